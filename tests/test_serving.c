/* test_serving.c - the serving scenario in sim mode: the utilization
 * ceiling it finds is one the stream completes at and the next step up is
 * not (both run again), the KV slab and blocks agree with the budget
 * formula and the model shape, preemptions follow the slab's size, graphs
 * replace eager decode steps, the same seed serves the same stream, and
 * bad parameters are refused with one line before anything runs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/run.h"

/* --- running and reading results.csv ------------------------------------------------------ */

/* Value of `name` in the first row of `allocator` whose status is `status`
 * (NAN when none). Rows: run_id,gpu,mode,case,scenario,allocator,upstream,
 * params,repetition,status,metric,value,error. */
static double metric_in(const char *dir, const char *allocator, const char *status, const char *name)
{
    char path[700], line[8192];
    double v = NAN;
    snprintf(path, sizeof path, "%s/results.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return NAN;
    while (fgets(line, sizeof line, f)) {
        char *field[13] = {0}, *p = line;
        int n = 0;
        for (char *tok = strsep(&p, ","); tok && n < 13; tok = strsep(&p, ","))
            field[n++] = tok;
        if (n < 12 || strcmp(field[5], allocator) || strcmp(field[9], status) || strcmp(field[10], name))
            continue;
        v = strtod(field[11], NULL);
        break;
    }
    fclose(f);
    return v;
}

static double metric(const char *dir, const char *allocator, const char *name)
{
    return metric_in(dir, allocator, "ok", name);
}

/* Runs the serving scenario in sim mode with `args` into dir `sub`. */
static const char *serve(const char *sub, const char *args)
{
    static char dirs[4][600];
    static int next;
    char *dir = dirs[next++ % 4];
    char full[4096], out[65536];
    snprintf(dir, sizeof dirs[0], "%s/%s", cmb_test_tmpdir(), sub);
    snprintf(full, sizeof full, "--mode sim --quiet --repetitions 1 --scenario serving %s --out %s", args, dir);
    int rc = cmb_test_run(full, out, sizeof out);
    if (rc != 0)
        fail_msg("cumembench %s: exit %d: %s", full, rc, out);
    return dir;
}

/* --- the ceiling ------------------------------------------------------------------------------- */

/* The search's answer for `allocator`, then the stream at it (completes)
 * and 0.001 above it (runs out of memory), each on its own. */
static double check_ceiling(const char *allocator)
{
    char args[512];
    snprintf(args, sizeof args, "--allocator %s", allocator);
    const char *dir = serve("search", args);
    double ceiling = metric(dir, allocator, "max_utilization");
    if (isnan(ceiling))
        fail_msg("%s: no max_utilization", allocator);
    assert_true(ceiling > 0 && ceiling <= 1.0);
    snprintf(args, sizeof args, "--allocator %s --param find_max_utilization=false --param utilization=%.3f",
             allocator, ceiling);
    dir = serve("at", args);
    if (metric(dir, allocator, "requests_completed") != 64)
        fail_msg("%s: did not serve the stream at its ceiling %.3f", allocator, ceiling);
    if (ceiling < 1.0) {
        snprintf(args, sizeof args, "--allocator %s --param find_max_utilization=false --param utilization=%.3f",
                 allocator, ceiling + 0.001);
        dir = serve("above", args);
        if (!isnan(metric(dir, allocator, "requests_completed")))
            fail_msg("%s: served at %.3f, above the ceiling %.3f", allocator, ceiling + 0.001, ceiling);
        assert_false(isnan(metric_in(dir, allocator, "oom", "did_not_fit_allocs")));
    }
    return ceiling;
}

static void ceiling_completes_and_one_step_above_does_not(void **state)
{
    (void)state;
    /* torch-caching's rounding and cached blocks put its ceiling below 1;
     * a zero-overhead policy's is not lower */
    double tc = check_ceiling("torch-caching");
    assert_true(tc < 1.0);
    double cmb = check_ceiling("cmb");
    assert_true(cmb >= tc);
    check_ceiling("cupy");
}

/* --- the KV slab ------------------------------------------------------------------------------ */

static void kv_slab_follows_the_budget(void **state)
{
    (void)state;
    const char *dir = serve("kv", "--allocator cuda --param find_max_utilization=false");
    double blocks = metric(dir, "cuda", "kv_blocks"), tokens = metric(dir, "cuda", "kv_tokens");
    double slab = metric(dir, "cuda", "kv_slab_bytes");
    /* quick shape: 8 layers, 8 KV heads x 128, bf16, blocks of 16 tokens */
    double token_bytes = 2.0 * 8 * 8 * 128 * 2;
    assert_true(blocks > 0);
    assert_true(tokens == blocks * 16);
    assert_true(slab == tokens * token_bytes);
    double budget = 0.9 * 1073741824.0 - metric(dir, "cuda", "weights_bytes") -
                    metric(dir, "cuda", "profile_peak_bytes") - metric(dir, "cuda", "graph_pool_bytes");
    assert_true(slab <= budget && slab > budget - 16 * token_bytes);
    assert_true(metric(dir, "cuda", "kv_peak_blocks") <= blocks);
    assert_true(metric(dir, "cuda", "requests_completed") == 64);
    double waste = metric(dir, "cuda", "kv_waste_ratio");
    assert_true(waste > 0 && waste < 0.04); /* PagedAttention's bound on waste */
}

static void preemptions_follow_the_slab(void **state)
{
    (void)state;
    const char *small = serve("small", "--allocator cuda --param find_max_utilization=false --param utilization=0.6");
    double p_small = metric(small, "cuda", "preemptions"), b_small = metric(small, "cuda", "kv_blocks");
    double peak_small = metric(small, "cuda", "kv_peak_blocks");
    const char *large = serve("large", "--allocator cuda --param find_max_utilization=false --param utilization=0.95");
    double p_large = metric(large, "cuda", "preemptions"), b_large = metric(large, "cuda", "kv_blocks");
    assert_true(b_small < b_large);
    assert_true(p_small > p_large);
    assert_true(p_small > 0);
    assert_true(peak_small <= b_small && peak_small > 0.9 * b_small); /* preempted because it was full */
    /* a slab larger than the whole stream needs preempts nothing */
    const char *all = serve("all", "--allocator cuda --param find_max_utilization=false --param capacity=8GiB");
    assert_true(metric(all, "cuda", "preemptions") == 0);
    assert_true(metric(all, "cuda", "kv_peak_blocks") < metric(all, "cuda", "kv_blocks"));
}

/* Below the KV needed for one max_model_len request the stream cannot run. */
static void too_small_a_slab_does_not_fit(void **state)
{
    (void)state;
    const char *dir = serve("tiny", "--allocator cuda --param find_max_utilization=false --param utilization=0.3");
    assert_true(isnan(metric(dir, "cuda", "requests_completed")));
    assert_false(isnan(metric_in(dir, "cuda", "oom", "kv_tokens")));
    assert_true(metric_in(dir, "cuda", "oom", "kv_tokens") < 4096);
}

static void graphs_and_vattention(void **state)
{
    (void)state;
    const char *dir = serve("graphs", "--allocator cuda --param find_max_utilization=false");
    assert_true(metric(dir, "cuda", "graph_steps") > 0 && metric(dir, "cuda", "eager_steps") > 0);
    assert_true(metric(dir, "cuda", "graph_pool_bytes") > 0);
    double allocs_graph = metric(dir, "cuda", "allocs");
    dir = serve("eager", "--allocator cuda --param find_max_utilization=false --param graph_max=0");
    assert_true(metric(dir, "cuda", "graph_steps") == 0 && metric(dir, "cuda", "graph_pool_bytes") == 0);
    assert_true(metric(dir, "cuda", "allocs") > allocs_graph); /* decode ran eagerly */
    /* vAttention: pages as sequences grow, same stream served */
    dir = serve("vattn", "--allocator cuda --param find_max_utilization=false --param kv=vattention");
    assert_true(metric(dir, "cuda", "requests_completed") == 64);
    assert_true(metric(dir, "cuda", "kv_tokens") > 0);
    assert_true(metric(dir, "cuda", "allocs") > allocs_graph);
}

/* --- determinism and refusals ----------------------------------------------------------------------- */

static void same_seed_same_stream(void **state)
{
    (void)state;
    static const char *names[] = {"steps", "preemptions", "peak_reserved_bytes", "max_utilization", "eager_steps"};
    double a[5], b[5];
    const char *dir = serve("s1", "--allocator torch-caching --seed 7");
    for (int i = 0; i < 5; i++)
        a[i] = metric(dir, "torch-caching", names[i]);
    dir = serve("s2", "--allocator torch-caching --seed 7");
    for (int i = 0; i < 5; i++) {
        b[i] = metric(dir, "torch-caching", names[i]);
        if (a[i] != b[i])
            fail_msg("%s: %g then %g with the same seed", names[i], a[i], b[i]);
    }
    dir = serve("s3", "--allocator torch-caching --seed 8");
    assert_true(metric(dir, "torch-caching", "steps") != a[0]);
    /* bursty arrivals are another stream */
    dir = serve("s4", "--allocator torch-caching --seed 7 --param burstiness=0.25");
    assert_true(metric(dir, "torch-caching", "steps") != a[0]);
}

/* scripts/serving_server.py draws the scenario's stream, number for number:
 * the same total tokens and last arrival, Poisson and bursty. */
static void server_draws_the_same_stream(void **state)
{
    (void)state;
    static const char *variants[][2] = {
        {"", ""},
        {"--param burstiness=0.25 --seed 9", "--burstiness 0.25 --seed 9"},
        {"--param lengths=alpaca --param rate=3", "--lengths alpaca --rate 3"},
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        char args[512], cmd[1024], out[256];
        snprintf(args, sizeof args, "--allocator cuda --param find_max_utilization=false %s", variants[i][0]);
        const char *dir = serve("stream", args);
        double tokens = metric(dir, "cuda", "stream_tokens"), span = metric(dir, "cuda", "stream_span_s");
        snprintf(cmd, sizeof cmd,
                 "python3 %s/scripts/serving_server.py --print-stream --requests 64 --max-model-len 4096 %s"
                 " | awk '{s += $2 + $3; t = $1} END {printf \"%%d %%.6f\", s, t}'",
                 cmb_test_src(), variants[i][1]);
        if (cmb_test_sh(cmd, out, sizeof out) != 0)
            fail_msg("%s: %s", cmd, out);
        long long py_tokens = 0;
        double py_span = -1;
        if (sscanf(out, "%lld %lf", &py_tokens, &py_span) != 2)
            fail_msg("%s: %s", cmd, out);
        if ((double)py_tokens != tokens || fabs(py_span - span) > 1e-6)
            fail_msg("variant %zu: scenario %g tokens to %.6f s, server %lld to %.6f s", i, tokens, span, py_tokens,
                     py_span);
    }
}

/* The server's scheduler (run without PyTorch, tests/support/serving_scheduler.py)
 * serves the stream as the scenario does: the same preemptions, steps, graph
 * and eager steps and peak blocks for the same KV blocks. */
static void server_schedules_as_the_scenario(void **state)
{
    (void)state;
    static const char *variants[][2] = {
        {"--param utilization=0.6", ""},
        {"--param utilization=0.5 --param burstiness=0.25 --param max_seqs=32",
         "--burstiness 0.25 --max-seqs 32"},
        {"--param utilization=0.7 --param graph_max=16 --param max_batched_tokens=512",
         "--graph-max 16 --max-batched-tokens 512"},
    };
    static const char *names[] = {"preemptions", "steps", "graph_steps", "eager_steps", "requests_completed",
                                  "kv_peak_blocks"};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        char args[512], cmd[1024], out[256];
        snprintf(args, sizeof args, "--allocator cuda --param find_max_utilization=false %s", variants[i][0]);
        const char *dir = serve("sched", args);
        double want[6], got[6];
        for (int k = 0; k < 6; k++)
            want[k] = metric(dir, "cuda", names[k]);
        snprintf(cmd, sizeof cmd, "python3 %s/tests/support/serving_scheduler.py %s %.0f --requests 64 --max-model-len 4096 %s",
                 cmb_test_src(), cmb_test_src(), metric(dir, "cuda", "kv_blocks"), variants[i][1]);
        if (cmb_test_sh(cmd, out, sizeof out) != 0 ||
            sscanf(out, "%lf %lf %lf %lf %lf %lf", &got[0], &got[1], &got[2], &got[3], &got[4], &got[5]) != 6)
            fail_msg("%s: %s", cmd, out);
        for (int k = 0; k < 6; k++)
            if (got[k] != want[k])
                fail_msg("variant %zu: %s %g in the scenario, %g in the server", i, names[k], want[k], got[k]);
    }
}

static void refused(const char *args, const char *needle)
{
    char full[2048], out[8192];
    snprintf(full, sizeof full, "--mode sim --quiet --allocator cuda --scenario serving --out %s/r %s",
             cmb_test_tmpdir(), args);
    int rc = cmb_test_run(full, out, sizeof out);
    if (rc != 2 || !strstr(out, needle))
        fail_msg("%s: exit %d, expected 2 with '%s': %s", args, rc, needle, out);
    size_t lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    if (lines != 1)
        fail_msg("%s: expected one line, got: %s", args, out);
    char path[700];
    snprintf(path, sizeof path, "%s/r/results.csv", cmb_test_tmpdir());
    if (cmb_test_exists(path))
        fail_msg("%s: a case ran before the refusal", args);
}

static void bad_parameters_are_refused(void **state)
{
    (void)state;
    refused("--param burstiness=0", "burstiness must be above 0");
    refused("--param lengths=fixed --param prompt_len=4000 --param output_len=200", "exceeds max_model_len");
    refused("--param kv=vattention --param page_size=4KiB --param kv_heads=32", "page_size is smaller than one token");
    refused("--param utilization=1.5", "out of range");
    refused("--param dtype=f64", "expected one of");
    refused("--param max_model_len=8192 --param max_batched_tokens=4", "max_model_len is more than");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ceiling_completes_and_one_step_above_does_not),
        cmocka_unit_test(kv_slab_follows_the_budget),
        cmocka_unit_test(preemptions_follow_the_slab),
        cmocka_unit_test(too_small_a_slab_does_not_fit),
        cmocka_unit_test(graphs_and_vattention),
        cmocka_unit_test(same_seed_same_stream),
        cmocka_unit_test(server_draws_the_same_stream),
        cmocka_unit_test(server_schedules_as_the_scenario),
        cmocka_unit_test(bad_parameters_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
