/* wire.c - the case record (parent to child, one table of its fields
 * below) and run records (child to parent):
 *
 *   R<TAB>name<TAB>is_aggregate<TAB>aggregate_name<TAB>pct<TAB>rep_index<TAB>
 *     repetitions<TAB>iterations<TAB>threads<TAB>real_s<TAB>cpu_s<TAB>unit<TAB>
 *     error<TAB>error_message<TAB>label
 *   C<TAB>name<TAB>value<TAB>flags<TAB>one_k_1024
 *   E
 *   P<TAB>done<TAB>total<TAB>seconds<TAB>what      (progress, between runs)
 * Strings are sanitized (no tabs or newlines) before they are written.
 */
#include "wire.h"

#include "../common/cmb_io.h"
#include "../common/cmb_units.h"
#include "case.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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

int cmb_wire_write_progress(int fd, uint64_t done, uint64_t total, double seconds, const char *what)
{
    char buf[256], w[64];
    clean_copy(w, sizeof w, what);
    int n = snprintf(buf, sizeof buf, "P\t%llu\t%llu\t%.17g\t%s\n", (unsigned long long)done,
                     (unsigned long long)total, seconds, w);
    return n > 0 && (size_t)n < sizeof buf ? cmb_write_all(fd, buf, (size_t)n) : -1;
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
    if (!strcmp(f[0], "P")) {
        if (r->in_run || n != 5)
            return bad(r, "progress record");
        cmb_wire_progress *p = &r->progress;
        p->done = strtoull(f[1], NULL, 10);
        p->total = strtoull(f[2], NULL, 10);
        p->seconds = strtod(f[3], NULL);
        snprintf(p->what, sizeof p->what, "%s", f[4]);
        p->seq++;
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

/* --- the case record (parent to child) ------------------------------------------------------ */

typedef struct line_buf {
    char *s;
    size_t len, cap;
    const char *bad; /* the key of a value that cannot be written */
} line_buf;

static void put_line(line_buf *b, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put_line(line_buf *b, const char *key, const char *fmt, ...)
{
    char value[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof value || strpbrk(value, "\t\n")) {
        b->bad = b->bad ? b->bad : key;
        return;
    }
    size_t need = b->len + strlen(key) + (size_t)n + 3;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < need)
            cap *= 2;
        char *grown = realloc(b->s, cap);
        if (!grown) {
            b->bad = "host memory";
            return;
        }
        b->s = grown;
        b->cap = cap;
    }
    b->len += (size_t)sprintf(b->s + b->len, "%s\t%s\n", key, value);
}

/* One field of cmb_case_spec: a number or text at an offset, or one with
 * its own way of being written and read back. */
typedef enum field_kind { F_U64, F_INT, F_UINT, F_TEXT, F_OWN } field_kind;

typedef struct case_field {
    const char *key;
    field_kind kind;
    size_t offset, size; /* of the member (F_TEXT: its capacity) */
    void (*put)(line_buf *b, const char *key, const cmb_case_spec *cs);
    int (*get)(cmb_case_spec *cs, const char *value, char *err, size_t errlen);
} case_field;

static void put_scenario(line_buf *b, const char *k, const cmb_case_spec *cs)
{
    put_line(b, k, "%s", cs->scenario->name);
}

static void put_allocator(line_buf *b, const char *k, const cmb_case_spec *cs)
{
    put_line(b, k, "%s", cs->alloc.text);
}

static void put_mode(line_buf *b, const char *k, const cmb_case_spec *cs)
{
    put_line(b, k, "%s", cs->mode == CMB_MODE_GPU ? "gpu" : "sim");
}

static void put_name(line_buf *b, const char *k, const cmb_case_spec *cs)
{
    put_line(b, k, "%s", cs->name);
}

static void put_fault(line_buf *b, const char *k, const cmb_case_spec *cs)
{
    const cmb_fault_spec *f = &cs->fault;
    put_line(b, k, "%llu %llu %.17g %llu %llu", (unsigned long long)f->fail_nth, (unsigned long long)f->fail_every,
             f->fail_prob, (unsigned long long)f->seed, (unsigned long long)f->cap_bytes);
}

static void put_params(line_buf *b, const char *k, const cmb_case_spec *cs)
{
    for (size_t i = 0; i < cs->params.n; i++)
        put_line(b, k, "%s=%s", cs->params.spec[i]->name, cs->params.value[i]);
}

static int get_scenario(cmb_case_spec *cs, const char *v, char *err, size_t errlen)
{
    if (!(cs->scenario = cmb_scenario_find(v))) {
        snprintf(err, errlen, "case record: unknown scenario '%s'", v);
        return -1;
    }
    return 0;
}

static int get_allocator(cmb_case_spec *cs, const char *v, char *err, size_t errlen)
{
    return cmb_alloc_spec_parse(v, &cs->alloc, err, errlen);
}

static int get_mode(cmb_case_spec *cs, const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "gpu") && strcmp(v, "sim")) {
        snprintf(err, errlen, "case record: mode '%s' is neither gpu nor sim", v);
        return -1;
    }
    cs->mode = strcmp(v, "gpu") ? CMB_MODE_SIM : CMB_MODE_GPU;
    return 0;
}

/* The name is rebuilt from the fields; the record's must match it. */
static int get_name(cmb_case_spec *cs, const char *v, char *err, size_t errlen)
{
    if (cmb_case_spec_make_name(cs, err, errlen))
        return -1;
    if (strcmp(cs->name, v)) {
        snprintf(err, errlen, "case record: name '%.200s' does not match its fields ('%.200s')", v, cs->name);
        return -1;
    }
    return 0;
}

static int get_fault(cmb_case_spec *cs, const char *v, char *err, size_t errlen)
{
    cmb_fault_spec *f = &cs->fault;
    unsigned long long nth, every, seed, cap;
    int used = 0;
    if (sscanf(v, "%llu %llu %lf %llu %llu%n", &nth, &every, &f->fail_prob, &seed, &cap, &used) != 5 || v[used]) {
        snprintf(err, errlen, "case record: fault '%s' is not 'nth every prob seed cap'", v);
        return -1;
    }
    f->fail_nth = nth;
    f->fail_every = every;
    f->seed = seed;
    f->cap_bytes = cap;
    return 0;
}

/* One parameter, checked against the scenario's spec as the parent did. */
static int get_param(cmb_case_spec *cs, const char *v, char *err, size_t errlen)
{
    const char *eq = strchr(v, '=');
    char name[64];
    if (!cs->scenario || !eq || (size_t)(eq - v) >= sizeof name || cs->params.n == CMB_MAX_PARAMS) {
        snprintf(err, errlen, "case record: parameter '%s' before the scenario, or malformed", v);
        return -1;
    }
    snprintf(name, sizeof name, "%.*s", (int)(eq - v), v);
    const cmb_param_spec *spec = cmb_param_spec_find(cs->scenario, name);
    if (!spec) {
        snprintf(err, errlen, "case record: scenario %s has no parameter '%s'", cs->scenario->name, name);
        return -1;
    }
    cs->params.spec[cs->params.n] = spec;
    return cmb_param_canonical(spec, eq + 1, cs->params.value[cs->params.n++], CMB_PARAM_VALUE_MAX, err, errlen);
}

#define AT(member) offsetof(cmb_case_spec, member), sizeof(((cmb_case_spec *)0)->member)

/* The fields, in the order they are written; "name" last: it is checked
 * against the others. */
static const case_field case_fields[] = {
    {"scenario", F_OWN, 0, 0, put_scenario, get_scenario},
    {"allocator", F_OWN, 0, 0, put_allocator, get_allocator},
    {"param", F_OWN, 0, 0, put_params, get_param},
    {"mode", F_OWN, 0, 0, put_mode, get_mode},
    {"seed", F_U64, AT(seed), NULL, NULL},
    {"device", F_INT, AT(device), NULL, NULL},
    {"capacity", F_U64, AT(capacity), NULL, NULL},
    {"repetitions", F_INT, AT(repetitions), NULL, NULL},
    {"fault", F_OWN, 0, 0, put_fault, get_fault},
    {"record_trace", F_TEXT, AT(record_trace), NULL, NULL},
    {"timeline_dir", F_TEXT, AT(timeline_dir), NULL, NULL},
    {"timeline_points", F_UINT, AT(timeline_points), NULL, NULL},
    {"name", F_OWN, 0, 0, put_name, get_name},
};

#define N_CASE_FIELDS (sizeof case_fields / sizeof case_fields[0])

static void put_field(line_buf *b, const case_field *f, const cmb_case_spec *cs)
{
    const char *at = (const char *)cs + f->offset;
    switch (f->kind) {
    case F_U64:
        put_line(b, f->key, "%llu", (unsigned long long)*(const uint64_t *)at);
        break;
    case F_INT:
        put_line(b, f->key, "%d", *(const int *)at);
        break;
    case F_UINT:
        put_line(b, f->key, "%u", *(const unsigned *)at);
        break;
    case F_TEXT:
        put_line(b, f->key, "%s", at);
        break;
    case F_OWN:
        f->put(b, f->key, cs);
        break;
    }
}

static int get_field(const case_field *f, cmb_case_spec *cs, const char *v, char *err, size_t errlen)
{
    char *at = (char *)cs + f->offset;
    int64_t x = 0;
    int bad = 0;
    switch (f->kind) {
    case F_U64:
        bad = cmb_parse_u64(v, (uint64_t *)at);
        break;
    case F_INT:
        bad = cmb_parse_i64(v, &x) || x < INT32_MIN || x > INT32_MAX;
        *(int *)at = (int)x;
        break;
    case F_UINT:
        bad = cmb_parse_i64(v, &x) || x < 0 || x > UINT32_MAX;
        *(unsigned *)at = (unsigned)x;
        break;
    case F_TEXT:
        bad = strlen(v) >= f->size;
        if (!bad)
            memcpy(at, v, strlen(v) + 1);
        break;
    case F_OWN:
        return f->get(cs, v, err, errlen);
    }
    if (bad)
        snprintf(err, errlen, "case record: %s '%.200s' is %s", f->key, v,
                 f->kind == F_TEXT ? "too long" : "not a number in range");
    return bad ? -1 : 0;
}

char *cmb_wire_case_encode(const cmb_case_spec *cs, char *err, size_t errlen)
{
    line_buf b = {0};
    for (size_t i = 0; i < N_CASE_FIELDS; i++)
        put_field(&b, &case_fields[i], cs);
    if (b.bad || !b.s) {
        snprintf(err, errlen, "case %.200s: its %s cannot be passed on (a tab or newline in it?)", cs->name,
                 b.bad ? b.bad : "record");
        free(b.s);
        return NULL;
    }
    return b.s;
}

static const case_field *field_of(const char *key, size_t len)
{
    for (size_t i = 0; i < N_CASE_FIELDS; i++)
        if (strlen(case_fields[i].key) == len && !memcmp(case_fields[i].key, key, len))
            return &case_fields[i];
    return NULL;
}

int cmb_wire_case_decode(const char *record, cmb_case_spec *cs, char *err, size_t errlen)
{
    unsigned seen = 0;
    memset(cs, 0, sizeof *cs);
    for (const char *line = record; *line;) {
        size_t n = strcspn(line, "\n"), k = strcspn(line, "\t\n");
        const case_field *f = k < n ? field_of(line, k) : NULL;
        char value[2048];
        if (!f || n - k - 1 >= sizeof value) {
            snprintf(err, errlen, "case record: malformed line '%.*s'", (int)(n < 80 ? n : 80), line);
            return -1;
        }
        snprintf(value, sizeof value, "%.*s", (int)(n - k - 1), line + k + 1);
        if (get_field(f, cs, value, err, errlen))
            return -1;
        seen |= 1u << (f - case_fields);
        line += n + (line[n] == '\n');
    }
    unsigned all = (1u << N_CASE_FIELDS) - 1;
    unsigned optional = 1u << (field_of("param", 5) - case_fields); /* a scenario may have no parameters */
    if ((seen | optional) != all) {
        snprintf(err, errlen, "case record: fields missing");
        return -1;
    }
    return 0;
}
