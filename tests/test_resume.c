/* test_resume.c - nothing lost: a run interrupted (SIGINT) or killed
 * (SIGKILL) keeps valid files with every finished case, and --resume
 * finishes it with every case in results.json and results.csv exactly
 * once, also after a kill between the JSON and the CSV write or in the
 * middle of a CSV line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/run.h"

static const char *SMALL = "--param n=300 --param max_size=2MiB --param dist=uniform --param checkerboard=true "
                           "--param fill=0.5 --capacity 1GiB";

/* results_check.py once DIR [--cases N] [--killed] */
static void check_once_as(const char *dir, int cases, int killed)
{
    char cmd[4096], out[1 << 16];
    int n = snprintf(cmd, sizeof cmd, "python3 %s/tests/support/results_check.py once %s%s", cmb_test_src(), dir,
                     killed ? " --killed" : "");
    if (cases >= 0)
        snprintf(cmd + n, sizeof cmd - (size_t)n, " --cases %d", cases);
    if (cmb_test_sh(cmd, out, sizeof out))
        fail_msg("%s: %s", dir, out);
}

static void check_once(const char *dir, int cases)
{
    check_once_as(dir, cases, 0);
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char sh_out[1 << 16];
static int sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return cmb_test_sh(cmd, sh_out, sizeof sh_out);
}

/* A finished run of every scenario's quick preset resumes as finished: each
 * case's CSV rows match what its JSON entries make (a counter named like a
 * key every entry has, as leak-check's "iterations" was, made a whole run
 * look damaged). */
static void a_finished_run_resumes_as_finished(void **state)
{
    (void)state;
    char dir[600];
    const char *bin = getenv("CMB_BIN");
    snprintf(dir, sizeof dir, "%s/done", cmb_test_tmpdir());
    if (sh("cd '%s' && '%s' --mode sim --quiet --preset quick --allocator torch-caching --repetitions 2 --out %s",
           cmb_test_src(), bin, dir))
        fail_msg("the run: %s", sh_out);
    if (sh("cd '%s' && '%s' --quiet --resume %s", cmb_test_src(), bin, dir))
        fail_msg("--resume of a finished run: %s", sh_out);
    check_once(dir, -1);
}

/* SIGINT while the second case hangs: the hung case is not recorded, and
 * --resume (with a case timeout) runs it and the case after it. */
static void an_interrupted_run_resumes(void **state)
{
    (void)state;
    char dir[600];
    const char *bin = getenv("CMB_BIN");
    snprintf(dir, sizeof dir, "%s/o", cmb_test_tmpdir());
    sh("'%s' --mode sim --quiet --scenario churn --allocator cuda,external:%s:mode=hang,rmm-pool %s "
       "--repetitions 2 --out %s & pid=$!; sleep 2; kill -INT $pid; wait $pid; echo exit=$?",
       bin, getenv("CMB_MISBEHAVING"), SMALL, dir);
    if (!strstr(sh_out, "exit=130") || !strstr(sh_out, "--resume"))
        fail_msg("interrupt: %s", sh_out);
    check_once(dir, 1);
    /* only --quiet, --verbose and --case-timeout may come beside --resume */
    assert_int_equal(sh("'%s' --resume %s --seed 7", bin, dir), 2);
    if (!strstr(sh_out, "only --quiet, --verbose and --case-timeout"))
        fail_msg("%s", sh_out);
    assert_int_equal(sh("cd / && '%s' --resume %s --case-timeout 1", bin, dir), 1); /* the hang fails */
    if (!strstr(sh_out, "1 finished cases kept"))
        fail_msg("resume: %s", sh_out);
    check_once(dir, 3);
    /* a finished run: nothing left to do; the earlier failure still counts */
    assert_int_equal(sh("'%s' --resume %s --quiet", bin, dir), 1);
    check_once(dir, 3);
}

/* SIGKILL of the parent at a random point of a run of many short cases:
 * whatever was written is valid and resumable. */
static void a_killed_run_resumes(void **state)
{
    (void)state;
    char dir[600];
    const char *bin = getenv("CMB_BIN");
    const char *delays[] = {"0.4", "0.9", "1.6"};
    sh("'%s' --list | sed -n '/^allocators/,$p' | grep -c '^  [a-z]'", bin);
    int n_allocators = atoi(sh_out);
    assert_true(n_allocators > 5);
    for (int k = 0; k < 3; k++) {
        snprintf(dir, sizeof dir, "%s/k", cmb_test_tmpdir());
        sh("'%s' --mode sim --quiet --scenario churn --allocator all --param n=30000 "
           "--param max_size=1MiB,4MiB,16MiB,64MiB --param dist=uniform,bimodal,loguniform --repetitions 1 --timeline off "
           "--out %s & pid=$!; sleep %s; kill -KILL $pid; wait $pid; echo exit=$?",
           bin, dir, delays[k]);
        if (!strstr(sh_out, "exit=137"))
            fail_msg("kill: %s", sh_out);
        sh("sleep 0.3; python3 -c \"import json; json.load(open('%s/results.json'))\"", dir);
        check_once_as(dir, -1, 1);
        if (sh("'%s' --resume %s --quiet", bin, dir))
            fail_msg("resume after kill at %s s: %s", delays[k], sh_out);
        check_once(dir, n_allocators * 12); /* every allocator (some skipped in sim) x 12 parameter sets */
    }
}

/* A kill between a case's JSON and CSV writes, and one in the middle of a
 * CSV line: resume drops the half-written case from both files and runs it
 * again. The run used a relative trace path from another directory. */
static void torn_writes_are_repaired(void **state)
{
    (void)state;
    char dir[600];
    const char *bin = getenv("CMB_BIN");
    snprintf(dir, sizeof dir, "%s/t", cmb_test_tmpdir());
    assert_int_equal(sh("cd '%s' && '%s' --mode sim --quiet --scenario churn,replay --allocator cuda,rmm-pool,bfc %s "
                        "--param trace=traces/samples/churn_small.trace --repetitions 2 --out %s",
                        cmb_test_src(), bin, SMALL, dir), 0);
    check_once(dir, 6);
    /* drop the last case's CSV rows (killed after its JSON write) */
    assert_int_equal(sh("cd %s && last=$(tail -1 results.csv | cut -d, -f4) && grep -v -F \"$last\" results.csv > c "
                        "&& mv c results.csv && cp results.csv full.csv", dir), 0);
    /* and cut the one before it in the middle of its fourth line */
    assert_int_equal(sh("cd %s && prev=$(tail -1 results.csv | cut -d, -f4) && grep -v -F \"$prev\" full.csv > c && "
                        "grep -F \"$prev\" full.csv | head -3 >> c && grep -F \"$prev\" full.csv | sed -n 4p | "
                        "head -c 40 >> c && mv c results.csv && rm full.csv", dir), 0);
    assert_int_equal(sh("cd / && '%s' --resume %s", bin, dir), 0);
    if (!strstr(sh_out, "cut short, dropped") || !strstr(sh_out, "entries of an unfinished case dropped") ||
        !strstr(sh_out, "4 finished cases kept"))
        fail_msg("resume: %s", sh_out);
    check_once(dir, 6);
}

static void resume_refuses_what_it_cannot_continue(void **state)
{
    (void)state;
    const char *bin = getenv("CMB_BIN");
    const char *tmp = cmb_test_tmpdir();
    assert_int_equal(sh("'%s' --resume %s/none", bin, tmp), 2);
    if (!strstr(sh_out, "No such file"))
        fail_msg("%s", sh_out);
    assert_int_equal(sh("'%s' --resume %s", bin, tmp), 2);
    if (!strstr(sh_out, "run.args"))
        fail_msg("%s", sh_out);
    assert_int_equal(sh("'%s' --mode sim --quiet --scenario churn --allocator cuda %s --repetitions 1 --out %s/r",
                        bin, SMALL, tmp), 0);
    assert_int_equal(sh("'%s' --mode sim --quiet --scenario churn --allocator cuda %s --repetitions 1 --out %s/r",
                        bin, SMALL, tmp), 2);
    if (!strstr(sh_out, "--resume"))
        fail_msg("%s", sh_out);
    /* the closing cut off (an append torn at its end): nothing finished is lost, the file is closed again */
    assert_int_equal(sh("truncate -s -3 %s/r/results.json && '%s' --resume %s/r", tmp, bin, tmp), 0);
    if (!strstr(sh_out, "1 finished cases kept") || !strstr(sh_out, "torn tail of results.json cut off"))
        fail_msg("%s", sh_out);
    /* a finished case's entry cut: the CSV holds what the JSON lost, refused */
    assert_int_equal(sh("truncate -s -200 %s/r/results.json && '%s' --resume %s/r", tmp, bin, tmp), 2);
    if (!strstr(sh_out, "which results.json lacks"))
        fail_msg("%s", sh_out);
    /* a case in two stretches (a skipped case between), the second torn and dropped, and the JSON without
     * the case: still the first stretch's, refused (dropping the tail once forgot the first stretch) */
    assert_int_equal(sh("'%s' --mode sim --quiet --scenario churn --allocator cuda,cub %s --repetitions 1 "
                        "--out %s/s",
                        bin, SMALL, tmp), 0);
    assert_int_equal(sh("cd %s/s && grep -m1 ',cuda,' results.csv > row && cat row >> results.csv && head -c 30 row >> results.csv && "
                        "python3 -c \"import json; d=json.load(open('results.json')); d['benchmarks']=[]; "
                        "json.dump(d, open('results.json', 'w'))\"",
                        tmp), 0);
    assert_int_equal(sh("'%s' --resume %s/s", bin, tmp), 2);
    if (!strstr(sh_out, "which results.json lacks"))
        fail_msg("%s", sh_out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_interrupted_run_resumes),
        cmocka_unit_test(a_killed_run_resumes),
        cmocka_unit_test(torn_writes_are_repaired),
        cmocka_unit_test(resume_refuses_what_it_cannot_continue),
        cmocka_unit_test(a_finished_run_resumes_as_finished),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
