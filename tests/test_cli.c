/* test_cli.c - malformed command lines: each gets exit status 2, exactly
 * one line on stderr that says what is wrong, and writes nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/run.h"

#define Z50 "00000000000000000000000000000000000000000000000000"

typedef struct bad_case {
    const char *args;
    const char *expect; /* a piece of the one-line message */
} bad_case;

static const bad_case bad[] = {
    {"--bogus", "unknown option '--bogus' (see"},
    {"-x", "unknown option"},
    {"--scenario", "needs a value"},
    {"--scenario nosuch", "unknown scenario 'nosuch'"},
    {"--scenario churn,,replay", "empty scenario name"},
    {"--scenario ,churn", "empty scenario name"},
    {"--allocator nosuch", "unknown allocator 'nosuch' (cumembench --list"},
    /* a misspelt name: the closest known one (common/cmb_suggest.h) */
    {"--sceanrio churn", "unknown option '--sceanrio'; did you mean '--scenario'?"},
    {"--scenario chrun", "unknown scenario 'chrun'; did you mean 'churn'?"},
    {"--allocator torch-cachng --scenario churn", "unknown allocator 'torch-cachng'; did you mean 'torch-caching'?"},
    {"--allocator rmm_pool --scenario churn", "unknown allocator 'rmm_pool'; did you mean 'rmm-pool'?"},
    {"--allocator real:rmm-pol --scenario churn", "unknown allocator 'real:rmm-pol'; did you mean 'real:rmm-pool'?"},
    {"--allocator bfc:allow_grwth=true --scenario churn", "unknown option 'allow_grwth'; did you mean 'allow_growth'?"},
    {"--param fil=0.5 --scenario churn", "no selected scenario has a parameter 'fil'; did you mean 'fill'?"},
    {"--allocator cuda,", "empty allocator name"},
    {"--allocator cuda@gpu", "unknown upstream 'gpu'"},
    {"--allocator cuda:", "empty option list"},
    {"--allocator cuda:noequals", "is not key=value"},
    {"--allocator cmb:layout= --scenario churn", "option 'layout=' has no value"},
    {"--allocator external:", "needs a path"},
    {"--allocator external:/nonexistent/lib.so", "cannot load external allocator"},
    {"--preset medium", "expects quick or full"},
    {"--mode turbo", "expects auto, gpu or sim"},
    {"--seed -4", "--seed expects a non-negative integer"},
    {"--seed abc", "--seed expects a non-negative integer"},
    {"--repetitions 0", "--repetitions expects an integer in [1, 1000]"},
    {"--repetitions 1.5", "--repetitions expects an integer"},
    {"--repetitions 5000", "--repetitions expects an integer"},
    {"--capacity 12", "--capacity expects a size of at least 1MiB"},
    {"--capacity lots", "--capacity expects a size"},
    {"--device -1", "--device expects an integer"},
    {"--case-timeout 0", "--case-timeout expects a positive number"},
    {"--case-timeout soon", "--case-timeout expects a positive number"},
    {"--fault nth=x", "--fault: expected"},
    {"--fault prob=2", "--fault: expected"},
    {"--fault sometimes", "--fault: expected"},
    {"--param", "needs a value"},
    {"--param n", "--param expects NAME=VALUE"},
    {"--param =5", "--param expects NAME=VALUE"},
    {"--param n=", "--param expects NAME=VALUE"},
    {"--param nosuch=1 --scenario churn", "no selected scenario has a parameter 'nosuch'"},
    {"--param n=-3 --scenario churn", "parameter n=-3: expected a non-negative integer"},
    {"--param n=0 --scenario churn", "out of range"},
    {"--param max_size=huge --scenario churn", "parameter max_size=huge: expected a size"},
    {"--param dist=normal --scenario churn", "expected one of uniform|loguniform|bimodal"},
    {"--param fill=1.5 --scenario churn", "out of range"},
    {"--param checkerboard=maybe --scenario churn", "expected true or false"},
    {"--param n=10,,20 --scenario churn", "empty value"},
    {"--param n=1 --param n=2 --scenario churn", "given twice"},
    {"--param fill_min=64MiB --param fill_max=1MiB --scenario churn", "fill_min must not exceed fill_max"},
    {"--param 'trace=a;b' --scenario replay", "may not contain"},
    {"--param trace=/nonexistent.trace --scenario replay", "/nonexistent.trace: cannot open"},
    {"--allocator cuda:bogus=1 --scenario churn --param n=10 --record-trace", "needs a value"},
    {"--record-trace /tmp/x.trace --scenario churn", "needs exactly one case"},
    {"--out", "needs a value"},
    {"--costs /nonexistent/costs.json", "--costs /nonexistent/costs.json: No such file or directory"},
    {"--costs /dev/zero", "--costs /dev/zero: not a regular file"},
    {"--costs /proc/self/status", "cost file /proc/self/status: '[' or '{' expected"},
    {"--gpu-model amd-mi300", "no committed cost file is close to 'amd-mi300' (committed: nvidia-h100"},
    {"--gpu-model n", "no committed cost file is close to 'n' (committed: nvidia-h100"},
    {"--gpu-model nosuch-gpu", "no committed cost file is close to 'nosuch-gpu' (committed: nvidia-h100"},
    {"--gpu-model nvidia-h100 --costs /dev/zero", "--costs and --gpu-model both choose the cost file"},
    {"--mode gpu", "no CUDA GPU is usable"},
    {"--param n=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 --param fill=0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9 "
     "--param max_size=1MiB,2MiB,3MiB,4MiB,5MiB,6MiB,7MiB,8MiB,9MiB,10MiB,11MiB,12MiB,13MiB,14MiB,15MiB,16MiB,17MiB,"
     "18MiB,19MiB,20MiB,21MiB,22MiB,23MiB,24MiB,25MiB,26MiB,27MiB,28MiB,29MiB,30MiB,31MiB,32MiB --scenario churn",
     "more than 4096 cases"},
    {"--resume", "needs a value"},
    {"--resume=", "--resume needs the directory"},
    {"--resume /nonexistent/run", "only --quiet, --verbose and --case-timeout may be given beside it"},
    {"--fault every=2,bogus=1", "--fault: expected"},
    /* duplicates, contradictions and ambiguous units: refused, never one silently winning */
    {"--scenario churn,churn --allocator bfc", "scenario 'churn' is listed twice"},
    {"--scenario churn --allocator bfc,bfc", "allocator 'bfc' is listed twice"},
    {"--scenario churn --scenario replay", "--scenario is given twice"},
    {"--capacity 4GiB --param capacity=8GiB --scenario replay", "both set the device size"},
    {"--param max_size=64mb --scenario churn", "ambiguous"},
    {"--param max_size=64MB --scenario churn", "ambiguous"},
    {"--capacity 64mb", "ambiguous"},
    /* upper limits (common/cmb_size.h) and no silent truncation */
    {"--capacity 16777215TiB", "--capacity expects a size of at least 1MiB and at most 1TiB"},
    {"--capacity 1025GiB", "at most 1TiB"},
    {"--fault prob=0." Z50 Z50 Z50 Z50 Z50 "1,every=3000000", "--fault: longer than 255 characters"},
    {"--param fill=1.5 --scenario churn", "out of range [0, 0.95]"},
    /* allocator options checked before anything runs */
    {"--allocator bfc:foo=bar --scenario churn", "allocator 'bfc': unknown option 'foo'"},
    {"--allocator torch-caching:max_split_size=banana --scenario churn", "max_split_size=banana: expected a size"},
    /* a size option that declares no maximum has the suite's (cmb_option_check.h) */
    {"--allocator rmm-pool:initial_pool_size=300TiB --scenario churn", "out of range [0, 256TiB]"},
    {"--allocator cupy:limit=16777215TiB --scenario churn", "out of range [0, 256TiB]"},
    /* --list checks the names it is given, as a run does */
    {"--list --scenario nosuch", "unknown scenario 'nosuch' (cumembench --list"},
    {"--list --allocator nosuch", "unknown allocator 'nosuch' (cumembench --list"},
    {"--list --allocator torch-cachng", "did you mean 'torch-caching'?"},
    /* --fault refuses what --param refuses: empty values, a key twice, a fault that never fires */
    {"--fault ''", "--fault: empty value ''"},
    {"--fault nth=1,", "--fault: empty item in 'nth=1,'"},
    {"--fault ,every=2", "--fault: empty item in ',every=2'"},
    {"--fault nth=1,,every=2", "--fault: empty item in 'nth=1,,every=2'"},
    {"--fault nth=1,nth=2", "--fault: nth is given twice in 'nth=1,nth=2'"},
    {"--fault every=0", "--fault: every=0: never fires"},
    {"--fault nth=0", "--fault: nth=0: never fires"},
    {"--fault prob=0,seed=3", "--fault: prob=0: never fires"},
    {"--fault seed=3", "--fault: 'seed=3' never fires: give nth=N, every=K or prob=P"},
    {"--fault nth=99999999999999999999", "--fault: nth=99999999999999999999: too large"},
    /* a number beyond 64 bits is too large, not malformed */
    {"--allocator cmb:chunk=99999999999999999999 --scenario churn",
     "allocator 'cmb': chunk=99999999999999999999: too large"},
    {"--allocator cmb:chunk=-99999999999999999999 --scenario churn", "chunk=-99999999999999999999: too small"},
    {"--param iterations=99999999999999999999 --scenario leak-check",
     "parameter iterations=99999999999999999999: too large"},
    {"--seed 99999999999999999999", "--seed 99999999999999999999: too large (at most 18446744073709551615)"},
    /* one --param listing a value twice (two cases under one name) */
    {"--param n=10,10 --scenario churn", "--param n lists 10 twice"},
    {"--param max_size=1MiB,1048576 --scenario churn", "--param max_size lists 1MiB twice"},
    /* an allocator spec without a name, or with two upstreams */
    {"--allocator @vmm --scenario churn", "empty allocator name in '@vmm'"},
    {"--allocator :slack=0.1@sim --scenario churn", "empty allocator name in ':slack=0.1@sim'"},
    {"--allocator cmb@sim@vmm --scenario churn", "upstream given twice in 'cmb@sim@vmm'"},
};

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void malformed_invocations(void **state)
{
    (void)state;
    char args[1024], out[8192];
    assert_true(sizeof bad / sizeof bad[0] >= 30);
    print_message("%zu malformed command lines\n", sizeof bad / sizeof bad[0]); /* docs/reliability.md's figure */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *dir = cmb_test_tmpdir();
        char outdir[512];
        snprintf(outdir, sizeof outdir, "%s/out", dir);
        snprintf(args, sizeof args, "--mode sim --quiet --out %s %s", outdir, bad[i].args);
        /* an option given twice is refused: a case that sets --mode is run with its own */
        if (!strcmp(bad[i].args, "--mode gpu"))
            snprintf(args, sizeof args, "--mode gpu --out %s", outdir);
        else if (!strncmp(bad[i].args, "--mode ", 7))
            snprintf(args, sizeof args, "--quiet --out %s %s", outdir, bad[i].args);
        if (!strcmp(bad[i].args, "--out"))
            snprintf(args, sizeof args, "--mode sim --out");
        int rc = cmb_test_run(args, out, sizeof out);
        if (rc != 2 || !strstr(out, bad[i].expect) || count_lines(out) != 1)
            fail_msg("'%s': exit %d, output '%s' (want exit 2 and one line with '%s')", bad[i].args, rc, out,
                     bad[i].expect);
        if (cmb_test_exists(outdir))
            fail_msg("'%s': wrote %s although the command line was rejected", bad[i].args, outdir);
    }
}

static void unwritable_out(void **state)
{
    (void)state;
    char out[8192];
    int rc = cmb_test_run("--mode sim --scenario churn --allocator cuda --param n=10 --out /proc/nope/x",
                          out, sizeof out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "cannot create output directory /proc/nope/x"));
}

/* A tab or newline in --out: refused before anything runs (every case
 * failed with it). */
static void out_with_control_characters(void **state)
{
    (void)state;
    char args[1024], out[8192];
    const char *dir = cmb_test_tmpdir();
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "--mode sim --quiet --scenario churn --allocator cuda --param n=10 --out \"$(printf '%s/a%sb')\"", dir,
                 i ? "\\n" : "\\t");
        int rc = cmb_test_run(args, out, sizeof out);
        if (rc != 2 || !strstr(out, "--out: a tab or newline") || count_lines(out) != 1)
            fail_msg("%s: exit %d: %s", args, rc, out);
    }
    char ls[600];
    snprintf(ls, sizeof ls, "ls -A %s | wc -l", dir);
    assert_int_equal(cmb_test_sh(ls, out, sizeof out), 0);
    assert_int_equal(atoi(out), 0);
}

/* `args` (with "--out DIR/o" appended) is refused: exit 2, one line holding
 * `expect`, and no run directory. */
static void refused_before_running(const char *dir, const char *args, const char *expect)
{
    char full[1200], out[8192], o[600];
    snprintf(full, sizeof full, "%s --out %s/o", args, dir);
    int rc = cmb_test_run(full, out, sizeof out);
    if (rc != 2 || !strstr(out, expect) || count_lines(out) != 1)
        fail_msg("%s: exit %d: %s", full, rc, out);
    snprintf(o, sizeof o, "%s/o", dir);
    assert_false(cmb_test_exists(o));
}

#define SMALL_CHURN                                                                                                    \
    "--mode sim --quiet --scenario churn --allocator bfc --param n=10 --param max_size=1MiB "                         \
    "--param checkerboard=false --param dist=uniform"

/* --record-trace into a place it cannot write: refused before the case
 * runs (the case ran and its measurements were thrown away). */
static void record_trace_unwritable(void **state)
{
    (void)state;
    refused_before_running(cmb_test_tmpdir(), SMALL_CHURN " --record-trace /proc/nope/x.trace",
                           "--record-trace: cannot write /proc/nope/x.trace");
}

/* cmb's layout naming a trace that cannot be read: refused before the
 * cases run, not one failed case each. */
static void layout_unreadable(void **state)
{
    (void)state;
    refused_before_running(cmb_test_tmpdir(),
                           "--mode sim --quiet --scenario churn --allocator cmb:layout=/proc/nope/run.trace "
                           "--param n=10 --param max_size=1MiB --param checkerboard=false --param dist=uniform",
                           "layout=/proc/nope/run.trace: No such file or directory");
}

/* cmb's layout naming a file that is readable but no trace: what only
 * create() finds (allocators/policy.h, cmb_policy_try) is refused before the
 * cases run too, as one line naming the file and line. */
static void layout_malformed(void **state)
{
    (void)state;
    char cmd[1024], args[1024], out[8192];
    const char *dir = cmb_test_tmpdir();
    snprintf(cmd, sizeof cmd, "printf 'no trace here\\n' >%s/bad.trace", dir);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    snprintf(args, sizeof args, "--mode sim --quiet --scenario churn --allocator cmb:layout=%s/bad.trace "
             "--param n=10 --param max_size=1MiB --param checkerboard=false --param dist=uniform", dir);
    refused_before_running(dir, args, "bad.trace:1: not a trace");
}

/* A replay of a trace that holds no allocation (only its header line):
 * refused before anything runs, as cumembench tune refuses it. */
static void replay_without_allocations(void **state)
{
    (void)state;
    char cmd[1024], args[1024], out[8192];
    const char *dir = cmb_test_tmpdir();
    snprintf(cmd, sizeof cmd, "head -1 %s/traces/samples/torch_mlp_sweep_default.trace >%s/h.trace", cmb_test_src(),
             dir);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    snprintf(args, sizeof args, "--mode sim --quiet --scenario replay --allocator cmb --param trace=%s/h.trace "
             "--repetitions 1", dir);
    refused_before_running(dir, args, "h.trace: no allocations to replay");
}

/* --record-trace never replaces an existing file (as --out never writes
 * into a run directory that holds results). */
static void record_trace_exists(void **state)
{
    (void)state;
    char cmd[1024], args[1024], out[8192];
    const char *dir = cmb_test_tmpdir();
    snprintf(cmd, sizeof cmd, "echo keep >%s/x.trace", dir);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    snprintf(args, sizeof args, SMALL_CHURN " --record-trace %s/x.trace", dir);
    refused_before_running(dir, args, "x.trace already exists");
    snprintf(cmd, sizeof cmd, "cat %s/x.trace", dir);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 0);
    assert_string_equal(out, "keep\n");
}

static void out_already_holds_results(void **state)
{
    (void)state;
    char args[1024], out[8192];
    const char *dir = cmb_test_tmpdir();
    snprintf(args, sizeof args,
             "--mode sim --quiet --scenario churn --allocator cuda --param n=100 --param checkerboard=false "
             "--param max_size=1MiB --param dist=uniform --repetitions 1 --out %s/o",
             dir);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 2);
    assert_non_null(strstr(out, "already holds results"));
}

static void help_list_version(void **state)
{
    (void)state;
    char out[65536];
    assert_int_equal(cmb_test_run("--help", out, sizeof out), 0);
    assert_non_null(strstr(out, "usage: cumembench"));
    assert_int_equal(cmb_test_run("--list", out, sizeof out), 0);
    assert_non_null(strstr(out, "churn"));
    assert_non_null(strstr(out, "replay"));
    assert_non_null(strstr(out, "cuda-async-retain"));
    assert_int_equal(cmb_test_run("--version", out, sizeof out), 0);
    assert_non_null(strstr(out, "cumembench"));
}

/* No GPU here: the run says so in one line and falls back to sim mode. */
static void no_gpu_falls_back_to_sim(void **state)
{
    (void)state;
    char args[1024], out[65536];
    snprintf(args, sizeof args,
             "--scenario churn --allocator all --param n=100 --param checkerboard=false --repetitions 1 --out %s/o",
             cmb_test_tmpdir());
    assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    assert_non_null(strstr(out, "no CUDA GPU available"));
    assert_non_null(strstr(out, "running in sim mode"));
    assert_non_null(strstr(out, "skipping allocator cuda-async: needs a GPU"));
    assert_non_null(strstr(out, "GPU timings need a GPU"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(malformed_invocations),   cmocka_unit_test(unwritable_out),
        cmocka_unit_test(out_already_holds_results), cmocka_unit_test(help_list_version),
        cmocka_unit_test(no_gpu_falls_back_to_sim), cmocka_unit_test(out_with_control_characters),
        cmocka_unit_test(record_trace_unwritable), cmocka_unit_test(layout_unreadable),
        cmocka_unit_test(layout_malformed),
        cmocka_unit_test(replay_without_allocations),
        cmocka_unit_test(record_trace_exists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
