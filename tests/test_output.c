/* test_output.c - the files output.c writes: the CSV header is the one
 * harness/schema.def describes, every row has every column, and a
 * repetition whose workload did not fit (cmb_case_set_oom, carried as the
 * CMB_OOM_COUNTER counter) is written with status oom and "did not fit: N
 * allocations failed" on each of its rows, while --resume counts it as a
 * finished case, not a failed one. And the results store under them
 * (harness/results.c): an append that fails part-way (a file-size limit,
 * as a full disk) is undone and the files stay valid and resumable; a
 * second writer of a directory is refused with the holder's pid; an older
 * run's header reads by name; a number that is not finite is null. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/output.h"
#include "harness/results.h"
#include "harness/resume.h"
#include "harness/schema.h"
#include "support/run.h"

static void header_is_the_schema(void **state)
{
    (void)state;
    assert_int_equal(CMB_N_COLS, 15);
    assert_string_equal(cmb_col_name(CMB_COL_ALLOCATOR), "allocator");
    assert_string_equal(cmb_col_name(CMB_COL_OPTIONS), "options");
    assert_string_equal(cmb_col_name(CMB_COL_IMPL), "impl");
    assert_null(cmb_col_name(CMB_N_COLS));
    char expect[512] = "";
    for (int i = 0; i < CMB_N_COLS; i++) {
        strcat(expect, cmb_col_name(i));
        strcat(expect, i + 1 < CMB_N_COLS ? "," : "\n");
    }
    assert_string_equal(cmb_csv_header, expect);
    assert_int_equal(cmb_csv_header_len, strlen(expect));
}

static void run_of(cmb_bench_run *r, const char *name, int rep, double oom)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->repetition_index = rep;
    r->repetitions = 2;
    r->iterations = 1;
    r->threads = 1;
    r->real_accumulated_time = 0.5;
    r->cpu_accumulated_time = 0.25;
    r->time_unit = CMB_UNIT_MS;
    snprintf(r->counters[0].name, sizeof r->counters[0].name, "peak_reserved_bytes");
    r->counters[0].value = 4096;
    r->n_counters = 1;
    if (oom > 0) {
        snprintf(r->counters[1].name, sizeof r->counters[1].name, CMB_OOM_COUNTER);
        r->counters[1].value = oom;
        r->n_counters = 2;
    }
}

static void a_case_that_did_not_fit_is_oom(void **state)
{
    (void)state;
    char dir[700], err[512], cmd[2048], out[8192];
    cmb_env env;
    cmb_output o;
    cmb_bench_run runs[2];
    memset(&env, 0, sizeof env);
    snprintf(env.gpu_slug, sizeof env.gpu_slug, "sim");
    snprintf(dir, sizeof dir, "%s/o", cmb_test_tmpdir());
    assert_int_equal(cmb_output_open(&o, dir, &env, "sim", "test", err, sizeof err), 0);
    cmb_case_row fit = {"s/a:k=v/n:1", "s", "a", "k=v", "emulation", "sim", "n=1"};
    cmb_case_row big = {"s/a:k=v/n:2", "s", "a", "k=v", "emulation", "sim", "n=2"};
    run_of(&runs[0], fit.name, 0, 0);
    run_of(&runs[1], fit.name, 1, 0);
    assert_int_equal(cmb_output_case(&o, &fit, runs, 2, err, sizeof err), 0);
    run_of(&runs[0], big.name, 0, 3);
    run_of(&runs[1], big.name, 1, 1);
    assert_true(cmb_output_oom_count(&runs[0]) == 3);
    assert_int_equal(cmb_output_case(&o, &big, runs, 2, err, sizeof err), 0);
    assert_int_equal(cmb_output_close(&o, err, sizeof err), 0);

    /* every row: 15 fields; the fitting case ok, the other oom with why */
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import csv; r=list(csv.reader(open('%s/results.csv'))); "
             "assert {len(x) for x in r}=={15}, r; "
             "print(sorted({(x[3], x[8], x[9], x[12], x[13], x[14]) for x in r[1:]}))\"", dir);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, "[('s/a:k=v/n:1', '0', 'ok', '', 'k=v', 'emulation'), "
                             "('s/a:k=v/n:1', '1', 'ok', '', 'k=v', 'emulation'), "
                             "('s/a:k=v/n:2', '0', 'oom', 'did not fit: 3 allocations failed', 'k=v', 'emulation'), "
                             "('s/a:k=v/n:2', '1', 'oom', 'did not fit: 1 allocation failed', 'k=v', 'emulation')]\n");

    /* --resume: both finished, neither failed */
    cmb_resume r;
    assert_int_equal(cmb_resume_load(&r, dir, err, sizeof err), 0);
    assert_int_equal(r.n_done, 2);
    assert_int_equal(r.n_failed, 0);
    assert_true(cmb_resume_is_done(&r, big.name));
    cmb_resume_free(&r);
}

static long file_size(const char *dir, const char *file)
{
    char path[800];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return stat(path, &st) ? -1 : (long)st.st_size;
}

/* A case of many counters, appended under a file-size limit that lets half
 * of it through: the call fails, both files are as before it, strict JSON,
 * and the directory recovers with nothing to repair. */
static void a_failed_append_is_undone(void **state)
{
    (void)state;
    char dir[700], err[512], path[800];
    cmb_env env;
    cmb_output o;
    static cmb_bench_run runs[2];
    struct rlimit old, lim;
    memset(&env, 0, sizeof env);
    snprintf(env.gpu_slug, sizeof env.gpu_slug, "sim");
    snprintf(dir, sizeof dir, "%s/undo", cmb_test_tmpdir());
    assert_int_equal(cmb_output_open(&o, dir, &env, "sim", "test", err, sizeof err), 0);
    cmb_case_row one = {"s/a/n:1", "s", "a", "", "emulation", "sim", "n=1"};
    cmb_case_row two = {"s/a/n:2", "s", "a", "", "emulation", "sim", "n=2"};
    run_of(&runs[0], one.name, 0, 0);
    assert_int_equal(cmb_output_case(&o, &one, runs, 1, err, sizeof err), 0);
    long json = file_size(dir, "results.json"), csv = file_size(dir, "results.csv");
    run_of(&runs[0], two.name, 0, 0);
    run_of(&runs[1], two.name, 1, 0);
    for (int k = 0; k < 2; k++) {
        for (size_t i = 1; i < CMB_BENCH_MAX_COUNTERS; i++) {
            snprintf(runs[k].counters[i].name, sizeof runs[k].counters[i].name, "counter_%zu", i);
            runs[k].counters[i].value = (double)i;
        }
        runs[k].n_counters = CMB_BENCH_MAX_COUNTERS;
    }
    signal(SIGXFSZ, SIG_IGN); /* past the limit a write fails (EFBIG), as on a full disk (ENOSPC) */
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = (rlim_t)json + 2000;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = cmb_output_case(&o, &two, runs, 2, err, sizeof err);
    setrlimit(RLIMIT_FSIZE, &old);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, "the files hold every case before this one"));
    assert_int_equal(file_size(dir, "results.json"), json);
    assert_int_equal(file_size(dir, "results.csv"), csv);
    assert_int_equal(cmb_output_case(&o, &two, runs, 2, err, sizeof err), 0); /* room again: the run goes on */
    assert_int_equal(cmb_output_close(&o, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/results.json", dir);
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    assert_non_null(doc);
    assert_int_equal(json_array_size(json_object_get(doc, "benchmarks")), 3);
    json_decref(doc);
    cmb_resume r;
    assert_int_equal(cmb_resume_load(&r, dir, err, sizeof err), 0);
    assert_int_equal(r.n_done, 2);
    assert_false(r.csv_repaired || r.json_dropped || r.json_repaired);
    cmb_resume_free(&r);
}

/* Another process holds the directory: refused at once, with its pid;
 * once it is gone the lock is free. */
static void a_second_writer_is_refused_with_the_pid(void **state)
{
    (void)state;
    char dir[700], err[512], buf[8];
    int up[2], down[2];
    cmb_results s;
    snprintf(dir, sizeof dir, "%s", cmb_test_tmpdir());
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(down), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        cmb_results mine;
        int ok = cmb_results_lock(&mine, dir, err, sizeof err) == 0;
        (void)!write(up[1], ok ? "y" : "n", 1);
        (void)!read(down[0], buf, 1); /* held until the parent has tried */
        _exit(ok ? 0 : 1);
    }
    assert_int_equal(read(up[0], buf, 1), 1);
    assert_int_equal(buf[0], 'y');
    assert_int_equal(cmb_results_lock(&s, dir, err, sizeof err), -1);
    char want[64];
    snprintf(want, sizeof want, "(pid %ld)", (long)child);
    if (!strstr(err, want))
        fail_msg("%s", err);
    assert_int_equal(write(down[1], "x", 1), 1);
    int st;
    assert_int_equal(waitpid(child, &st, 0), child);
    assert_int_equal(cmb_results_lock(&s, dir, err, sizeof err), 0);
    assert_int_equal(cmb_results_close(&s, err, sizeof err), 0);
    assert_int_equal(file_size(dir, "run.lock"), -1); /* removed with the lock */
}

static int collect(const char *const *f, size_t at, void *ctx)
{
    (void)at;
    snprintf(ctx, 256, "%s|%s|%s|%s", f[CMB_COL_CASE], f[CMB_COL_ALLOCATOR], f[CMB_COL_OPTIONS], f[CMB_COL_IMPL]);
    return 0;
}

/* A run written before the options and impl columns: read by name, the
 * new columns empty; --resume (this version's header only) refuses it. */
static void an_older_header_reads_by_name(void **state)
{
    (void)state;
    char dir[700], err[512], got[256] = "", path[800];
    snprintf(dir, sizeof dir, "%s/old", cmb_test_tmpdir());
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/results.csv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("run_id,gpu,mode,case,scenario,allocator,upstream,params,repetition,status,metric,value,error\n"
          "r,sim,sim,\"s/a:k=v,w\",s,a:k=v,sim,,0,ok,time_s,1,\n", f);
    fclose(f);
    assert_int_equal(cmb_results_read_csv(dir, 0, collect, got, NULL, err, sizeof err), 0);
    assert_string_equal(got, "s/a:k=v,w|a:k=v||");
    assert_int_equal(cmb_results_read_csv(dir, CMB_RESULTS_THIS_VERSION, collect, got, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "this version's CSV header"));
}

static void a_number_that_is_not_finite_is_null(void **state)
{
    (void)state;
    json_t *v = cmb_results_number(NAN);
    assert_true(json_is_null(v));
    json_decref(v);
    v = cmb_results_number(-INFINITY);
    assert_true(json_is_null(v));
    json_decref(v);
    v = cmb_results_number(0.1);
    assert_true(json_is_real(v) && json_real_value(v) == 0.1);
    json_decref(v);
    char dir[700];
    snprintf(dir, sizeof dir, "%s/x", cmb_test_tmpdir());
    char *long_dir = malloc(1000);
    memset(long_dir, 'd', 999);
    long_dir[999] = '\0';
    char err[256];
    assert_int_equal(cmb_results_check_dir(long_dir, err, sizeof err), -1);
    assert_non_null(strstr(err, "767"));
    assert_int_equal(cmb_results_check_dir(dir, err, sizeof err), 0);
    free(long_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_is_the_schema),
        cmocka_unit_test(a_case_that_did_not_fit_is_oom),
        cmocka_unit_test(a_failed_append_is_undone),
        cmocka_unit_test(a_second_writer_is_refused_with_the_pid),
        cmocka_unit_test(an_older_header_reads_by_name),
        cmocka_unit_test(a_number_that_is_not_finite_is_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
