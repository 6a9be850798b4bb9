/* wire.c - run records between child and parent.
 *
 *   R<TAB>name<TAB>is_aggregate<TAB>aggregate_name<TAB>pct<TAB>rep_index<TAB>
 *     repetitions<TAB>iterations<TAB>threads<TAB>real_s<TAB>cpu_s<TAB>unit<TAB>
 *     error<TAB>error_message<TAB>label
 *   C<TAB>name<TAB>value<TAB>flags<TAB>one_k_1024
 *   E
 * Strings are sanitized (no tabs or newlines) before they are written.
 */
#include "wire.h"

#include "../common/cmb_io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void clean_copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
    cmb_bench_sanitize(dst);
    for (char *p = dst; *p; p++)
        if (*p == '\t')
            *p = ' ';
}

int cmb_wire_write_run(int fd, const cmb_bench_run *r)
{
    size_t cap = 4096 + r->n_counters * 160;
    char *buf = malloc(cap);
    char name[CMB_BENCH_NAME_MAX], agg[32], msg[512], label[256];
    if (!buf)
        return -1;
    clean_copy(name, sizeof name, r->name);
    clean_copy(agg, sizeof agg, r->aggregate_name);
    clean_copy(msg, sizeof msg, r->error_message);
    clean_copy(label, sizeof label, r->label);
    size_t n = (size_t)snprintf(buf, cap, "R\t%s\t%d\t%s\t%d\t%lld\t%lld\t%lld\t%lld\t%.17g\t%.17g\t%d\t%d\t%s\t%s\n",
                                name, r->is_aggregate, agg, r->aggregate_is_percentage,
                                (long long)r->repetition_index, (long long)r->repetitions,
                                (long long)r->iterations, (long long)r->threads, r->real_accumulated_time,
                                r->cpu_accumulated_time, (int)r->time_unit, r->error_occurred, msg, label);
    for (size_t i = 0; i < r->n_counters && n < cap; i++) {
        char cname[64];
        clean_copy(cname, sizeof cname, r->counters[i].name);
        n += (size_t)snprintf(buf + n, cap - n, "C\t%s\t%.17g\t%u\t%d\n", cname, r->counters[i].value,
                              r->counters[i].flags, r->counters[i].one_k_1024);
    }
    if (n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "E\n");
    int rc = n < cap ? cmb_write_all(fd, buf, n) : -1;
    free(buf);
    return rc;
}

void cmb_wire_reader_init(cmb_wire_reader *r)
{
    memset(r, 0, sizeof *r);
}

void cmb_wire_reader_free(cmb_wire_reader *r)
{
    free(r->runs);
    memset(r, 0, sizeof *r);
}

/* Splits a line on tabs in place; returns the field count. */
static size_t split_tabs(char *line, char **fields, size_t max)
{
    size_t n = 0;
    fields[n++] = line;
    for (char *p = line; *p && n < max; p++) {
        if (*p == '\t') {
            *p = '\0';
            fields[n++] = p + 1;
        }
    }
    return n;
}

static int bad(cmb_wire_reader *r, const char *what)
{
    snprintf(r->error, sizeof r->error, "malformed result record from the case process: %s", what);
    return -1;
}

static int parse_run(cmb_wire_reader *r, char **f, size_t n)
{
    if (n != 15)
        return bad(r, "run record field count");
    cmb_bench_run *c = &r->cur;
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", f[1]);
    c->is_aggregate = atoi(f[2]);
    snprintf(c->aggregate_name, sizeof c->aggregate_name, "%s", f[3]);
    c->aggregate_is_percentage = atoi(f[4]);
    c->repetition_index = strtoll(f[5], NULL, 10);
    c->repetitions = strtoll(f[6], NULL, 10);
    c->iterations = strtoll(f[7], NULL, 10);
    c->threads = strtoll(f[8], NULL, 10);
    c->real_accumulated_time = strtod(f[9], NULL);
    c->cpu_accumulated_time = strtod(f[10], NULL);
    c->time_unit = (cmb_time_unit)atoi(f[11]);
    c->error_occurred = atoi(f[12]);
    snprintf(c->error_message, sizeof c->error_message, "%s", f[13]);
    snprintf(c->label, sizeof c->label, "%s", f[14]);
    r->in_run = 1;
    return 0;
}

static int finish_run(cmb_wire_reader *r)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        cmb_bench_run *grown = realloc(r->runs, cap * sizeof *grown);
        if (!grown)
            return bad(r, "host out of memory");
        r->runs = grown;
        r->cap = cap;
    }
    r->runs[r->n++] = r->cur;
    r->in_run = 0;
    return 0;
}

static int feed_line(cmb_wire_reader *r, char *line)
{
    char *f[16];
    size_t n = split_tabs(line, f, 16);
    if (!strcmp(f[0], "R"))
        return r->in_run ? bad(r, "run inside run") : parse_run(r, f, n);
    if (!strcmp(f[0], "C")) {
        if (!r->in_run || n != 5)
            return bad(r, "counter record");
        if (r->cur.n_counters == CMB_BENCH_MAX_COUNTERS)
            return 0;
        cmb_bench_counter *k = &r->cur.counters[r->cur.n_counters++];
        snprintf(k->name, sizeof k->name, "%s", f[1]);
        k->value = strtod(f[2], NULL);
        k->flags = (unsigned)strtoul(f[3], NULL, 10);
        k->one_k_1024 = atoi(f[4]);
        return 0;
    }
    if (!strcmp(f[0], "E"))
        return r->in_run ? finish_run(r) : bad(r, "end without run");
    return bad(r, "unknown record type");
}

int cmb_wire_feed(cmb_wire_reader *r, const char *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char ch = data[i];
        if (ch == '\n') {
            r->pending[r->pending_len] = '\0';
            if (feed_line(r, r->pending))
                return -1;
            r->pending_len = 0;
        } else {
            if (r->pending_len + 1 >= sizeof r->pending)
                return bad(r, "line too long");
            r->pending[r->pending_len++] = ch;
        }
    }
    return 0;
}
