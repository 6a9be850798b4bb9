/* test_policy_tf_cupy_buddy.c - "bfc", "cupy" and "buddy" on the sim
 * upstream: the shared conformance checks, then hand-built layouts whose
 * results are known exactly (bins, split decisions, region doubling,
 * GetFragmentation, CuPy's merge and free_all_blocks, buddy orders). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/registry.h"
#include "support/conformance.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

int _cmb_bfc_bin_for_size(uint64_t size);

/* --- helpers --------------------------------------------------------------- */

typedef struct fixture {
    cmb_upstream *up;
    const cmb_allocator_methods *m;
    void *state;
} fixture;

static fixture open_policy(const char *name, const char *options, uint64_t capacity)
{
    fixture f;
    cmb_test_open(name, options, capacity, NULL, &f.up, &f.m, &f.state);
    return f;
}

static void close_policy(fixture *f)
{
    assert_int_equal(f->m->destroy(f->state), CMB_OK);
    assert_int_equal(cmb_upstream_misuse_count(f->up), 0);
    assert_int_equal(f->up->stats.held_current, 0);
    cmb_upstream_close(f->up);
}

static cmb_alloc_stats stats_of(fixture *f)
{
    cmb_alloc_stats s;
    assert_int_equal(f->m->stats(f->state, &s), CMB_OK);
    return s;
}

static uintptr_t alloc_on(fixture *f, uint64_t size, uintptr_t stream)
{
    void *p = NULL;
    cmb_status st = f->m->allocate(f->state, size, (cmb_stream)stream, &p);
    if (st != CMB_OK)
        fail_msg("%s: allocate(%llu) = %s", f->m->name, (unsigned long long)size, cmb_status_str(st));
    return (uintptr_t)p;
}

static uintptr_t alloc(fixture *f, uint64_t size)
{
    return alloc_on(f, size, 1);
}

static void release_on(fixture *f, uintptr_t p, uint64_t size, uintptr_t stream)
{
    assert_int_equal(f->m->deallocate(f->state, (void *)p, size, (cmb_stream)stream), CMB_OK);
}

static void release(fixture *f, uintptr_t p, uint64_t size)
{
    release_on(f, p, size, 1);
}

static cmb_status try_alloc_on(fixture *f, uint64_t size, uintptr_t stream)
{
    void *p;
    return f->m->allocate(f->state, size, (cmb_stream)stream, &p);
}

/* TF's GetFragmentation() from the stats the harness reads. */
static double fragmentation(const cmb_alloc_stats *s)
{
    double avail = (double)(s->reserved.current - s->allocated.current);
    return (avail - (double)s->largest_free) / avail;
}

static void refuses_unknown_option(const char *name)
{
    cmb_upstream_config ucfg;
    cmb_upstream *up;
    char err[256] = "";
    void *st;
    cmb_upstream_config_default(&ucfg);
    assert_int_equal(cmb_upstream_open(&ucfg, &up, err, sizeof err), CMB_OK);
    const cmb_allocator_entry *e = cmb_allocator_find(name);
    assert_non_null(e);
    cmb_option opt = {"bogus", "1"};
    cmb_config cfg = {.options = &opt, .n_options = 1, .sim = 1, .error = err, .error_len = sizeof err};
    assert_int_equal(e->methods->create(&cfg, up, &st), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "bogus"));
    cmb_upstream_close(up);
}

/* --- conformance ------------------------------------------------------------- */

static void conformance_bfc(void **unused)
{
    (void)unused;
    cmb_conformance c = {.allocator = "bfc", .ops = 100000, .seed = 11};
    cmb_conformance_random(&c);
    c.ops = 40000;
    cmb_conformance_faults(&c);
}

static void conformance_bfc_prealloc(void **unused)
{
    (void)unused;
    cmb_conformance c = {.allocator = "bfc-prealloc", .ops = 60000, .seed = 12};
    cmb_conformance_random(&c);
    c.ops = 20000;
    cmb_conformance_faults(&c);
}

static void conformance_cupy(void **unused)
{
    (void)unused;
    cmb_conformance c = {.allocator = "cupy", .ops = 100000, .streams = 3, .seed = 13};
    cmb_conformance_random(&c);
    c.ops = 40000;
    cmb_conformance_faults(&c);
}

static void conformance_buddy(void **unused)
{
    (void)unused;
    cmb_conformance c = {.allocator = "buddy", .ops = 100000, .streams = 2, .seed = 14};
    cmb_conformance_random(&c);
    c.ops = 40000;
    cmb_conformance_faults(&c);
}

static void unknown_options_are_refused(void **unused)
{
    (void)unused;
    refuses_unknown_option("bfc");
    refuses_unknown_option("cupy");
    refuses_unknown_option("buddy");
}

/* --- bfc ------------------------------------------------------------------- */

static void bfc_bin_index(void **unused)
{
    (void)unused;
    assert_int_equal(_cmb_bfc_bin_for_size(1), 0);
    assert_int_equal(_cmb_bfc_bin_for_size(256), 0);
    assert_int_equal(_cmb_bfc_bin_for_size(511), 0);
    assert_int_equal(_cmb_bfc_bin_for_size(512), 1);
    assert_int_equal(_cmb_bfc_bin_for_size(1023), 1);
    assert_int_equal(_cmb_bfc_bin_for_size(1024), 2);
    assert_int_equal(_cmb_bfc_bin_for_size(1 * MiB), 12);
    assert_int_equal(_cmb_bfc_bin_for_size((256ull << 20) - 1), 19);
    assert_int_equal(_cmb_bfc_bin_for_size(256ull << 20), 20);
    assert_int_equal(_cmb_bfc_bin_for_size(1ull << 40), 20);
}

/* allow_growth: 2 MiB first, x2 after each extension that did not have to
 * grow, grown to the request when it is larger. */
static void bfc_region_doubling(void **unused)
{
    (void)unused;
    fixture f = open_policy("bfc", NULL, 8 * GiB);
    alloc(&f, 1 * MiB);
    assert_int_equal(stats_of(&f).reserved.current, 2 * MiB);
    alloc(&f, 1 * MiB); /* the rest of the first region */
    assert_int_equal(stats_of(&f).reserved.current, 2 * MiB);
    alloc(&f, 1 * MiB); /* region 2: 4 MiB */
    assert_int_equal(stats_of(&f).reserved.current, 6 * MiB);
    alloc(&f, 20 * MiB); /* 8 MiB < 20 MiB: grown to 32 MiB */
    assert_int_equal(stats_of(&f).reserved.current, 38 * MiB);
    alloc(&f, 40 * MiB); /* grown to 64 MiB */
    assert_int_equal(stats_of(&f).reserved.current, 102 * MiB);
    alloc(&f, 30 * MiB); /* 64 MiB again (no free chunk of 30 MiB), then x2 */
    assert_int_equal(stats_of(&f).reserved.current, 166 * MiB);
    alloc(&f, 100 * MiB); /* 128 MiB */
    cmb_alloc_stats s = stats_of(&f);
    assert_int_equal(s.reserved.current, 294 * MiB);
    assert_int_equal(s.upstream_allocs, 6);
    assert_int_equal(s.upstream_frees, 0);
    close_policy(&f);
}

/* Split when the chunk is >= 2x the rounded request, or when the remainder
 * is >= the internal-fragmentation cap (128 MiB, or the fraction given). */
static void bfc_split_rule(void **unused)
{
    (void)unused;
    fixture f = open_policy("bfc", NULL, 8 * GiB);
    uintptr_t a = alloc(&f, 1 * MiB);        /* 2 MiB region: split */
    assert_int_equal(stats_of(&f).allocated.current, 1 * MiB);
    uintptr_t b = alloc(&f, 600 * KiB);      /* 1 MiB < 1200 KiB: whole */
    assert_int_equal(b, a + 1 * MiB);
    assert_int_equal(stats_of(&f).allocated.current, 2 * MiB);
    assert_int_equal(stats_of(&f).requested.current, 1 * MiB + 600 * KiB);
    uintptr_t c = alloc(&f, 100);            /* rounded to 256 */
    assert_int_equal(stats_of(&f).allocated.current, 2 * MiB + 256);
    release(&f, c, 100);
    close_policy(&f);

    f = open_policy("bfc", "memory_limit=1GiB:fragmentation_fraction=0.0001", 8 * GiB);
    a = alloc(&f, 1 * MiB);
    b = alloc(&f, 600 * KiB);                /* 424 KiB left >= 107374 B: split */
    assert_int_equal(b, a + 1 * MiB);
    assert_int_equal(stats_of(&f).allocated.current, 1 * MiB + 600 * KiB);
    close_policy(&f);

    f = open_policy("bfc", "allow_growth=false:memory_limit=512MiB", 8 * GiB);
    a = alloc(&f, 300 * MiB);                /* 212 MiB left >= 128 MiB: split */
    assert_int_equal(stats_of(&f).reserved.current, 512 * MiB);
    assert_int_equal(stats_of(&f).allocated.current, 300 * MiB);
    release(&f, a, 300 * MiB);
    assert_int_equal(stats_of(&f).largest_free, 512 * MiB); /* merged back */
    a = alloc(&f, 400 * MiB);                /* 112 MiB left: whole */
    assert_int_equal(stats_of(&f).allocated.current, 512 * MiB);
    assert_int_equal(try_alloc_on(&f, 256, 1), CMB_ERR_OOM); /* limit reached */
    close_policy(&f);
}

/* Best fit: smallest fitting chunk, lowest address among equal sizes. */
static void bfc_best_fit(void **unused)
{
    (void)unused;
    fixture f = open_policy("bfc", "allow_growth=false:memory_limit=64MiB", 8 * GiB);
    uintptr_t p[6];
    uint64_t sz[6] = {3 * MiB, 1 * MiB, 2 * MiB, 1 * MiB, 2 * MiB, 1 * MiB};
    for (int i = 0; i < 6; i++)
        p[i] = alloc(&f, sz[i]);
    release(&f, p[0], sz[0]); /* free: 3 MiB at 0, 2 MiB at 4, 2 MiB at 7 (not adjacent) */
    release(&f, p[2], sz[2]);
    release(&f, p[4], sz[4]);
    assert_int_equal(alloc(&f, 1536 * KiB), p[2]); /* 2 MiB, lower address */
    assert_int_equal(alloc(&f, 1536 * KiB), p[4]);
    assert_int_equal(alloc(&f, 1536 * KiB), p[0]); /* only 3 MiB left */
    close_policy(&f);
}

/* GetFragmentation on a crafted layout: one 1 GiB region of 8 x 128 MiB. */
static void bfc_get_fragmentation(void **unused)
{
    (void)unused;
    fixture f = open_policy("bfc", "allow_growth=false:memory_limit=1GiB", 8 * GiB);
    uintptr_t p[8];
    for (int i = 0; i < 8; i++)
        p[i] = alloc(&f, 128 * MiB);
    cmb_alloc_stats s = stats_of(&f);
    assert_int_equal(s.reserved.current, 1 * GiB);
    assert_int_equal(s.allocated.current, 1 * GiB);
    assert_int_equal(s.largest_free, 0);
    release(&f, p[1], 128 * MiB);
    release(&f, p[3], 128 * MiB);
    release(&f, p[5], 128 * MiB);
    s = stats_of(&f);
    assert_int_equal(s.largest_free, 128 * MiB);
    assert_true(fragmentation(&s) > 2.0 / 3 - 1e-12 && fragmentation(&s) < 2.0 / 3 + 1e-12);
    release(&f, p[2], 128 * MiB); /* 1, 2, 3 merge into 384 MiB */
    s = stats_of(&f);
    assert_int_equal(s.largest_free, 384 * MiB);
    assert_true(fragmentation(&s) == 0.25);
    close_policy(&f);
}

/* Garbage collection: a free region goes back so that a larger one fits. */
static void bfc_garbage_collection(void **unused)
{
    (void)unused;
    fixture f = open_policy("bfc", "memory_limit=64MiB", 8 * GiB);
    uintptr_t a = alloc(&f, 1 * MiB);
    release(&f, a, 1 * MiB);
    alloc(&f, 63 * MiB); /* 62 MiB left under the limit: GC, then 64 MiB */
    cmb_alloc_stats s = stats_of(&f);
    assert_int_equal(s.oom_retries, 1);
    assert_int_equal(s.reserved.current, 64 * MiB);
    assert_int_equal(s.upstream_allocs, 2);
    assert_int_equal(s.upstream_frees, 1);
    close_policy(&f);

    f = open_policy("bfc", "memory_limit=64MiB:garbage_collection=false", 8 * GiB);
    a = alloc(&f, 1 * MiB);
    release(&f, a, 1 * MiB);
    assert_int_equal(try_alloc_on(&f, 63 * MiB, 1), CMB_ERR_OOM);
    assert_non_null(f.m->last_error(f.state));
    assert_int_equal(f.m->trim(f.state), CMB_OK); /* trim returns the idle region */
    assert_int_equal(stats_of(&f).reserved.current, 0);
    alloc(&f, 63 * MiB);
    close_policy(&f);
}

/* A refused region backs off by x0.9 until the upstream accepts it. */
static void bfc_backpedal(void **unused)
{
    (void)unused;
    fixture f = open_policy("bfc", "allow_growth=false:memory_limit=1GiB", 10 * MiB);
    alloc(&f, 1 * MiB);
    cmb_alloc_stats s = stats_of(&f);
    assert_true(s.reserved.current <= (int64_t)(10 * MiB));
    assert_true(s.reserved.current > (int64_t)(9 * MiB));
    assert_int_equal(s.reserved.current % 256, 0);
    assert_int_equal(try_alloc_on(&f, 20 * MiB, 1), CMB_ERR_OOM);
    close_policy(&f);
}

/* Backpedal once (TF <= 2.13's started_backpedal_) or always (TF's later
 * tsl, XLA). A 12 MiB request takes a 16 MiB region (2 MiB doubled to
 * cover it); under a 24 MiB cap a 6 MiB request's 16 MiB region is refused
 * and backs off: x0.9 in float, rounded up to 256 B, seven refusals, then
 * 8024832 B fits. The region size doubles to 32 MiB. With the cap raised
 * to 40 MiB another 6 MiB request's 32 MiB region is refused: `once` fails
 * at once (one refused call), `always` backs off seven times to 16049664 B. */
static void bfc_backpedal_once_or_always(void **unused)
{
    (void)unused;
    static const char *const modes[] = {"once", "always"};
    for (int m = 0; m < 2; m++) {
        char opts[96];
        snprintf(opts, sizeof opts, "memory_limit=1GiB:backpedal=%s", modes[m]);
        fixture f = open_policy("bfc", opts, 40 * MiB);
        cmb_upstream_set_cap(f.up, 24 * MiB);
        alloc(&f, 12 * MiB);
        assert_int_equal(stats_of(&f).reserved.current, 16 * MiB);
        uint64_t failed = f.up->stats.failed_calls;
        alloc(&f, 6 * MiB);
        assert_int_equal(f.up->stats.failed_calls - failed, 7);
        assert_int_equal(stats_of(&f).reserved.current, 16 * MiB + 8024832);
        cmb_upstream_set_cap(f.up, 40 * MiB);
        failed = f.up->stats.failed_calls;
        if (m == 0) {
            assert_int_equal(try_alloc_on(&f, 6 * MiB, 1), CMB_ERR_OOM);
            assert_int_equal(f.up->stats.failed_calls - failed, 1);
            assert_int_equal(stats_of(&f).reserved.current, 16 * MiB + 8024832);
        } else {
            alloc(&f, 6 * MiB);
            assert_int_equal(f.up->stats.failed_calls - failed, 7);
            assert_int_equal(stats_of(&f).reserved.current, 16 * MiB + 8024832 + 16049664);
        }
        close_policy(&f);
    }
}

/* The default limit: free memory less TF's MinSystemMemory. */
static void bfc_memory_limit(void **unused)
{
    (void)unused;
    fixture f = open_policy("bfc-prealloc", NULL, 8 * GiB);
    alloc(&f, 1);
    assert_int_equal(stats_of(&f).reserved.current, 8 * GiB - 1800 * MiB);
    close_policy(&f);
    f = open_policy("bfc-prealloc", NULL, 1 * GiB);
    alloc(&f, 1);
    assert_int_equal(stats_of(&f).reserved.current, 1 * GiB - 225 * MiB);
    close_policy(&f);
    f = open_policy("bfc-prealloc", "min_system_memory=0", 1 * GiB);
    alloc(&f, 1);
    assert_int_equal(stats_of(&f).reserved.current, 1 * GiB);
    close_policy(&f);
}

/* --- cupy ------------------------------------------------------------------ */

/* Pieces of one allocation merge back into one chunk, and only then does
 * free_all_blocks (trim) release it. */
static void cupy_merge_and_free_all_blocks(void **unused)
{
    (void)unused;
    fixture f = open_policy("cupy", NULL, 8 * GiB);
    uintptr_t x = alloc(&f, 4 * MiB);
    release(&f, x, 4 * MiB);
    uintptr_t a = alloc(&f, 1 * MiB), b = alloc(&f, 1 * MiB), c = alloc(&f, 1 * MiB);
    assert_int_equal(a, x);
    assert_int_equal(b, x + 1 * MiB);
    assert_int_equal(c, x + 2 * MiB);
    assert_int_equal(stats_of(&f).upstream_allocs, 1);
    assert_int_equal(stats_of(&f).largest_free, 1 * MiB);
    assert_int_equal(f.m->trim(f.state), CMB_OK); /* split: kept */
    assert_int_equal(stats_of(&f).reserved.current, 4 * MiB);
    release(&f, b, 1 * MiB);
    release(&f, a, 1 * MiB);
    assert_int_equal(stats_of(&f).largest_free, 2 * MiB);
    assert_int_equal(f.m->trim(f.state), CMB_OK); /* still split */
    assert_int_equal(stats_of(&f).reserved.current, 4 * MiB);
    release(&f, c, 1 * MiB);
    cmb_alloc_stats s = stats_of(&f);
    assert_int_equal(s.largest_free, 4 * MiB);
    assert_int_equal(s.allocated.current, 0);
    assert_int_equal(f.m->trim(f.state), CMB_OK); /* one whole chunk: released */
    s = stats_of(&f);
    assert_int_equal(s.reserved.current, 0);
    assert_int_equal(s.upstream_frees, 1);
    assert_int_equal(s.largest_free, 0);
    close_policy(&f);
}

static void cupy_free_all_blocks_keeps_split(void **unused)
{
    (void)unused;
    fixture f = open_policy("cupy", NULL, 8 * GiB);
    uintptr_t x = alloc(&f, 4 * MiB);
    release(&f, x, 4 * MiB);
    uintptr_t a = alloc(&f, 1 * MiB); /* splits x: 3 MiB stay free */
    uintptr_t y = alloc(&f, 8 * MiB); /* a whole new chunk */
    release(&f, y, 8 * MiB);
    assert_int_equal(stats_of(&f).reserved.current, 12 * MiB);
    assert_int_equal(f.m->trim(f.state), CMB_OK);
    cmb_alloc_stats s = stats_of(&f);
    assert_int_equal(s.reserved.current, 4 * MiB); /* only y went back */
    assert_int_equal(s.largest_free, 3 * MiB);
    release(&f, a, 1 * MiB);
    close_policy(&f);
}

/* 512 B rounding, best fit over exact-size bins, one arena per stream. */
static void cupy_bins_and_arenas(void **unused)
{
    (void)unused;
    fixture f = open_policy("cupy", NULL, 8 * GiB);
    uintptr_t t = alloc(&f, 1);
    assert_int_equal(stats_of(&f).allocated.current, 512);
    release(&f, t, 1);
    uintptr_t a = alloc(&f, 1 * MiB), b = alloc(&f, 2 * MiB), c = alloc(&f, 3 * MiB);
    release(&f, a, 1 * MiB);
    release(&f, c, 3 * MiB);
    release(&f, b, 2 * MiB);
    assert_int_equal(alloc(&f, 1536 * KiB), b); /* the 2 MiB chunk */
    assert_int_equal(stats_of(&f).allocated.current, 1536 * KiB);
    uint64_t before = stats_of(&f).upstream_allocs;
    uintptr_t s2 = alloc_on(&f, 1 * MiB, 2); /* other stream: a new chunk */
    assert_int_equal(stats_of(&f).upstream_allocs, before + 1);
    assert_true(s2 != a);
    release_on(&f, s2, 1 * MiB, 2);
    assert_int_equal(alloc_on(&f, 1 * MiB, 1), a); /* stream 1's own 1 MiB */
    assert_int_equal(alloc_on(&f, 1 * MiB, 2), s2);
    close_policy(&f);
}

/* OOM: free_all_blocks and retry; over the limit the same (CuPy 14). */
static void cupy_oom_retry_and_limit(void **unused)
{
    (void)unused;
    fixture f = open_policy("cupy", NULL, 16 * MiB);
    uintptr_t a = alloc(&f, 8 * MiB);
    release(&f, a, 8 * MiB);
    alloc_on(&f, 12 * MiB, 2); /* 8 + 12 > 16: release the cached 8, retry */
    cmb_alloc_stats s = stats_of(&f);
    assert_int_equal(s.oom_retries, 1);
    assert_int_equal(s.reserved.current, 12 * MiB);
    assert_int_equal(try_alloc_on(&f, 8 * MiB, 2), CMB_ERR_OOM);
    assert_int_equal(stats_of(&f).oom_retries, 3);
    close_policy(&f);

    /* over the limit: the cached 8 MiB count, and are released for 4 MiB */
    f = open_policy("cupy", "limit=10MiB", 8 * GiB);
    a = alloc(&f, 8 * MiB);
    release(&f, a, 8 * MiB);
    alloc_on(&f, 4 * MiB, 2);
    s = stats_of(&f);
    assert_int_equal(s.oom_retries, 1);
    assert_int_equal(s.reserved.current, 4 * MiB);
    assert_int_equal(s.upstream_frees, 1);
    /* nothing left to release: two rounds of free_all_blocks, then out of memory */
    assert_int_equal(try_alloc_on(&f, 8 * MiB, 2), CMB_ERR_OOM);
    assert_int_equal(stats_of(&f).oom_retries, 3);
    assert_non_null(strstr(f.m->last_error(f.state), "limit set to"));
    close_policy(&f);

    /* a split allocation with a live piece is not released: out of memory */
    f = open_policy("cupy", "limit=10MiB", 8 * GiB);
    a = alloc(&f, 8 * MiB);
    release(&f, a, 8 * MiB);
    uintptr_t piece = alloc(&f, 2 * MiB); /* splits the cached 8 MiB */
    assert_int_equal(try_alloc_on(&f, 4 * MiB, 2), CMB_ERR_OOM);
    s = stats_of(&f);
    assert_int_equal(s.oom_retries, 2);
    assert_int_equal(s.reserved.current, 8 * MiB);
    release(&f, piece, 2 * MiB);
    close_policy(&f);
}

/* --- buddy ------------------------------------------------------------------ */

static void buddy_split_orders(void **unused)
{
    (void)unused;
    fixture f = open_policy("buddy", "pool_size=1MiB", 8 * GiB);
    assert_int_equal(stats_of(&f).reserved.current, 1 * MiB); /* taken at create */
    assert_int_equal(stats_of(&f).largest_free, 1 * MiB);
    uintptr_t base = alloc(&f, 1);
    cmb_alloc_stats s = stats_of(&f);
    assert_int_equal(s.allocated.current, 512);
    assert_int_equal(s.largest_free, 512 * KiB); /* 1 MiB split down to 512 B */
    assert_int_equal(alloc(&f, 512), base + 512); /* the buddy */
    assert_int_equal(alloc(&f, 100 * KiB), base + 128 * KiB); /* 128 KiB block */
    assert_int_equal(alloc(&f, 300 * KiB), base + 512 * KiB); /* the 512 KiB half */
    s = stats_of(&f);
    assert_int_equal(s.largest_free, 256 * KiB);
    assert_int_equal(s.allocated.current, 1024 + 128 * KiB + 512 * KiB);
    assert_int_equal(try_alloc_on(&f, 300 * KiB, 1), CMB_ERR_OOM);
    release(&f, base + 512 * KiB, 300 * KiB);
    release(&f, base + 128 * KiB, 100 * KiB);
    release(&f, base, 1);
    assert_int_equal(stats_of(&f).largest_free, 512 * KiB);
    release(&f, base + 512, 512);
    s = stats_of(&f);
    assert_int_equal(s.largest_free, 1 * MiB); /* merged back to the top */
    assert_int_equal(s.allocated.current, 0);
    close_policy(&f);
}

static void buddy_merge_needs_buddy(void **unused)
{
    (void)unused;
    fixture f = open_policy("buddy", "pool_size=1MiB", 8 * GiB);
    uintptr_t p[4];
    for (int i = 0; i < 4; i++)
        p[i] = alloc(&f, 256 * KiB);
    assert_int_equal(stats_of(&f).largest_free, 0);
    assert_int_equal(try_alloc_on(&f, 1, 1), CMB_ERR_OOM);
    release(&f, p[1], 256 * KiB);
    release(&f, p[2], 256 * KiB); /* adjacent, but not buddies */
    assert_int_equal(stats_of(&f).largest_free, 256 * KiB);
    release(&f, p[0], 256 * KiB); /* 0 + 1 */
    assert_int_equal(stats_of(&f).largest_free, 512 * KiB);
    release(&f, p[3], 256 * KiB); /* 2 + 3, then the two halves */
    assert_int_equal(stats_of(&f).largest_free, 1 * MiB);
    assert_int_equal(f.m->deallocate(f.state, (void *)p[3], 256 * KiB, (cmb_stream)1), CMB_ERR_INVALID);
    close_policy(&f);
}

/* Default pool: the largest power of two <= 95% of free memory; trim gives
 * it back when nothing is live. */
static void buddy_pool_size_and_trim(void **unused)
{
    (void)unused;
    fixture f = open_policy("buddy", NULL, 8 * GiB);
    assert_int_equal(stats_of(&f).reserved.current, 4 * GiB);
    close_policy(&f);
    f = open_policy("buddy", NULL, 80 * GiB);
    assert_int_equal(stats_of(&f).reserved.current, 64 * GiB);
    uintptr_t a = alloc(&f, 40 * GiB); /* a 64 GiB block */
    assert_int_equal(stats_of(&f).allocated.current, 64 * GiB);
    assert_int_equal(f.m->trim(f.state), CMB_OK); /* live: kept */
    assert_int_equal(stats_of(&f).reserved.current, 64 * GiB);
    release(&f, a, 40 * GiB);
    assert_int_equal(f.m->trim(f.state), CMB_OK);
    assert_int_equal(stats_of(&f).reserved.current, 0);
    assert_int_equal(stats_of(&f).largest_free, 0);
    a = alloc(&f, 1 * MiB); /* reserved again */
    assert_int_equal(stats_of(&f).reserved.current, 64 * GiB);
    assert_int_equal(stats_of(&f).upstream_allocs, 2);
    close_policy(&f);
}

/* A refused reservation is no failure of create: allocations retry it. */
static void buddy_reservation_retry(void **unused)
{
    (void)unused;
    fixture f;
    cmb_fault_spec fault = {.fail_nth = 1};
    cmb_test_open("buddy", "pool_size=1MiB", 8 * GiB, &fault, &f.up, &f.m, &f.state);
    assert_int_equal(stats_of(&f).reserved.current, 0);
    assert_int_equal(stats_of(&f).largest_free, 0);
    uintptr_t a = alloc(&f, 1000); /* request 2 succeeds */
    assert_int_equal(stats_of(&f).reserved.current, 1 * MiB);
    assert_int_equal(stats_of(&f).allocated.current, 1024);
    release(&f, a, 1000);
    close_policy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conformance_bfc),
        cmocka_unit_test(conformance_bfc_prealloc),
        cmocka_unit_test(conformance_cupy),
        cmocka_unit_test(conformance_buddy),
        cmocka_unit_test(unknown_options_are_refused),
        cmocka_unit_test(bfc_bin_index),
        cmocka_unit_test(bfc_region_doubling),
        cmocka_unit_test(bfc_split_rule),
        cmocka_unit_test(bfc_best_fit),
        cmocka_unit_test(bfc_get_fragmentation),
        cmocka_unit_test(bfc_garbage_collection),
        cmocka_unit_test(bfc_backpedal),
        cmocka_unit_test(bfc_backpedal_once_or_always),
        cmocka_unit_test(bfc_memory_limit),
        cmocka_unit_test(cupy_merge_and_free_all_blocks),
        cmocka_unit_test(cupy_free_all_blocks_keeps_split),
        cmocka_unit_test(cupy_bins_and_arenas),
        cmocka_unit_test(cupy_oom_retry_and_limit),
        cmocka_unit_test(buddy_split_orders),
        cmocka_unit_test(buddy_merge_needs_buddy),
        cmocka_unit_test(buddy_pool_size_and_trim),
        cmocka_unit_test(buddy_reservation_retry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
