/* test_contract.c - allocator-contract violations fail the case
 * (harness/verify.c, harness/metered.c). The hostile plug-in
 * (tests/plugins/hostile_allocator.c) hands out misaligned blocks, a block
 * still live, or statistics of all 0xff bytes. With verification on
 * (CMB_VERIFY=1) each fails the case with its reason; the control (mode=ok)
 * stays ok. With or without it, impossible statistics never appear in the
 * results as numbers (they were published as peak_reserved_bytes=-1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/run.h"

/* Runs one churn case under the plug-in; returns the exit status and puts
 * the results directory in dir. */
static int run_hostile(const char *mode, int verify, char *dir, size_t dirlen)
{
    char args[4096], out[1 << 14];
    snprintf(dir, dirlen, "%s/%s-%d", cmb_test_tmpdir(), mode, verify);
    snprintf(args, sizeof args,
             "--mode sim --scenario churn --param n=300 --param max_size=1MiB --allocator external:%s:mode=%s:at=5 "
             "--repetitions 1 --quiet --timeline off --out %s",
             getenv("CMB_HOSTILE"), mode, dir);
    if (verify)
        setenv("CMB_VERIFY", "1", 1);
    else
        unsetenv("CMB_VERIFY");
    int rc = cmb_test_run(args, out, sizeof out);
    unsetenv("CMB_VERIFY");
    return rc;
}

/* A python expression over the rows r of results.csv, printed. */
static void query(const char *dir, const char *expr, char *out, size_t outlen)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import csv; r=list(csv.DictReader(open('%s/results.csv'))); print(%s)\"", dir, expr);
    if (cmb_test_sh(cmd, out, outlen) != 0)
        fail_msg("cannot read %s/results.csv: %s", dir, out);
    out[strcspn(out, "\n")] = '\0';
}

static void expect_failed_with(const char *mode, const char *words)
{
    char dir[700], out[4096];
    int rc = run_hostile(mode, 1, dir, sizeof dir);
    if (rc == 0)
        fail_msg("mode=%s under CMB_VERIFY=1 exited 0", mode);
    query(dir, "sorted(set(x['status'] for x in r))", out, sizeof out);
    if (strcmp(out, "['failed']"))
        fail_msg("mode=%s: statuses %s, expected only failed", mode, out);
    query(dir, "r[0]['error']", out, sizeof out);
    if (!strstr(out, words))
        fail_msg("mode=%s: expected '%s' in the error: %s", mode, words, out);
}

static void violations_fail_the_case(void **state)
{
    (void)state;
    char dir[700], out[256];
    assert_int_equal(run_hostile("ok", 1, dir, sizeof dir), 0); /* the control */
    query(dir, "sorted(set(x['status'] for x in r))", out, sizeof out);
    assert_string_equal(out, "['ok']");
    expect_failed_with("misalign", "misaligned");
    expect_failed_with("duplicate", "overlapping");
    expect_failed_with("badstats", "impossible statistics");
}

static void impossible_statistics_never_published(void **state)
{
    (void)state;
    char dir[700], out[1024];
    assert_int_equal(run_hostile("badstats", 0, dir, sizeof dir), 0);
    query(dir, "[(x['metric'], x['value']) for x in r if x['value'].startswith('-')]", out, sizeof out);
    assert_string_equal(out, "[]");
    query(dir, "len([x for x in r if x['metric'] in ('peak_reserved_bytes', 'peak_allocated_bytes')])", out,
          sizeof out);
    assert_string_equal(out, "0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(violations_fail_the_case),
        cmocka_unit_test(impossible_statistics_never_published),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
