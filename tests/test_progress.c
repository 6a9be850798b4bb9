/* test_progress.c - progress inside a case and the time left: the
 * per-scenario estimate, the progress record on the wire, the console
 * line, a whole sim replay that shows progress on stderr while its
 * results.csv matches a --quiet run's, and case lines of 120 columns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness/caseline.h"
#include "harness/progress.h"
#include "harness/wire.h"
#include "support/run.h"

/* --- the time left ------------------------------------------------------------------------------ */

static void eta_uses_the_mean_of_each_scenario(void **state)
{
    (void)state;
    static const char a, b, c; /* three scenarios */
    cmb_eta_case cases[] = {
        {&a, 2.0}, {&a, 4.0}, {&b, 10.0}, /* finished: a's mean 3, b's 10, all 16/3 */
        {&a, -1}, {&b, -1}, {&c, -1},     /* left: 3 + 10 + 16/3 (c: none of its own) */
    };
    size_t n = sizeof cases / sizeof cases[0];
    assert_float_equal(cmb_eta_left(cases, n, n, 0, -1), 3.0 + 10.0 + 16.0 / 3.0, 1e-9);
    /* the running case (a) by its own progress */
    assert_float_equal(cmb_eta_left(cases, n, 3, 1.0, 0.5), 0.5 + 10.0 + 16.0 / 3.0, 1e-9);
    /* without progress: its scenario's mean less the time it has run, not below 0 */
    assert_float_equal(cmb_eta_left(cases, n, 3, 1.0, -1), 2.0 + 10.0 + 16.0 / 3.0, 1e-9);
    assert_float_equal(cmb_eta_left(cases, n, 4, 30.0, -1), 3.0 + 0.0 + 16.0 / 3.0, 1e-9);
    /* a slow scenario does not slow the estimate of a fast one */
    cases[2].seconds = 1000.0;
    double fast = cmb_eta_left(cases, n, n, 0, -1) - 1000.0 - 1006.0 / 3.0; /* a's share */
    assert_float_equal(fast, 3.0, 1e-6);
}

static void eta_is_zero_before_any_case_finished(void **state)
{
    (void)state;
    cmb_eta_case cases[] = {{"x", -1}, {"y", -1}};
    assert_float_equal(cmb_eta_left(cases, 2, 2, 0, -1), 0.0, 0);
    assert_float_equal(cmb_eta_left(cases, 2, 0, 5.0, 7.0), 7.0, 1e-12);
}

/* --- the record and the line -------------------------------------------------------------------- */

static void progress_record_round_trip(void **state)
{
    (void)state;
    int fds[2];
    char buf[512];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(cmb_wire_write_progress(fds[1], 3200000, 10000000, 2.9, "events\tx"), 0);
    ssize_t n = read(fds[0], buf, sizeof buf);
    close(fds[0]);
    close(fds[1]);
    assert_true(n > 0);
    cmb_wire_reader r;
    cmb_wire_reader_init(&r);
    assert_int_equal(cmb_wire_feed(&r, buf, (size_t)n), 0);
    assert_int_equal(r.progress.seq, 1);
    assert_int_equal(r.progress.done, 3200000);
    assert_int_equal(r.progress.total, 10000000);
    assert_float_equal(r.progress.seconds, 2.9, 1e-12);
    assert_string_equal(r.progress.what, "events x"); /* no tab gets through */
    assert_int_equal(r.n, 0);                         /* not a run */

    char line[192];
    cmb_progress_format(&r.progress, line, sizeof line);
    assert_string_equal(line, "3.2M/10.0M events x, 1.1M/s, ~6 s left");
    /* a progress record inside a run is malformed */
    const char *bad = "R\tn\t0\t\t0\t0\t1\t1\t1\t1\t1\t2\t0\t\t\nP\t1\t2\t0.5\tevents\n";
    assert_int_equal(cmb_wire_feed(&r, bad, strlen(bad)), -1);
    cmb_wire_reader_free(&r);
}

/* --- a whole run -------------------------------------------------------------------------------- */

/* A trace of `events` alloc/free events (traces/FORMAT.md). */
static void write_trace(const char *path, unsigned events)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "# cumembench-trace 1\n");
    for (unsigned i = 0; i < events / 2; i++) {
        fprintf(f, "a %u %u 0 -\n", i % 64, 4096u * (1 + i % 97));
        fprintf(f, "f %u - 0 -\n", i % 64);
    }
    assert_int_equal(fclose(f), 0);
}

/* results.csv without what differs run to run: the run id and times. */
static void csv_shape(const char *dir, const char *run, char *out, size_t len)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cut -d, -f4,5,6,9,10,11,12 %s/%s/results.csv | "
             "grep -Ev ',(time_s|cpu_time_s|[a-z0-9_]*_ns|ops_per_s|events_per_s|predicted_[a-z_]*_s),'", dir, run);
    assert_int_equal(cmb_test_sh(cmd, out, len), 0);
}

static void replay_shows_progress_and_keeps_results(void **state)
{
    (void)state;
    static char out[1 << 16], loud[1 << 16], quiet[1 << 16];
    char args[2048], trace[600];
    const char *dir = cmb_test_tmpdir();
    snprintf(trace, sizeof trace, "%s/long.trace", dir);
    write_trace(trace, 600000);
    const char *common = "--mode sim --scenario replay --allocator bfc,cuda --repetitions 2 --param passes=2";
    /* progress from the start, a record every 20 ms, every one on a line */
    snprintf(args, sizeof args, "%s --param trace=%s --out %s/loud", common, trace, dir);
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "CMB_PROGRESS_AFTER_S=0 CMB_PROGRESS_EVERY_S=0.02 CMB_PROGRESS_LINE_S=0 '%s' %s",
             getenv("CMB_BIN"), args);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    if (!strstr(out, "    [1/2] replay bfc: ") || !strstr(out, "/1.2M events") ||
        !strstr(out, "    [2/2] replay cuda: "))
        fail_msg("no progress line with done/total on stderr:\n%s", out);
    snprintf(args, sizeof args, "%s --quiet --param trace=%s --out %s/quiet", common, trace, dir);
    snprintf(cmd, sizeof cmd, "CMB_PROGRESS_AFTER_S=0 CMB_PROGRESS_EVERY_S=0.02 CMB_PROGRESS_LINE_S=0 '%s' %s",
             getenv("CMB_BIN"), args);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    if (strstr(out, " events"))
        fail_msg("--quiet showed progress:\n%s", out);
    csv_shape(dir, "loud", loud, sizeof loud);
    csv_shape(dir, "quiet", quiet, sizeof quiet);
    assert_true(strlen(loud) > 1000);
    assert_string_equal(loud, quiet);
}

static void short_cases_send_no_progress(void **state)
{
    (void)state;
    char args[1024], out[1 << 14];
    snprintf(args, sizeof args, "--mode sim --scenario churn --allocator cuda --param n=300 --param max_size=2MiB "
             "--param dist=uniform --capacity 1GiB --repetitions 1 --out %s/short", cmb_test_tmpdir());
    assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    if (strstr(out, " steps") || !strstr(out, "[1/1] churn cuda  ok"))
        fail_msg("a short case showed progress, or no case line:\n%s", out);
}

/* --- the case line: 120 columns, the full name in the files and with --verbose ---------------- */

/* Every line of `out` up to the run's totals (the answers after them are
 * a table of their own) at most CMB_CASELINE_WIDTH columns. */
static void lines_fit(const char *out)
{
    for (const char *p = out; *p && !(!strncmp(p, "cumembench: ", 12) && p[12] >= '0' && p[12] <= '9');) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n > CMB_CASELINE_WIDTH)
            fail_msg("a line of %zu columns:\n%.*s", n, (int)n, p);
        p = nl ? nl + 1 : p + n;
    }
}

static void case_lines_fit_and_verbose_names_in_full(void **state)
{
    (void)state;
    static char out[1 << 16], csv[1 << 16];
    char args[1024];
    const char *dir = cmb_test_tmpdir();
    const char *run = "--mode sim --scenario churn --allocator 'cuda,torch-caching:max_split_size_mb=64|128@sim,"
                      "torch-caching:garbage_collection_threshold=0.5@sim' --param n=300 --param max_size=2MiB,4MiB "
                      "--param dist=uniform --capacity 1GiB --repetitions 1";
    const char *full = "churn/torch-caching:max_split_size_mb=64@sim/n:300/max_size:4MiB/dist:uniform/live_cap:";
    snprintf(args, sizeof args, "%s --out %s/short", run, dir);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    lines_fit(out);
    /* the option that varies is named; one the run's other torch-caching specs do not vary is "..." */
    if (!strstr(out, "] churn torch-caching:max_split_size_mb=64@sim max_size:4MiB  ok\n      churn peak reserved") ||
        !strstr(out, "] churn torch-caching:max_split_size_mb=128@sim max_size:2MiB  ok") ||
        !strstr(out, "] churn torch-caching:...@sim max_size:4MiB  ok") ||
        strstr(out, full) || !strstr(out, "(sim bookkeeping)") || !strstr(out, "with --verbose"))
        fail_msg("no short case line with the parameter that varies and labelled sim times:\n%s", out);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cut -d, -f4 %s/short/results.csv | sort -u", dir);
    assert_int_equal(cmb_test_sh(cmd, csv, sizeof csv), 0);
    if (!strstr(csv, full))
        fail_msg("results.csv lost the full name:\n%s", csv);
    snprintf(args, sizeof args, "%s --verbose --out %s/verbose", run, dir);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    if (!strstr(out, "] churn/torch-caching:max_split_size_mb=64@sim/n:300/max_size:4MiB/") ||
        strstr(out, "with --verbose"))
        fail_msg("--verbose did not print the full name:\n%s", out);
}

/* A result too long for one line goes on indented lines, none over 120
 * columns; an item too long for any line is cut, the tail stays. */
static void case_line_wraps_at_items(void **state)
{
    (void)state;
    char item[300], result[700], out[2048];
    memset(item, 'x', 200);
    item[200] = '\0';
    snprintf(result, sizeof result, "FAILED: %s  second item  third", item);
    cmb_caseline_fit(result, "(1.0 s, ~3 s left)", 60, out, sizeof out);
    lines_fit(out);
    assert_non_null(strstr(out, "x...\n      second item  third  (1.0 s, ~3 s left)"));
    assert_int_equal(strcspn(out, "\n"), 60);
    cmb_caseline_fit("ok  a  b", "(t)", 60, out, sizeof out);
    assert_string_equal(out, "ok  a  b  (t)");
    cmb_caseline_elide("abcdefghijklmnopqrstuvwxyz", 11, out, sizeof out);
    assert_string_equal(out, "abcd...wxyz");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(eta_uses_the_mean_of_each_scenario),
        cmocka_unit_test(eta_is_zero_before_any_case_finished),
        cmocka_unit_test(progress_record_round_trip),
        cmocka_unit_test(replay_shows_progress_and_keeps_results),
        cmocka_unit_test(short_cases_send_no_progress),
        cmocka_unit_test(case_lines_fit_and_verbose_names_in_full),
        cmocka_unit_test(case_line_wraps_at_items),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
