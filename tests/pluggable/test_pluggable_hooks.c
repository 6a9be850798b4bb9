/* test_pluggable_hooks.c - libcmb_pluggable's side of PyTorch's contract
 * beyond malloc and free, over the sim upstream: record_stream (a block
 * freed while a held stream's work may still read it is not reused until
 * that work is done, with the sim's events held pending), the private pools
 * of CUDA graphs, the memory fraction, the out-of-memory account, the
 * statistics with pools, and all of it from threads at once (the test that
 * ThreadSanitizer runs in CI).
 *
 * Instances are per device and live for the process: each test uses its
 * own device ordinal. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pluggable/cmb_pluggable.h"

#define MiB (1ull << 20)
#define STREAM(n) ((void *)(uintptr_t)(0x5000 + (n)))

static cmb_pluggable_memstats stats_of(int device)
{
    cmb_pluggable_memstats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    assert_int_equal(cmb_pluggable_stats(device, &s), 0);
    return s;
}

static void configure_ok(const char *spec, uint64_t capacity)
{
    if (cmb_pluggable_configure(spec) || cmb_pluggable_set_capacity(capacity))
        fail_msg("configure(%s): %s", spec, cmb_pluggable_last_error());
}

static void expect_error(const char *words)
{
    const char *err = cmb_pluggable_last_error();
    if (!strstr(err, words))
        fail_msg("expected '%s' in: %s", words, err);
    assert_null(strchr(err, '\n'));
}

/* --- record_stream ------------------------------------------------------------------ */

/* bfc ignores streams: without record_stream a freed block is the next
 * allocation's at once; with it, not before the other stream's work is done. */
static void record_stream_defers_reuse(void **state)
{
    (void)state;
    const int dev = 1;
    void *a = STREAM(1), *b = STREAM(2);
    configure_ok("bfc@sim", 0);
    void *p = cmb_torch_malloc(MiB, dev, a);
    assert_non_null(p);
    cmb_torch_free(p, MiB, dev, a);
    void *q = cmb_torch_malloc(MiB, dev, a);
    assert_ptr_equal(q, p); /* the control: reused at once */

    assert_int_equal(cmb_pluggable_record_stream(q, dev, b), 0);
    assert_int_equal(cmb_pluggable_sim_hold_stream(b, 1), 0); /* b's kernels still read q */
    cmb_torch_free(q, MiB, dev, a);
    void *r = cmb_torch_malloc(MiB, dev, a);
    assert_non_null(r);
    assert_ptr_not_equal(r, q); /* not reused while b's work is pending */
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.requested_current, (int64_t)MiB); /* q is dead to the program */
    assert_true(s.allocated_current >= (int64_t)(2 * MiB)); /* but still held */

    assert_int_equal(cmb_pluggable_sim_hold_stream(b, 0), 0); /* b's work done */
    void *t = cmb_torch_malloc(MiB, dev, a);
    assert_ptr_equal(t, q); /* back to the policy at the next allocation */
    cmb_torch_free(r, MiB, dev, a);
    cmb_torch_free(t, MiB, dev, a);
    s = stats_of(dev);
    assert_int_equal(s.allocated_current, 0);
    assert_int_equal(s.bad_frees, 0);
}

/* Recorded on its own stream only: nothing to wait for. */
static void record_on_own_stream_is_free(void **state)
{
    (void)state;
    const int dev = 2;
    void *a = STREAM(3);
    configure_ok("bfc@sim", 0);
    void *p = cmb_torch_malloc(MiB, dev, a);
    assert_int_equal(cmb_pluggable_record_stream(p, dev, a), 0);
    assert_int_equal(cmb_pluggable_sim_hold_stream(a, 1), 0);
    cmb_torch_free(p, MiB, dev, a);
    void *q = cmb_torch_malloc(MiB, dev, a);
    assert_ptr_equal(q, p);
    assert_int_equal(cmb_pluggable_sim_hold_stream(a, 0), 0);
    cmb_torch_free(q, MiB, dev, a);
    assert_int_equal(cmb_pluggable_record_stream(NULL, dev, a), 0);
    assert_int_equal(cmb_pluggable_record_stream(p, 50, a), -1); /* no instance there */
    /* PyTorch's free of a pointer never allocated here: counted, not a free */
    int x;
    cmb_pluggable_memstats before = stats_of(dev);
    cmb_torch_free(&x, 4096, dev, a);
    cmb_pluggable_memstats after = stats_of(dev);
    assert_int_equal(after.bad_frees, before.bad_frees + 1);
    assert_int_equal(after.frees, before.frees);
    assert_int_equal(after.requested_current, before.requested_current);
}

/* An allocation that would fail waits for the pending work first, as
 * PyTorch's allocator synchronizes its events before it gives up. */
static void out_of_memory_waits_for_deferred(void **state)
{
    (void)state;
    const int dev = 3;
    void *a = STREAM(4), *b = STREAM(5);
    configure_ok("cuda@sim", 3 * MiB); /* cudaMalloc/cudaFree per block: nothing cached */
    void *p = cmb_torch_malloc(2 * MiB, dev, a);
    assert_non_null(p);
    assert_int_equal(cmb_pluggable_record_stream(p, dev, b), 0);
    assert_int_equal(cmb_pluggable_sim_hold_stream(b, 1), 0);
    cmb_torch_free(p, 2 * MiB, dev, a);
    void *q = cmb_torch_malloc(2 * MiB, dev, a);
    assert_non_null(q); /* fits only once p went back */
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.ooms, 0);
    assert_true(s.reserved_peak <= (int64_t)(3 * MiB));
    assert_int_equal(cmb_pluggable_sim_hold_stream(b, 0), 0);
    cmb_torch_free(q, 2 * MiB, dev, a);
}

/* The CuPy and generic pair (sizes from the library's table) defer too. */
static void record_stream_generic_pair(void **state)
{
    (void)state;
    const int dev = 4;
    void *b = STREAM(6);
    configure_ok("bfc@sim", 0);
    void *p = cmb_cupy_malloc(NULL, MiB, dev);
    assert_int_equal(cmb_pluggable_record_stream(p, dev, b), 0);
    assert_int_equal(cmb_pluggable_sim_hold_stream(b, 1), 0);
    cmb_cupy_free(NULL, p, dev);
    void *q = cmb_cupy_malloc(NULL, MiB, dev);
    assert_ptr_not_equal(q, p);
    assert_int_equal(cmb_pluggable_sim_hold_stream(b, 0), 0);
    cmb_pluggable_empty_cache(dev); /* collects the deferred block too */
    cmb_cupy_free(NULL, q, dev);
    assert_int_equal(stats_of(dev).allocated_current, 0);
}

/* --- graph pools ---------------------------------------------------------------------- */

static int only_stream(void *ctx, void *stream)
{
    return stream == ctx;
}

static int filter_freed;
static void count_free(void *ctx)
{
    (void)ctx;
    filter_freed++;
}

static void graph_pool_private(void **state)
{
    (void)state;
    const int dev = 5;
    void *cap = STREAM(7), *other = STREAM(8);
    configure_ok("torch-caching@sim", 0);
    void *before = cmb_torch_malloc(MiB, dev, other);
    cmb_torch_free(before, MiB, dev, other); /* cached by the policy */
    int64_t reserved0 = stats_of(dev).reserved_current;

    filter_freed = 0;
    assert_int_equal(cmb_pluggable_pool_begin(dev, 1, 0, only_stream, cap, count_free), 0);
    void *g1 = cmb_torch_malloc(MiB, dev, cap);    /* captured: the pool's */
    void *n1 = cmb_torch_malloc(MiB, dev, other);  /* another stream: the policy's */
    assert_non_null(g1);
    assert_ptr_not_equal(g1, before); /* never the policy's cached block */
    assert_ptr_equal(n1, before);
    cmb_pluggable_memstats s = stats_of(dev);
    /* The pool's instance of torch-caching: a 1 MiB block from a 2 MiB segment
     * (kSmallBuffer, c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.11). */
    assert_int_equal(s.reserved_current, reserved0 + (int64_t)(2 * MiB));
    assert_int_equal(s.allocated_current, (int64_t)(2 * MiB));
    cmb_torch_free(g1, MiB, dev, cap);
    void *g2 = cmb_torch_malloc(MiB, dev, cap); /* the pool reuses its own */
    assert_ptr_equal(g2, g1);
    assert_int_equal(cmb_pluggable_pool_end(dev, 1, 0), 0);
    assert_int_equal(filter_freed, 1);

    void *after = cmb_torch_malloc(MiB, dev, cap); /* capture over: the policy's */
    assert_ptr_not_equal(after, g1);
    cmb_torch_free(after, MiB, dev, cap);
    cmb_torch_free(n1, MiB, dev, other);
    /* Released while g2 is live: its memory stays until g2 is freed. */
    int64_t reserved1 = stats_of(dev).reserved_current;
    assert_int_equal(cmb_pluggable_pool_release(dev, 1, 0), 0);
    assert_int_equal(stats_of(dev).reserved_current, reserved1);
    cmb_torch_free(g2, MiB, dev, cap);
    s = stats_of(dev);
    assert_int_equal(s.allocated_current, 0);
    assert_int_equal(s.bad_frees, 0);
    assert_int_equal(s.reserved_current, reserved1 - (int64_t)(2 * MiB)); /* the pool's segment went back */
    assert_int_equal(cmb_pluggable_pool_end(dev, 1, 0), -1); /* gone */
    assert_int_equal(cmb_pluggable_pool_release(dev, 9, 9), -1);
}

/* A MemPool context: no filter, every allocation of the device. The pool
 * lives on after its end; a later begin with the same id reuses it. */
static void mem_pool_context(void **state)
{
    (void)state;
    const int dev = 6;
    configure_ok("rmm-pool@sim", 0);
    assert_int_equal(cmb_pluggable_pool_begin(dev, 0, 7, NULL, NULL, NULL), 0);
    void *p = cmb_torch_malloc(4096, dev, NULL);
    assert_int_equal(cmb_pluggable_pool_end(dev, 0, 7), 0);
    cmb_torch_free(p, 4096, dev, NULL);
    assert_int_equal(cmb_pluggable_pool_begin(dev, 0, 7, NULL, NULL, NULL), 0);
    void *q = cmb_torch_malloc(4000, dev, NULL); /* rounds to the same 4096 */
    assert_ptr_equal(q, p);
    assert_int_equal(cmb_pluggable_pool_end(dev, 0, 7), 0);
    cmb_torch_free(q, 4000, dev, NULL);
    assert_int_equal(cmb_pluggable_pool_release(dev, 0, 7), 0);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.allocated_current, 0);
    assert_int_equal(s.allocs, s.frees);
}

/* The generic pair (no size at free) inside a pool context. */
static void generic_pair_in_a_pool(void **state)
{
    (void)state;
    const int dev = 14;
    configure_ok("bfc@sim", 0);
    assert_int_equal(cmb_pluggable_pool_begin(dev, 8, 8, NULL, NULL, NULL), 0);
    void *p = cmb_pluggable_malloc(MiB, dev, NULL);
    assert_non_null(p);
    assert_int_equal(cmb_pluggable_pool_end(dev, 8, 8), 0);
    cmb_pluggable_free(p, 0, dev, NULL);
    assert_int_equal(cmb_pluggable_pool_release(dev, 8, 8), 0);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.bad_frees, 0);
    assert_int_equal(s.allocated_current, 0);
    assert_int_equal(s.requested_current, 0);
}

/* record_stream during a capture: the free's events wait for its end. */
static void deferred_across_capture(void **state)
{
    (void)state;
    const int dev = 7;
    void *a = STREAM(9), *b = STREAM(10), *cap = STREAM(11);
    configure_ok("bfc@sim", 0);
    void *p = cmb_torch_malloc(MiB, dev, a);
    assert_int_equal(cmb_pluggable_record_stream(p, dev, b), 0);
    assert_int_equal(cmb_pluggable_pool_begin(dev, 2, 0, only_stream, cap, NULL), 0);
    cmb_torch_free(p, MiB, dev, a); /* no event may be recorded now */
    void *q = cmb_torch_malloc(MiB, dev, a);
    assert_ptr_not_equal(q, p);
    assert_int_equal(cmb_pluggable_pool_end(dev, 2, 0), 0); /* records b's event: b is idle */
    void *r = cmb_torch_malloc(MiB, dev, a);
    assert_ptr_equal(r, p);
    cmb_torch_free(q, MiB, dev, a);
    cmb_torch_free(r, MiB, dev, a);
    assert_int_equal(cmb_pluggable_pool_release(dev, 2, 0), 0);
}

/* While a graph captures, a free of a policy's block (no record_stream)
 * waits for the capture's end: the policy's own free may touch events. */
static void policy_frees_wait_for_capture_end(void **state)
{
    (void)state;
    const int dev = 9;
    void *a = STREAM(12), *cap = STREAM(13);
    configure_ok("bfc@sim", 0);
    void *p = cmb_torch_malloc(MiB, dev, a);
    assert_int_equal(cmb_pluggable_pool_begin(dev, 4, 0, only_stream, cap, NULL), 0);
    cmb_torch_free(p, MiB, dev, a);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.requested_current, 0);
    assert_int_equal(s.allocated_current, (int64_t)MiB); /* the policy has not seen the free yet */
    void *q = cmb_torch_malloc(MiB, dev, a);             /* not captured: the policy's, not p */
    assert_ptr_not_equal(q, p);
    void *g = cmb_torch_malloc(MiB, dev, cap);
    cmb_torch_free(g, MiB, dev, cap); /* a pool's block goes back to its pool at once */
    assert_int_equal(stats_of(dev).allocated_current, (int64_t)(2 * MiB));
    assert_int_equal(cmb_pluggable_pool_end(dev, 4, 0), 0);
    assert_int_equal(stats_of(dev).allocated_current, (int64_t)MiB); /* p went back at the end */
    cmb_torch_free(q, MiB, dev, a);
    assert_int_equal(cmb_pluggable_pool_release(dev, 4, 0), 0);
    s = stats_of(dev);
    assert_int_equal(s.allocated_current, 0);
    assert_int_equal(s.bad_frees, 0);
}

/* Issue 27's GPU failure: under every policy over the cuda upstream a
 * capture ended at the pool's first segment (a cudaMalloc in global capture
 * mode). Over the sim, a call a capture forbids is counted: upstream
 * allocations run in relaxed mode, and no event is recorded, queried or
 * waited for, no memory given back, until the capture ends, although a
 * record_stream free with a pending event and a policy at its cap (whose
 * retry would collect it) are there to tempt it. */
static void capture_makes_no_forbidden_call(void **state)
{
    (void)state;
    const int dev = 21;
    void *a = STREAM(30), *b = STREAM(31), *cap = STREAM(32);
    configure_ok("torch-caching@sim", 48 * MiB);
    void *p = cmb_torch_malloc(2 * MiB, dev, a);
    assert_int_equal(cmb_pluggable_record_stream(p, dev, b), 0);
    assert_int_equal(cmb_pluggable_sim_hold_stream(b, 1), 0);
    cmb_torch_free(p, 2 * MiB, dev, a); /* deferred, its event pending */
    assert_int_equal(cmb_pluggable_sim_capture_faults(dev), 0);

    assert_int_equal(cmb_pluggable_pool_begin(dev, 21, 0, only_stream, cap, NULL), 0);
    void *g1 = cmb_torch_malloc(MiB, dev, cap);  /* a new segment from the upstream */
    void *g2 = cmb_torch_malloc(MiB, dev, cap);
    void *n1 = cmb_torch_malloc(MiB, dev, a);    /* not captured: the policy's */
    void *big = cmb_torch_malloc(30 * MiB, dev, a); /* over the cap: no wait for b now */
    assert_non_null(g1);
    assert_non_null(g2);
    assert_non_null(n1);
    assert_null(big);
    cmb_torch_free(g1, MiB, dev, cap);
    cmb_torch_free(n1, MiB, dev, a);
    assert_int_equal(cmb_pluggable_sim_capture_faults(dev), 0);
    assert_int_equal(cmb_pluggable_pool_end(dev, 21, 0), 0);

    assert_int_equal(cmb_pluggable_sim_hold_stream(b, 0), 0);
    cmb_torch_free(g2, MiB, dev, cap);
    assert_int_equal(cmb_pluggable_pool_release(dev, 21, 0), 0);
    void *q = cmb_torch_malloc(MiB, dev, a); /* collects p's free: b is done */
    cmb_torch_free(q, MiB, dev, a);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.allocated_current, 0);
    assert_int_equal(s.bad_frees, 0);
    assert_int_equal(cmb_pluggable_sim_capture_faults(dev), 0);
    assert_int_equal(cmb_pluggable_sim_capture_faults(63), -1);
}

/* The GPU's graph check under cmb@vmm: after the graph was deleted the
 * capture stream's cuBLAS workspace, allocated during the capture and kept
 * by PyTorch until cleared, held its pool. Released with a block live, the
 * pool keeps its segments; the block's free gives them all back; eager
 * allocations between replays (other streams, or the capture stream after
 * the end) are the policy's, and a policy free held back by the capture
 * reaches the policy at the end. */
static void graph_pool_released_with_live_block(void **state)
{
    (void)state;
    const int dev = 22;
    void *cap = STREAM(40), *main_s = STREAM(41);
    configure_ok("cmb@sim", 0);
    void *w = cmb_torch_malloc(4 * MiB, dev, main_s);
    void *x = cmb_torch_malloc(MiB, dev, main_s);
    cmb_pluggable_memstats s0 = stats_of(dev);
    assert_int_equal(cmb_pluggable_pool_begin(dev, 22, 0, only_stream, cap, NULL), 0);
    void *ws = cmb_torch_malloc(32 * MiB, dev, cap); /* the capture stream's workspace */
    void *tmp = cmb_torch_malloc(2 * MiB, dev, cap);
    void *out = cmb_torch_malloc(MiB, dev, cap);
    cmb_torch_free(tmp, 2 * MiB, dev, cap);
    cmb_torch_free(x, MiB, dev, main_s); /* a policy block: held back until the end */
    assert_int_equal(cmb_pluggable_pool_end(dev, 22, 0), 0);
    assert_int_equal(stats_of(dev).allocated_current, s0.allocated_current - (int64_t)MiB + (int64_t)(33 * MiB));
    void *ref = cmb_torch_malloc(MiB, dev, main_s); /* eager between replays: the policy's */
    void *ref2 = cmb_torch_malloc(2 * MiB, dev, cap);
    assert_ptr_not_equal(ref2, tmp);
    cmb_torch_free(ref, MiB, dev, main_s);
    cmb_torch_free(ref2, 2 * MiB, dev, cap);
    cmb_torch_free(out, MiB, dev, cap);
    assert_int_equal(cmb_pluggable_pool_release(dev, 22, 0), 0); /* del g: ws still live */
    cmb_pluggable_memstats s1 = stats_of(dev);
    assert_true(s1.reserved_current >= s0.reserved_current + (int64_t)(35 * MiB));
    cmb_torch_free(ws, 32 * MiB, dev, cap); /* clearing the workspaces */
    cmb_pluggable_memstats s2 = stats_of(dev);
    assert_int_equal(s2.allocated_current, s0.allocated_current - (int64_t)MiB);
    /* The pool's instance closed: its 35 MiB and its pages' rounding went back. */
    assert_true(s2.reserved_current <= s1.reserved_current - (int64_t)(35 * MiB));
    assert_true(s2.reserved_current >= s0.reserved_current);
    assert_int_equal(s2.bad_frees, 0);
    cmb_torch_free(w, 4 * MiB, dev, main_s);
    assert_int_equal(stats_of(dev).allocated_current, 0);
}

/* Serving under cmb@vmm: every capture ran out of memory while the policy
 * held gigabytes free. A pool's allocation the upstream refuses asks the
 * policy to release its cached memory and retries (over vmm and the sim;
 * over cuda cudaFree would end the capture). */
static void pool_takes_the_policys_cache(void **state)
{
    (void)state;
    const int dev = 23;
    void *a = STREAM(50), *cap = STREAM(51);
    configure_ok("torch-caching@sim", 64 * MiB);
    void *big = cmb_torch_malloc(40 * MiB, dev, a);
    void *keep = cmb_torch_malloc(4 * MiB, dev, a);
    assert_non_null(big);
    cmb_torch_free(big, 40 * MiB, dev, a); /* cached by the policy */
    cmb_pluggable_memstats s0 = stats_of(dev);
    assert_true(s0.reserved_current >= (int64_t)(40 * MiB));
    assert_int_equal(cmb_pluggable_pool_begin(dev, 23, 0, only_stream, cap, NULL), 0);
    void *g = cmb_torch_malloc(30 * MiB, dev, cap); /* 30 MiB more than the cap leaves */
    assert_non_null(g);
    cmb_pluggable_memstats s1 = stats_of(dev);
    assert_true(s1.reserved_current <= (int64_t)(64 * MiB));
    assert_true(s1.reserved_current < s0.reserved_current + (int64_t)(30 * MiB)); /* the cache went */
    assert_int_equal(s1.ooms, s0.ooms);
    assert_int_equal(s1.oom_retries, s0.oom_retries + 1);
    assert_int_equal(cmb_pluggable_sim_capture_faults(dev), 0);
    /* The cap itself: nothing left to release, one line that says so. */
    assert_null(cmb_torch_malloc(40 * MiB, dev, cap));
    expect_error("after the policy released its cached memory");
    assert_int_equal(cmb_pluggable_pool_end(dev, 23, 0), 0);
    cmb_torch_free(g, 30 * MiB, dev, cap);
    cmb_torch_free(keep, 4 * MiB, dev, a);
    assert_int_equal(cmb_pluggable_pool_release(dev, 23, 0), 0);
    assert_int_equal(stats_of(dev).allocated_current, 0);
}

/* Serving captures its decode graphs largest batch first into one pool: a
 * pool that is an instance of the policy reuses the 16 MiB capture's freed
 * memory, split, for the 8 and 4 MiB ones (as PyTorch's private pools do),
 * where a pool reusing only equal sizes would need their sum. */
static void captures_reuse_one_pool(void **state)
{
    (void)state;
    static const char *specs[] = {"torch-caching@sim", "cmb@sim"};
    for (int i = 0; i < 2; i++) {
        const int dev = 30 + i;
        void *cap = STREAM(60), *other = STREAM(61);
        configure_ok(specs[i], 0);
        void *warm = cmb_torch_malloc(MiB, dev, other); /* the device's instance exists */
        int64_t reserved0 = stats_of(dev).reserved_current;
        for (uint64_t size = 16 * MiB; size >= 4 * MiB; size /= 2) {
            assert_int_equal(cmb_pluggable_pool_begin(dev, 30, 0, only_stream, cap, NULL), 0);
            void *a = cmb_torch_malloc(size, dev, cap);
            assert_non_null(a);
            assert_int_equal(stats_of(dev).allocated_current, (int64_t)(MiB + size));
            cmb_torch_free(a, size, dev, cap); /* freed during its capture: the pool's again */
            assert_int_equal(cmb_pluggable_pool_end(dev, 30, 0), 0);
        }
        cmb_pluggable_memstats s = stats_of(dev);
        /* The largest capture's 16 MiB, plus at most one 2 MiB page or
         * segment of rounding; equal sizes only would need 28 MiB. */
        if (s.reserved_current - reserved0 < (int64_t)(16 * MiB) || s.reserved_current - reserved0 > (int64_t)(18 * MiB))
            fail_msg("%s: the pool reserved %lld B", specs[i], (long long)(s.reserved_current - reserved0));
        assert_int_equal(s.allocated_current, (int64_t)MiB);
        assert_int_equal(cmb_pluggable_sim_capture_faults(dev), 0);
        assert_int_equal(cmb_pluggable_pool_release(dev, 30, 0), 0); /* empty: its memory goes back */
        s = stats_of(dev);
        assert_int_equal(s.reserved_current, reserved0);
        assert_int_equal(s.bad_frees, 0);
        assert_int_equal(cmb_pluggable_pool_end(dev, 30, 0), -1); /* gone */
        cmb_torch_free(warm, MiB, dev, other);
    }
}

/* A pool's instance draws on the device's memory: under CMB_CAPACITY, what
 * the device's policy holds live leaves the pool the rest, no more. */
static void pool_counts_against_the_cap(void **state)
{
    (void)state;
    const int dev = 32;
    void *a = STREAM(62), *cap = STREAM(63);
    configure_ok("cmb@sim", 64 * MiB);
    void *live = cmb_torch_malloc(40 * MiB, dev, a);
    assert_non_null(live);
    assert_int_equal(cmb_pluggable_pool_begin(dev, 32, 0, only_stream, cap, NULL), 0);
    assert_null(cmb_torch_malloc(30 * MiB, dev, cap));
    expect_error("out of memory on device 32");
    void *g = cmb_torch_malloc(16 * MiB, dev, cap);
    assert_non_null(g);
    assert_int_equal(cmb_pluggable_pool_end(dev, 32, 0), 0);
    cmb_torch_free(g, 16 * MiB, dev, cap);
    assert_int_equal(cmb_pluggable_pool_release(dev, 32, 0), 0);
    cmb_torch_free(live, 40 * MiB, dev, a);
    assert_int_equal(stats_of(dev).allocated_current, 0);

    /* The memory fraction caps the pool's bytes and the policy's together. */
    const int dev2 = 33;
    assert_int_equal(cmb_pluggable_pool_begin(dev2, 33, 0, only_stream, cap, NULL), 0);
    g = cmb_torch_malloc(16 * MiB, dev2, cap);
    assert_non_null(g);
    assert_int_equal(cmb_pluggable_pool_end(dev2, 33, 0), 0);
    assert_int_equal(cmb_pluggable_set_memory_fraction(0.5, dev2), 0); /* 32 MiB, 16 of them the pool's */
    assert_null(cmb_torch_malloc(20 * MiB, dev2, a));
    expect_error("out of memory on device 33");
    live = cmb_torch_malloc(12 * MiB, dev2, a);
    assert_non_null(live);
    cmb_torch_free(live, 12 * MiB, dev2, a);
    cmb_torch_free(g, 16 * MiB, dev2, cap);
    assert_int_equal(cmb_pluggable_pool_release(dev2, 33, 0), 0);
    assert_int_equal(stats_of(dev2).allocated_current, 0);
    assert_int_equal(cmb_pluggable_set_memory_fraction(1, dev2), 0);
    cmb_pluggable_set_capacity(0);
}

/* A policy whose second instance cannot open (rmm-pool taking 48 of the
 * device's 64 MiB at creation): the pool says so and serves its blocks
 * from segments, reused by requests of the same size. */
static void pool_without_an_instance_uses_segments(void **state)
{
    (void)state;
    const int dev = 34;
    void *a = STREAM(64), *cap = STREAM(65);
    configure_ok("rmm-pool:initial_pool_size=48MiB@sim", 64 * MiB);
    void *warm = cmb_torch_malloc(MiB, dev, a);
    assert_non_null(warm);
    int64_t reserved0 = stats_of(dev).reserved_current;
    assert_int_equal(cmb_pluggable_pool_begin(dev, 34, 0, only_stream, cap, NULL), 0);
    void *g = cmb_torch_malloc(4 * MiB, dev, cap);
    assert_non_null(g);
    expect_error("a graph pool's own instance of rmm-pool");
    cmb_torch_free(g, 4 * MiB, dev, cap);
    assert_ptr_equal(cmb_torch_malloc(4 * MiB, dev, cap), g); /* the same size: its segment */
    void *h = cmb_torch_malloc(2 * MiB, dev, cap);             /* another: a segment more */
    assert_non_null(h);
    assert_int_equal(stats_of(dev).reserved_current, reserved0 + (int64_t)(6 * MiB));
    cmb_torch_free(g, 4 * MiB, dev, cap);
    cmb_torch_free(h, 2 * MiB, dev, cap);
    assert_int_equal(cmb_pluggable_pool_end(dev, 34, 0), 0);
    assert_int_equal(cmb_pluggable_pool_release(dev, 34, 0), 0);
    assert_int_equal(stats_of(dev).reserved_current, reserved0);
    cmb_torch_free(warm, MiB, dev, a);
    assert_int_equal(stats_of(dev).allocated_current, 0);
    cmb_pluggable_set_capacity(0);
}

/* --- memory fraction ------------------------------------------------------------------ */

static void memory_fraction_caps(void **state)
{
    (void)state;
    const int dev = 8;
    configure_ok("cuda@sim", 64 * MiB);
    assert_int_equal(cmb_pluggable_set_memory_fraction(1.5, dev), -1);
    expect_error("fraction is in [0, 1]");
    assert_int_equal(cmb_pluggable_set_memory_fraction(0.25, dev), 0); /* before the first allocation */
    void *p = cmb_torch_malloc(12 * MiB, dev, NULL);
    assert_non_null(p);
    assert_null(cmb_torch_malloc(8 * MiB, dev, NULL)); /* 20 MiB > 16 MiB */
    expect_error("out of memory on device 8");
    assert_int_equal(stats_of(dev).device_total, (int64_t)(16 * MiB));
    assert_int_equal(cmb_pluggable_set_memory_fraction(0.5, dev), 0); /* on a live instance */
    void *q = cmb_torch_malloc(8 * MiB, dev, NULL);
    assert_non_null(q);
    assert_null(cmb_torch_malloc(16 * MiB, dev, NULL));
    assert_int_equal(cmb_pluggable_set_memory_fraction(1, dev), 0); /* back to CMB_CAPACITY's 64 MiB */
    void *r = cmb_torch_malloc(16 * MiB, dev, NULL);
    assert_non_null(r);
    assert_int_equal(stats_of(dev).device_total, (int64_t)(64 * MiB));
    cmb_torch_free(p, 12 * MiB, dev, NULL);
    cmb_torch_free(q, 8 * MiB, dev, NULL);
    cmb_torch_free(r, 16 * MiB, dev, NULL);
    cmb_pluggable_set_capacity(0);
}

/* --- out of memory -------------------------------------------------------------------- */

/* A request beyond the whole device is out of memory under every policy,
 * never "CUDA error", with the account. */
static void larger_than_the_device(void **state)
{
    (void)state;
    static const char *specs[] = {"rmm-pool@sim", "torch-caching@sim", "bfc@sim", "cmb@sim"};
    for (int i = 0; i < 4; i++) {
        const int dev = 10 + i;
        configure_ok(specs[i], 0);
        assert_null(cmb_torch_malloc(16ull << 40, dev, NULL));
        char want[128];
        snprintf(want, sizeof want, "out of memory on device %d: 16.00 TiB under %s (", dev, specs[i]);
        expect_error(want);
        expect_error("larger than the whole device");
        assert_int_equal(stats_of(dev).ooms, 1);
    }
}

/* --- threads ---------------------------------------------------------------------------- */

typedef struct hook_worker {
    int device, id;
    long ops;
    int failures;
} hook_worker;

/* Each thread allocates on its stream, records every fourth block on a
 * neighbour's stream, frees, and reads statistics. */
static void *hook_work(void *arg)
{
    hook_worker *w = arg;
    void *live[16] = {0};
    size_t sz[16] = {0};
    void *mine = STREAM(100 + w->id), *next = STREAM(100 + (w->id + 1) % 4);
    uint64_t rng = 0x2545f4914f6cdd1dull * (uint64_t)(w->id + 1);
    for (long i = 0; i < w->ops; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int k = (int)(rng % 16);
        if (live[k]) {
            cmb_torch_free(live[k], sz[k], w->device, mine);
            live[k] = NULL;
            continue;
        }
        sz[k] = 512 + (size_t)((rng >> 8) % MiB);
        if (!(live[k] = cmb_torch_malloc(sz[k], w->device, mine))) {
            w->failures++;
            continue;
        }
        if (i % 4 == 0 && cmb_pluggable_record_stream(live[k], w->device, next))
            w->failures++;
        if (i % 512 == 0)
            (void)stats_of(w->device);
    }
    for (int k = 0; k < 16; k++)
        if (live[k])
            cmb_torch_free(live[k], sz[k], w->device, mine);
    return NULL;
}

/* --- thread caches ------------------------------------------------------------------------ */

/* A freed block comes back to the same thread's next request of its size on
 * its stream, never on another stream; the program's counts stay exact; the
 * policy sees it again on empty_cache; record_stream and a private pool
 * make the cache stand aside. */
static void thread_cache_reuses_exact_size(void **state)
{
    (void)state;
    const int dev = 24;
    void *a = STREAM(60), *b = STREAM(61), *cap = STREAM(62);
    configure_ok("bfc@sim", 0);
    assert_int_equal(cmb_pluggable_set_thread_cache(8 * MiB), 0);
    void *p = cmb_torch_malloc(MiB, dev, a);
    cmb_pluggable_memstats s0 = stats_of(dev);
    cmb_torch_free(p, MiB, dev, a);
    cmb_pluggable_memstats s1 = stats_of(dev);
    assert_int_equal(s1.requested_current, 0);
    assert_int_equal(s1.blocks_current, 0);
    assert_int_equal(s1.frees, 1);
    assert_int_equal(s1.allocated_current, s0.allocated_current); /* the policy still holds it */
    void *q = cmb_torch_malloc(MiB, dev, b);                      /* another stream: not p */
    assert_ptr_not_equal(q, p);
    void *r = cmb_torch_malloc(MiB - 512, dev, a); /* not the exact size: not p */
    assert_ptr_not_equal(r, p);
    void *p2 = cmb_torch_malloc(MiB, dev, a);
    assert_ptr_equal(p2, p);
    cmb_pluggable_memstats s2 = stats_of(dev);
    assert_int_equal(s2.allocs, 4);
    assert_int_equal(s2.requested_current, (int64_t)(3 * MiB - 512));
    assert_int_equal(s2.blocks_current, 3);
    /* record_stream: the block goes the slow way, its free deferred. */
    assert_int_equal(cmb_pluggable_record_stream(p2, dev, b), 0);
    assert_int_equal(cmb_pluggable_sim_hold_stream(b, 1), 0);
    cmb_torch_free(p2, MiB, dev, a);
    void *p3 = cmb_torch_malloc(MiB, dev, a);
    assert_ptr_not_equal(p3, p);
    assert_int_equal(cmb_pluggable_sim_hold_stream(b, 0), 0);
    cmb_torch_free(p3, MiB, dev, a);
    cmb_torch_free(q, MiB, dev, b);
    cmb_torch_free(r, MiB - 512, dev, a);
    assert_true(stats_of(dev).allocated_current > 0); /* cached */
    assert_int_equal(cmb_pluggable_empty_cache(dev), 0);
    cmb_pluggable_memstats s3 = stats_of(dev);
    assert_int_equal(s3.allocated_current, 0);
    assert_int_equal(s3.requested_current, 0);
    assert_int_equal(s3.allocs, s3.frees);
    assert_int_equal(s3.bad_frees, 0);
    /* A private pool exists: a freed block goes back to the policy at once. */
    assert_int_equal(cmb_pluggable_pool_begin(dev, 24, 0, only_stream, cap, NULL), 0);
    void *g = cmb_torch_malloc(MiB, dev, cap);
    assert_int_equal(cmb_pluggable_pool_end(dev, 24, 0), 0);
    void *e = cmb_torch_malloc(MiB, dev, a);
    cmb_torch_free(g, MiB, dev, cap); /* to its pool, not to this thread's cache */
    cmb_torch_free(e, MiB, dev, a);
    assert_int_equal(stats_of(dev).allocated_current, 0);
    void *e2 = cmb_torch_malloc(MiB, dev, cap);
    assert_ptr_not_equal(e2, g);
    cmb_torch_free(e2, MiB, dev, cap);
    assert_int_equal(cmb_pluggable_pool_release(dev, 24, 0), 0);
    assert_int_equal(cmb_pluggable_empty_cache(dev), 0);
    assert_int_equal(stats_of(dev).allocated_current, 0);
    assert_int_equal(cmb_pluggable_set_thread_cache(0), 0);
}

/* Blocks a thread caches are the policy's free memory when it runs out. */
static void thread_cache_flushed_before_out_of_memory(void **state)
{
    (void)state;
    const int dev = 25;
    configure_ok("cuda@sim", 16 * MiB);
    assert_int_equal(cmb_pluggable_set_thread_cache(16 * MiB), 0);
    void *p = cmb_torch_malloc(6 * MiB, dev, NULL), *q = cmb_torch_malloc(6 * MiB, dev, NULL);
    cmb_torch_free(p, 6 * MiB, dev, NULL);
    cmb_torch_free(q, 6 * MiB, dev, NULL);
    void *big = cmb_torch_malloc(12 * MiB, dev, NULL);
    assert_non_null(big);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.ooms, 0);
    assert_int_equal(s.allocated_current, (int64_t)(12 * MiB));
    cmb_torch_free(big, 12 * MiB, dev, NULL);
    assert_int_equal(cmb_pluggable_empty_cache(dev), 0);
    assert_int_equal(cmb_pluggable_set_thread_cache(0), 0);
}

/* While a graph captures, the caches are not flushed into the policy (its
 * free may touch events); after the end they are. */
static void thread_cache_kept_during_capture(void **state)
{
    (void)state;
    const int dev = 27;
    void *cap = STREAM(80);
    configure_ok("cuda@sim", 16 * MiB);
    assert_int_equal(cmb_pluggable_set_thread_cache(16 * MiB), 0);
    void *p = cmb_torch_malloc(6 * MiB, dev, NULL);
    cmb_torch_free(p, 6 * MiB, dev, NULL); /* cached by this thread */
    assert_int_equal(cmb_pluggable_pool_begin(dev, 27, 0, only_stream, cap, NULL), 0);
    assert_null(cmb_torch_malloc(12 * MiB, dev, NULL));
    assert_int_equal(cmb_pluggable_empty_cache(dev), 0); /* skipped during the capture */
    assert_int_equal(stats_of(dev).allocated_current, (int64_t)(6 * MiB));
    assert_int_equal(cmb_pluggable_pool_end(dev, 27, 0), 0);
    void *big = cmb_torch_malloc(12 * MiB, dev, NULL);
    assert_non_null(big);
    cmb_torch_free(big, 12 * MiB, dev, NULL); /* a pool exists: straight to the policy */
    assert_int_equal(cmb_pluggable_pool_release(dev, 27, 0), 0);
    assert_int_equal(stats_of(dev).allocated_current, 0);
    assert_int_equal(cmb_pluggable_set_thread_cache(0), 0);
}

/* Threads hand blocks to one another (the freeing thread is not the
 * allocating one) and exit with blocks cached: every block reaches the
 * policy exactly once, and the counts add up. */
typedef struct tc_worker {
    int device, id;
    void **handoff; /* blocks this thread allocates for the next to free */
    int n, twice;
} tc_worker;

static pthread_barrier_t tc_barrier;

static void *tc_work(void *arg)
{
    tc_worker *w = arg;
    void *st = STREAM(70);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < w->n; i++) {
            size_t sz = 512u << (i % 8);
            void *p = cmb_torch_malloc(sz, w->device, st);
            void *q = cmb_torch_malloc(sz, w->device, st);
            if (p == q)
                w->twice++; /* one block handed out twice */
            cmb_torch_free(q, sz, w->device, st);
            w->handoff[i] = p;
        }
        pthread_barrier_wait(&tc_barrier);
        tc_worker *prev = w - (w->id ? 1 : 0) + (w->id ? 0 : 3);
        for (int i = 0; i < w->n; i++) /* the neighbour's blocks */
            cmb_torch_free(prev->handoff[i], 512u << (i % 8), w->device, st);
        pthread_barrier_wait(&tc_barrier);
    }
    return NULL;
}

static void thread_cache_across_threads(void **state)
{
    (void)state;
    const int dev = 26, n = 4, per = 32;
    tc_worker w[4];
    void *blocks[4][32];
    pthread_t t[4];
    configure_ok("bfc@sim", 0);
    assert_int_equal(cmb_pluggable_set_thread_cache(MiB), 0);
    assert_int_equal(pthread_barrier_init(&tc_barrier, NULL, (unsigned)n), 0);
    for (int i = 0; i < n; i++) {
        w[i] = (tc_worker){.device = dev, .id = i, .handoff = blocks[i], .n = per};
        assert_int_equal(pthread_create(&t[i], NULL, tc_work, &w[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].twice, 0);
    }
    pthread_barrier_destroy(&tc_barrier);
    cmb_pluggable_memstats s = stats_of(dev);
    assert_int_equal(s.allocs, (int64_t)n * per * 2 * 50);
    assert_int_equal(s.frees, s.allocs);
    assert_int_equal(s.requested_current, 0);
    assert_int_equal(s.blocks_current, 0);
    assert_int_equal(s.bad_frees, 0);
    assert_int_equal(s.ooms, 0);
    assert_int_equal(s.allocated_current, 0); /* the threads exited: their caches went back */
    assert_int_equal(cmb_pluggable_set_thread_cache(0), 0);
}

static void threads_with_hooks(void **state)
{
    (void)state;
    const int dev = 20, n = 4;
    hook_worker w[4];
    pthread_t t[4];
    configure_ok("torch-caching@sim", 0);
    for (int i = 0; i < n; i++) {
        w[i] = (hook_worker){.device = dev, .id = i, .ops = 4000};
        assert_int_equal(pthread_create(&t[i], NULL, hook_work, &w[i]), 0);
    }
    /* The main thread holds a stream, captures into a pool and resets peaks meanwhile. */
    for (int r = 0; r < 50; r++) {
        cmb_pluggable_sim_hold_stream(STREAM(101), r % 2);
        cmb_pluggable_pool_begin(dev, 3, (uint64_t)r, only_stream, STREAM(999), NULL);
        cmb_pluggable_pool_end(dev, 3, (uint64_t)r);
        cmb_pluggable_pool_release(dev, 3, (uint64_t)r);
        cmb_pluggable_reset_peaks(dev);
    }
    cmb_pluggable_sim_hold_stream(STREAM(101), 0);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    cmb_pluggable_empty_cache(dev);
    cmb_pluggable_memstats s = stats_of(dev);
    for (int i = 0; i < n; i++)
        assert_int_equal(w[i].failures, 0);
    assert_int_equal(s.allocs, s.frees);
    assert_int_equal(s.requested_current, 0);
    assert_int_equal(s.allocated_current, 0);
    assert_int_equal(s.bad_frees, 0);
}

int main(void)
{
    setenv("CMB_PLUGGABLE_ALLOW_SIM", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(record_stream_defers_reuse),  cmocka_unit_test(record_on_own_stream_is_free),
        cmocka_unit_test(out_of_memory_waits_for_deferred), cmocka_unit_test(record_stream_generic_pair),
        cmocka_unit_test(graph_pool_private),          cmocka_unit_test(mem_pool_context),
        cmocka_unit_test(deferred_across_capture),     cmocka_unit_test(policy_frees_wait_for_capture_end),
        cmocka_unit_test(capture_makes_no_forbidden_call), cmocka_unit_test(graph_pool_released_with_live_block),
        cmocka_unit_test(pool_takes_the_policys_cache), cmocka_unit_test(memory_fraction_caps),
        cmocka_unit_test(generic_pair_in_a_pool),
        cmocka_unit_test(captures_reuse_one_pool),     cmocka_unit_test(pool_counts_against_the_cap),
        cmocka_unit_test(pool_without_an_instance_uses_segments),
        cmocka_unit_test(larger_than_the_device),      cmocka_unit_test(threads_with_hooks),
        cmocka_unit_test(thread_cache_reuses_exact_size), cmocka_unit_test(thread_cache_flushed_before_out_of_memory),
        cmocka_unit_test(thread_cache_kept_during_capture), cmocka_unit_test(thread_cache_across_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
