/* test_rank.c - the recommendation (harness/rank.c, docs/costs.md): the
 * smallest GPU within the time budget; cuda per request and a time far
 * above the rest never recommended; without times, never cuda for memory
 * alone; a case with failed allocations never fits. Then the sim answers
 * of several scenarios, with and without a (fixture) cost file: no
 * 'recommended' line names cuda. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "harness/rank.h"
#include "support/run.h"

#define GIB (1024.0 * 1024 * 1024)

static void smallest_gpu_within_budget(void **state)
{
    (void)state;
    cmb_rank_entry e[] = {
        {"cuda", 1, 2.0 * GIB, 2.0 * GIB, 0.5, 0},         /* smallest GPU, never recommended */
        {"cmb", 1, 2.1 * GIB, 2.1 * GIB, 0.0104, 0},       /* within 5% of the fastest */
        {"rmm-pool", 1, 2.4 * GIB, 40 * GIB, 0.0100, 0},   /* fastest */
        {"torch-caching", 1, 2.6 * GIB, 3.6 * GIB, 0.011, 0},
    };
    cmb_rank_result r;
    cmb_rank_recommend(e, 4, CMB_RANK_BUDGET, &r);
    assert_int_equal(r.fastest, 2);
    assert_int_equal(r.recommended, 1);
    assert_true(r.by_capacity && r.timed);
    e[1].time_s = 0.0106; /* 6% above the fastest: out of the budget */
    cmb_rank_recommend(e, 4, CMB_RANK_BUDGET, &r);
    assert_int_equal(r.recommended, 2);
    /* ranked by the smallest GPU, not by peak reserved on the simulated device */
    assert_true(e[2].memory > e[3].memory);
}

static void far_above_and_failures(void **state)
{
    (void)state;
    cmb_rank_entry e[] = {
        {"a", 1, 1.0 * GIB, 1.0 * GIB, 1.0, 0},   /* far above: 100x the median */
        {"b", 0, 0.5 * GIB, 0.5 * GIB, 0.01, 0},  /* failed allocations somewhere: does not fit */
        {"c", 1, 3.0 * GIB, 3.0 * GIB, 0.01, 0},
        {"d", 1, 4.0 * GIB, 4.0 * GIB, 0.01, 0},
    };
    cmb_rank_result r;
    cmb_rank_recommend(e, 4, CMB_RANK_BUDGET, &r);
    assert_true(r.far[0]);
    assert_false(r.far[2]);
    assert_int_equal(r.recommended, 2);
}

static void without_times(void **state)
{
    (void)state;
    cmb_rank_entry e[] = {
        {"cuda", 1, 1.0 * GIB, 1.0 * GIB, NAN, 0},
        {"cuda@vmm", 1, 1.0 * GIB, 1.0 * GIB, NAN, 0},
        {"buddy", 1, 4.0 * GIB, 4.0 * GIB, NAN, 0},
        {"bfc", 1, NAN, 3.0 * GIB, NAN, 0}, /* no smallest GPU: rank by the memory measure */
    };
    cmb_rank_result r;
    cmb_rank_recommend(e, 4, CMB_RANK_BUDGET, &r);
    assert_false(r.timed);
    assert_false(r.by_capacity);
    assert_int_equal(r.recommended, 3);
    assert_true(cmb_rank_is_per_request("cuda:x=1"));
    assert_false(cmb_rank_is_per_request("cuda-async"));
}

static void sim_answers_never_recommend_cuda(void **state)
{
    (void)state;
    static char out[1 << 20];
    const char *envs[] = {"", "CMB_COSTS=%s/tests/fixtures/costs/fixture-costs.json "};
    for (int i = 0; i < 2; i++) {
        char env[1024], cmd[4096];
        snprintf(env, sizeof env, envs[i], cmb_test_src());
        snprintf(cmd, sizeof cmd,
                 "%s\"$CMB_BIN\" --mode sim --scenario churn,replay,batch-sweep --allocator "
                 "cuda,torch-caching,rmm-pool,cmb,buddy --param n=2000 "
                 "--param trace=%s/traces/samples/torch_mlp_sweep_default.trace --repetitions 1 --out %s/r%d 2>&1",
                 env, cmb_test_src(), cmb_test_tmpdir(), i);
        assert_in_range(cmb_test_sh(cmd, out, sizeof out), 0, 1);
        assert_non_null(strstr(out, "recommended"));
        for (const char *p = out; (p = strstr(p, "recommended      ")); p++)
            assert_true(strncmp(p + strlen("recommended      "), "cuda ", 5));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(smallest_gpu_within_budget),
        cmocka_unit_test(far_above_and_failures),
        cmocka_unit_test(without_times),
        cmocka_unit_test(sim_answers_never_recommend_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
