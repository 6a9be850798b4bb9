/* test_params.c - scenario parameters: canonical values, preset grids,
 * command-line sweeps, and the churn traffic generator's RMM semantics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/params.h"
#include "scenarios/scenario.h"
#include "support/run.h"

static void canonical_values(void **state)
{
    (void)state;
    const cmb_scenario *churn = cmb_scenario_find("churn");
    const cmb_param_spec *max = cmb_param_spec_find(churn, "max_size");
    const cmb_param_spec *fill = cmb_param_spec_find(churn, "fill");
    const cmb_param_spec *flag = cmb_param_spec_find(churn, "checkerboard");
    char out[64], err[256];
    assert_int_equal(cmb_param_canonical(max, "1048576", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "1MiB");
    assert_int_equal(cmb_param_canonical(max, "1536KiB", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "1536KiB");
    assert_int_equal(cmb_param_canonical(max, "4GiB", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "4GiB");
    /* "4G", "64mb", "64MB": powers of 1000 or 1024? refused, never guessed */
    assert_int_equal(cmb_param_canonical(max, "4G", out, sizeof out, err, sizeof err), -1);
    assert_int_equal(cmb_param_canonical(max, "64mb", out, sizeof out, err, sizeof err), -1);
    assert_non_null(strstr(err, "ambiguous"));
    assert_int_equal(cmb_param_canonical(fill, "0.50", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "0.5");
    assert_int_equal(cmb_param_canonical(flag, "yes", out, sizeof out, err, sizeof err), 0);
    assert_string_equal(out, "true");
    assert_int_equal(cmb_param_canonical(fill, "0.99", out, sizeof out, err, sizeof err), -1);
    assert_non_null(strstr(err, "out of range"));
    /* a subnormal's shortest decimal reads back inexactly: refused, so every canonical text reads again */
    assert_int_equal(cmb_param_canonical(fill, "1e-310", out, sizeof out, err, sizeof err), -1);
    assert_int_equal(cmb_param_canonical(fill, "0x0.0000000000000000000000000000000000000000000000000000000000000000"
                                               "00000000000000000000000000000000000000000000000000000000000000000000"
                                               "00000000000000000000000000000000000000000000000000000000000000000000"
                                               "00000000000000000000000000000000000000000000000000000000000000000000"
                                               "09303",
                                         out, sizeof out, err, sizeof err),
                     -1);
}

static size_t expand(const char *scenario, cmb_preset preset, const cmb_param_override *ov, size_t n_ov,
                     cmb_param_set **sets)
{
    char err[256];
    size_t n;
    if (cmb_params_expand(cmb_scenario_find(scenario), preset, ov, n_ov, sets, &n, err, sizeof err))
        fail_msg("expand: %s", err);
    return n;
}

static void preset_grids(void **state)
{
    (void)state;
    cmb_param_set *sets;
    /* quick: n=10000 x max_size {1,64} MiB, uniform, with the checkerboard */
    assert_int_equal(expand("churn", CMB_PRESET_QUICK, NULL, 0, &sets), 2);
    assert_string_equal(cmb_param_set_get(&sets[0], "max_size"), "1MiB");
    assert_string_equal(cmb_param_set_get(&sets[1], "max_size"), "64MiB");
    assert_string_equal(cmb_param_set_get(&sets[1], "dist"), "uniform");
    assert_string_equal(cmb_param_set_get(&sets[1], "checkerboard"), "true");
    free(sets);
    /* full: RMM's grid of uniform sizes without the checkerboard at n=1000
     * (5 sizes) and n=10000 (2), the checkerboard at 64 MiB under 3
     * distributions, 2 more distributions at n=1000 x 1 GiB */
    assert_int_equal(expand("churn", CMB_PRESET_FULL, NULL, 0, &sets), 5 + 2 + 3 + 2);
    assert_string_equal(cmb_param_set_get(&sets[0], "checkerboard"), "false");
    assert_string_equal(cmb_param_set_get(&sets[0], "n"), "1000");
    assert_string_equal(cmb_param_set_get(&sets[0], "traffic_max"), "1TiB");
    assert_string_equal(cmb_param_set_get(&sets[6], "max_size"), "4MiB");
    assert_string_equal(cmb_param_set_get(&sets[7], "checkerboard"), "true");
    assert_string_equal(cmb_param_set_get(&sets[7], "max_size"), "64MiB");
    assert_string_equal(cmb_param_set_get(&sets[11], "dist"), "bimodal");
    free(sets);
    /* a sweep on the command line replaces the preset's values */
    cmb_param_override ov[] = {{"n", "100,200,300"}, {"dist", "loguniform"}};
    assert_int_equal(expand("churn", CMB_PRESET_QUICK, ov, 2, &sets), 6);
    assert_string_equal(cmb_param_set_get(&sets[5], "n"), "300");
    assert_string_equal(cmb_param_set_get(&sets[5], "dist"), "loguniform");
    char text[512];
    cmb_param_set_format(&sets[0], '=', ';', text, sizeof text);
    assert_non_null(strstr(text, "n=100;max_size=1MiB;dist=loguniform;"));
    free(sets);
    /* overrides that fold grids together leave no duplicate cases */
    cmb_param_override same[] = {{"n", "10000"}, {"max_size", "64MiB"}, {"dist", "bimodal"}};
    assert_int_equal(expand("churn", CMB_PRESET_FULL, same, 3, &sets), 2); /* with and without the checkerboard */
    free(sets);
}

/* The full preset's traffic bound: a grid point above it is planned as a
 * skipped case with the reason; --param traffic_max=0 runs it. */
static void traffic_bound_skips(void **state)
{
    (void)state;
    char args[2048], out[65536], cmd[4096];
    const char *dir = cmb_test_tmpdir();
    snprintf(args, sizeof args,
             "--mode sim --quiet --scenario churn --allocator cuda --preset full --param n=10000 "
             "--param max_size=64MiB,1GiB --param dist=uniform --param checkerboard=false --param live_cap=4GiB "
             "--repetitions 1 "
             "--out %s/t",
             dir);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "grep -c ',skipped,.*above traffic_max' %s/t/results.csv", dir);
    cmb_test_sh(cmd, out, sizeof out);
    assert_string_equal(out, "1\n");
    snprintf(cmd, sizeof cmd, "grep -c 'max_size:64MiB.*,0,ok,time_s,' %s/t/results.csv", dir);
    cmb_test_sh(cmd, out, sizeof out);
    assert_string_equal(out, "1\n");
}

/* A repetition reports the RMM semantics: n allocations made, live bytes
 * under live_cap, sizes within [1, max_size]. */
static void churn_generator(void **state)
{
    (void)state;
    char args[2048], out[65536], cmd[4096];
    const char *dir = cmb_test_tmpdir();
    snprintf(args, sizeof args,
             "--mode sim --quiet --scenario churn --allocator cuda --param n=2000 --param max_size=4MiB "
             "--param dist=uniform,loguniform,bimodal --param live_cap=16MiB --param checkerboard=false "
             "--repetitions 1 --out %s/o",
             dir);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    /* all three distributions made exactly n allocations, stayed under the cap */
    snprintf(cmd, sizeof cmd,
             "test $(grep -c ',churn_allocations,2000,' %s/o/results.csv) = 3 && "
             "awk -F, '$11==\"peak_requested_bytes\" && ($12 >= 16777216 || $12 < 4194304) {bad=1} END {exit bad}' "
             "%s/o/results.csv && test $(grep -c ',allocs,2000,' %s/o/results.csv) = 3",
             dir, dir, dir);
    if (cmb_test_sh(cmd, out, sizeof out))
        fail_msg("churn counters: %s", out);
    /* the seed changes the traffic, the same seed repeats it */
    snprintf(args, sizeof args,
             "--mode sim --quiet --scenario churn --allocator cuda --param n=2000 --param max_size=4MiB "
             "--param dist=uniform --param checkerboard=false --repetitions 1 --seed 7 --out %s/s7",
             dir);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd,
             "a=$(grep 'dist=uniform' %s/o/results.csv | grep ',peak_requested_bytes,' | cut -d, -f12); "
             "b=$(grep ',peak_requested_bytes,' %s/s7/results.csv | cut -d, -f12); test \"$a\" != \"$b\"",
             dir, dir);
    if (cmb_test_sh(cmd, out, sizeof out))
        fail_msg("different seeds gave the same traffic");
}

/* Every size and number parameter has an upper limit, the one cmb_param_range
 * prints for --list: sizes at most 1PiB (traffic_max, the total traffic of
 * a case; the others at most a device's 1TiB). */
static void every_parameter_bounded(void **state)
{
    (void)state;
    char out[1 << 17], range[96];
    size_t n = 0;
    assert_int_equal(cmb_test_run("--list", out, sizeof out), 0);
    for (size_t i = 0; i < cmb_scenario_count(); i++) {
        const cmb_scenario *s = cmb_scenario_at(i);
        for (size_t k = 0; k < s->n_params; k++) {
            const cmb_param_spec *p = &s->params[k];
            if (p->type != CMB_P_SIZE && p->type != CMB_P_INT && p->type != CMB_P_REAL)
                continue;
            if (!(p->max >= p->min) || (p->type == CMB_P_SIZE && p->max > 1125899906842624.0))
                fail_msg("%s: parameter %s has no sensible upper limit", s->name, p->name);
            cmb_param_range(p, range, sizeof range);
            char line[256];
            snprintf(line, sizeof line, "--param %-14s", p->name);
            char head[96];
            snprintf(head, sizeof head, "\n  %s", s->name);
            const char *section = strstr(out, head);
            const char *at = section ? strstr(section, line) : NULL, *shown = at ? strstr(at, range) : NULL;
            const char *next = at ? strstr(at + 1, "--param ") : NULL;
            if (!shown || (next && shown > next))
                fail_msg("--list does not show %s's range %s", p->name, range);
            n++;
        }
    }
    assert_true(n > 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(canonical_values), cmocka_unit_test(every_parameter_bounded),
        cmocka_unit_test(preset_grids),
        cmocka_unit_test(traffic_bound_skips),
        cmocka_unit_test(churn_generator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
