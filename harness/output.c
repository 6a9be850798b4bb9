/* output.c - results.json, results.csv and run.log of a run. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/cmb_io.h"
#include "schema.h"

/* --- directories ---------------------------------------------------------------- */

static int mkdir_p(const char *path)
{
    char tmp[768];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0777) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0777) && errno != EEXIST)
        return -1;
    return 0;
}

static int exists(const char *dir, const char *file)
{
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return stat(path, &st) == 0;
}

/* --- CSV ------------------------------------------------------------------------------ */

void cmb_csv_field(char **buf, size_t *len, size_t *cap, const char *text, int last)
{
    size_t need = *len + 2 * strlen(text) + 4;
    if (need > *cap) {
        size_t ncap = *cap ? *cap : 4096;
        while (ncap < need)
            ncap *= 2;
        char *grown = realloc(*buf, ncap);
        if (!grown)
            return;
        *buf = grown;
        *cap = ncap;
    }
    int quote = strpbrk(text, ",\"\n\r") != NULL;
    char *o = *buf + *len;
    if (quote)
        *o++ = '"';
    for (const char *p = text; *p; p++) {
        if (*p == '"')
            *o++ = '"';
        *o++ = (*p == '\n' || *p == '\r') ? ' ' : *p;
    }
    if (quote)
        *o++ = '"';
    *o++ = last ? '\n' : ',';
    *len = (size_t)(o - *buf);
}

typedef struct row_buf {
    char *buf;
    size_t len, cap;
} row_buf;

static void csv_row(row_buf *b, const cmb_output *o, const cmb_case_row *row, const char *rep, const char *status,
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
    for (size_t i = 0; i < CMB_N_COLS; i++)
        cmb_csv_field(&b->buf, &b->len, &b->cap, fields[i] ? fields[i] : "", i + 1 == CMB_N_COLS);
}

/* One write per case, then fsync: a killed run keeps every finished case. */
static int append_all(int fd, const char *buf, size_t len)
{
    return cmb_write_all(fd, buf, len) ? -1 : fsync(fd);
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
static void run_rows(row_buf *b, const cmb_output *o, const cmb_case_row *row, const cmb_bench_run *r)
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

static void set_ids(cmb_output *o, const char *dir, const cmb_env *env, const char *mode)
{
    memset(o, 0, sizeof *o);
    o->csv_fd = -1;
    snprintf(o->dir, sizeof o->dir, "%s", dir);
    const char *base = strrchr(dir, '/');
    snprintf(o->run_id, sizeof o->run_id, "%s", base && base[1] ? base + 1 : dir);
    snprintf(o->gpu, sizeof o->gpu, "%s", env->gpu_slug);
    snprintf(o->mode, sizeof o->mode, "%s", mode);
}

static int append_csv(cmb_output *o, row_buf *b, char *err, size_t errlen)
{
    int rc = 0;
    if (b->len && append_all(o->csv_fd, b->buf, b->len)) {
        snprintf(err, errlen, "cannot append to %s/results.csv: %s", o->dir, strerror(errno));
        rc = -1;
    }
    free(b->buf);
    return rc;
}

/* In the JSON a failed case is an entry with error_occurred, as the
 * library itself records a benchmark that skipped with an error. */
static void failed_entry(cmb_bench_run *r, const char *name, const char *reason)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->repetition_index = 0;
    r->repetitions = 1;
    r->iterations = 0;
    r->threads = 1;
    r->time_unit = CMB_UNIT_MS;
    r->error_occurred = 1;
    snprintf(r->error_message, sizeof r->error_message, "%s", reason);
}

/* --- open / write / close ---------------------------------------------------------------- */

int cmb_output_open(cmb_output *o, const char *dir, const cmb_env *env, const char *mode, const char *argv0,
                    char *err, size_t errlen)
{
    char path[1024];
    set_ids(o, dir, env, mode);

    if (mkdir_p(dir)) {
        snprintf(err, errlen, "cannot create output directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (exists(dir, "results.json") || exists(dir, "results.csv")) {
        snprintf(err, errlen, "%s already holds results; give another --out, or continue it with --resume %s", dir, dir);
        return -1;
    }
    snprintf(path, sizeof path, "%s/.write-test", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "output directory %s is not writable: %s", dir, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(path);

    for (size_t i = 0; i < env->n; i++)
        cmb_bench_add_context(env->key[i], env->value[i]);
    cmb_bench_add_context("mode", mode);

    snprintf(path, sizeof path, "%s/results.json", dir);
    o->json = cmb_bench_json_open(path, argv0, err, errlen);
    if (!o->json)
        goto out_fail;

    snprintf(path, sizeof path, "%s/results.csv", dir);
    o->csv_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (o->csv_fd < 0 || append_all(o->csv_fd, cmb_csv_header, cmb_csv_header_len)) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        goto out_fail;
    }
    snprintf(path, sizeof path, "%s/run.log", dir);
    o->log = fopen(path, "w");
    if (!o->log) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        goto out_fail;
    }
    return 0;

out_fail:
    if (o->csv_fd >= 0)
        close(o->csv_fd);
    if (o->json)
        cmb_bench_json_close(o->json, err, 0);
    o->json = NULL;
    return -1;
}

int cmb_output_case(cmb_output *o, const cmb_case_row *row, const cmb_bench_run *runs, size_t n, char *err,
                    size_t errlen)
{
    row_buf b = {0};
    if (cmb_bench_json_add(o->json, runs, n, err, errlen))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!runs[i].is_aggregate)
            run_rows(&b, o, row, &runs[i]);
    return append_csv(o, &b, err, errlen);
}

/* The JSON is written before the CSV: the CSV is the record of finished
 * cases (--resume reads it), so a case is never in the CSV without being
 * in the JSON. */
int cmb_output_case_status(cmb_output *o, const cmb_case_row *row, const char *status, const char *reason,
                           char *err, size_t errlen)
{
    row_buf b = {0};
    if (!strcmp(status, CMB_STATUS_FAILED)) {
        cmb_bench_run *r = malloc(sizeof *r);
        if (!r)
            return -1;
        failed_entry(r, row->name, reason);
        int rc = cmb_bench_json_add(o->json, r, 1, err, errlen);
        free(r);
        if (rc)
            return rc;
    }
    csv_row(&b, o, row, "", status, "", "", reason);
    return append_csv(o, &b, err, errlen);
}

int cmb_output_case_failed(cmb_output *o, const cmb_case_row *row, const cmb_bench_run *runs, size_t n,
                           const char *reason, char *err, size_t errlen)
{
    row_buf b = {0};
    cmb_bench_run *all = malloc((n + 1) * sizeof *all);
    if (!all) {
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    if (n)
        memcpy(all, runs, n * sizeof *all);
    failed_entry(&all[n], row->name, reason);
    int rc = cmb_bench_json_add(o->json, all, n + 1, err, errlen);
    free(all);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (!runs[i].is_aggregate)
            run_rows(&b, o, row, &runs[i]);
    csv_row(&b, o, row, "", CMB_STATUS_FAILED, "", "", reason);
    return append_csv(o, &b, err, errlen);
}

/* --- a resumed run ------------------------------------------------------------------------ */

int cmb_output_reopen(cmb_output *o, const char *dir, const char *run_id, const cmb_env *env, const char *mode,
                      const char *argv0, char *err, size_t errlen)
{
    char path[1024];
    set_ids(o, dir, env, mode);
    if (run_id && run_id[0])
        snprintf(o->run_id, sizeof o->run_id, "%s", run_id); /* as the first part of the run wrote it */
    snprintf(path, sizeof path, "%s/results.json", dir);
    o->json = cmb_bench_json_reopen(path, argv0, err, errlen);
    if (!o->json)
        return -1;
    snprintf(path, sizeof path, "%s/results.csv", dir);
    o->csv_fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (o->csv_fd < 0) {
        snprintf(err, errlen, "cannot append to %s: %s", path, strerror(errno));
        goto out_fail;
    }
    snprintf(path, sizeof path, "%s/run.log", dir);
    o->log = fopen(path, "a");
    if (!o->log) {
        snprintf(err, errlen, "cannot append to %s: %s", path, strerror(errno));
        goto out_fail;
    }
    return 0;

out_fail:
    if (o->csv_fd >= 0)
        close(o->csv_fd);
    o->csv_fd = -1;
    cmb_bench_json_close(o->json, NULL, 0);
    o->json = NULL;
    return -1;
}

int cmb_output_close(cmb_output *o, char *err, size_t errlen)
{
    int rc = 0;
    if (o->json && cmb_bench_json_close(o->json, err, errlen))
        rc = -1;
    o->json = NULL;
    if (o->csv_fd >= 0)
        close(o->csv_fd);
    o->csv_fd = -1;
    if (o->log)
        fclose(o->log);
    o->log = NULL;
    return rc;
}
