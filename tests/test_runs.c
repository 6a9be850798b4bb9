/* test_runs.c - whole runs of the binary in sim mode: valid outputs that
 * compare.py reads, a crashing, aborting or hanging case failing alone
 * with its reason while the run goes on, an interrupted run keeping what
 * it finished, determinism of sim results, and the wire format. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness/wire.h"
#include "support/run.h"

static const char *SMALL = "--param n=300 --param max_size=2MiB --param dist=uniform --param checkerboard=true "
                           "--param fill=0.5 --capacity 1GiB";

/* Python checks of a results.json: valid JSON and a statement about it. */
static int json_check(const char *dir, const char *python_expr, char *out, size_t outlen)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import json,sys; d=json.load(open('%s/results.json')); b=d['benchmarks']; "
             "ok=(%s); print('check:', ok); sys.exit(0 if ok else 1)\"",
             dir, python_expr);
    return cmb_test_sh(cmd, out, outlen);
}

static void outputs_are_valid_and_compare_py_reads_them(void **state)
{
    (void)state;
    char args[2048], out[65536], cmd[4096];
    const char *dir = cmb_test_tmpdir();
    for (int run = 0; run < 2; run++) {
        snprintf(args, sizeof args, "--mode sim --quiet --scenario churn --allocator cuda %s --repetitions 5 --out %s/%c",
                 SMALL, dir, 'a' + run);
        assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    }
    char a[600];
    snprintf(a, sizeof a, "%s/a", dir);
    if (json_check(a,
                   "len([x for x in b if x['run_type']=='iteration'])==5 and "
                   "len([x for x in b if x['run_type']=='aggregate'])==4 and "
                   "all('peak_reserved_bytes' in x and 'frag_ratio' in x for x in b) and "
                   /* the capacity probe runs in the first repetition only */
                   "[('capacity_ratio' in x) for x in b if x['run_type']=='iteration']==[True]+[False]*4 and "
                   "all('capacity_ratio' in x for x in b if x['run_type']=='aggregate') and "
                   "d['context']['mode']=='sim' and d['context']['seed']=='42' and b[0]['time_unit']=='ms'",
                   out, sizeof out))
        fail_msg("results.json: %s", out);
    snprintf(cmd, sizeof cmd, "head -1 %s/a/results.csv", dir);
    cmb_test_sh(cmd, out, sizeof out);
    assert_string_equal(out, "run_id,gpu,mode,case,scenario,allocator,upstream,params,repetition,status,metric,value,error,"
                             "options,impl\n");
    snprintf(cmd, sizeof cmd, "grep -c ',ok,peak_reserved_bytes,' %s/a/results.csv", dir);
    cmb_test_sh(cmd, out, sizeof out);
    assert_string_equal(out, "5\n");
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 /usr/share/benchmark/compare.py benchmarks %s/a/results.json %s/b/results.json", dir,
             dir);
    if (cmb_test_sh(cmd, out, sizeof out) != 0 || !strstr(out, "churn/cuda"))
        fail_msg("compare.py could not read the results: %s", out);
}

static void sim_results_are_deterministic(void **state)
{
    (void)state;
    char args[2048], out[65536], cmd[4096];
    const char *dir = cmb_test_tmpdir();
    for (int run = 0; run < 2; run++) {
        snprintf(args, sizeof args, "--mode sim --quiet --scenario churn,replay --allocator cuda %s --repetitions 1 "
                 "--param trace=%s/traces/samples/churn_small.trace --out %s/%c",
                 SMALL, cmb_test_src(), dir, 'a' + run);
        assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    }
    /* every memory counter equal; only time-like ones may differ */
    snprintf(cmd, sizeof cmd,
             "cut -d, -f4,11,12 %s/a/results.csv | grep -Ev ',(time_s|cpu_time_s|[a-z0-9_]*_ns|ops_per_s|events_per_s|checkerboard_s),' > %s/a.txt; "
             "cut -d, -f4,11,12 %s/b/results.csv | grep -Ev ',(time_s|cpu_time_s|[a-z0-9_]*_ns|ops_per_s|events_per_s|checkerboard_s),' > %s/b.txt; "
             "test $(wc -l < %s/a.txt) -gt 20 && cmp %s/a.txt %s/b.txt",
             dir, dir, dir, dir, dir, dir, dir);
    if (cmb_test_sh(cmd, out, sizeof out))
        fail_msg("sim runs with the same seed differ: %s", out);
}

static void a_crash_fails_only_its_case(void **state)
{
    (void)state;
    const char *plugin = getenv("CMB_MISBEHAVING");
    assert_non_null(plugin);
    const char *modes[] = {"segv", "abort"};
    const char *why[] = {"killed by signal 11", "killed by signal 6"};
    for (int i = 0; i < 2; i++) {
        char args[4096], out[65536], dir[600];
        snprintf(dir, sizeof dir, "%s/o", cmb_test_tmpdir());
        snprintf(args, sizeof args,
                 "--mode sim --quiet --scenario churn,replay --allocator cuda,external:%s:mode=%s %s "
                 "--param trace=%s/traces/samples/churn_small.trace --repetitions 2 --out %s",
                 plugin, modes[i], SMALL, cmb_test_src(), dir);
        int rc = cmb_test_run(args, out, sizeof out);
        assert_int_equal(rc, 1); /* some cases failed */
        char expr[1024];
        snprintf(expr, sizeof expr,
                 "len([x for x in b if x.get('error_occurred') and '%s' in x['error_message']])==2 and "
                 "len([x for x in b if x['run_type']=='iteration' and not x.get('error_occurred') and '/cuda/' in x['name']])==4",
                 why[i]);
        if (json_check(dir, expr, out, sizeof out))
            fail_msg("mode %s: %s", modes[i], out);
    }
}

static void a_hang_is_killed_at_the_timeout(void **state)
{
    (void)state;
    char args[4096], out[65536], dir[600];
    snprintf(dir, sizeof dir, "%s/o", cmb_test_tmpdir());
    snprintf(args, sizeof args,
             "--mode sim --quiet --scenario churn --allocator external:%s:mode=hang,cuda %s --repetitions 1 "
             "--case-timeout 1 --out %s",
             getenv("CMB_MISBEHAVING"), SMALL, dir);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 1);
    if (json_check(dir, "any('timed out after' in x.get('error_message','') for x in b) and "
                        "any('/cuda/' in x['name'] and not x.get('error_occurred') for x in b)",
                   out, sizeof out))
        fail_msg("%s", out);
}

/* A case that leaves a process holding its pipes (in a session of its
 * own, beyond the group kill) ends when its own process ends. */
static void a_leftover_process_does_not_hold_the_run(void **state)
{
    (void)state;
    char args[4096], out[65536], dir[600];
    snprintf(dir, sizeof dir, "%s/o", cmb_test_tmpdir());
    snprintf(args, sizeof args,
             "--mode sim --quiet --scenario churn --allocator external:%s:mode=orphan,cuda %s --repetitions 1 "
             "--out %s",
             getenv("CMB_MISBEHAVING"), SMALL, dir);
    time_t t0 = time(NULL);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    if (time(NULL) - t0 > 15)
        fail_msg("the run waited %lld s for a leftover process", (long long)(time(NULL) - t0));
    if (json_check(dir, "len([x for x in b if x['run_type']=='iteration' and not x.get('error_occurred')])==2", out,
                   sizeof out))
        fail_msg("%s", out);
}

/* SIGINT while a case hangs: the finished case is kept, the files are valid. */
static void an_interrupted_run_keeps_finished_cases(void **state)
{
    (void)state;
    char args[4096], out[65536], dir[600], cmd[8192];
    snprintf(dir, sizeof dir, "%s/o", cmb_test_tmpdir());
    snprintf(args, sizeof args,
             "--mode sim --quiet --scenario churn --allocator cuda,external:%s:mode=hang %s --repetitions 1 --out %s",
             getenv("CMB_MISBEHAVING"), SMALL, dir);
    snprintf(cmd, sizeof cmd, "'%s' %s & pid=$!; sleep 2; kill -INT $pid; wait $pid; echo exit=$?", getenv("CMB_BIN"),
             args);
    cmb_test_sh(cmd, out, sizeof out);
    if (!strstr(out, "exit=130") || !strstr(out, "interrupted"))
        fail_msg("interrupt: %s", out);
    if (json_check(dir, "len([x for x in b if '/cuda/' in x['name'] and x['run_type']=='iteration'])==1", out,
                   sizeof out))
        fail_msg("%s", out);
    snprintf(cmd, sizeof cmd, "grep -c ',ok,peak_requested_bytes,' %s/results.csv", dir);
    cmb_test_sh(cmd, out, sizeof out);
    assert_string_equal(out, "1\n");
}

static void wire_round_trip(void **state)
{
    (void)state;
    cmb_bench_run *r = calloc(1, sizeof *r);
    snprintf(r->name, sizeof r->name, "churn/cuda/n:10");
    r->is_aggregate = 1;
    snprintf(r->aggregate_name, sizeof r->aggregate_name, "cv");
    r->aggregate_is_percentage = 1;
    r->repetition_index = -1;
    r->repetitions = 3;
    r->iterations = 1;
    r->threads = 1;
    r->real_accumulated_time = 0.1 + 0.2;
    r->cpu_accumulated_time = 1e-300;
    r->time_unit = CMB_UNIT_MS;
    snprintf(r->error_message, sizeof r->error_message, "tab\there \"quoted\"");
    snprintf(r->label, sizeof r->label, "mode=sim");
    r->n_counters = 2;
    snprintf(r->counters[0].name, 64, "peak_reserved_bytes");
    r->counters[0].value = 123456789012345.0;
    snprintf(r->counters[1].name, 64, "frag_ratio");
    r->counters[1].value = 1.0 / 3.0;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(cmb_wire_write_run(fds[1], r), 0);
    close(fds[1]);
    char buf[65536];
    ssize_t n = read(fds[0], buf, sizeof buf);
    close(fds[0]);
    cmb_wire_reader *rd = calloc(1, sizeof *rd);
    cmb_wire_reader_init(rd);
    /* fed in odd pieces, as a pipe delivers them */
    for (ssize_t i = 0; i < n; i += 7)
        assert_int_equal(cmb_wire_feed(rd, buf + i, (size_t)(n - i < 7 ? n - i : 7)), 0);
    assert_int_equal(rd->n, 1);
    cmb_bench_run *g = &rd->runs[0];
    assert_string_equal(g->name, r->name);
    assert_string_equal(g->aggregate_name, "cv");
    assert_true(g->real_accumulated_time == r->real_accumulated_time); /* exact */
    assert_true(g->cpu_accumulated_time == r->cpu_accumulated_time);
    assert_true(g->counters[1].value == r->counters[1].value);
    assert_null(strchr(g->error_message, '\t'));
    assert_null(strchr(g->error_message, '"'));
    assert_int_equal(cmb_wire_feed(rd, "X\tjunk\n", 7), -1);
    cmb_wire_reader_free(rd);
    free(rd);
    free(r);
}

/* A run whose every case is skipped before it runs (sim mode, GPU-only
 * allocators) says why and writes no run directory, not an empty one. */
static void nothing_to_run_writes_nothing(void **state)
{
    (void)state;
    char args[2048], out[8192], dir[600];
    snprintf(dir, sizeof dir, "%s/none", cmb_test_tmpdir());
    snprintf(args, sizeof args, "--mode sim --scenario churn --allocator cub,managed %s --out %s", SMALL, dir);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 1);
    if (!strstr(out, "nothing ran: all 2 cases were skipped (no run directory written)") ||
        !strstr(out, "needs a GPU"))
        fail_msg("%s", out);
    assert_false(cmb_test_exists(dir));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(outputs_are_valid_and_compare_py_reads_them),
        cmocka_unit_test(sim_results_are_deterministic),
        cmocka_unit_test(a_crash_fails_only_its_case),
        cmocka_unit_test(a_hang_is_killed_at_the_timeout),
        cmocka_unit_test(a_leftover_process_does_not_hold_the_run),
        cmocka_unit_test(an_interrupted_run_keeps_finished_cases),
        cmocka_unit_test(nothing_to_run_writes_nothing),
        cmocka_unit_test(wire_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
