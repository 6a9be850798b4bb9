/* test_scenarios.c - the scenario set (issue 4) on the CPU: parameter
 * handling (presets expand as intended, bad values are refused with one
 * line) and each traffic generator in sim mode (expected allocation counts,
 * the scenario's own counters, determinism with the same seed). The GPU
 * parts (kernels, cuBLAS, timings, the holder process) need a GPU and are
 * run by scripts/gpu-scenarios.sh. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/params.h"
#include "support/run.h"

/* --- reading results.csv ------------------------------------------------------------------ */

/* Value of `metric` in the first ok row whose case name contains `case_part`
 * (NAN when there is none). Rows: run_id,gpu,mode,case,scenario,allocator,
 * upstream,params,repetition,status,metric,value,error. */
static double metric(const char *dir, const char *case_part, const char *name)
{
    char path[700], line[8192];
    double v = NAN;
    snprintf(path, sizeof path, "%s/results.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return NAN;
    while (fgets(line, sizeof line, f)) {
        char *field[13] = {0}, *save = NULL, *p = line;
        int n = 0;
        for (char *tok = strsep(&p, ","); tok && n < 13; tok = strsep(&p, ","))
            field[n++] = tok;
        (void)save;
        if (n < 12 || strcmp(field[9], "ok") || strcmp(field[10], name) || !strstr(field[3], case_part))
            continue;
        v = strtod(field[11], NULL);
        break;
    }
    fclose(f);
    return v;
}

/* Status of the first row of a case ("ok", "skipped", "failed"), or "". */
static const char *status_of(const char *dir, const char *case_part)
{
    static char status[32];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "grep -F '%s' %s/results.csv | head -1 | cut -d, -f10 | tr -d '\\n'", case_part, dir);
    cmb_test_sh(cmd, status, sizeof status);
    return status;
}

/* Runs the binary in sim mode with `args` into a fresh directory. */
static const char *run_sim(const char *args)
{
    static char dir[600];
    char full[4096], out[65536];
    snprintf(dir, sizeof dir, "%s/o", cmb_test_tmpdir());
    snprintf(full, sizeof full, "--mode sim --quiet --repetitions 1 --allocator cuda %s --out %s", args, dir);
    int rc = cmb_test_run(full, out, sizeof out);
    if (rc != 0)
        fail_msg("cumembench %s: exit %d: %s", full, rc, out);
    return dir;
}

/* --- presets ------------------------------------------------------------------------------ */

static size_t n_sets(const char *scenario, cmb_preset preset, cmb_param_set **sets)
{
    char err[256];
    size_t n = 0;
    const cmb_scenario *s = cmb_scenario_find(scenario);
    if (!s)
        fail_msg("scenario %s is not registered", scenario);
    if (cmb_params_expand(s, preset, NULL, 0, sets, &n, err, sizeof err))
        fail_msg("%s: %s", scenario, err);
    return n;
}

static void presets_expand_as_intended(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t quick, full;
    } expect[] = {
        {"stream-async", 1, 3 + 1},     /* streams; then 16 MiB at 4 streams */
        {"shared-mem", 1, 1},
        {"gemm-chunked", 2, 2 + 3},     /* whole x dtype; chunked f64 x budget */
        {"batch-sweep", 1, 1},
        {"leak-check", 2, 2},           /* variant */
        {"pinned", 1, 4},
        {"contention", 1, 3},
    };
    cmb_param_set *sets;
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        size_t n = n_sets(expect[i].name, CMB_PRESET_QUICK, &sets);
        if (n != expect[i].quick)
            fail_msg("%s quick: %zu sets, expected %zu", expect[i].name, n, expect[i].quick);
        free(sets);
        n = n_sets(expect[i].name, CMB_PRESET_FULL, &sets);
        if (n != expect[i].full)
            fail_msg("%s full: %zu sets, expected %zu", expect[i].name, n, expect[i].full);
        free(sets);
    }
    /* gemm-chunked quick: one whole case and one chunked budget, n=4096
     * float64 (the full preset draws the curve over three budgets) */
    assert_int_equal(n_sets("gemm-chunked", CMB_PRESET_QUICK, &sets), 2);
    assert_string_equal(cmb_param_set_get(&sets[0], "mode"), "whole");
    assert_string_equal(cmb_param_set_get(&sets[1], "mode"), "chunked");
    assert_string_equal(cmb_param_set_get(&sets[1], "budget"), "128MiB");
    assert_string_equal(cmb_param_set_get(&sets[1], "n"), "4096");
    assert_string_equal(cmb_param_set_get(&sets[1], "dtype"), "f64");
    free(sets);
    /* the defaults: 10000 x 10000 in the full preset, MLP 100-500-10 */
    assert_int_equal(n_sets("gemm-chunked", CMB_PRESET_FULL, &sets), 5);
    assert_string_equal(cmb_param_set_get(&sets[0], "n"), "10000");
    assert_string_equal(cmb_param_set_get(&sets[4], "budget"), "1GiB");
    assert_string_equal(cmb_param_set_get(&sets[4], "dtype"), "f64");
    free(sets);
    assert_int_equal(n_sets("batch-sweep", CMB_PRESET_QUICK, &sets), 1);
    assert_string_equal(cmb_param_set_get(&sets[0], "layers"), "100x500x10");
    assert_string_equal(cmb_param_set_get(&sets[0], "cap"), "1GiB");
    free(sets);
    /* leak-check runs the leaking and the clean variant */
    assert_int_equal(n_sets("leak-check", CMB_PRESET_QUICK, &sets), 2);
    assert_string_equal(cmb_param_set_get(&sets[0], "variant"), "leak");
    assert_string_equal(cmb_param_set_get(&sets[1], "variant"), "clean");
    free(sets);
}

static void gpu_only_scenarios_are_marked(void **state)
{
    (void)state;
    assert_true(cmb_scenario_find("pinned")->flags & CMB_SCN_NEEDS_GPU);
    assert_true(cmb_scenario_find("shared-mem")->flags & CMB_SCN_NEEDS_GPU);
    const char *sim[] = {"stream-async", "gemm-chunked", "batch-sweep", "leak-check", "contention"};
    for (size_t i = 0; i < sizeof sim / sizeof sim[0]; i++)
        assert_false(cmb_scenario_find(sim[i])->flags & CMB_SCN_NEEDS_GPU);
    for (size_t i = 0; i < cmb_scenario_count(); i++)
        assert_true(strlen(cmb_scenario_at(i)->question) > 20 && strchr(cmb_scenario_at(i)->question, '?'));
}

/* --- bad values ------------------------------------------------------------------------------ */

static void refused(const char *args, const char *needle)
{
    char full[2048], out[8192];
    snprintf(full, sizeof full, "--mode sim --quiet --allocator cuda --out %s/o %s", cmb_test_tmpdir(), args);
    int rc = cmb_test_run(full, out, sizeof out);
    if (rc != 2 || !strstr(out, needle))
        fail_msg("%s: exit %d, expected 2 with '%s': %s", args, rc, needle, out);
    size_t lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    if (lines != 1)
        fail_msg("%s: expected one line, got: %s", args, out);
}

static void bad_values_are_refused_with_one_line(void **state)
{
    (void)state;
    refused("--scenario stream-async --param streams=9", "out of range");
    refused("--scenario stream-async --param size=12", "out of range");
    refused("--scenario gemm-chunked --param dtype=f16", "expected one of f32|f64");
    refused("--scenario gemm-chunked --param mode=chunked --param budget=8MiB", "too small for n=4096");
    refused("--scenario batch-sweep --param layers=100x", "layers=100x");
    refused("--scenario batch-sweep --param layers=100", "layers=100");
    refused("--scenario batch-sweep --param layers=100xabcx10", "joined by 'x'");
    refused("--scenario batch-sweep --param cap=1MiB", "cap must be 0");
    refused("--scenario batch-sweep --param start=1024 --param max_batch=512", "start must not exceed");
    refused("--scenario leak-check --param variant=sloppy", "expected one of leak|clean");
    refused("--scenario leak-check --param fail_every=0", "out of range");
    refused("--scenario leak-check --param failure=crash", "expected one of error|oom");
    refused("--scenario pinned --param iters=0", "out of range");
    refused("--scenario shared-mem --param levels=1", "out of range");
    refused("--scenario contention --param share=0.6 --param warm=0.5", "warm + share");
    refused("--scenario contention --param share=1.5", "out of range");
}

/* --- traffic generators in sim mode ----------------------------------------------------------- */

static void stream_async_traffic(void **state)
{
    (void)state;
    const char *dir = run_sim("--scenario stream-async --param streams=2 --param rounds=5 --param blocks=3 "
                              "--param trials=4 --capacity 4GiB");
    /* phase 1: rounds x streams x blocks (the standard metrics); phase 2
     * runs on fresh allocator instances */
    assert_float_equal(metric(dir, "stream-async", "allocs"), 5 * 2 * 3, 0);
    assert_float_equal(metric(dir, "stream-async", "frees"), 5 * 2 * 3, 0);
    assert_float_equal(metric(dir, "stream-async", "live_at_end_bytes"), 0, 0);
    /* cudaMalloc in sim never hands an address out twice */
    assert_float_equal(metric(dir, "stream-async", "reuse_first_same"), 0, 0);
    assert_float_equal(metric(dir, "stream-async", "reuse_hit_none"), 0, 0);
    assert_float_equal(metric(dir, "stream-async", "traffic_reuse_share"), 0, 0);
    /* no GPU: no waits or stalls are reported */
    assert_true(isnan(metric(dir, "stream-async", "reuse_wait_us_same")));
    assert_true(isnan(metric(dir, "stream-async", "stall_us_none")));
    /* one stream: only the same-stream pattern */
    dir = run_sim("--scenario stream-async --param streams=1 --param rounds=2 --param blocks=2 --param trials=3");
    assert_float_equal(metric(dir, "stream-async", "allocs"), 2 * 1 * 2, 0);
    assert_false(isnan(metric(dir, "stream-async", "reuse_hit_same")));
    assert_true(isnan(metric(dir, "stream-async", "reuse_hit_event")));
}

static void gemm_chunked_traffic(void **state)
{
    (void)state;
    const char *dir = run_sim("--scenario gemm-chunked --param n=1024 --param mode=whole,chunked "
                              "--param budget=36MiB --param samples=8");
    /* whole: samples, workspace, A, B, C */
    assert_float_equal(metric(dir, "mode:whole", "allocs"), 5, 0);
    assert_float_equal(metric(dir, "mode:whole", "chunks"), 1, 0);
    assert_float_equal(metric(dir, "mode:whole", "peak_requested_bytes"),
                       3.0 * 1024 * 1024 * 8 + (32 << 20) + 8 * 8, 0);
    /* chunked: 36 MiB leave 4 MiB for panels of 1024 x b doubles: b = 192
     * (2*1024*192 + 192^2) * 8 = 3.4 MiB; 6 tiles per dimension */
    double tiles = metric(dir, "mode:chunked", "chunks");
    assert_float_equal(metric(dir, "mode:chunked", "tile_edge"), 192, 0);
    assert_float_equal(tiles, 36, 0);
    /* samples + workspace + one A panel per row + B panel and C tile per tile */
    assert_float_equal(metric(dir, "mode:chunked", "allocs"), 2 + 6 + 2 * 36, 0);
    assert_true(metric(dir, "mode:chunked", "peak_requested_bytes") <= 36.0 * (1 << 20));
    assert_float_equal(metric(dir, "mode:chunked", "budget_bytes"), 36.0 * (1 << 20), 0);
    /* no GPU: no rates, no check */
    assert_true(isnan(metric(dir, "mode:chunked", "tflops")));
    assert_true(isnan(metric(dir, "mode:chunked", "max_rel_err")));
}

static void batch_sweep_traffic(void **state)
{
    (void)state;
    const char *dir = run_sim("--scenario batch-sweep --param layers=100x200x50x10 --param steps=3 "
                              "--param cap=256MiB --param time_batch=512");
    /* on the case's allocator: 6L+1 allocations for the model, Adam state and
     * workspace, and 6L+1 per step (L = 3 Linear layers) */
    assert_float_equal(metric(dir, "batch-sweep", "allocs"), (6 * 3 + 1) * (1 + 3), 0);
    assert_float_equal(metric(dir, "batch-sweep", "frees"), (6 * 3 + 1) * (1 + 3), 0);
    double max = metric(dir, "batch-sweep", "max_batch"), fail = metric(dir, "batch-sweep", "fail_batch");
    double peak = metric(dir, "batch-sweep", "max_batch_peak_requested_bytes");
    assert_true(max > 1000 && fail > max);
    assert_true(fail - max <= 0.05 * max + 1);
    /* the largest batch fits the cap; per-sample memory is a few KiB, so the
     * next batch up would not */
    assert_true(peak <= 256.0 * (1 << 20) && peak > 0.9 * 256.0 * (1 << 20));
    assert_float_equal(metric(dir, "batch-sweep", "cap_bytes"), 256.0 * (1 << 20), 0);
    /* doubling from 64 to the first failure, then bisection */
    double trials = metric(dir, "batch-sweep", "trials");
    assert_true(trials >= log2(fail / 64) + 1 && trials <= log2(fail / 64) + 1 + 12);
}

static void leak_check_traffic(void **state)
{
    (void)state;
    const char *dir = run_sim("--scenario leak-check --param variant=leak,clean --param iterations=40 "
                              "--param fail_every=4 --param size=1MiB --param failure=oom");
    double leak = 40 / 4 * (double)(1 << 20);
    assert_float_equal(metric(dir, "variant:leak", "error_paths"), 10, 0);
    assert_float_equal(metric(dir, "variant:leak", "expected_leak_bytes"), leak, 0);
    assert_float_equal(metric(dir, "variant:leak", "live_at_end_bytes"), leak, 0);
    /* plain cudaMalloc gives nothing back at destroy: the leak stays upstream */
    assert_float_equal(metric(dir, "variant:leak", "leaked_bytes"), leak, 0);
    assert_float_equal(metric(dir, "variant:leak", "failed_allocs"), 10, 0);
    assert_float_equal(metric(dir, "variant:leak", "allocs"), 2 * 40 - 10, 0);
    assert_float_equal(metric(dir, "variant:clean", "expected_leak_bytes"), 0, 0);
    assert_float_equal(metric(dir, "variant:clean", "live_at_end_bytes"), 0, 0);
    assert_float_equal(metric(dir, "variant:clean", "leaked_bytes"), 0, 0);
    assert_float_equal(metric(dir, "variant:clean", "frees"), 2 * 40 - 10, 0);
    /* failure=error: the work fails before the output is allocated */
    dir = run_sim("--scenario leak-check --param variant=leak --param iterations=40 --param fail_every=4 "
                  "--param size=1MiB --param failure=error");
    assert_float_equal(metric(dir, "variant:leak", "live_at_end_bytes"), leak, 0);
    assert_float_equal(metric(dir, "variant:leak", "failed_allocs"), 0, 0);
    assert_float_equal(metric(dir, "variant:leak", "allocs"), 2 * 40 - 10, 0);
    assert_float_equal(metric(dir, "variant:leak", "frees"), 2 * 40 - 10 - 10, 0);
}

static void contention_traffic(void **state)
{
    (void)state;
    const char *dir = run_sim("--scenario contention --capacity 8GiB --param share=0.5 --param warm=0.3 "
                              "--param keep=0.2 --param demand_size=256MiB");
    double cap = 8.0 * (1u << 30);
    /* the other process takes half the device (there is room for it) */
    assert_float_equal(metric(dir, "contention", "held_bytes"), 0.5 * cap, 1);
    double live = metric(dir, "contention", "warm_reserved_bytes"); /* cudaMalloc: reserved == live */
    assert_true(live > 0 && live < 0.3 * cap);
    assert_float_equal(metric(dir, "contention", "available_bytes"), cap - 0.5 * cap - live, 1);
    /* plain cudaMalloc strands nothing: all but the last partial block */
    assert_true(metric(dir, "contention", "contended_capacity_ratio") > 0.9);
    assert_float_equal(metric(dir, "contention", "failed_clean"), 1, 0);
    /* after the other process ends, its 4 GiB can be used again */
    assert_float_equal(metric(dir, "contention", "recovered_bytes"), 0.5 * cap, 0);
    assert_float_equal(metric(dir, "contention", "recovery_ratio"), 1, 0);
    assert_float_equal(metric(dir, "contention", "guard_stopped"), 0, 0);
    assert_float_equal(metric(dir, "contention", "live_at_end_bytes"), 0, 0);
}

static void gpu_only_scenarios_are_skipped_in_sim(void **state)
{
    (void)state;
    char dir[600], full[1024], out[65536];
    snprintf(dir, sizeof dir, "%s/o", cmb_test_tmpdir());
    snprintf(full, sizeof full, "--mode sim --repetitions 1 --allocator cuda --scenario pinned,shared-mem --out %s", dir);
    /* nothing ran: exit 1, why on screen, and no run directory */
    int rc = cmb_test_run(full, out, sizeof out);
    if (rc != 1 || !strstr(out, "nothing ran: all 2 cases were skipped") || !strstr(out, "needs a GPU"))
        fail_msg("cumembench %s: exit %d (expected 1 and why nothing ran): %s", full, rc, out);
    assert_false(cmb_test_exists(dir));
    /* beside a case that runs, they are recorded as skipped */
    snprintf(full, sizeof full, "--mode sim --repetitions 1 --allocator cuda --scenario pinned,shared-mem,fastpath "
             "--param size=512B --out %s", dir);
    rc = cmb_test_run(full, out, sizeof out);
    if (rc != 0)
        fail_msg("cumembench %s: exit %d: %s", full, rc, out);
    assert_string_equal(status_of(dir, "pinned/cuda"), "skipped");
    assert_string_equal(status_of(dir, "shared-mem/cuda"), "skipped");
}

static void sim_traffic_is_deterministic(void **state)
{
    (void)state;
    char cmd[4096], out[8192], a[700], b[700];
    const char *args = "--scenario stream-async,gemm-chunked,batch-sweep,leak-check,contention --capacity 8GiB "
                       "--param n=2048 --param rounds=10 --param trials=3";
    snprintf(a, sizeof a, "%s", run_sim(args));
    snprintf(b, sizeof b, "%s", run_sim(args));
    snprintf(cmd, sizeof cmd,
             "for d in %s %s; do cut -d, -f4,10,11,12 $d/results.csv | "
             "grep -Ev ',(time_s|cpu_time_s|[a-z0-9_]*_ns|ops_per_s|step_ms|us_per_sample),' > $d.txt; done; "
             "test $(grep -c ',ok,' %s.txt) -gt 100 && cmp %s.txt %s.txt",
             a, b, a, a, b);
    if (cmb_test_sh(cmd, out, sizeof out))
        fail_msg("two sim runs with the same seed differ: %s", out);
}

static void every_scenario_runs_in_sim_under_every_allocator(void **state)
{
    (void)state;
    char args[2048], out[1 << 16], cmd[1024];
    const char *dir = cmb_test_tmpdir();
    snprintf(args, sizeof args,
             "--mode sim --quiet --repetitions 1 --capacity 16GiB --scenario stream-async,gemm-chunked,"
             "batch-sweep,leak-check,contention,pinned,shared-mem --allocator all --out %s/o",
             dir);
    int rc = cmb_test_run(args, out, sizeof out);
    if (rc != 0)
        fail_msg("exit %d: %s", rc, out);
    snprintf(cmd, sizeof cmd, "cut -d, -f10 %s/o/results.csv | grep -c failed", dir);
    cmb_test_sh(cmd, out, sizeof out);
    assert_string_equal(out, "0\n");
}

/* --- the memory holder ------------------------------------------------------------------------- */

static void holder_answers_in_one_line(void **state)
{
    (void)state;
    char out[4096];
    int rc = cmb_test_run("--hold-memory 1MiB --device 0 < /dev/null", out, sizeof out);
    /* with a GPU it holds and exits at end of input; without one it says why */
    if (!((rc == 0 && !strncmp(out, "ready", 5)) || (rc == 1 && !strncmp(out, "fail", 4))))
        fail_msg("exit %d: %s", rc, out);
    rc = cmb_test_run("--hold-memory lots", out, sizeof out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "--hold-memory expects a size"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(presets_expand_as_intended),
        cmocka_unit_test(gpu_only_scenarios_are_marked),
        cmocka_unit_test(bad_values_are_refused_with_one_line),
        cmocka_unit_test(stream_async_traffic),
        cmocka_unit_test(gemm_chunked_traffic),
        cmocka_unit_test(batch_sweep_traffic),
        cmocka_unit_test(leak_check_traffic),
        cmocka_unit_test(contention_traffic),
        cmocka_unit_test(gpu_only_scenarios_are_skipped_in_sim),
        cmocka_unit_test(sim_traffic_is_deterministic),
        cmocka_unit_test(every_scenario_runs_in_sim_under_every_allocator),
        cmocka_unit_test(holder_answers_in_one_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
