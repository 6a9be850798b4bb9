/* test_isolation.c - the parts of case isolation that need a GPU, tested
 * without one: the device check between cases (driven by a scripted
 * reading of the device's used memory), and the hidden planted-fault
 * scenario (never listed, found only with CMB_PLANTED_FAULTS=1, skipped in
 * sim mode). On a GPU, scripts/gpu-reliability.sh runs them for real. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/devcheck.h"
#include "scenarios/scenario.h"
#include "support/run.h"

#define MiB (1ull << 20)

/* --- a scripted device --------------------------------------------------------------- */

typedef struct script {
    uint64_t values[64];
    size_t n, at;
} script;

static int read_script(void *ctx, uint64_t *used)
{
    script *s = ctx;
    if (s->n == 0)
        return -1;
    *used = s->values[s->at < s->n ? s->at : s->n - 1];
    s->at++;
    return 0;
}

static void push(script *s, uint64_t v, size_t times)
{
    while (times--)
        s->values[s->n++] = v;
}

static void a_clean_device_stays_clean(void **state)
{
    (void)state;
    script s = {0};
    cmb_devcheck d = {0};
    char note[320];
    push(&s, 1000 * MiB, 1);        /* baseline */
    push(&s, 1000 * MiB, 1);        /* before case 1 */
    push(&s, 1010 * MiB, 1);        /* after case 1: within the slack */
    push(&s, 1005 * MiB, 1);        /* before case 2 */
    push(&s, 1000 * MiB, 1);        /* after */
    cmb_devcheck_start_with(&d, read_script, &s, 0.5);
    assert_true(d.active);
    assert_int_equal(d.baseline, 1000 * MiB);
    for (int i = 0; i < 2; i++) {
        cmb_devcheck_before(&d);
        cmb_devcheck_after(&d);
        assert_int_equal(d.dirty, 0);
        assert_int_equal(d.unreturned, 0);
        assert_int_equal(cmb_devcheck_note(&d, note, sizeof note), 0);
    }
}

static void memory_that_comes_back_late_is_waited_for(void **state)
{
    (void)state;
    script s = {0};
    cmb_devcheck d = {0};
    push(&s, 500 * MiB, 2);         /* baseline, before */
    push(&s, 1524 * MiB, 3);        /* after: the process's memory is still being torn down */
    push(&s, 500 * MiB, 1);         /* ... and then it is back */
    cmb_devcheck_start_with(&d, read_script, &s, 5.0);
    cmb_devcheck_before(&d);
    cmb_devcheck_after(&d);
    assert_int_equal(d.unreturned, 0);
    assert_int_equal(d.n_unreturned, 0);
}

static void a_leak_marks_the_case_and_the_next_one_dirty(void **state)
{
    (void)state;
    script s = {0};
    cmb_devcheck d = {0};
    char note[320];
    push(&s, 500 * MiB, 2);         /* baseline, before case 1 */
    push(&s, 1524 * MiB, 1);        /* after case 1: 1 GiB not returned (settle 0: no waiting) */
    push(&s, 1524 * MiB, 2);        /* before and after case 2 */
    push(&s, 500 * MiB, 2);         /* case 3: the holder has gone */
    cmb_devcheck_start_with(&d, read_script, &s, 0);

    cmb_devcheck_before(&d);
    cmb_devcheck_after(&d);
    assert_int_equal(d.dirty, 0);
    assert_int_equal(d.unreturned, 1024 * MiB);
    assert_int_equal(cmb_devcheck_note(&d, note, sizeof note), 1);
    assert_non_null(strstr(note, "not returned: 1.00 GiB"));

    cmb_bench_run runs[2];
    memset(runs, 0, sizeof runs);
    runs[1].error_occurred = 1;
    snprintf(runs[1].error_message, sizeof runs[1].error_message, "cuda error: boom");
    cmb_devcheck_annotate(&d, runs, 2);
    assert_int_equal(runs[0].n_counters, 2);
    assert_string_equal(runs[0].counters[1].name, "device_unreturned_bytes");
    assert_true(runs[0].counters[1].value == (double)(1024 * MiB));
    assert_int_equal(runs[1].n_counters, 0);
    assert_non_null(strstr(runs[1].error_message, "cuda error: boom; device memory not returned"));

    cmb_devcheck_before(&d);
    cmb_devcheck_after(&d);
    assert_int_equal(d.dirty, 1024 * MiB);
    assert_int_equal(d.unreturned, 0);
    cmb_devcheck_note(&d, note, sizeof note);
    assert_non_null(strstr(note, "ran on a dirty device: 1.00 GiB above"));

    cmb_devcheck_before(&d);
    cmb_devcheck_after(&d);
    assert_int_equal(d.dirty, 0);
    assert_int_equal(d.n_dirty, 1);
    assert_int_equal(d.n_unreturned, 1);
}

static void the_baseline_follows_the_lowest_level(void **state)
{
    (void)state;
    script s = {0};
    cmb_devcheck d = {0};
    push(&s, 900 * MiB, 1);         /* another program held 400 MiB at the start */
    push(&s, 500 * MiB, 2);         /* ... and let it go */
    push(&s, 600 * MiB, 2);         /* 100 MiB above the new baseline */
    cmb_devcheck_start_with(&d, read_script, &s, 0);
    cmb_devcheck_before(&d);
    cmb_devcheck_after(&d);
    assert_int_equal(d.baseline, 500 * MiB);
    cmb_devcheck_before(&d);
    assert_int_equal(d.dirty, 100 * MiB);
}

static void no_reader_means_no_check(void **state)
{
    (void)state;
    script s = {0}; /* fails every read */
    cmb_devcheck d = {0};
    cmb_bench_run run;
    memset(&run, 0, sizeof run);
    cmb_devcheck_start_with(&d, read_script, &s, 0);
    assert_false(d.active);
    cmb_devcheck_before(&d);
    cmb_devcheck_after(&d);
    cmb_devcheck_annotate(&d, &run, 1);
    assert_int_equal(run.n_counters, 0);
}

/* --- the planted-fault scenario ---------------------------------------------------------- */

static void the_planted_scenario_is_hidden(void **state)
{
    (void)state;
    unsetenv("CMB_PLANTED_FAULTS");
    assert_null(cmb_scenario_find("planted-fault"));
    setenv("CMB_PLANTED_FAULTS", "1", 1);
    const cmb_scenario *s = cmb_scenario_find("planted-fault");
    assert_non_null(s);
    assert_true(s->flags & CMB_SCN_NEEDS_GPU);
    for (size_t i = 0; i < cmb_scenario_count(); i++)
        assert_ptr_not_equal(cmb_scenario_at(i), s);
    unsetenv("CMB_PLANTED_FAULTS");

    char out[1 << 16], args[1024];
    assert_int_equal(cmb_test_run("--list", out, sizeof out), 0);
    assert_null(strstr(out, "planted"));
    snprintf(args, sizeof args, "--mode sim --scenario planted-fault --out %s/a", cmb_test_tmpdir());
    assert_int_equal(cmb_test_run(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown scenario 'planted-fault'"));
    /* selected on purpose in sim mode: skipped, the run goes on */
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "CMB_PLANTED_FAULTS=1 '%s' --mode sim --quiet --scenario planted-fault,churn --allocator cuda "
             "--param kind=illegal-address,orphan --param n=100 --param max_size=1MiB --param dist=uniform "
             "--repetitions 1 --out %s/b",
             getenv("CMB_BIN"), cmb_test_tmpdir());
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "1 ok, 0 failed, 2 skipped"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_clean_device_stays_clean),
        cmocka_unit_test(memory_that_comes_back_late_is_waited_for),
        cmocka_unit_test(a_leak_marks_the_case_and_the_next_one_dirty),
        cmocka_unit_test(the_baseline_follows_the_lowest_level),
        cmocka_unit_test(no_reader_means_no_check),
        cmocka_unit_test(the_planted_scenario_is_hidden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
