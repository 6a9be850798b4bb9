/* trace_file.c - traces for tests through the suite's trace writer. */
#include "trace_file.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>

#include <cmocka.h>

#include "run.h"

/* the writer keys blocks by pointer: the test's id, never NULL */
static const void *key(uint64_t id)
{
    return (const void *)(uintptr_t)(id + 1);
}

void cmb_test_trace_open(cmb_test_trace *t)
{
    static unsigned serial;
    char err[256];
    snprintf(t->path, sizeof t->path, "%s/test-%u.trace", cmb_test_tmpdir(), serial++);
    if (cmb_trace_writer_open(&t->w, t->path, NULL, err, sizeof err))
        fail_msg("%s", err);
}

void cmb_test_trace_alloc(cmb_test_trace *t, uint64_t id, uint64_t size, int stream)
{
    cmb_trace_write_alloc(&t->w, key(id), size, stream, -1);
}

void cmb_test_trace_free(cmb_test_trace *t, uint64_t id, int stream)
{
    cmb_trace_write_free(&t->w, key(id), stream, -1);
}

const char *cmb_test_trace_close(cmb_test_trace *t)
{
    char err[256];
    if (cmb_trace_writer_close(&t->w, err, sizeof err))
        fail_msg("%s", err);
    return t->path;
}

const char *cmb_test_trace_of(char *buf, size_t len, const char *const *ev, size_t n)
{
    cmb_test_trace t;
    cmb_test_trace_open(&t);
    for (size_t i = 0; i < n; i++) {
        unsigned long long id, size;
        int stream;
        if (sscanf(ev[i], "a %llu %llu %d", &id, &size, &stream) == 3)
            cmb_test_trace_alloc(&t, id, size, stream);
        else if (sscanf(ev[i], "f %llu %d", &id, &stream) == 2)
            cmb_test_trace_free(&t, id, stream);
        else
            fail_msg("bad event '%s'", ev[i]);
    }
    snprintf(buf, len, "%s", cmb_test_trace_close(&t));
    return buf;
}
