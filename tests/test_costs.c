/* test_costs.c - the cost model (harness/costs.c, docs/costs.md) on a
 * hand-written fixture cost file: interpolation, every upstream kind
 * priced, cudaFree's lost overlap, an emulation priced as its original,
 * a deferred access run priced per handle (and as one handle where the
 * file has no cuMemSetAccess_handles), refusals of malformed files; then a
 * sim replay end to end with the fixture (CMB_COSTS): the counts and the
 * prediction agree by hand. */
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

#include "allocators/registry.h"
#include "allocators/upstream.h"
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

/* The fixture without cuMemSetAccess_handles, as a cost file made before
 * calibrate measured it (results/nvidia-h100/costs.json): its path. */
static const char *fixture_without_handles(void)
{
    static char path[1024];
    char cmd[2600], out[256];
    snprintf(path, sizeof path, "%s/no-handles.json", cmb_test_tmpdir());
    snprintf(cmd, sizeof cmd, "grep -v cuMemSetAccess_handles %s/tests/fixtures/costs/fixture-costs.json > %s",
             cmb_test_src(), path);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    return path;
}

/* defer_access(0)'s calls: one cuMemSetAccess per contiguous run, priced
 * by the handles it covers (cuMemSetAccess_handles), not as one handle of
 * the run's pages; a file without that curve prices them the old way. */
static void access_runs_per_handle(void **state)
{
    (void)state;
    load_fixture();
    static cmb_up_counts n;
    memset(&n, 0, sizeof n);
    /* two runs of 8 one-page handles (16 MiB each), one of 4 (8 MiB) */
    n.calls[CMB_UPK_SET_ACCESS][24] = 2, n.bytes[CMB_UPK_SET_ACCESS][24] = 2 * (16 << 20);
    n.access_handles[24] = 16;
    n.calls[CMB_UPK_SET_ACCESS][23] = 1, n.bytes[CMB_UPK_SET_ACCESS][23] = 8 << 20;
    n.access_handles[23] = 4;
    cmb_cost_input in = {"cmb", &n, 0, 0, 0, 0, 0};
    cmb_cost_parts p;
    assert_int_equal(cmb_costs_access_per_handle(&costs), 1);
    cmb_costs_predict(&costs, &in, &p);
    /* 8 handles: 2.4e-5 a call; 4: 3e-6 + (log 4 / log 8) (2.4e-5 - 3e-6), as every curve interpolates */
    double at4 = 3e-6 + 2.0 / 3.0 * 2.1e-5;
    assert_near(p.upstream_s, 2 * 2.4e-5 + at4, 1e-12);
    assert_true(p.upstream_s > 3 * 3e-6); /* one handle of its pages each: 3e-6 (cuMemSetAccess is flat) */
    /* 512 handles, far beyond the fixture's last point (64): flat there, nothing extrapolated */
    memset(&n, 0, sizeof n);
    n.calls[CMB_UPK_SET_ACCESS][30] = 1, n.bytes[CMB_UPK_SET_ACCESS][30] = 1u << 30;
    n.access_handles[30] = 512;
    cmb_costs_predict(&costs, &in, &p);
    assert_near(p.upstream_s, 1.92e-4, 1e-12);
    /* counts that carry no handles are priced as one handle of the pages */
    n.access_handles[30] = 0;
    cmb_costs_predict(&costs, &in, &p);
    assert_near(p.upstream_s, 3e-6, 1e-12);

    /* the same runs priced by a file without the curve: one handle each */
    char err[512];
    assert_int_equal(cmb_costs_load(fixture_without_handles(), &costs, err, sizeof err), 0);
    assert_int_equal(cmb_costs_access_per_handle(&costs), 0);
    assert_int_equal(costs.call[CMB_CC_SET_ACCESS_HANDLES].n, 0);
    memset(&n, 0, sizeof n);
    n.calls[CMB_UPK_SET_ACCESS][24] = 2, n.bytes[CMB_UPK_SET_ACCESS][24] = 2 * (16 << 20);
    n.access_handles[24] = 16;
    cmb_costs_predict(&costs, &in, &p);
    assert_near(p.upstream_s, 2 * 3e-6, 1e-12);
}

/* The meters count the handles of each deferred run: a map or an unpark
 * made while deferring is one handle; a map made outside is its own
 * access (one handle, counted as a map, no run). */
static int bucket_of(size_t size)
{
    int b = 0;
    while (size >> (b + 1))
        b++;
    return b;
}

static void metered_runs_count_handles(void **state)
{
    (void)state;
    cmb_upstream_config ucfg;
    cmb_upstream *up;
    char err[256];
    cmb_upstream_config_default(&ucfg);
    ucfg.sim_capacity = 64u << 20;
    assert_int_equal(cmb_upstream_open(&ucfg, &up, err, sizeof err), CMB_OK);
    cmb_metered mt; /* the allocator is never called: the test drives the upstream */
    assert_int_equal(cmb_metered_init(&mt, cmb_allocator_find("cuda")->methods, NULL, up, 16, 1), CMB_OK);
    const size_t g = up->granularity;
    void *va;
    assert_int_equal(cmb_up_va_reserve(up, 16 * g, &va), CMB_OK);
    char *b = va;
    assert_int_equal(cmb_up_defer_access(up, 1), CMB_OK); /* one run of 4 handles over 5 pages */
    for (int i = 0; i < 3; i++)
        assert_int_equal(cmb_up_map(up, b + (size_t)i * g, g), CMB_OK);
    assert_int_equal(cmb_up_map(up, b + 3 * g, 2 * g), CMB_OK);
    assert_int_equal(cmb_up_defer_access(up, 0), CMB_OK);
    assert_int_equal(cmb_up_map(up, b + 8 * g, g), CMB_OK); /* not deferred: no run */
    assert_int_equal(cmb_up_park(up, b + 8 * g, g), CMB_OK);
    assert_int_equal(cmb_up_defer_access(up, 1), CMB_OK); /* one run of 3 handles, one of them kept */
    assert_int_equal(cmb_up_map(up, b + 10 * g, g), CMB_OK);
    assert_int_equal(cmb_up_map(up, b + 12 * g, g), CMB_OK);
    assert_int_equal(cmb_up_unpark(up, b + 11 * g, g), CMB_OK);
    assert_int_equal(cmb_up_defer_access(up, 0), CMB_OK);
    const cmb_up_counts *n = mt.up_counts;
    int b5 = bucket_of(5 * g), b3 = bucket_of(3 * g), b1 = bucket_of(g);
    assert_int_equal(n->calls[CMB_UPK_SET_ACCESS][b5], 1);
    assert_int_equal(n->access_handles[b5], 4);
    assert_int_equal(n->calls[CMB_UPK_SET_ACCESS][b3], 1);
    assert_int_equal(n->access_handles[b3], 3);
    assert_int_equal(n->calls[CMB_UPK_MAP][b1], 1);
    assert_int_equal(n->calls[CMB_UPK_UNPARK_NOACCESS][b1], 1);
    uint64_t handles = 0, calls = 0, deferred = 0;
    for (int k = 0; k < CMB_UP_BUCKETS; k++) {
        handles += n->access_handles[k], calls += n->calls[CMB_UPK_SET_ACCESS][k];
        deferred += n->calls[CMB_UPK_MAP_NOACCESS][k] + n->calls[CMB_UPK_UNPARK_NOACCESS][k];
    }
    assert_int_equal(calls, 2);
    assert_int_equal(handles, deferred); /* every handle mapped while deferring, once */

    /* priced: each run per handle, against one handle of its pages (3e-6) without the curve */
    load_fixture();
    cmb_cost_input in = {"cmb", n, 0, 0, 0, 0, 0};
    cmb_cost_parts with, without;
    cmb_costs_predict(&costs, &in, &with);
    assert_int_equal(cmb_costs_load(fixture_without_handles(), &costs, err, sizeof err), 0);
    cmb_costs_predict(&costs, &in, &without);
    double at4 = 3e-6 + log(4) / log(8) * 2.1e-5, at3 = 3e-6 + log(3) / log(8) * 2.1e-5;
    assert_near(with.upstream_s - without.upstream_s, (at4 - 3e-6) + (at3 - 3e-6), 1e-12);

    size_t at[] = {0, 1, 2, 3, 10, 11, 12};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        assert_int_equal(cmb_up_unmap(up, b + at[i] * g, (at[i] == 3 ? 2 : 1) * g), CMB_OK);
    assert_int_equal(cmb_up_va_release(up, va, 16 * g), CMB_OK);
    cmb_metered_free(&mt);
    assert_int_equal(cmb_upstream_close(up), 0);
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
    /* cuMemSetAccess_handles is optional, but read as strictly as every curve */
    const char *bad_handles[] = {"[{\"x\": 8, \"median_s\": 1e-4}, {\"x\": 1, \"median_s\": 4e-5}]",
                                 "[{\"x\": 0, \"median_s\": 4e-5}]", "[{\"x\": 1, \"median_s\": -1}]",
                                 "[{\"x\": 1}]", "{\"x\": 1, \"median_s\": 4e-5}"};
    for (size_t i = 0; i < sizeof bad_handles / sizeof bad_handles[0]; i++) {
        snprintf(path, sizeof path, "%s/bad-handles%zu.json", dir, i);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "{\"format\": \"cumembench-costs/1\", \"calls\": {"
                   "\"cudaMalloc\": {\"points\": [{\"x\": 1, \"median_s\": 1e-5}]}, "
                   "\"cudaFree\": {\"points\": [{\"x\": 1, \"median_s\": 1e-5}]}, "
                   "\"cuMemSetAccess_handles\": {\"unit\": \"handles\", \"points\": %s}}}", bad_handles[i]);
        fclose(f);
        err[0] = 0;
        assert_int_equal(cmb_costs_load(path, &costs, err, sizeof err), -1);
        assert_non_null(strstr(err, "malformed points of cuMemSetAccess_handles"));
        assert_null(strchr(err, '\n'));
    }
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
     * file (the name was once compared unslugged, so both got the directory's first); --gpu-model without
     * the vendor's word names the card too. A name that only shares letters with a committed one ("n" was
     * once read as nvidia-h100) is refused below in one line naming the committed ones. */
    const struct {
        int option; /* --gpu-model, else CMB_GPU_MODEL */
        const char *name, *slug;
    } cards[] = {{0, "NVIDIA H200", "nvidia-h200"}, {0, "NVIDIA H100 80GB HBM3", "nvidia-h100"},
                 {1, "H100", "nvidia-h100"},         {1, "h200", "nvidia-h200"}};
    for (int i = 0; i < 4; i++) {
        char env[160] = "", opt[160] = "";
        snprintf(cards[i].option ? opt : env, sizeof env, cards[i].option ? "--gpu-model '%s'" : "CMB_GPU_MODEL='%s'",
                 cards[i].name);
        snprintf(cmd, sizeof cmd,
                 "cd %s && env -u CMB_COSTS %s \"$CMB_BIN\" --mode sim --scenario replay --allocator cuda "
                 "--param trace=traces/samples/churn_small.trace --param find_min_capacity=false --repetitions 1 "
                 "%s --out %s/h%d 2>&1 | grep -c 'predicted from .*results/%s/costs.json'",
                 cmb_test_src(), env, opt, dir, i, cards[i].slug);
        assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
        assert_string_equal(out, "1\n");
    }
    const char *not_named[] = {"n", "nosuch-gpu", "nvidia-h10"};
    for (int i = 0; i < 3; i++) {
        char want[256], made[1024];
        snprintf(cmd, sizeof cmd,
                 "cd %s && env -u CMB_COSTS \"$CMB_BIN\" --mode sim --scenario replay --allocator cuda "
                 "--param trace=traces/samples/churn_small.trace --repetitions 1 --gpu-model '%s' --out %s/n%d",
                 cmb_test_src(), not_named[i], dir, i);
        assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 2);
        snprintf(want, sizeof want, "no committed cost file is close to '%s' (committed: nvidia-h100, nvidia-h200)",
                 not_named[i]);
        assert_non_null(strstr(out, want));
        assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1); /* one line */
        snprintf(made, sizeof made, "%s/n%d", dir, i);
        assert_false(cmb_test_exists(made));
    }
}

/* cmb's growths set access over runs of several handles: priced per
 * handle with the fixture, as one handle (and a note saying so) without
 * the curve; the counts are the same either way. */
static void replay_access_runs(void **state)
{
    (void)state;
    char cmd[4096], out[1 << 16];
    char fixture[1024];
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/costs/fixture-costs.json", cmb_test_src());
    const char *dir = cmb_test_tmpdir(), *files[2] = {fixture, fixture_without_handles()};
    double up[2], calls[2];
    int noted[2];
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "CMB_COSTS=%s \"$CMB_BIN\" --mode sim --scenario replay --allocator cmb "
                 "--param trace=%s/traces/samples/churn_small.trace --param find_min_capacity=false --repetitions 1 "
                 "--out %s/runs%d >/dev/null 2>&1 && python3 -c \"import json; d=json.load(open('%s/runs%d/results.json'));"
                 "k=[b for b in d['benchmarks'] if b.get('run_type') == 'iteration'][0];"
                 "print(k['predicted_upstream_time_s'], k['up_set_access_calls'], "
                 "int('without cuMemSetAccess_handles' in k.get('label', '')))\"",
                 files[i], cmb_test_src(), dir, i, dir, i);
        assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
        assert_int_equal(sscanf(out, "%lf %lf %d", &up[i], &calls[i], &noted[i]), 3);
    }
    assert_true(calls[0] > 0);
    assert_near(calls[0], calls[1], 0);
    assert_true(up[0] > up[1]); /* runs of several handles cost more than one handle */
    assert_int_equal(noted[0], 0);
    assert_int_equal(noted[1], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(interpolation),
        cmocka_unit_test(upstream_kinds),
        cmocka_unit_test(access_runs_per_handle),
        cmocka_unit_test(metered_runs_count_handles),
        cmocka_unit_test(emulation_priced_as_original),
        cmocka_unit_test(refusals),
        cmocka_unit_test(replay_end_to_end),
        cmocka_unit_test(replay_access_runs),
        cmocka_unit_test(cli_options_choose_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
