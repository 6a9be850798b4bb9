/* test_costs.c - the cost model (harness/costs.c, docs/costs.md) on a
 * hand-written fixture cost file: interpolation, every upstream kind
 * priced, cudaFree's lost overlap, an emulation priced as its original,
 * refusals of malformed files; then a sim replay end to end with the
 * fixture (CMB_COSTS): the counts and the prediction agree by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

/* this cmocka has no assert_double_equal */
#define assert_near(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))

#include "harness/costs.h"
#include "support/run.h"

static cmb_costs costs;

static void load_fixture(void)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/costs/fixture-costs.json", cmb_test_src());
    assert_int_equal(cmb_costs_load(path, &costs, err, sizeof err), 0);
}

static void interpolation(void **state)
{
    (void)state;
    load_fixture();
    const cmb_cost_curve *m = &costs.call[CMB_CC_MALLOC];
    assert_int_equal(m->n, 2);
    assert_near(cmb_cost_at(m, 1), 1e-5, 1e-12);        /* flat below */
    assert_near(cmb_cost_at(m, 1 << 30), 1e-4, 1e-12);  /* flat above */
    assert_near(cmb_cost_at(m, 32768), 5.5e-5, 1e-12);  /* halfway in log */
    assert_int_equal(costs.n_real, 2); /* real:cupy skipped: not calibrated */
}

static void upstream_kinds(void **state)
{
    (void)state;
    load_fixture();
    static cmb_up_counts n;
    memset(&n, 0, sizeof n);
    n.calls[CMB_UPK_ALLOC][20] = 3, n.bytes[CMB_UPK_ALLOC][20] = 3 << 20;  /* 3 x 1 MiB */
    n.calls[CMB_UPK_FREE][20] = 2, n.bytes[CMB_UPK_FREE][20] = 2 << 20;
    n.calls[CMB_UPK_MAP][21] = 1, n.bytes[CMB_UPK_MAP][21] = 2 << 20;     /* one page */
    n.calls[CMB_UPK_UNMAP][21] = 1, n.bytes[CMB_UPK_UNMAP][21] = 2 << 20;
    n.calls[CMB_UPK_STREAM_SYNC][0] = 4, n.bytes[CMB_UPK_STREAM_SYNC][0] = 4;
    cmb_cost_input in = {"cmb", &n, 10, 10, 4096, 1e-3, 0};
    cmb_cost_parts p;
    cmb_costs_predict(&costs, &in, &p);
    /* 3 cudaMalloc 1e-4 + 2 cudaFree 2e-5 + map 1e-5+2e-6+3e-6 + unmap 4e-6+5e-6 */
    assert_near(p.upstream_s, 3e-4 + 4e-5 + 1.5e-5 + 9e-6, 1e-12);
    /* 2 frees lose 1e-4 - 2e-5 each; 4 syncs lose 5e-5 each */
    assert_near(p.sync_s, 2 * 8e-5 + 4 * 5e-5, 1e-12);
    assert_near(p.ops_s, 1e-3, 1e-12); /* the suite's own policy: its bookkeeping */
    assert_near(p.total_s, p.upstream_s + p.sync_s + p.ops_s, 1e-15);
}

static void emulation_priced_as_original(void **state)
{
    (void)state;
    load_fixture();
    cmb_cost_input in = {"torch-caching", NULL, 100, 100, 4096, 5.0, 0};
    cmb_cost_parts p;
    cmb_costs_predict(&costs, &in, &p);
    assert_near(p.ops_s, 100 * 4e-6, 1e-12); /* 100 pairs, not 5 s of bookkeeping */
    setenv("CMB_COSTS_OPS", "bookkeeping", 1); /* the policy's own code, as through libcmb_pluggable */
    cmb_costs_predict(&costs, &in, &p);
    assert_near(p.ops_s, 5.0, 1e-12);
    unsetenv("CMB_COSTS_OPS");
    in.own_code = 1; /* the same said in the input (tune's threads do not touch the environment) */
    cmb_costs_predict(&costs, &in, &p);
    assert_near(p.ops_s, 5.0, 1e-12);
    in.own_code = 0;
    in.allocator = "cupy"; /* its original was not calibrated: its bookkeeping */
    cmb_costs_predict(&costs, &in, &p);
    assert_near(p.ops_s, 5.0, 1e-12);
    in.allocator = "cuda-async";
    cmb_costs_predict(&costs, &in, &p);
    assert_near(p.ops_s, 100 * 2e-6 + 100 * 1e-6, 1e-12);
}

static void refusals(void **state)
{
    (void)state;
    char path[1024], err[512];
    const char *dir = cmb_test_tmpdir();
    const char *bad[] = {"{", "{\"format\": \"other\"}", "{\"format\": \"cumembench-costs/1\", \"calls\": {}}",
                         "{\"format\": \"cumembench-costs/1\", \"calls\": {\"cudaMalloc\": {\"points\": "
                         "[{\"x\": 2, \"median_s\": 1}, {\"x\": 1, \"median_s\": 1}]}}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "%s/bad%zu.json", dir, i);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(bad[i], f);
        fclose(f);
        err[0] = 0;
        assert_int_equal(cmb_costs_load(path, &costs, err, sizeof err), -1);
        assert_non_null(strstr(err, "cost file"));
        assert_null(strchr(err, '\n'));
    }
    assert_int_equal(cmb_costs_load("/nonexistent/costs.json", &costs, err, sizeof err), -1);
}

/* cuda over the sim upstream: every allocation is one upstream alloc and
 * every free one upstream free, so the prediction is known by hand. */
static void replay_end_to_end(void **state)
{
    (void)state;
    char args[2048], out[1 << 16];
    const char *dir = cmb_test_tmpdir();
    snprintf(args, sizeof args,
             "--mode sim --scenario replay --allocator cuda --param trace=%s/traces/samples/churn_small.trace "
             "--param find_min_capacity=false --repetitions 1 --out %s/r",
             cmb_test_src(), dir);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "CMB_COSTS=%s/tests/fixtures/costs/fixture-costs.json \"$CMB_BIN\" %s >/dev/null 2>&1 && "
             "python3 -c \"import json,sys; d=json.load(open('%s/r/results.json'));"
             "k=[b for b in d['benchmarks'] if b.get('run_type') == 'iteration'][0];"
             "print(k['up_alloc_calls'], k['allocs'], k['up_free_calls'], k['predicted_alloc_time_s'], "
             "k['predicted_sync_time_s'])\"", cmb_test_src(), args, dir);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    double ua, a, uf, pt, ps;
    assert_int_equal(sscanf(out, "%lf %lf %lf %lf %lf", &ua, &a, &uf, &pt, &ps), 5);
    assert_near(ua, a, 0);              /* cuda: one upstream call per request */
    assert_true(pt > 0);
    assert_near(ps, uf * 8e-5, 1e-9);   /* each cudaFree loses the fixture's overlap */
    /* two passes: cuda's passes are alike, so the last pass alone is half the whole */
    snprintf(cmd, sizeof cmd,
             "CMB_COSTS=%s/tests/fixtures/costs/fixture-costs.json \"$CMB_BIN\" --mode sim --scenario replay "
             "--allocator cuda --param trace=%s/traces/samples/churn_small.trace --param find_min_capacity=false "
             "--param passes=2 --repetitions 1 --out %s/r2 >/dev/null 2>&1 && python3 -c \"import json,sys; "
             "d=json.load(open('%s/r2/results.json'));k=[b for b in d['benchmarks'] if b.get('run_type') == "
             "'iteration'][0];print(k['predicted_alloc_time_s'], k['predicted_alloc_time_last_pass_s'])\"",
             cmb_test_src(), cmb_test_src(), dir, dir);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    double whole, last;
    assert_int_equal(sscanf(out, "%lf %lf", &whole, &last), 2);
    assert_near(whole, 2 * pt, 1e-9 + 1e-9 * pt);
    assert_near(last, pt, 1e-9 + 1e-9 * pt);
}

/* --costs FILE does what CMB_COSTS=FILE does, for every case process (a
 * relative path too), and the answers name the file; --gpu-model picks the
 * committed one. */
static void cli_options_choose_the_file(void **state)
{
    (void)state;
    char cmd[4096], out[1 << 16];
    const char *dir = cmb_test_tmpdir();
    snprintf(cmd, sizeof cmd,
             "cd %s && env -u CMB_COSTS -u CMB_GPU_MODEL \"$CMB_BIN\" --mode sim --scenario replay --allocator cuda "
             "--param trace=traces/samples/churn_small.trace --param find_min_capacity=false --repetitions 1 "
             "--costs tests/fixtures/costs/fixture-costs.json --out %s/c 2>&1 | grep -c 'predicted from %s/tests/fixtures/costs/fixture-costs.json' && "
             "python3 -c \"import json; d=json.load(open('%s/c/results.json'));"
             "k=[b for b in d['benchmarks'] if b.get('run_type') == 'iteration'][0];"
             "print(k['up_free_calls'], k['predicted_sync_time_s'])\"",
             cmb_test_src(), dir, cmb_test_src(), dir);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    double uf, ps;
    int lines;
    assert_int_equal(sscanf(out, "%d %lf %lf", &lines, &uf, &ps), 3);
    assert_int_equal(lines, 1);
    assert_true(uf > 0);
    assert_near(ps, uf * 8e-5, 1e-9); /* the fixture's overlap: the case processes used it */
    snprintf(cmd, sizeof cmd,
             "cd %s && env -u CMB_COSTS \"$CMB_BIN\" --mode sim --scenario replay --allocator cuda "
             "--param trace=traces/samples/churn_small.trace --param find_min_capacity=false --repetitions 1 "
             "--gpu-model 'NVIDIA H100 80GB HBM3' --out %s/g 2>&1 | grep -c 'predicted from .*results/nvidia-h100/costs.json'",
             cmb_test_src(), dir);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, "1\n");
    /* CMB_GPU_MODEL as nvidia-smi names the card (tune and replay without --gpu-model): each card its own
     * file (the name was once compared unslugged, so both got the directory's first) */
    const char *cards[][2] = {{"NVIDIA H200", "nvidia-h200"}, {"NVIDIA H100 80GB HBM3", "nvidia-h100"}};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "cd %s && env -u CMB_COSTS CMB_GPU_MODEL='%s' \"$CMB_BIN\" --mode sim --scenario replay "
                 "--allocator cuda --param trace=traces/samples/churn_small.trace --param find_min_capacity=false "
                 "--repetitions 1 --out %s/h%d 2>&1 | grep -c 'predicted from .*results/%s/costs.json'",
                 cmb_test_src(), cards[i][0], dir, i, cards[i][1]);
        assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
        assert_string_equal(out, "1\n");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(interpolation),
        cmocka_unit_test(upstream_kinds),
        cmocka_unit_test(emulation_priced_as_original),
        cmocka_unit_test(refusals),
        cmocka_unit_test(replay_end_to_end),
        cmocka_unit_test(cli_options_choose_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
