/* test_fault_matrix.c - every allocator that runs in sim mode, over churn
 * and replay (the suite's trace format and RMM's CSV), while the upstream
 * fails the Nth request, every Kth request, or requests at random with a
 * fixed seed: no case may fail (every failure surfaces as a clean OOM the
 * scenario handles), nothing may leak, overlap, land outside the
 * upstream's memory or misuse the upstream, statistics must agree, every
 * allocator must meet injected faults, and the allocators that free their
 * cache and retry (CuPy, PyTorch's caching allocator) must be seen doing
 * it, as must cmb, which releases its cached pages and retries. CUB also
 * retries, but only runs on a GPU (scripts/gpu-reliability.sh).
 * The checks are in tests/support/results_check.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/run.h"

static const char *const FAULTS[] = {
    "every=1",        "every=2",           "every=3",           "every=7",          "nth=1",
    "nth=5",          "prob=0.05,seed=11", "prob=0.3,seed=12",  "prob=0.7,seed=13",
};
#define N_FAULTS (sizeof FAULTS / sizeof FAULTS[0])

static void every_allocator_survives_upstream_faults(void **state)
{
    (void)state;
    char args[4096], out[1 << 16], cmd[8192], dirs[N_FAULTS * 700] = "";
    const char *tmp = cmb_test_tmpdir();
    const char *src = cmb_test_src();
    for (size_t k = 0; k < N_FAULTS; k++) {
        char dir[600];
        snprintf(dir, sizeof dir, "%s/f%zu", tmp, k);
        snprintf(args, sizeof args,
                 "--mode sim --quiet --scenario churn,replay --allocator all --fault %s --capacity 8GiB "
                 "--param n=2000 --param max_size=64MiB --param dist=uniform,bimodal "
                 "--param trace=%s/traces/samples/churn_small.trace,%s/traces/samples/churn_small_rmm.csv,"
                 "%s/traces/samples/torch_mlp_sweep_default.trace "
                 /* the capacity search replays each trace a dozen times more: its trials are
                  * verified by test_instance; here it would only multiply the run time */
                 "--param find_min_capacity=false --repetitions 1 --out %s",
                 FAULTS[k], src, src, src, dir);
        int rc = cmb_test_run(args, out, sizeof out);
        /* 1: some repetitions failed; the checker below accepts only clean
         * OOM failures (a pool whose first reservation was refused) */
        if (rc != 0 && rc != 1)
            fail_msg("--fault %s: exit %d: %s", FAULTS[k], rc, out);
        strcat(dirs, " ");
        strcat(dirs, dir);
    }
    snprintf(cmd, sizeof cmd, "python3 %s/tests/support/results_check.py faults --retry cupy,torch-caching,cmb "
                              "--summary %s/summary.txt%s", src, tmp, dirs);
    int rc = cmb_test_sh(cmd, out, sizeof out);
    printf("%s", out);
    if (rc)
        fail_msg("fault matrix: %s", out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_allocator_survives_upstream_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
