/* test_instance.c - every allocator instance is checked, the case's own
 * and each fresh trial instance a scenario opens (harness/instance.h):
 * the misbehaving plug-in plants one block inside another in the instance
 * it is told to, and a --fault run (whose fault never fires) must count
 * it in verify_overlaps and fail the case (the allocator contract is
 * broken), also where the instance is a trial of replay's capacity search
 * or of batch-sweep's batches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/run.h"

/* verify_overlaps of the one case of a run, or -1 when there is none. */
static double overlaps_of(const char *dir)
{
    char cmd[1024], out[256];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import csv; r=[x['value'] for x in csv.DictReader(open('%s/results.csv')) "
             "if x['metric']=='verify_overlaps']; print(r[0] if len(r)==1 else -1)\"", dir);
    if (cmb_test_sh(cmd, out, sizeof out) != 0)
        fail_msg("cannot read %s/results.csv: %s", dir, out);
    return strtod(out, NULL);
}

/* Runs `scenario_args` under the plug-in planting its overlap in instance
 * `instance` (0: none planted) and returns verify_overlaps, or where one
 * was planted, the failed cases whose error names it. */
static double run_planted(const char *name, const char *scenario_args, int instance)
{
    char args[4096], out[1 << 14], dir[700];
    snprintf(dir, sizeof dir, "%s/%s-%d", cmb_test_tmpdir(), name, instance);
    snprintf(args, sizeof args,
             "--mode sim %s --allocator external:%s:mode=%s:at=3:instance=%d --fault nth=1000000000 "
             "--repetitions 1 --quiet --timeline off --out %s",
             scenario_args, getenv("CMB_MISBEHAVING"), instance ? "overlap" : "ok", instance, dir);
    int rc = cmb_test_run(args, out, sizeof out);
    if ((rc != 0) != (instance != 0))
        fail_msg("%s (instance %d) exited %d: %s", name, instance, rc, out);
    char grep[800];
    snprintf(grep, sizeof grep, "grep -c 'allocator contract broken: block .* is overlapping' %s/results.csv", dir);
    if (!instance)
        return overlaps_of(dir);
    /* a failed case keeps no counters: its error names the overlap */
    if (cmb_test_sh(grep, out, sizeof out) != 0)
        fail_msg("%s (instance %d): the case's error does not say why", name, instance);
    return strtod(out, NULL);
}

static void replay_capacity_search_trials_are_checked(void **state)
{
    (void)state;
    char scn[1024];
    snprintf(scn, sizeof scn,
             "--scenario replay --param trace=%s/traces/samples/churn_small.trace --param find_min_capacity=true",
             cmb_test_src());
    assert_true(run_planted("replay", scn, 0) == 0);
    assert_true(run_planted("replay", scn, 1) == 1); /* the case's own instance */
    assert_true(run_planted("replay", scn, 2) == 1); /* the search's first trial */
    assert_true(run_planted("replay", scn, 4) == 1); /* a later trial */
}

static void batch_sweep_trials_are_checked(void **state)
{
    (void)state;
    const char *scn = "--scenario batch-sweep";
    assert_true(run_planted("batch", scn, 0) == 0);
    assert_true(run_planted("batch", scn, 2) == 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(replay_capacity_search_trials_are_checked),
        cmocka_unit_test(batch_sweep_trials_are_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
