/* output.c - a run's cases as JSON entries and CSV rows (see output.h);
 * the results store (harness/results.c) writes them. */
#include "output.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

/* --- JSON entries: the fields Google Benchmark's JSON reporter writes --------------------------- */

static const char *unit_name(cmb_time_unit u)
{
    return u == CMB_UNIT_S ? "s" : u == CMB_UNIT_MS ? "ms" : u == CMB_UNIT_US ? "us" : "ns";
}

static double unit_multiplier(cmb_time_unit u)
{
    return u == CMB_UNIT_S ? 1.0 : u == CMB_UNIT_MS ? 1e3 : u == CMB_UNIT_US ? 1e6 : 1e9;
}

/* A string value: jansson takes UTF-8 only, so other bytes become '?'. */
static json_t *text(const char *s)
{
    json_t *v = json_string(s);
    if (v)
        return v;
    char *copy = strdup(s);
    for (char *p = copy; p && *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    v = copy ? json_string(copy) : NULL;
    free(copy);
    return v;
}

/* As the reporter (json_reporter.cc, GetAdjustedRealTime): the time per
 * iteration in the run's unit; a percentage aggregate (cv) as it is. */
static void add_times(json_t *e, const cmb_bench_run *r)
{
    double real = r->real_accumulated_time, cpu = r->cpu_accumulated_time;
    if (!(r->is_aggregate && r->aggregate_is_percentage)) {
        double m = unit_multiplier(r->time_unit), it = r->iterations ? (double)r->iterations : 1.0;
        real = real * m / it;
        cpu = cpu * m / it;
    }
    json_object_set_new(e, "iterations", json_integer(r->iterations));
    json_object_set_new(e, "real_time", cmb_results_number(real));
    json_object_set_new(e, "cpu_time", cmb_results_number(cpu));
    json_object_set_new(e, "time_unit", json_string(unit_name(r->time_unit)));
}

static json_t *entry_of(const cmb_bench_run *r)
{
    char full[CMB_BENCH_NAME_MAX + 40]; /* an aggregate's name ends in _mean, _cv, ... */
    json_t *e = json_object();
    snprintf(full, sizeof full, "%s%s%s", r->name, r->is_aggregate ? "_" : "", r->is_aggregate ? r->aggregate_name : "");
    json_object_set_new(e, "name", text(full));
    json_object_set_new(e, "family_index", json_integer(0));
    json_object_set_new(e, "per_family_instance_index", json_integer(0));
    json_object_set_new(e, "run_name", text(r->name));
    json_object_set_new(e, "run_type", json_string(r->is_aggregate ? "aggregate" : "iteration"));
    json_object_set_new(e, "repetitions", json_integer(r->repetitions));
    if (!r->is_aggregate)
        json_object_set_new(e, "repetition_index", json_integer(r->repetition_index));
    json_object_set_new(e, "threads", json_integer(r->threads > 0 ? r->threads : 1));
    if (r->is_aggregate) {
        json_object_set_new(e, "aggregate_name", text(r->aggregate_name));
        json_object_set_new(e, "aggregate_unit", json_string(r->aggregate_is_percentage ? "percentage" : "time"));
    }
    if (r->error_occurred) {
        json_object_set_new(e, "error_occurred", json_true());
        json_object_set_new(e, "error_message", text(r->error_message));
    }
    add_times(e, r);
    for (size_t i = 0; i < r->n_counters; i++)
        json_object_set_new(e, r->counters[i].name, cmb_results_number(r->counters[i].value));
    if (r->label[0])
        json_object_set_new(e, "label", text(r->label));
    return e;
}

/* --- CSV rows ---------------------------------------------------------------------------------- */

/* A case's commit: its entries and rows, appended together. */
typedef struct batch {
    json_t *entries;
    char *buf;
    size_t len, cap;
    int bad;
} batch;

static void csv_row(batch *b, const cmb_output *o, const cmb_case_row *row, const char *rep, const char *status,
                    const char *metric, const char *value, const char *error)
{
    const char *fields[CMB_N_COLS] = {
        [CMB_COL_RUN_ID] = o->run_id,       [CMB_COL_GPU] = o->gpu,
        [CMB_COL_MODE] = o->mode,           [CMB_COL_CASE] = row->name,
        [CMB_COL_SCENARIO] = row->scenario, [CMB_COL_ALLOCATOR] = row->allocator,
        [CMB_COL_UPSTREAM] = row->upstream, [CMB_COL_PARAMS] = row->params,
        [CMB_COL_REPETITION] = rep,         [CMB_COL_STATUS] = status,
        [CMB_COL_METRIC] = metric,          [CMB_COL_VALUE] = value,
        [CMB_COL_ERROR] = error,            [CMB_COL_OPTIONS] = row->options,
        [CMB_COL_IMPL] = row->impl,
    };
    b->bad |= cmb_results_csv_row(&b->buf, &b->len, &b->cap, fields);
}

double cmb_output_oom_count(const cmb_bench_run *r)
{
    for (size_t i = 0; i < r->n_counters; i++)
        if (!strcmp(r->counters[i].name, CMB_OOM_COUNTER))
            return r->counters[i].value;
    return 0;
}

/* A repetition's rows: its time and every counter, each with the status of
 * the repetition (oom when its workload did not fit: the numbers are real,
 * of a run that stopped short). */
static void run_rows(batch *b, const cmb_output *o, const cmb_case_row *row, const cmb_bench_run *r)
{
    char rep[32], value[64], oom[96] = "";
    snprintf(rep, sizeof rep, "%lld", (long long)r->repetition_index);
    if (r->error_occurred) {
        csv_row(b, o, row, rep, CMB_STATUS_FAILED, "", "", r->error_message);
        return;
    }
    double n_oom = cmb_output_oom_count(r);
    const char *status = n_oom > 0 ? CMB_STATUS_OOM : CMB_STATUS_OK;
    if (n_oom > 0)
        cmb_oom_message(n_oom, oom, sizeof oom);
    double iters = r->iterations > 0 ? (double)r->iterations : 1.0;
    snprintf(value, sizeof value, "%.17g", r->real_accumulated_time / iters);
    csv_row(b, o, row, rep, status, "time_s", value, oom);
    snprintf(value, sizeof value, "%.17g", r->cpu_accumulated_time / iters);
    csv_row(b, o, row, rep, status, "cpu_time_s", value, oom);
    for (size_t i = 0; i < r->n_counters; i++) {
        snprintf(value, sizeof value, "%.17g", r->counters[i].value);
        csv_row(b, o, row, rep, status, r->counters[i].name, value, oom);
    }
}

/* Every run of a case: an entry each, rows for the repetitions. */
static void add_runs(batch *b, const cmb_output *o, const cmb_case_row *row, const cmb_bench_run *runs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        b->bad |= json_array_append_new(b->entries, entry_of(&runs[i]));
        if (!runs[i].is_aggregate)
            run_rows(b, o, row, &runs[i]);
    }
}

/* In the JSON a failed case is an entry with error_occurred, as the
 * library itself records a benchmark that skipped with an error. */
static void add_failure(batch *b, const cmb_case_row *row, const char *reason)
{
    cmb_bench_run *r = calloc(1, sizeof *r);
    if (!r) {
        b->bad = 1;
        return;
    }
    snprintf(r->name, sizeof r->name, "%s", row->name);
    r->repetitions = 1;
    r->threads = 1;
    r->time_unit = CMB_UNIT_MS;
    r->error_occurred = 1;
    snprintf(r->error_message, sizeof r->error_message, "%s", reason);
    b->bad |= json_array_append_new(b->entries, entry_of(r));
    free(r);
}

static int commit(cmb_output *o, batch *b, char *err, size_t errlen)
{
    int rc = -1;
    if (b->bad || !b->entries)
        snprintf(err, errlen, "host out of memory");
    else
        rc = cmb_results_append(&o->store, b->entries, b->buf, b->len, err, errlen);
    json_decref(b->entries);
    free(b->buf);
    return rc;
}

/* --- the cases ------------------------------------------------------------------------------------- */

int cmb_output_case(cmb_output *o, const cmb_case_row *row, const cmb_bench_run *runs, size_t n, char *err,
                    size_t errlen)
{
    batch b = {.entries = json_array()};
    add_runs(&b, o, row, runs, n);
    return commit(o, &b, err, errlen);
}

int cmb_output_case_status(cmb_output *o, const cmb_case_row *row, const char *status, const char *reason,
                           char *err, size_t errlen)
{
    batch b = {.entries = json_array()};
    if (!strcmp(status, CMB_STATUS_FAILED))
        add_failure(&b, row, reason);
    csv_row(&b, o, row, "", status, "", "", reason);
    return commit(o, &b, err, errlen);
}

int cmb_output_case_failed(cmb_output *o, const cmb_case_row *row, const cmb_bench_run *runs, size_t n,
                           const char *reason, char *err, size_t errlen)
{
    batch b = {.entries = json_array()};
    add_runs(&b, o, row, runs, n);
    add_failure(&b, row, reason);
    csv_row(&b, o, row, "", CMB_STATUS_FAILED, "", "", reason);
    return commit(o, &b, err, errlen);
}

/* --- open / close ------------------------------------------------------------------------------------ */

static void set_ids(cmb_output *o, const char *dir, const cmb_env *env, const char *mode)
{
    memset(o, 0, sizeof *o);
    o->store.lock_fd = o->store.csv_fd = o->store.json_fd = -1;
    const char *base = strrchr(dir, '/');
    snprintf(o->run_id, sizeof o->run_id, "%s", base && base[1] ? base + 1 : dir);
    snprintf(o->gpu, sizeof o->gpu, "%s", env->gpu_slug);
    snprintf(o->mode, sizeof o->mode, "%s", mode);
}

static int open_log(cmb_output *o, const char *how, char *err, size_t errlen)
{
    char path[CMB_RESULTS_DIR_MAX + 16];
    snprintf(path, sizeof path, "%s/run.log", o->store.dir);
    o->log = fopen(path, how);
    if (!o->log) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        cmb_results_close(&o->store, NULL, 0);
        return -1;
    }
    return 0;
}

/* The library's context block (host, CPUs, caches, load) with the run's
 * environment added, as a JSON object. */
static json_t *context_of(const cmb_env *env, const char *mode, const char *argv0, char *err, size_t errlen)
{
    int how;
    for (size_t i = 0; i < env->n; i++)
        cmb_bench_add_context(env->key[i], env->value[i]);
    cmb_bench_add_context("mode", mode);
    char *head = cmb_bench_context_text(argv0);
    json_t *doc = head ? cmb_results_parse_json(head, strlen(head), &how, err, errlen) : NULL;
    json_t *ctx = json_incref(json_object_get(doc, "context"));
    if (!head)
        snprintf(err, errlen, "host out of memory");
    free(head);
    json_decref(doc);
    return ctx;
}

int cmb_output_open(cmb_output *o, const char *dir, const cmb_env *env, const char *mode, const char *argv0,
                    char *err, size_t errlen)
{
    set_ids(o, dir, env, mode);
    json_t *ctx = context_of(env, mode, argv0, err, errlen);
    int rc = ctx ? cmb_results_create(&o->store, dir, ctx, err, errlen) : -1;
    json_decref(ctx);
    return rc ? rc : open_log(o, "w", err, errlen);
}

int cmb_output_lock(cmb_output *o, const char *dir, const cmb_env *env, const char *mode, char *err,
                    size_t errlen)
{
    set_ids(o, dir, env, mode);
    return cmb_results_lock(&o->store, dir, err, errlen);
}

int cmb_output_reopen(cmb_output *o, const char *run_id, char *err, size_t errlen)
{
    if (run_id && run_id[0])
        snprintf(o->run_id, sizeof o->run_id, "%s", run_id); /* as the first part of the run wrote it */
    if (cmb_results_reopen(&o->store, err, errlen)) {
        cmb_results_close(&o->store, NULL, 0);
        return -1;
    }
    return open_log(o, "a", err, errlen);
}

int cmb_output_close(cmb_output *o, char *err, size_t errlen)
{
    int rc = cmb_results_close(&o->store, err, errlen);
    if (o->log)
        fclose(o->log);
    o->log = NULL;
    return rc;
}
