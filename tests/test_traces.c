/* test_traces.c - the trace readers on good and malformed input (every
 * error names the file and line), the writer, record -> replay round
 * trips, the PyTorch snapshot converter, the loader replay and tune
 * share, and the replay of all three formats under every policy that runs
 * in sim mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/registry.h"
#include "support/run.h"
#include "traces/trace.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Reads the whole file; returns the events read, or -1 with err. */
static int read_all(const char *path, char *err, size_t errlen, cmb_trace_counts *counts)
{
    cmb_trace_reader r;
    cmb_trace_event ev;
    int n = 0, rc;
    if (cmb_trace_open(&r, path, err, errlen))
        return -1;
    while ((rc = cmb_trace_next(&r, &ev, err, errlen)) == 1)
        n++;
    if (counts)
        *counts = r.counts;
    cmb_trace_close(&r);
    return rc < 0 ? -1 : n;
}

static void suite_format_good(void **state)
{
    (void)state;
    char path[512], err[512];
    cmb_trace_counts k;
    snprintf(path, sizeof path, "%s/good.trace", cmb_test_tmpdir());
    write_file(path, "# cumembench-trace 1\n# comment\n\na 1 100 0 10\na 2 200 1 -\nf 1 - 0 20\n"
                     "s - - -1 30\na 1 50 0 31\nf 2 - 1 -\nf 1 - 0 40\n");
    assert_int_equal(read_all(path, err, sizeof err, &k), 7);
    assert_int_equal(k.allocs, 3);
    assert_int_equal(k.frees, 3);
    assert_int_equal(k.syncs, 1);
    assert_int_equal(k.max_live_slots, 2);
}

static void suite_format_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *expect; /* a piece of the message */
        int line;
    } cases[] = {
        {"", "empty file", 0},
        {"hello\n", "not a trace", 1},
        {"# cumembench-trace 2\n", "not a trace", 1},
        {"# cumembench-trace 1\na 1 100 0 10", "truncated", 2},
        {"# cumembench-trace 1\na 1 100 0\n", "expected 5 fields", 2},
        {"# cumembench-trace 1\na 1 100 0 1 9\n", "expected 5 fields", 2},
        {"# cumembench-trace 1\nx 1 100 0 1\n", "unknown event", 2},
        {"# cumembench-trace 1\na 1 0 0 1\n", "bad size", 2},
        {"# cumembench-trace 1\na 1 -5 0 1\n", "bad size", 2},
        {"# cumembench-trace 1\na 1 999999999999999999 0 1\n", "bad size", 2},
        {"# cumembench-trace 1\na x 10 0 1\n", "bad block id", 2},
        {"# cumembench-trace 1\na 1 10 zz 1\n", "bad stream", 2},
        {"# cumembench-trace 1\na 1 10 0 5\na 2 10 0 4\n", "backwards", 3},
        {"# cumembench-trace 1\nf 7 - 0 1\n", "not live", 2},
        {"# cumembench-trace 1\na 1 10 0 1\nf 1 - 0 2\nf 1 - 0 3\n", "not live", 4},
        {"# cumembench-trace 1\na 1 10 0 1\na 1 10 0 2\n", "still live", 3},
        {"# cumembench-trace 1\nf 1 10 0 2\n", "no size field", 2},
        {"# cumembench-trace 1\ns 1 - 0 2\n", "no id or size", 2},
        {"# cumembench-trace 1\na 1 10 0 1\n\x01\x02\x03\n", "binary data", 3},
        {"# cumembench-trace 1\na 18446744073709551615 10 0 1\n", "block id 18446744073709551615 is out of range", 2},
    };
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/bad.trace", cmb_test_tmpdir());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path, cases[i].text);
        err[0] = '\0';
        assert_int_equal(read_all(path, err, sizeof err, NULL), -1);
        if (!strstr(err, cases[i].expect) || !strstr(err, path))
            fail_msg("case %zu: error '%s' lacks '%s' or the file name", i, err, cases[i].expect);
        if (cases[i].line) {
            char where[600];
            snprintf(where, sizeof where, "%s:%d:", path, cases[i].line);
            if (!strstr(err, where))
                fail_msg("case %zu: error '%s' does not name line %d", i, err, cases[i].line);
        }
    }
    /* a NUL byte */
    FILE *f = fopen(path, "wb");
    fwrite("# cumembench-trace 1\na 1\0 10 0 1\n", 1, 33, f);
    fclose(f);
    assert_int_equal(read_all(path, err, sizeof err, NULL), -1);
    assert_non_null(strstr(err, "binary data"));
    assert_int_equal(read_all("/nonexistent/x.trace", err, sizeof err, NULL), -1);
    assert_non_null(strstr(err, "cannot open"));
}

static void rmm_csv(void **state)
{
    (void)state;
    char path[512], err[512];
    cmb_trace_counts k;
    snprintf(path, sizeof path, "%s/log.csv", cmb_test_tmpdir());
    write_file(path, "Thread,Time,Action,Pointer,Size,Stream\n"
                     "1,23:59:59.900000,free,0x7e00,64,0x0\n"
                     "1,23:59:59.950000,allocate,0x7f00,256,0x0\n"
                     "2,23:59:59.960000,allocate failure,0x0,1099511627776,0x5\n"
                     "1,00:00:00.010000,allocate,0x8f00,1024,0x7f1c2c000b70\n"
                     "1,00:00:00.020000,free,0x7f00,256,0x0\n");
    cmb_trace_reader r;
    cmb_trace_event ev;
    assert_int_equal(cmb_trace_open(&r, path, err, sizeof err), 0);
    assert_int_equal(r.format, CMB_TRACE_RMM_CSV);
    assert_int_equal(cmb_trace_next(&r, &ev, err, sizeof err), 1);
    assert_int_equal(ev.op, CMB_TRACE_ALLOC);
    assert_int_equal(ev.size, 256);
    assert_int_equal(ev.t_ns, 50000000);
    assert_int_equal(cmb_trace_next(&r, &ev, err, sizeof err), 1);
    assert_int_equal(ev.stream, 0x7f1c2c000b70);
    assert_int_equal(ev.t_ns, 110000000); /* across midnight */
    assert_int_equal(cmb_trace_next(&r, &ev, err, sizeof err), 1);
    assert_int_equal(ev.op, CMB_TRACE_FREE);
    assert_int_equal(ev.size, 256);
    assert_int_equal(cmb_trace_next(&r, &ev, err, sizeof err), 0);
    k = r.counts;
    cmb_trace_close(&r);
    assert_int_equal(k.skipped_failures, 1);
    assert_int_equal(k.unknown_frees, 1);

    static const struct {
        const char *line;
        const char *expect;
    } bad[] = {
        {"1,12:00:00.000001,allocate,0x10,100", "6 comma-separated"},
        {"1,12:00:00.000001,allocate,0x10,100,0x0,7", "6 comma-separated"},
        {"1,25:00:00.000001,allocate,0x10,100,0x0", "bad time"},
        {"1,12:00:00.x,allocate,0x10,100,0x0", "bad time"},
        {"1,12:00:00.000001,allocate,16,100,0x0", "bad pointer"},
        {"1,12:00:00.000001,allocate,0x10,-1,0x0", "bad size"},
        {"1,12:00:00.000001,allocate,0x10,100,zero", "bad stream"},
        {"1,12:00:00.000001,reallocate,0x10,100,0x0", "unknown action"},
        {"t,12:00:00.000001,allocate,0x10,100,0x0", "bad thread"},
        {"1,12:00:00.000001,allocate,0x10,0,0x0", "0 bytes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "Thread,Time,Action,Pointer,Size,Stream\n%s\n", bad[i].line);
        write_file(path, text);
        assert_int_equal(read_all(path, err, sizeof err, NULL), -1);
        if (!strstr(err, bad[i].expect) || !strstr(err, ":2:"))
            fail_msg("rmm case %zu: '%s' lacks '%s' or the line", i, err, bad[i].expect);
    }
    write_file(path, "Thread,Time,Action,Pointer,Size\n");
    assert_int_equal(read_all(path, err, sizeof err, NULL), -1);
    assert_non_null(strstr(err, "not a trace"));
}

static void writer_round_trip(void **state)
{
    (void)state;
    char path[512], err[512];
    cmb_trace_writer w;
    snprintf(path, sizeof path, "%s/w.trace", cmb_test_tmpdir());
    assert_int_equal(cmb_trace_writer_open(&w, path, "test", err, sizeof err), 0);
    cmb_trace_write_alloc(&w, (void *)0x1000, 100, 0, 1);
    cmb_trace_write_alloc(&w, (void *)0x2000, 200, 2, 2);
    cmb_trace_write_free(&w, (void *)0x1000, 0, 3);
    cmb_trace_write_alloc(&w, (void *)0x1000, 300, 0, 4); /* reused pointer: a new id */
    cmb_trace_write_sync(&w, -1, 5);
    assert_false(cmb_test_exists(path)); /* appears only when complete */
    assert_int_equal(cmb_trace_writer_close(&w, err, sizeof err), 0);
    cmb_trace_counts k;
    assert_int_equal(read_all(path, err, sizeof err, &k), 5);
    assert_int_equal(k.allocs, 3);
    assert_int_equal(k.max_live_slots, 2);
}

/* Recording a churn case and replaying the trace gives the same traffic. */
static void record_then_replay(void **state)
{
    (void)state;
    char args[2048], out[16384], trace[512];
    const char *dir = cmb_test_tmpdir();
    snprintf(trace, sizeof trace, "%s/churn.trace", dir);
    snprintf(args, sizeof args,
             "--mode sim --scenario churn --allocator cuda --param n=500 --param max_size=8MiB "
             "--param dist=bimodal --param checkerboard=false --repetitions 1 --quiet "
             "--record-trace %s --out %s/a",
             trace, dir);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    snprintf(args, sizeof args,
             "--mode sim --scenario replay --allocator cuda --param trace=%s --param find_min_capacity=false "
             "--repetitions 1 --quiet --out %s/b",
             trace, dir);
    assert_int_equal(cmb_test_run(args, out, sizeof out), 0);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "a=$(grep ',peak_requested_bytes,' %s/a/results.csv | cut -d, -f12); "
             "b=$(grep ',peak_requested_bytes,' %s/b/results.csv | cut -d, -f12); "
             "test -n \"$a\" && test \"$a\" = \"$b\"",
             dir, dir);
    if (cmb_test_sh(cmd, out, sizeof out) != 0)
        fail_msg("record/replay peaks differ: %s", out);
}

/* The converter reproduces the committed samples from the shared pickles,
 * and refuses hostile or broken input with one line. */
static void torch_converter(void **state)
{
    (void)state;
    char cmd[4096], out[8192];
    const char *src = cmb_test_src();
    const char *dir = cmb_test_tmpdir();
    const char *names[] = {"default", "expandable"};
    for (int i = 0; i < 2; i++) {
        char pickle[1024];
        snprintf(pickle, sizeof pickle, "%s/../shared/data/traces/torch_mlp_sweep_%s.pickle", src, names[i]);
        if (!cmb_test_exists(pickle)) {
            print_message("skipping the shared pickle %s: not present\n", pickle);
            continue;
        }
        snprintf(cmd, sizeof cmd, "python3 %s/traces/torch_snapshot_to_trace.py --force %s %s/t.trace && cmp %s/t.trace %s/traces/samples/torch_mlp_sweep_%s.trace",
                 src, pickle, dir, dir, src, names[i]);
        if (cmb_test_sh(cmd, out, sizeof out) != 0)
            fail_msg("converter output differs from the committed sample: %s", out);
    }
    /* a pickle that references a class is refused, not executed */
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import pickle,os; pickle.dump({'device_traces': [[]], 'x': os.getcwd}, open('%s/evil.pickle','wb'))\" && "
             "python3 %s/traces/torch_snapshot_to_trace.py %s/evil.pickle %s/e.trace",
             dir, src, dir, dir);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "refusing"));
    snprintf(cmd, sizeof cmd, "head -c 100 %s/traces/samples/torch_mlp_sweep_default.trace > %s/cut.pickle; "
             "python3 %s/traces/torch_snapshot_to_trace.py %s/cut.pickle %s/c.trace", src, dir, src, dir, dir);
    assert_int_equal(cmb_test_sh(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "not a readable snapshot"));
}

/* The reader never holds more than its line limit: a 16 MiB line is
 * refused after 4096 bytes (it was read whole first, as a 1 GiB line or
 * /dev/zero grew the process by gigabytes), and special files are named
 * as such (/dev/zero was called empty). */
static void reader_memory_bounded(void **state)
{
    (void)state;
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/long.trace", cmb_test_tmpdir());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("# cumembench-trace 1\na 1 10 0 1\n", f);
    for (int i = 0; i < 16 << 10; i++)
        fprintf(f, "%01023d ", 0);
    fputs("\n", f);
    fclose(f);
    cmb_trace_reader r;
    cmb_trace_event ev;
    assert_int_equal(cmb_trace_open(&r, path, err, sizeof err), 0);
    assert_int_equal(cmb_trace_next(&r, &ev, err, sizeof err), 1);
    assert_int_equal(cmb_trace_next(&r, &ev, err, sizeof err), -1);
    if (!strstr(err, "line longer than 4096 bytes") || !strstr(err, ":3:"))
        fail_msg("%s", err);
    if (r.cap > 8192)
        fail_msg("the reader holds %zu bytes for one line", r.cap);
    cmb_trace_close(&r);
    assert_int_equal(cmb_trace_open(&r, "/dev/zero", err, sizeof err), -1);
    if (!strstr(err, "/dev/zero: a character device, not a trace file"))
        fail_msg("%s", err);
    assert_int_equal(cmb_trace_open(&r, cmb_test_tmpdir(), err, sizeof err), -1);
    if (!strstr(err, "a directory, not a trace file"))
        fail_msg("%s", err);
}

/* A trace on 20 streams, past the loader's first array: stream 0 holds
 * one large block throughout; then 2,600 blocks of 100 + i bytes, each
 * freed at once, on streams 100..119 in turn; then a device sync. */
static void write_many_streams(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("# cumembench-trace 1\na 0 1000000 0 -\n", f);
    for (int i = 0; i < 2600; i++)
        fprintf(f, "a 1 %d %d -\nf 1 - %d -\n", 100 + i, 100 + i % 20, 100 + i % 20);
    fputs("s - - -1 -\nf 0 - 0 -\n", f);
    fclose(f);
}

/* cmb_trace_load (replay's and tune's one loader): every event packed in
 * order, streams numbered by first use and folded past
 * CMB_TRACE_MAX_STREAMS, the peak of live requested bytes, the counts;
 * a malformed trace leaves nothing held. */
static void loader_packs_and_folds(void **state)
{
    (void)state;
    char path[512], err[512];
    cmb_trace_loaded t;
    snprintf(path, sizeof path, "%s/streams.trace", cmb_test_tmpdir());
    write_many_streams(path);
    assert_int_equal(cmb_trace_load(&t, path, err, sizeof err), 0);
    assert_int_equal(t.n, 2 * 2600 + 3);
    assert_int_equal(t.streams, CMB_TRACE_MAX_STREAMS);
    assert_int_equal(t.folded_streams, 1);
    assert_int_equal(t.peak_requested, 1000000 + 100 + 2599);
    assert_int_equal(t.counts.allocs, 2601);
    assert_int_equal(t.counts.frees, 2601);
    assert_int_equal(t.slots, 2);
    assert_int_equal(t.ev[0].op, CMB_TRACE_ALLOC);
    assert_int_equal(t.ev[0].stream, 0);
    assert_int_equal(t.ev[0].size, 1000000);
    for (int i = 0; i < 2600; i++) {
        const cmb_trace_packed *a = &t.ev[1 + 2 * i], *fr = &t.ev[2 + 2 * i];
        int k = i % 20, want = k < CMB_TRACE_MAX_STREAMS - 1 ? 1 + k : (100 + k) % CMB_TRACE_MAX_STREAMS;
        assert_int_equal(a->op, CMB_TRACE_ALLOC);
        assert_int_equal(a->size, 100 + i);
        assert_int_equal(fr->op, CMB_TRACE_FREE);
        assert_int_equal(fr->slot, a->slot);
        assert_int_equal(a->stream, want);
        assert_int_equal(fr->stream, want);
    }
    assert_int_equal(t.ev[t.n - 2].op, CMB_TRACE_SYNC);
    assert_int_equal(t.ev[t.n - 2].stream, -1);
    cmb_trace_unload(&t);
    assert_null(t.ev);
    snprintf(path, sizeof path, "%s/few.trace", cmb_test_tmpdir());
    write_file(path, "# cumembench-trace 1\na 1 100 7 -\na 2 50 3 -\nf 1 - 3 -\ns - - 7 -\nf 2 - 7 -\n");
    assert_int_equal(cmb_trace_load(&t, path, err, sizeof err), 0);
    assert_int_equal(t.streams, 2);
    assert_int_equal(t.folded_streams, 0);
    assert_int_equal(t.peak_requested, 150);
    assert_int_equal(t.ev[2].stream, 1);
    assert_int_equal(t.ev[3].stream, 0);
    cmb_trace_unload(&t);
    write_file(path, "# cumembench-trace 1\na 1 100 0 -\nf 2 - 0 -\n");
    assert_int_equal(cmb_trace_load(&t, path, err, sizeof err), -1);
    if (!strstr(err, "few.trace:3:"))
        fail_msg("%s", err);
    assert_null(t.ev);
    assert_int_equal(t.n, 0);
}

/* Every format replays under every allocator that runs in sim mode. */
static void all_formats_all_policies(void **state)
{
    (void)state;
    char args[4096], out[65536], list[2048] = "";
    for (size_t i = 0; i < cmb_allocator_count(); i++) {
        const cmb_allocator_entry *e = cmb_allocator_at(i);
        if (cmb_allocator_sim_skip_reason(e->methods))
            continue;
        if (list[0])
            strcat(list, ",");
        strcat(list, e->name);
    }
    const char *src = cmb_test_src();
    snprintf(args, sizeof args,
             "--mode sim --scenario replay --allocator %s --repetitions 1 --quiet --out %s/r "
             "--param trace=%s/traces/samples/torch_mlp_sweep_default.trace,%s/traces/samples/churn_small.trace,"
             "%s/traces/samples/churn_small_rmm.csv",
             list, cmb_test_tmpdir(), src, src, src);
    int rc = cmb_test_run(args, out, sizeof out);
    if (rc != 0)
        fail_msg("replay of the samples failed (%d): %s", rc, out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(suite_format_good),  cmocka_unit_test(suite_format_errors),
        cmocka_unit_test(rmm_csv),            cmocka_unit_test(writer_round_trip),
        cmocka_unit_test(record_then_replay), cmocka_unit_test(torch_converter),
        cmocka_unit_test(all_formats_all_policies), cmocka_unit_test(reader_memory_bounded),
        cmocka_unit_test(loader_packs_and_folds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
