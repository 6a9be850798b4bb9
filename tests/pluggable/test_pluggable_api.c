/* test_pluggable_api.c - libcmb_pluggable's C API over the sim upstream:
 * bad specs refused before anything runs, allocate/free/stats from several
 * threads at once, streams, peaks and their reset, out of memory, frees of
 * unknown pointers, and trace recording read back by the suite's reader.
 *
 * Instances are per device and live for the process, so each test uses
 * its own device ordinal (sim devices cost nothing). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "allocators/cmb_allocator.h"
#include "pluggable/cmb_pluggable.h"
#include "traces/trace.h"

#define MiB (1ull << 20)

static cmb_pluggable_memstats stats_of(int device)
{
    cmb_pluggable_memstats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    assert_int_equal(cmb_pluggable_stats(device, &s), 0);
    return s;
}

static void configure_ok(const char *spec)
{
    int rc = cmb_pluggable_configure(spec);
    if (rc)
        fail_msg("configure(%s): %s", spec, cmb_pluggable_last_error());
}

/* --- bad input ------------------------------------------------------------------- */

static void expect_refused(const char *spec, const char *words)
{
    assert_int_equal(cmb_pluggable_configure(spec), -1);
    const char *err = cmb_pluggable_last_error();
    if (!strstr(err, words))
        fail_msg("configure(%s): expected '%s' in: %s", spec, words, err);
    assert_null(strchr(err, '\n')); /* one line */
}

static void bad_specs(void **state)
{
    (void)state;
    expect_refused("", "no allocator spec");
    expect_refused("nope@sim", "unknown allocator 'nope'");
    expect_refused("bfc@gpu", "unknown upstream 'gpu'");
    expect_refused("bfc:allow_growth@sim", "not key=value");
    expect_refused("bfc:no_such_option=1@sim", "no_such_option");
    expect_refused("torch-caching:max_split_size_mb=lots@sim", "max_split_size_mb");
    expect_refused("torch-expandable@cuda", "needs the vmm upstream");
    expect_refused("external:/nonexistent/libx.so@sim", "cannot load external allocator");
    expect_refused("cuda-async@sim", "cannot run over @sim");
    unsetenv("CMB_PLUGGABLE_ALLOW_SIM");
    expect_refused("bfc@sim", "the sim upstream has no memory");
    setenv("CMB_PLUGGABLE_ALLOW_SIM", "1", 1);
    /* A refused spec leaves the previous one in place. */
    configure_ok("bfc@sim");
    expect_refused("nope", "unknown allocator");
    assert_string_equal(cmb_pluggable_spec(), "bfc@sim");
}

static void bad_calls(void **state)
{
    (void)state;
    cmb_pluggable_memstats s;
    memset(&s, 0, sizeof s);
    s.struct_size = 8; /* an older or newer caller's struct */
    assert_int_equal(cmb_pluggable_stats(0, &s), -1);
    s.struct_size = sizeof s;
    assert_int_equal(cmb_pluggable_stats(-1, &s), -1);
    assert_int_equal(cmb_pluggable_stats(CMB_PLUGGABLE_MAX_DEVICES, &s), -1);
    assert_null(cmb_pluggable_malloc(4096, CMB_PLUGGABLE_MAX_DEVICES, NULL));
    assert_null(cmb_pluggable_malloc(4096, -3, NULL));
    assert_int_equal(cmb_pluggable_reset_peaks(-2), -1);
    assert_int_equal(cmb_pluggable_trace_stop(), -1); /* not recording */
    assert_int_equal(cmb_pluggable_set_torch_oom(2), -1);
    assert_int_equal(cmb_pluggable_abi_version(), CMB_PLUGGABLE_ABI_VERSION);
    assert_int_equal(cmb_pluggable_memstats_size(), sizeof(cmb_pluggable_memstats));
    /* A device never used reads as zeros, inactive. */
    cmb_pluggable_memstats z = stats_of(40);
    assert_int_equal(z.active, 0);
    assert_int_equal(z.reserved_peak, 0);
}

/* --- allocation ---------------------------------------------------------------------- */

static void zero_and_unknown(void **state)
{
    (void)state;
    const int dev = 1;
    configure_ok("cupy@sim");
    assert_null(cmb_pluggable_malloc(0, dev, NULL)); /* as PyTorch's allocator for 0 bytes */
    cmb_pluggable_free(NULL, 0, dev, NULL);
    void *p = cmb_pluggable_malloc(1000, dev, NULL);
    assert_non_null(p);
    int x;
    cmb_pluggable_free(&x, 0, dev, NULL); /* never allocated here */
    cmb_pluggable_free(p, 1000, dev, NULL);
    cmb_pluggable_free(p, 1000, dev, NULL); /* twice */
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.active, 1);
    assert_int_equal(s.allocs, 1);
    assert_int_equal(s.frees, 1);
    assert_int_equal(s.bad_frees, 2);
    assert_int_equal(s.ooms, 0);
    assert_int_equal(s.requested_current, 0);
    assert_int_equal(s.requested_peak, 1000);
    assert_int_equal(s.blocks_peak, 1);
    /* CuPy's own rounding is 512 B: 1000 -> 1024 allocated at the peak. */
    assert_int_equal(s.allocated_peak, 1024);
    assert_true(s.reserved_peak >= 1024);
}

typedef struct worker {
    int device, id;
    long ops;
    uint64_t requested_max; /* bytes this thread ever held at once */
    int failures;
} worker;

/* Random allocate/free traffic with up to 32 live blocks, on two streams. */
static void *work(void *arg)
{
    worker *w = arg;
    void *live[32] = {0};
    size_t sz[32] = {0};
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1), held = 0;
    for (long i = 0; i < w->ops; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int k = (int)(rng % 32);
        if (live[k]) {
            cmb_pluggable_free(live[k], sz[k], w->device, NULL);
            held -= sz[k];
            live[k] = NULL;
        } else {
            sz[k] = 1 + (size_t)((rng >> 8) % (3 * MiB));
            void *stream = (void *)(uintptr_t)(0x1000 * (1 + (rng >> 40) % 2));
            live[k] = cmb_pluggable_malloc(sz[k], w->device, stream);
            if (!live[k]) {
                w->failures++;
                continue;
            }
            held += sz[k];
            if (held > w->requested_max)
                w->requested_max = held;
        }
    }
    for (int k = 0; k < 32; k++)
        if (live[k])
            cmb_pluggable_free(live[k], sz[k], w->device, NULL);
    return NULL;
}

static void run_workers(int device, int n, long ops, worker *w)
{
    pthread_t t[16];
    for (int i = 0; i < n; i++) {
        w[i] = (worker){.device = device, .id = i, .ops = ops};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

static void threads_share_a_device(void **state)
{
    (void)state;
    const int dev = 2, n = 8;
    const long ops = 20000;
    worker w[8];
    configure_ok("torch-caching@sim");
    run_workers(dev, n, ops, w);
    uint64_t sum_max = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(w[i].failures, 0);
        sum_max += w[i].requested_max;
    }
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.ooms, 0);
    assert_int_equal(s.bad_frees, 0);
    assert_int_equal(s.allocs, s.frees);
    assert_int_equal(s.requested_current, 0);
    assert_int_equal(s.blocks_current, 0);
    assert_int_equal(s.allocated_current, 0); /* the policy agrees nothing is live */
    assert_true(s.requested_peak > 0 && (uint64_t)s.requested_peak <= sum_max);
    assert_true(s.allocated_peak >= s.requested_peak);
    assert_true(s.reserved_peak >= s.allocated_peak);
    assert_true(s.upstream_allocs > 0);
    assert_int_equal(s.streams, 2);
    assert_true(s.blocks_peak <= 8 * 32);
}

static void streams_in_order(void **state)
{
    (void)state;
    const int dev = 3;
    configure_ok("rmm-pool:initial_pool_size=64MiB@sim");
    void *a = cmb_pluggable_malloc(4096, dev, (void *)0x50);
    void *b = cmb_pluggable_malloc(4096, dev, NULL);
    void *c = cmb_pluggable_malloc(4096, dev, (void *)0x60);
    void *d = cmb_pluggable_malloc(4096, dev, (void *)0x50);
    assert_true(a && b && c && d);
    assert_int_equal(stats_of(dev).streams, 3);
    cmb_pluggable_free(a, 0, dev, NULL);
    cmb_pluggable_free(b, 0, dev, NULL);
    cmb_pluggable_free(c, 0, dev, NULL);
    cmb_pluggable_free(d, 0, dev, NULL);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.reserved_current, 64 * MiB); /* RMM's pool never shrinks */
    assert_int_equal(s.requested_current, 0);
}

static void out_of_memory(void **state)
{
    (void)state;
    const int dev = 4;
    configure_ok("bfc@sim");
    assert_int_equal(cmb_pluggable_set_capacity(64 * MiB), 0);
    void *small = cmb_pluggable_malloc(MiB, dev, NULL);
    assert_non_null(small);
    assert_null(cmb_pluggable_malloc(256 * MiB, dev, NULL));
    const char *err = cmb_pluggable_last_error();
    if (!strstr(err, "out of memory on device 4") || !strstr(err, "bfc@sim"))
        fail_msg("OOM message: %s", err);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.ooms, 1);
    assert_int_equal(s.allocs, 1);
    assert_int_equal(s.device_total, 64 * MiB);
    assert_true(s.reserved_peak <= (int64_t)(64 * MiB));
    /* Still usable after the refusal. */
    void *again = cmb_pluggable_malloc(MiB, dev, NULL);
    assert_non_null(again);
    cmb_pluggable_free(small, 0, dev, NULL);
    cmb_pluggable_free(again, 0, dev, NULL);
    assert_int_equal(cmb_pluggable_set_capacity(0), 0);
}

/* CMB_EXPLAIN_OOM=1: the first failed call of a device explains itself on
 * stderr: free bytes by reason and the largest live blocks. */
static void explain_at_the_failing_call(void **state)
{
    (void)state;
    const int dev = 9; /* a device no other test created: it takes this spec and capacity */
    char path[] = "/tmp/cmb-explain-XXXXXX", text[4096];
    int fd = mkstemp(path), saved = dup(2);
    assert_true(fd >= 0 && saved >= 0);
    setenv("CMB_EXPLAIN_OOM", "1", 1);
    configure_ok("torch-caching@sim");
    assert_int_equal(cmb_pluggable_set_capacity(64 * MiB), 0);
    void *a = cmb_pluggable_malloc(5 * MiB, dev, NULL), *b = cmb_pluggable_malloc(5 * MiB, dev, NULL);
    assert_true(a && b);
    cmb_pluggable_free(a, 0, dev, NULL);
    fflush(stderr);
    assert_int_equal(dup2(fd, 2), 2);
    void *big = cmb_pluggable_malloc(50 * MiB, dev, NULL);
    fflush(stderr);
    dup2(saved, 2);
    assert_null(big);
    close(saved);
    unsetenv("CMB_EXPLAIN_OOM");
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    assert_true(n > 0);
    text[n] = 0;
    if (!strstr(text, "explain-oom: 50.00 MiB (rounded to 50.00 MiB); largest free block 10.00 MiB") || !strstr(text, "15.00 MiB  free blocks smaller than the request") ||
        !strstr(text, "5.00 MiB  live on stream"))
        fail_msg("explanation: %s", text);
    cmb_pluggable_free(b, 0, dev, NULL);
    assert_int_equal(cmb_pluggable_set_capacity(0), 0);
}

/* Sizes near SIZE_MAX: NULL with the reason under every policy, the
 * library's count of requested bytes untouched (it went negative when a
 * wrapped round-up served SIZE_MAX). */
static void huge_requests_refused(void **state)
{
    (void)state;
    static const char *specs[] = {"bfc@sim", "cuda@sim", "torch-caching@sim", "rmm-pool@sim", "arena@sim",
                                  "binning@sim", "cupy@sim", "buddy@sim", "cmb@sim"};
    static const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 100, SIZE_MAX / 2 + 1, ((size_t)1 << 48) + 1};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        const int dev = 20 + (int)i;
        configure_ok(specs[i]);
        void *live = cmb_pluggable_malloc(MiB, dev, NULL);
        assert_non_null(live);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            void *p = cmb_pluggable_malloc(sizes[k], dev, NULL);
            if (p)
                fail_msg("%s: malloc(%zu) returned %p", specs[i], sizes[k], p);
            if (!strstr(cmb_pluggable_last_error(), "256TiB"))
                fail_msg("%s: malloc(%zu): no reason: %s", specs[i], sizes[k], cmb_pluggable_last_error());
        }
        cmb_pluggable_memstats s = stats_of(dev);
        assert_int_equal(s.requested_current, (int64_t)MiB);
        assert_int_equal(s.ooms, 4);
        void *other = cmb_pluggable_malloc(MiB, dev, NULL);
        assert_non_null(other);
        assert_ptr_not_equal(other, live);
        cmb_pluggable_free(live, 0, dev, NULL);
        cmb_pluggable_free(other, 0, dev, NULL);
    }
}

/* A plug-in that hands out a block still live: the library refuses it. */
static void duplicate_pointer_refused(void **state)
{
    (void)state;
    const int dev = 40;
    char spec[1024];
    const char *lib = getenv("CMB_HOSTILE");
    assert_non_null(lib);
    snprintf(spec, sizeof spec, "external:%s:mode=duplicate:at=3@sim", lib);
    configure_ok(spec);
    void *a = cmb_pluggable_malloc(MiB, dev, NULL);
    void *b = cmb_pluggable_malloc(MiB, dev, NULL);
    assert_non_null(a);
    assert_non_null(b);
    void *c = cmb_pluggable_malloc(MiB, dev, NULL); /* the plug-in answers b again */
    if (c)
        fail_msg("the library handed out %p (a=%p b=%p)", c, a, b);
    if (!strstr(cmb_pluggable_last_error(), "still live"))
        fail_msg("no reason: %s", cmb_pluggable_last_error());
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.allocs, 2);
    assert_int_equal(s.requested_current, (int64_t)(2 * MiB));
    cmb_pluggable_free(a, 0, dev, NULL);
    cmb_pluggable_free(b, 0, dev, NULL);
    assert_int_equal(stats_of(dev).bad_frees, 0);
}

/* CMB_CAPACITY is read as the command line reads --capacity: "64MB" is
 * ambiguous, above 1TiB too large; each refuses every use with the reason.
 * The environment is read once per process: each value runs in a fresh
 * copy of this program (main's --env-capacity). */
static void capacity_environment(void **state)
{
    (void)state;
    static const struct {
        const char *value, *words;
    } cases[] = {{"64MB", "ambiguous"}, {"64mb", "ambiguous"}, {"16777215TiB", "at most 1TiB"},
                 {"2TiB", "at most 1TiB"}, {"64MiB", NULL}, {"67108864", NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[512], out[1024] = "";
        snprintf(cmd, sizeof cmd, "CMB_CAPACITY=%s /proc/%d/exe --env-capacity 2>&1", cases[i].value, (int)getpid());
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = '\0';
        int rc = pclose(f);
        if (cases[i].words ? rc == 0 || !strstr(out, cases[i].words) : rc != 0)
            fail_msg("CMB_CAPACITY=%s: exit %d: %s", cases[i].value, rc, out);
    }
}

/* One allocation under CMB_CAPACITY: exit 0 when it was served within
 * 64MiB, 1 with the reason otherwise. */
static int env_capacity_main(void)
{
    configure_ok("bfc@sim");
    void *p = cmb_pluggable_malloc(MiB, 0, NULL);
    if (!p) {
        printf("%s\n", cmb_pluggable_last_error());
        return 1;
    }
    return stats_of(0).device_total == (int64_t)(64 * MiB) ? 0 : 1;
}

/* A plug-in whose statistics are all 0xff bytes: none of them reaches the
 * program as a number (peaks of -1); the library's own counts stay. */
static void impossible_statistics_withheld(void **state)
{
    (void)state;
    const int dev = 41;
    char spec[1024];
    snprintf(spec, sizeof spec, "external:%s:mode=badstats:at=1@sim", getenv("CMB_HOSTILE"));
    configure_ok(spec);
    void *p = cmb_pluggable_malloc(MiB, dev, NULL);
    assert_non_null(p);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.valid & ~(uint32_t)CMB_STAT_RESERVED, 0);
    if (s.allocated_peak < 0 || s.allocated_current < 0 || s.reserved_peak < 0 || s.reserved_current < 0 ||
        s.largest_free < 0 || s.oom_retries < 0 || s.upstream_allocs < 0)
        fail_msg("an impossible statistic was published: allocated %lld/%lld reserved %lld/%lld",
                 (long long)s.allocated_current, (long long)s.allocated_peak, (long long)s.reserved_current,
                 (long long)s.reserved_peak);
    assert_int_equal(s.reserved_current, (int64_t)MiB); /* the upstream's own count */
    assert_int_equal(s.requested_current, (int64_t)MiB);
    cmb_pluggable_free(p, 0, dev, NULL);
}

static void peaks_and_reset(void **state)
{
    (void)state;
    const int dev = 5;
    configure_ok("cuda@sim"); /* reserved = live bytes exactly */
    void *big = cmb_pluggable_malloc(10 * MiB, dev, NULL);
    cmb_pluggable_free(big, 0, dev, NULL);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.reserved_peak, 10 * MiB);
    assert_int_equal(s.requested_peak, 10 * MiB);
    assert_int_equal(cmb_pluggable_reset_peaks(dev), 0);
    s = stats_of(dev);
    assert_int_equal(s.reserved_peak, 0);
    assert_int_equal(s.requested_peak, 0);
    assert_int_equal(s.allocated_peak, 0);
    void *one = cmb_pluggable_malloc(MiB, dev, NULL);
    s = stats_of(dev);
    assert_int_equal(s.reserved_peak, MiB);      /* below the all-time 10 MiB */
    assert_int_equal(s.allocated_peak, MiB);
    assert_int_equal(s.requested_peak, MiB);
    void *more = cmb_pluggable_malloc(20 * MiB, dev, NULL);
    s = stats_of(dev);
    assert_int_equal(s.reserved_peak, 21 * MiB); /* past it: the policy's own peak */
    cmb_pluggable_free(one, 0, dev, NULL);
    cmb_pluggable_free(more, 0, dev, NULL);
    assert_int_equal(cmb_pluggable_reset_peaks(-1), 0);
    s = stats_of(dev);
    assert_int_equal(s.reserved_peak, 0);
    assert_int_equal(s.blocks_peak, 0);
}

static void empty_cache_returns_memory(void **state)
{
    (void)state;
    const int dev = 6;
    configure_ok("torch-caching@sim");
    void *p = cmb_pluggable_malloc(5 * MiB, dev, NULL);
    cmb_pluggable_free(p, 0, dev, NULL);
    assert_int_equal(stats_of(dev).reserved_current, 20 * MiB); /* kept in its 20 MiB segment */
    assert_int_equal(cmb_pluggable_empty_cache(dev), 0);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.reserved_current, 0);
    assert_int_equal(s.upstream_frees, 1);
}

/* --- trace recording ------------------------------------------------------------------- */

typedef struct trace_summary {
    int events, allocs, frees;
    int64_t streams_max;
    uint64_t bytes;
} trace_summary;

static trace_summary read_back(const char *path)
{
    cmb_trace_reader r;
    cmb_trace_event ev;
    char err[640];
    trace_summary t = {0};
    int rc;
    if (cmb_trace_open(&r, path, err, sizeof err))
        fail_msg("%s", err);
    while ((rc = cmb_trace_next(&r, &ev, err, sizeof err)) == 1) {
        t.events++;
        if (ev.stream > t.streams_max)
            t.streams_max = ev.stream;
        if (ev.op == CMB_TRACE_ALLOC) {
            t.allocs++;
            t.bytes += ev.size;
        } else if (ev.op == CMB_TRACE_FREE) {
            t.frees++;
        }
    }
    cmb_trace_close(&r);
    if (rc < 0)
        fail_msg("%s", err);
    return t;
}

static void trace_round_trip(void **state)
{
    (void)state;
    const int dev = 7;
    char pattern[256], path[256];
    snprintf(pattern, sizeof pattern, "%s/pl-trace-%d-{device}.trace", getenv("CMB_TEST_TMP") ?: "/tmp",
             (int)getpid());
    snprintf(path, sizeof path, "%s/pl-trace-%d-%d.trace", getenv("CMB_TEST_TMP") ?: "/tmp", (int)getpid(),
             dev);
    configure_ok("bfc@sim");
    void *before = cmb_pluggable_malloc(3000, dev, NULL); /* not in the trace, nor its free */
    assert_int_equal(cmb_pluggable_trace_start(pattern), 0);
    assert_int_equal(cmb_pluggable_trace_start(pattern), -1); /* once at a time */
    void *a = cmb_pluggable_malloc(100, dev, NULL);
    void *b = cmb_pluggable_malloc(5000, dev, (void *)0x70);
    cmb_pluggable_free(before, 0, dev, NULL);
    cmb_pluggable_free(a, 0, dev, NULL);
    void *c = cmb_pluggable_malloc(7, dev, (void *)0x80);
    cmb_pluggable_free(b, 0, dev, NULL);
    assert_int_equal(access(path, F_OK), -1); /* only complete files appear */
    assert_int_equal(cmb_pluggable_trace_stop(), 0);
    trace_summary t = read_back(path);
    assert_int_equal(t.allocs, 3);
    assert_int_equal(t.frees, 2); /* c stays live: the format allows it */
    assert_int_equal(t.bytes, 100 + 5000 + 7);
    assert_int_equal(t.streams_max, 2); /* NULL = 0, then 0x70 = 1, 0x80 = 2 */
    cmb_pluggable_free(c, 0, dev, NULL);
    remove(path);
}

static void trace_from_threads(void **state)
{
    (void)state;
    const int dev = 8, n = 6;
    const long ops = 5000;
    char path[256];
    worker w[6];
    snprintf(path, sizeof path, "%s/pl-trace-threads-%d.trace", getenv("CMB_TEST_TMP") ?: "/tmp", (int)getpid());
    configure_ok("arena:arena_size=1GiB@sim");
    /* Without {device}, device 8 writes PATH.dev8. */
    assert_int_equal(cmb_pluggable_trace_start(path), 0);
    run_workers(dev, n, ops, w);
    assert_int_equal(cmb_pluggable_trace_stop(), 0);
    char dev_path[300];
    snprintf(dev_path, sizeof dev_path, "%s.dev%d", path, dev);
    trace_summary t = read_back(dev_path);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(t.allocs, s.allocs);
    assert_int_equal(t.frees, s.frees);
    assert_int_equal(t.allocs, t.frees);
    remove(dev_path);
}

static void trace_unwritable(void **state)
{
    (void)state;
    assert_int_equal(cmb_pluggable_trace_start("/nonexistent-dir/x.trace"), -1);
    if (!strstr(cmb_pluggable_last_error(), "cannot write /nonexistent-dir/x.trace.tmp"))
        fail_msg("%s", cmb_pluggable_last_error());
    /* Not recording afterwards. */
    assert_int_equal(cmb_pluggable_trace_stop(), -1);
}

int main(int argc, char **argv)
{
    setenv("CMB_PLUGGABLE_ALLOW_SIM", "1", 1);
    if (argc == 2 && !strcmp(argv[1], "--env-capacity"))
        return env_capacity_main();
    unsetenv("CMB_ALLOCATOR");
    unsetenv("CMB_TRACE");
    unsetenv("CMB_CAPACITY");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_specs),        cmocka_unit_test(bad_calls),
        cmocka_unit_test(zero_and_unknown), cmocka_unit_test(threads_share_a_device),
        cmocka_unit_test(streams_in_order), cmocka_unit_test(out_of_memory),
        cmocka_unit_test(peaks_and_reset),  cmocka_unit_test(empty_cache_returns_memory),
        cmocka_unit_test(trace_round_trip), cmocka_unit_test(trace_from_threads),
        cmocka_unit_test(trace_unwritable), cmocka_unit_test(explain_at_the_failing_call),
        cmocka_unit_test(huge_requests_refused),
        cmocka_unit_test(duplicate_pointer_refused), cmocka_unit_test(capacity_environment),
        cmocka_unit_test(impossible_statistics_withheld),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
