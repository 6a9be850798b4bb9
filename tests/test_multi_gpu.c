/* test_multi_gpu.c - the multi-gpu scenario on the CPU: several simulated
 * devices, one rank process each. What each rank takes on every device
 * (the context-on-device-0 mistake charges device 0 in every rank but 0,
 * and nowhere else), per-device sums, the pool0 mistake's cost per policy,
 * the cross-device free's verdict, the sim model of CUDA's event rule,
 * the rank protocol's failures, and scripts/gpu-multi.sh in sim mode. The
 * GPU parts (contexts, cudaMemPool attributes, peer mapping, check
 * kernels) are run by scripts/gpu-multi.sh on a host with two GPUs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/upstream.h"
#include "scenarios/multi_gpu.h"
#include "support/run.h"

#define CTX ((double)CMB_MGPU_SIM_CONTEXT)

/* --- reading results.csv ------------------------------------------------------------------ */

/* Value of `name` in the ok row of the case whose allocator column is
 * `alloc` and whose params contain `params` (NAN when there is none). */
static double metric(const char *dir, const char *alloc, const char *params, const char *name)
{
    char path[700], line[8192];
    double v = NAN;
    snprintf(path, sizeof path, "%s/results.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return NAN;
    while (fgets(line, sizeof line, f)) {
        char *field[16] = {0}, *p = line;
        int n = 0;
        for (char *tok = strsep(&p, ","); tok && n < 16; tok = strsep(&p, ","))
            field[n++] = tok;
        if (n < 12 || strcmp(field[9], "ok") || strcmp(field[10], name) || strcmp(field[5], alloc) ||
            !strstr(field[7], params))
            continue;
        v = strtod(field[11], NULL);
        break;
    }
    fclose(f);
    return v;
}

static double rd(const char *dir, const char *alloc, const char *params, int r, int d)
{
    char name[64];
    snprintf(name, sizeof name, "r%d_d%d_bytes", r, d);
    return metric(dir, alloc, params, name);
}

static const char *run_sim(const char *args)
{
    static char dir[600];
    char full[4096], out[65536];
    snprintf(dir, sizeof dir, "%s/o", cmb_test_tmpdir());
    snprintf(full, sizeof full, "--mode sim --quiet --repetitions 1 --scenario multi-gpu %s --out %s", args, dir);
    int rc = cmb_test_run(full, out, sizeof out);
    if (rc != 0)
        fail_msg("cumembench %s: exit %d: %s", full, rc, out);
    return dir;
}

/* --- the sim model ------------------------------------------------------------------------- */

/* cudaEventRecord fails when the event (made on the current device) and the
 * stream belong to different devices; the sim upstream says the same. */
static void sim_events_follow_cuda(void **state)
{
    (void)state;
    cmb_upstream_config cfg;
    cmb_upstream *up;
    cmb_event ev;
    char err[256];
    cmb_upstream_config_default(&cfg);
    assert_int_equal(cmb_upstream_open(&cfg, &up, err, sizeof err), CMB_OK);
    assert_int_equal(cmb_sim_stream_device(cmb_sim_stream(3, 7)), 3);
    assert_int_equal(cmb_sim_stream_device((cmb_stream)(uintptr_t)5), -1);
    assert_ptr_not_equal(cmb_sim_stream(1, 0), cmb_sim_stream(1, 1));
    /* no current device: nothing is checked, as before */
    assert_int_equal(cmb_up_event_record(up, cmb_sim_stream(1, 0), &ev), CMB_OK);
    cmb_sim_set_device(0);
    assert_int_equal(cmb_up_event_record(up, cmb_sim_stream(1, 0), &ev), CMB_ERR_CUDA);
    assert_int_equal(cmb_up_event_record(up, (cmb_stream)(uintptr_t)2, &ev), CMB_OK); /* untagged */
    cmb_sim_set_device(1);
    assert_int_equal(cmb_up_event_record(up, cmb_sim_stream(1, 0), &ev), CMB_OK);
    assert_int_equal(cmb_up_event_rerecord(up, cmb_sim_stream(1, 4), ev), CMB_OK);
    assert_int_equal(cmb_up_event_rerecord(up, cmb_sim_stream(0, 0), ev), CMB_ERR_CUDA);
    cmb_sim_set_device(-1);
    assert_int_equal(cmb_upstream_close(up), 0);
}

/* --- what each rank takes where ------------------------------------------------------------ */

static void ctx0_charges_device0_in_every_nonzero_rank(void **state)
{
    (void)state;
    for (int n = 2; n <= CMB_MGPU_MAX_DEVICES; n++) {
        char args[256];
        snprintf(args, sizeof args, "--allocator cuda,torch-caching --param devices=%d --param mistake=none,ctx0", n);
        const char *dir = run_sim(args);
        for (int a = 0; a < 2; a++) {
            const char *alloc = a ? "torch-caching" : "cuda";
            for (int r = 0; r < n; r++) {
                double with = rd(dir, alloc, "mistake=ctx0", r, 0), without = rd(dir, alloc, "mistake=none", r, 0);
                if (r == 0) {
                    assert_true(with == without && with >= CTX); /* rank 0's own device: no change */
                    continue;
                }
                if (with != CTX || without != 0)
                    fail_msg("%s, %d devices, rank %d on device 0: %.0f with the mistake, %.0f without", alloc, n, r,
                             with, without);
                for (int d = 1; d < n; d++) /* and nothing anywhere else */
                    assert_true(rd(dir, alloc, "mistake=ctx0", r, d) == rd(dir, alloc, "mistake=none", r, d));
            }
            assert_true(metric(dir, alloc, "mistake=ctx0", "foreign_d0_bytes") == (n - 1) * CTX);
            assert_true(metric(dir, alloc, "mistake=none", "foreign_bytes") == 0);
            assert_true(metric(dir, alloc, "mistake=none", "context_bytes") == CTX);
        }
    }
}

static void per_device_sums_add_up(void **state)
{
    (void)state;
    static const char *const allocs[] = {"cuda", "torch-caching", "rmm-pool", "bfc", "cmb"};
    static const char *const mistakes[] = {"mistake=none", "mistake=ctx0", "mistake=pool0"};
    const char *dir = run_sim("--allocator cuda,torch-caching,rmm-pool,bfc,cmb --param devices=3");
    for (size_t a = 0; a < 5; a++) {
        for (size_t m = 0; m < 3; m++) {
            assert_true(metric(dir, allocs[a], mistakes[m], "ranks") == 3);
            assert_true(metric(dir, allocs[a], mistakes[m], "sum_disagree_bytes") == 0);
            assert_true(metric(dir, allocs[a], mistakes[m], "unreturned_bytes") == 0);
            assert_true(metric(dir, allocs[a], mistakes[m], "rank_leaked_bytes") == 0);
            for (int d = 0; d < 3; d++) {
                char name[32];
                double sum = 0;
                for (int r = 0; r < 3; r++)
                    sum += rd(dir, allocs[a], mistakes[m], r, d);
                snprintf(name, sizeof name, "d%d_bytes", d);
                if (metric(dir, allocs[a], mistakes[m], name) != sum || !(sum >= CTX))
                    fail_msg("%s %s device %d: %.0f measured, ranks add up to %.0f", allocs[a], mistakes[m], d,
                             metric(dir, allocs[a], mistakes[m], name), sum);
            }
        }
    }
}

/* pool0: the first block on device 0 leaves there what the policy keeps
 * after a free: nothing (cudaMalloc), a 2 MiB small-pool segment (PyTorch,
 * for a 1 MiB block), the whole initial pool (RMM: half the device). */
static void pool0_charges_what_the_policy_keeps(void **state)
{
    (void)state;
    const char *dir = run_sim("--allocator cuda,torch-caching,rmm-pool --param devices=2 --param mistake=pool0,ctx0 "
                              "--param capacity=4GiB --param stray=1MiB");
    assert_true(rd(dir, "cuda", "mistake=pool0", 1, 0) == CTX);
    assert_true(rd(dir, "torch-caching", "mistake=pool0", 1, 0) == CTX + (2 << 20));
    assert_true(rd(dir, "rmm-pool", "mistake=pool0", 1, 0) == CTX + (2.0 * (1 << 30)));
    assert_true(rd(dir, "rmm-pool", "mistake=ctx0", 1, 0) == CTX);
    /* the rank's own device is the same with either mistake */
    assert_true(rd(dir, "rmm-pool", "mistake=pool0", 1, 1) == rd(dir, "rmm-pool", "mistake=ctx0", 1, 1));
}

/* --- the cross-device free and the GPU-only parts ------------------------------------------- */

static void cross_device_free_has_a_verdict(void **state)
{
    (void)state;
    char out[65536], cmd[1024];
    const char *dir = run_sim("--allocator all --param devices=2 --param mistake=none,ctx0");
    int n = 0;
    for (const char *a = "cuda\0torch-caching\0torch-expandable\0rmm-pool\0arena\0binning\0bfc\0cupy\0buddy\0cmb\0";
         *a; a += strlen(a) + 1, n++) {
        double v = metric(dir, a, "mistake=none", "xfree_verdict");
        if (!(v == 0 || v == 1 || v == 2))
            fail_msg("%s: xfree_verdict %g", a, v);
        assert_true(metric(dir, a, "mistake=none", "xfree_misuse") >= 0);
        assert_true(isnan(metric(dir, a, "mistake=ctx0", "xfree_verdict"))); /* rank 0's tests run once */
    }
    assert_int_equal(n, 10);
    /* cudaFree ignores the stream: the plain allocator works */
    assert_true(metric(dir, "cuda", "mistake=none", "xfree_verdict") == 0);
    /* the verdict is said in words, and the driver-only parts are skipped with a reason */
    snprintf(cmd, sizeof cmd, "grep -c 'cross-device free \\(works\\|refused\\|corrupts\\)' %s/results.json", dir);
    cmb_test_sh(cmd, out, sizeof out);
    assert_true(atoi(out) >= 10);
    snprintf(cmd, sizeof cmd, "grep -c 'peer skipped: sim: peer mapping is driver work' %s/results.json", dir);
    cmb_test_sh(cmd, out, sizeof out);
    assert_true(atoi(out) >= 10);
    snprintf(cmd, sizeof cmd, "grep -c ',peer_\\|pool_reserved\\|,context_ms,' %s/results.csv", dir);
    cmb_test_sh(cmd, out, sizeof out);
    assert_int_equal(atoi(out), 0);
}

static void one_device_runs_without_the_cross_parts(void **state)
{
    (void)state;
    const char *dir = run_sim("--allocator torch-caching --param devices=1 --param mistake=ctx0");
    assert_true(metric(dir, "torch-caching", "devices=1", "ranks") == 1);
    assert_true(metric(dir, "torch-caching", "devices=1", "foreign_d0_bytes") == 0);
    assert_true(isnan(metric(dir, "torch-caching", "devices=1", "xfree_verdict")));
    assert_true(isnan(metric(dir, "torch-caching", "devices=1", "r0_d1_bytes")));
}

/* --- the rank process ------------------------------------------------------------------------- */

static void rank_answers_and_failures(void **state)
{
    (void)state;
    char cmd[2048], out[8192];
    const char *bin = getenv("CMB_BIN");
    assert_non_null(bin);
    /* a bad job: one line on descriptor 3, exit status 2 */
    snprintf(cmd, sizeof cmd, "echo 'rank=x' | %s --multi-gpu-rank 3>&1 1>/dev/null; echo rc=$?", bin);
    cmb_test_sh(cmd, out, sizeof out);
    assert_non_null(strstr(out, "fail job bad job field 'rank=x'"));
    assert_non_null(strstr(out, "rc=2"));
    /* an allocator that cannot be made: the step fails, the rank still ends
     * cleanly at end of file */
    snprintf(cmd, sizeof cmd,
             "printf 'gpu=0\\trank=1\\tdevices=2\\tmistake=ctx0\\tsize=16777216\\tstray=1\\tcapacity=67108864\\t"
             "alloc=arena:arena_size=1GiB\\ngo init\\ngo traffic\\ngo bogus\\n' | %s --multi-gpu-rank 3>&1; echo rc=$?",
             bin);
    cmb_test_sh(cmd, out, sizeof out);
    assert_non_null(strstr(out, "ok init init_ms="));
    assert_non_null(strstr(out, " take=536870912,536870912\nfail traffic"));
    assert_non_null(strstr(out, "fail traffic creating arena:arena_size=1GiB on device 1"));
    assert_non_null(strstr(out, "fail ? unknown request 'go bogus'"));
    assert_non_null(strstr(out, "ok exit leaked_bytes=0"));
    assert_non_null(strstr(out, "rc=0"));
}

/* A rank that crashes costs the case, never the run; one that crashes in
 * the cross-device free is that allocator's verdict (it corrupts). The
 * test plug-in crashes at its Nth allocation: rank 0 makes 8 for its
 * traffic, then the sentinel (9), the block freed across (10), the next (11). */
static void a_crashing_rank_is_contained(void **state)
{
    (void)state;
    char args[1024];
    const char *plugin = getenv("CMB_MISBEHAVING");
    assert_non_null(plugin);
    snprintf(args, sizeof args, "--allocator external:%s:mode=segv:at=11,external:%s:mode=segv:at=3 "
             "--param devices=2 --param mistake=none", plugin, plugin);
    char full[4096], out[65536], dir[600];
    snprintf(dir, sizeof dir, "%s/o", cmb_test_tmpdir());
    snprintf(full, sizeof full, "--mode sim --quiet --repetitions 1 --scenario multi-gpu %s --out %s", args, dir);
    int rc = cmb_test_run(full, out, sizeof out);
    assert_int_equal(rc, 1); /* one case failed */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "grep -c ',xfree_verdict,2,' %s/results.csv; grep -c 'corrupts: the rank process was "
             "killed by signal 11' %s/results.json; grep -c 'rank 0, step traffic: the rank process was killed by "
             "signal 11' %s/results.csv", dir, dir, dir);
    cmb_test_sh(cmd, out, sizeof out);
    if (strcmp(out, "1\n1\n1\n"))
        fail_msg("expected one corrupt verdict and one failed case, got counts:\n%s", out);
}

static void bad_parameters_are_refused(void **state)
{
    (void)state;
    char out[8192];
    int rc = cmb_test_run("--mode sim --scenario multi-gpu --allocator cuda --param devices=5 --out /nonexistent/x",
                          out, sizeof out);
    assert_int_equal(rc, 2);
    rc = cmb_test_run("--mode sim --scenario multi-gpu --allocator cuda --param size=64MiB --param capacity=100MiB "
                      "--out /nonexistent/x", out, sizeof out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "capacity must hold twice size plus stray"));
}

/* --- the GPU script, in sim mode ------------------------------------------------------------- */

static void gpu_multi_script_in_sim(void **state)
{
    (void)state;
    char cmd[2048], out[65536], build[600];
    const char *bin = getenv("CMB_BIN");
    snprintf(build, sizeof build, "%s", bin);
    *strrchr(build, '/') = '\0';
    const char *tmp = cmb_test_tmpdir();
    snprintf(cmd, sizeof cmd, "CMB_MODE=sim %s/scripts/gpu-multi.sh %s %s/out >%s/log 2>&1; echo rc=$?",
             cmb_test_src(), build, tmp, tmp);
    cmb_test_sh(cmd, out, sizeof out);
    if (!strstr(out, "rc=0")) {
        snprintf(cmd, sizeof cmd, "tail -30 %s/log", tmp);
        cmb_test_sh(cmd, out, sizeof out);
        fail_msg("gpu-multi.sh in sim mode failed: %s", out);
    }
    snprintf(cmd, sizeof cmd, "ls %s/out | wc -l; cat %s/out/summary.md", tmp, tmp);
    cmb_test_sh(cmd, out, sizeof out);
    assert_true(atoi(out) >= 3 && atoi(out) <= 8); /* at most 8 files come back from the GPU host */
    assert_non_null(strstr(out, "| torch-caching |"));
    assert_non_null(strstr(out, "rank 1 on device 0"));
    assert_non_null(strstr(out, "mode: sim"));
    snprintf(cmd, sizeof cmd, "tar tzf %s/out/multi-gpu.tar.gz | grep -c results.csv", tmp);
    cmb_test_sh(cmd, out, sizeof out);
    assert_true(atoi(out) >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sim_events_follow_cuda),
        cmocka_unit_test(ctx0_charges_device0_in_every_nonzero_rank),
        cmocka_unit_test(per_device_sums_add_up),
        cmocka_unit_test(pool0_charges_what_the_policy_keeps),
        cmocka_unit_test(cross_device_free_has_a_verdict),
        cmocka_unit_test(one_device_runs_without_the_cross_parts),
        cmocka_unit_test(rank_answers_and_failures),
        cmocka_unit_test(a_crashing_rank_is_contained),
        cmocka_unit_test(bad_parameters_are_refused),
        cmocka_unit_test(gpu_multi_script_in_sim),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
