/* test_output.c - the files output.c writes: the CSV header is the one
 * harness/schema.def describes, every row has every column, and a
 * repetition whose workload did not fit (cmb_case_set_oom, carried as the
 * CMB_OOM_COUNTER counter) is written with status oom and "did not fit: N
 * allocations failed" on each of its rows, while --resume counts it as a
 * finished case, not a failed one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/output.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_is_the_schema),
        cmocka_unit_test(a_case_that_did_not_fit_is_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
