/* trace_writer.c - writes the suite's trace format while a scenario runs.
 * Block ids are assigned in allocation order (a pointer seen again after
 * its free gets a new id); the file appears under its name only when it is
 * complete. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"

int cmb_trace_writer_open(cmb_trace_writer *w, const char *path, const char *comment, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path);
    w->next_id = 1;
    if (cmb_hashmap_init(&w->ptr_to_id, 4096)) {
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    w->f = fopen(w->tmp, "w");
    if (!w->f) {
        snprintf(err, errlen, "cannot write %s: %s", w->tmp, strerror(errno));
        cmb_hashmap_free(&w->ptr_to_id);
        return -1;
    }
    fprintf(w->f, "# cumembench-trace 1\n");
    if (comment && *comment)
        fprintf(w->f, "# %s\n", comment);
    return 0;
}

static void put_time(cmb_trace_writer *w, int64_t t_ns)
{
    if (t_ns < 0)
        fputs(" -\n", w->f);
    else
        fprintf(w->f, " %lld\n", (long long)t_ns);
}

void cmb_trace_write_alloc(cmb_trace_writer *w, const void *ptr, uint64_t size, int64_t stream, int64_t t_ns)
{
    uint64_t id = w->next_id++;
    if (cmb_hashmap_put(&w->ptr_to_id, (uint64_t)(uintptr_t)ptr, id))
        w->failed = 1;
    fprintf(w->f, "a %llu %llu %lld", (unsigned long long)id, (unsigned long long)size, (long long)stream);
    put_time(w, t_ns);
}

void cmb_trace_write_free(cmb_trace_writer *w, const void *ptr, int64_t stream, int64_t t_ns)
{
    uint64_t id;
    if (!cmb_hashmap_remove(&w->ptr_to_id, (uint64_t)(uintptr_t)ptr, &id)) {
        w->failed = 1; /* a free of a block the trace never saw */
        return;
    }
    fprintf(w->f, "f %llu - %lld", (unsigned long long)id, (long long)stream);
    put_time(w, t_ns);
}

void cmb_trace_write_sync(cmb_trace_writer *w, int64_t stream, int64_t t_ns)
{
    fprintf(w->f, "s - - %lld", (long long)stream);
    put_time(w, t_ns);
}

int cmb_trace_writer_close(cmb_trace_writer *w, char *err, size_t errlen)
{
    int bad = w->failed;
    if (!w->f)
        return -1;
    bad |= ferror(w->f) != 0;
    bad |= fclose(w->f) != 0;
    w->f = NULL;
    cmb_hashmap_free(&w->ptr_to_id);
    if (bad || rename(w->tmp, w->path)) {
        snprintf(err, errlen, "cannot write trace %s", w->path);
        remove(w->tmp);
        return -1;
    }
    return 0;
}
