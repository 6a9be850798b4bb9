/* test_policy_cmb.c - "cmb", the suite's own allocator: the shared
 * conformance checks, hand-built cases whose pages, placements and upstream
 * calls follow from its rules (docs/cmb.md), stream order checked over an
 * upstream whose events stay pending until the test lets them complete,
 * the budget checked against an independent count of the pages live blocks
 * touch, and the sample traces replayed within 2% of their requested peak. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cmb_hashmap.h"
#include "support/cmb_counters.h"
#include "support/conformance.h"
#include "support/run.h"
#include "support/trace_file.h"
#include "traces/trace.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define PAGE (2 * MiB)
#define S1 ((cmb_stream)(uintptr_t)1)
#define S2 ((cmb_stream)(uintptr_t)2)


/* --- a small fixture -------------------------------------------------------------- */

typedef struct fx {
    cmb_upstream *up;
    const cmb_allocator_methods *m;
    void *st;
} fx;

static fx open_fx(const char *options, uint64_t capacity)
{
    fx f;
    cmb_test_open("cmb", options, capacity, NULL, &f.up, &f.m, &f.st);
    return f;
}

static void close_fx(fx *f)
{
    assert_int_equal(f->m->destroy(f->st), CMB_OK);
    assert_int_equal(cmb_upstream_misuse_count(f->up), 0);
    assert_int_equal(cmb_upstream_close(f->up), 0);
}

static void *get(fx *f, size_t size, cmb_stream s)
{
    void *p = NULL;
    cmb_status st = f->m->allocate(f->st, size, s, &p);
    if (st != CMB_OK)
        fail_msg("allocate(%zu) returned %s", size, cmb_status_str(st));
    assert_int_equal((uintptr_t)p % 512, 0);
    return p;
}

static void put(fx *f, void *p, size_t size, cmb_stream s)
{
    assert_int_equal(f->m->deallocate(f->st, p, size, s), CMB_OK);
}

static cmb_alloc_stats stats(fx *f)
{
    cmb_alloc_stats s;
    assert_int_equal(f->m->stats(f->st, &s), CMB_OK);
    assert_int_equal(s.reserved.current, f->up->stats.held_current);
    return s;
}

static cmb_cmb_counters counters(fx *f)
{
    cmb_cmb_counters c;
    assert_int_equal(_cmb_cmb_counters(f->st, &c), sizeof c);
    return c;
}

#define RESERVED(f) (stats(f).reserved.current)

/* --- the shared checks --------------------------------------------------------------- */

static void conformance_default(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "cmb", .ops = 200000, .streams = 2, .seed = 41};
    cmb_conformance_random(&c);
    cmb_conformance f = {.allocator = "cmb", .ops = 40000, .streams = 2, .seed = 42};
    cmb_conformance_faults(&f);
}

static void conformance_options(void **state)
{
    (void)state;
    const char *opts = "slack=0:small_max=64KiB:fast_bins=false";
    cmb_conformance c = {.allocator = "cmb", .options = opts, .ops = 100000, .streams = 4, .seed = 43};
    cmb_conformance_random(&c);
    cmb_conformance f = {.allocator = "cmb", .options = opts, .ops = 40000, .streams = 3, .seed = 44};
    cmb_conformance_faults(&f);
    /* pages of 8 MiB: each upstream call maps four granules */
    cmb_conformance g = {.allocator = "cmb", .options = "page=8MiB", .ops = 100000, .streams = 2, .seed = 47};
    cmb_conformance_random(&g);
    cmb_conformance h = {.allocator = "cmb", .options = "page=8MiB", .ops = 40000, .streams = 2, .seed = 48};
    cmb_conformance_faults(&h);
    /* handles: a whole growth in one (reclaim at its coarsest), and a page each */
    cmb_conformance i = {.allocator = "cmb", .options = "chunk=0", .ops = 100000, .streams = 3, .seed = 49};
    cmb_conformance_random(&i);
    cmb_conformance j = {.allocator = "cmb", .options = "chunk=0", .ops = 40000, .streams = 2, .seed = 50};
    cmb_conformance_faults(&j);
    cmb_conformance k = {.allocator = "cmb", .options = "chunk=1:page=8MiB", .ops = 40000, .streams = 2, .seed = 51};
    cmb_conformance_faults(&k);
}

/* A device small enough that the traffic runs out of memory all the time:
 * the release-and-retry path and the budget's unmapping run constantly. */
static void conformance_tight(void **state)
{
    (void)state;
    cmb_conformance a = {.allocator = "cmb", .capacity = 1ull << 30, .ops = 100000, .streams = 3, .seed = 45};
    cmb_conformance_random(&a);
    cmb_conformance c = {.allocator = "cmb", .options = "chunk=0", .capacity = 1ull << 30, .ops = 100000,
                         .streams = 3, .seed = 52};
    cmb_conformance_random(&c);
    cmb_conformance b = {.allocator = "cmb", .options = "slack=1", .capacity = 256ull << 20, .ops = 100000,
                         .max_size = 32u << 20, .streams = 1, .seed = 46};
    cmb_conformance_random(&b);
}

/* --- options ------------------------------------------------------------------------------- */

static cmb_status try_create(const char *key, const char *value, char *err, size_t len)
{
    extern const cmb_allocator_methods cmb_cmb_methods;
    cmb_upstream_config ucfg;
    cmb_upstream *up;
    void *st = NULL;
    cmb_upstream_config_default(&ucfg);
    assert_int_equal(cmb_upstream_open(&ucfg, &up, err, len), CMB_OK);
    cmb_option opt = {key, value};
    cmb_config cfg = {.options = &opt, .n_options = 1, .sim = 1, .error = err, .error_len = len};
    cmb_status s = cmb_cmb_methods.create(&cfg, up, &st);
    if (s == CMB_OK)
        cmb_cmb_methods.destroy(st);
    cmb_upstream_close(up);
    return s;
}

static void options_are_checked(void **state)
{
    (void)state;
    char err[256];
    static const char *const bad[][2] = {
        {"bogus", "1"}, {"slack", "-0.1"}, {"slack", "2"}, {"slack", "x"}, {"keep", "-0.01"}, {"keep", "1.5"},
        {"small_max", "2TiB"}, {"small_max", "many"}, {"fast_bins", "perhaps"},
        {"page", "1MiB"},  /* below the granularity */
        {"page", "6MiB"},  /* not a power of two */
        {"page", "32GiB"}, {"chunk", "-1"}, {"chunk", "2097152"}, {"chunk", "some"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        if (try_create(bad[i][0], bad[i][1], err, sizeof err) != CMB_ERR_INVALID)
            fail_msg("%s=%s accepted", bad[i][0], bad[i][1]);
        assert_true(strlen(err) > 0);
    }
    static const char *const good[][2] = {
        {"slack", "0"}, {"slack", "0.25"}, {"keep", "0"}, {"keep", "0.05"}, {"small_max", "0"}, {"small_max", "4MiB"}, {"fast_bins", "false"},
        {"page", "2MiB"}, {"page", "8MiB"}, {"chunk", "0"}, {"chunk", "1"}, {"chunk", "64"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        if (try_create(good[i][0], good[i][1], err, sizeof err) != CMB_OK)
            fail_msg("%s=%s refused: %s", good[i][0], good[i][1], err);
}

/* The cuda upstream has no virtual memory: creating cmb over it fails cleanly. */
static void needs_virtual_memory(void **state)
{
    (void)state;
    extern const cmb_allocator_methods cmb_cmb_methods;
    cmb_upstream_config ucfg;
    cmb_upstream up;
    cmb_upstream_ops ops;
    char err[256] = "";
    void *st = NULL;
    cmb_upstream *sim;
    cmb_upstream_config_default(&ucfg);
    assert_int_equal(cmb_upstream_open(&ucfg, &sim, err, sizeof err), CMB_OK);
    up = *sim;
    ops = *sim->ops;
    ops.va_reserve = NULL;
    up.ops = &ops;
    cmb_config cfg = {.sim = 1, .error = err, .error_len = sizeof err};
    assert_int_equal(cmb_cmb_methods.create(&cfg, &up, &st), CMB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "virtual memory"));
    cmb_upstream_close(sim);
}

/* --- placement and pages by hand ------------------------------------------------------ */

/* Blocks are packed to 512 B and share their boundary pages: three 3 MiB
 * blocks hold 5 pages (9 MiB in 10), where one range per block would hold 6. */
static void packing_shares_pages(void **state)
{
    (void)state;
    fx f = open_fx(NULL, 0);
    void *a = get(&f, 3 * MiB, S1);
    void *b = get(&f, 3 * MiB, S1);
    void *c = get(&f, 3 * MiB - 100, S1);
    assert_int_equal((uintptr_t)b, (uintptr_t)a + 3 * MiB);
    assert_int_equal((uintptr_t)c, (uintptr_t)b + 3 * MiB);
    assert_int_equal(RESERVED(&f), 10 * MiB);
    assert_int_equal(stats(&f).allocated.current, 9 * MiB);
    assert_int_equal(counters(&f).map_calls, 5); /* one call per page, never more */

    /* small requests live in their own range, away from the large blocks */
    void *s = get(&f, 1000, S1);
    uintptr_t d = (uintptr_t)s > (uintptr_t)a ? (uintptr_t)s - (uintptr_t)a : (uintptr_t)a - (uintptr_t)s;
    assert_true(d >= 1ull << 30);
    assert_int_equal(RESERVED(&f), 12 * MiB);
    put(&f, s, 1000, S1);
    put(&f, b, 3 * MiB, S1);
    put(&f, a, 3 * MiB, S1);
    put(&f, c, 3 * MiB - 100, S1);
    assert_int_equal(f.m->trim(f.st), CMB_OK);
    assert_int_equal(RESERVED(&f), 0);
    close_fx(&f);
}

/* A block freed and asked for again on its stream comes back from the fast
 * bin: same address, no tree search, no upstream call; a request of another
 * size coalesces the bins first, so best fit sees every free byte. */
static void fast_bin_and_coalescing(void **state)
{
    (void)state;
    fx f = open_fx(NULL, 0);
    void *a = get(&f, 5 * MiB, S1);
    void *b = get(&f, 7 * MiB, S1);
    cmb_cmb_counters c0 = counters(&f);
    put(&f, a, 5 * MiB, S1);
    void *a2 = get(&f, 5 * MiB, S1);
    assert_ptr_equal(a2, a);
    cmb_cmb_counters c1 = counters(&f);
    assert_int_equal(c1.bin_hits, c0.bin_hits + 1);
    assert_int_equal(c1.map_calls, c0.map_calls);
    put(&f, a2, 5 * MiB, S1);
    put(&f, b, 7 * MiB, S1);
    /* 12 MiB: a and b merged back into one free block at a */
    void *big = get(&f, 12 * MiB, S1);
    assert_ptr_equal(big, a);
    assert_int_equal(counters(&f).map_calls, c1.map_calls);
    assert_int_equal(RESERVED(&f), 12 * MiB);
    put(&f, big, 12 * MiB, S1);
    close_fx(&f);
}

/* A request that does not fit a free block grows the free block before a
 * hole: only the missing pages are mapped, right after it. */
static void growth_maps_only_missing_pages(void **state)
{
    (void)state;
    fx f = open_fx("fast_bins=false", 0);
    void *a = get(&f, 4 * MiB, S1); /* pages 0-1 */
    put(&f, a, 4 * MiB, S1);        /* cached */
    uint64_t maps = counters(&f).map_calls;
    void *b = get(&f, 9 * MiB, S1); /* reuses the 2 cached pages, maps 3 more */
    assert_ptr_equal(b, a);
    /* pages 2-3, wholly under b, in one handle; page 4, which b shares with
     * whatever comes next, in one of its own */
    assert_int_equal(counters(&f).map_calls - maps, 2);
    assert_int_equal(RESERVED(&f), 10 * MiB);
    put(&f, b, 9 * MiB, S1);
    close_fx(&f);
}

/* Handles: a block's pages are mapped in handles of up to `chunk` pages and
 * only whole handles are unmapped, so a live block over part of a cached
 * handle keeps all of it (the driver cannot unmap part of a handle). */
static void live_block_pins_its_handle(void **state)
{
    (void)state;
    fx f = open_fx("fast_bins=false", 0); /* chunk=4: 8 MiB handles */
    void *a = get(&f, 16 * MiB, S1);       /* pages 0-7: two handles */
    assert_int_equal(counters(&f).map_calls, 2);
    put(&f, a, 16 * MiB, S1);
    void *b = get(&f, 2 * MiB, S1);        /* page 0, inside the first handle */
    assert_ptr_equal(b, a);
    uint64_t unmaps = counters(&f).unmap_calls;
    assert_int_equal(f.m->trim(f.st), CMB_OK);
    assert_int_equal(RESERVED(&f), 8 * MiB); /* pages 0-3 stay: b pins them */
    assert_int_equal(counters(&f).unmap_calls - unmaps, 1);
    assert_int_equal(cmb_upstream_misuse_count(f.up), 0);
    put(&f, b, 2 * MiB, S1);
    assert_int_equal(f.m->trim(f.st), CMB_OK);
    assert_int_equal(RESERVED(&f), 0);
    close_fx(&f);
}

/* Stitching moves handles: a growth over the budget parks the cached
 * handles it takes (cuMemUnmap, the handle kept) and maps them under the new
 * block (cuMemMap), creating only what they do not cover (cuMemCreate +
 * cuMemMap), with one cuMemSetAccess over the block's pages: 5 driver calls
 * here where releasing and creating made 8 (6 with an access call per
 * handle), and the memory held never exceeds the budget in between. */
static void stitching_moves_handles(void **state)
{
    (void)state;
    fx f = open_fx("fast_bins=false:slack=0:keep=0", 0);
    void *a = get(&f, 8 * MiB, S1);  /* pages 0-3: one handle */
    void *b = get(&f, 2 * MiB, S1);  /* page 4 */
    put(&f, a, 8 * MiB, S1);         /* cached; the need's peak is 5 pages */
    uint64_t total = f.up->driver.total, create = f.up->driver.mem_create;
    void *c = get(&f, 10 * MiB, S1); /* pages 5-9: needs 5, the budget 6 */
    cmb_cmb_counters k = counters(&f);
    assert_int_equal(k.moved, 1);     /* a's handle, under pages 5-8 */
    assert_int_equal(f.up->driver.mem_create - create, 1); /* page 9 */
    assert_int_equal(f.up->driver.mem_release, 0);
    assert_int_equal(f.up->driver.total - total, 1 + 1 + 2 + 1);
    assert_int_equal(RESERVED(&f), 12 * MiB);
    assert_int_equal(f.up->stats.held_peak, 12 * MiB);
    assert_true(cmb_upstream_contains(f.up, c, 10 * MiB));
    assert_false(cmb_upstream_contains(f.up, a, 2 * MiB));
    put(&f, c, 10 * MiB, S1);
    put(&f, b, 2 * MiB, S1);
    close_fx(&f);
}

/* Stitching: after a checkerboard, the cached pages of the freed blocks are
 * scattered between live blocks; one block of all the remaining memory is
 * still served, by unmapping them and mapping a fresh range. */
static void checkerboard_then_one_large_block(void **state)
{
    (void)state;
    const uint64_t cap = 128 * MiB;
    fx f = open_fx(NULL, cap);
    void *p[30];
    for (int i = 0; i < 30; i++)
        p[i] = get(&f, 4 * MiB, S1); /* 120 MiB: 60 of the device's 64 pages */
    for (int i = 0; i < 30; i += 2)
        put(&f, p[i], 4 * MiB, S1);
    assert_int_equal(RESERVED(&f), 120 * MiB);
    uint64_t live = 15 * 4 * MiB;
    void *big = get(&f, cap - live, S1); /* 68 MiB: every page not under a live block */
    assert_int_equal(RESERVED(&f), (int64_t)cap);
    cmb_cmb_counters c = counters(&f);
    /* the 30 scattered pages moved: each freed block's two pages are one
     * handle between live blocks, unmapped in one call */
    assert_true(c.unmap_calls >= 15);
    put(&f, big, cap - live, S1);
    for (int i = 1; i < 30; i += 2)
        put(&f, p[i], 4 * MiB, S1);
    close_fx(&f);
}

/* Out of memory: the upstream refuses a page, every cached page is released
 * and the request is tried again (with slack=1 the budget never unmaps
 * first, so the retry is what makes room). */
static void oom_releases_cache_and_retries(void **state)
{
    (void)state;
    fx f = open_fx("slack=1", 64 * MiB);
    void *a = get(&f, 30 * MiB, S1);
    void *b = get(&f, 2 * MiB, S1);
    put(&f, a, 30 * MiB, S1);
    void *c = get(&f, 40 * MiB, S2);
    cmb_alloc_stats s = stats(&f);
    assert_int_equal(s.oom_retries, 1);
    assert_int_equal(s.reserved.current, 42 * MiB);
    void *d;
    assert_int_equal(f.m->allocate(f.st, 40 * MiB, S1, &d), CMB_ERR_OOM);
    assert_non_null(f.m->last_error(f.st));
    assert_int_equal(stats(&f).oom_retries, 2);
    put(&f, b, 2 * MiB, S1);
    put(&f, c, 40 * MiB, S2);
    close_fx(&f);
}

static void bad_frees_are_refused(void **state)
{
    (void)state;
    fx f = open_fx(NULL, 0);
    void *a = get(&f, 1000, S1);
    assert_int_equal(f.m->deallocate(f.st, (char *)a + 512, 1000, S1), CMB_ERR_INVALID);
    assert_int_equal(f.m->deallocate(f.st, a, 5000, S1), CMB_ERR_INVALID); /* not its size */
    put(&f, a, 1000, S1);
    assert_int_equal(f.m->deallocate(f.st, a, 1000, S1), CMB_ERR_INVALID); /* twice (it sits in a bin) */
    void *x;
    assert_int_equal(f.m->allocate(f.st, 0, S1, &x), CMB_ERR_INVALID);
    assert_int_equal(stats(&f).requested.current, 0);
    close_fx(&f);
}

/* --- the budget against an independent count ---------------------------------------------- */

typedef struct page_count {
    cmb_hashmap refs; /* page -> live blocks touching it */
    uint64_t touched, peak;
} page_count;

static void pages_touch(page_count *pc, uintptr_t p, size_t size, int delta)
{
    for (uintptr_t q = p / PAGE; q <= (p + size - 1) / PAGE; q++) {
        uint64_t n = 0;
        cmb_hashmap_get(&pc->refs, q + 1, &n);
        if (delta > 0 && n++ == 0)
            pc->touched++;
        if (delta < 0 && --n == 0)
            pc->touched--;
        if (n)
            cmb_hashmap_put(&pc->refs, q + 1, n);
        else
            cmb_hashmap_remove(&pc->refs, q + 1, NULL);
    }
    if (pc->touched > pc->peak)
        pc->peak = pc->touched;
}

/* With one stream and no bins, the pages the policy counts as needed are
 * exactly the pages live blocks touch, and it never holds more than
 * (1 + slack) x their peak. */
static void budget_bounds_reserved(void **state)
{
    (void)state;
    static const double slacks[] = {0, 0.005, 0.05};
    for (size_t k = 0; k < sizeof slacks / sizeof slacks[0]; k++) {
        char opts[64];
        /* chunk=1: every page its own handle, so any cached page can go and
         * the bound is exact (larger handles can be pinned by a live block:
         * over_budget counts those growths, docs/cmb.md); keep=0: the budget
         * does not widen once the traffic repeats (keep_widens_... below) */
        snprintf(opts, sizeof opts, "fast_bins=false:chunk=1:keep=0:slack=%g", slacks[k]);
        fx f = open_fx(opts, 16ull << 30);
        page_count pc = {0};
        assert_int_equal(cmb_hashmap_init(&pc.refs, 4096), 0);
        void *p[512] = {0};
        size_t sz[512];
        uint64_t rng = 12345 + k;
        for (int step = 0; step < 40000; step++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int i = (int)((rng >> 33) % 512);
            if (p[i]) {
                pages_touch(&pc, (uintptr_t)p[i], sz[i], -1);
                put(&f, p[i], sz[i], S1);
                p[i] = NULL;
            } else {
                uint64_t r = rng >> 20;
                sz[i] = r % 4 == 0 ? (size_t)(r % (64 * KiB)) + 1 : (size_t)(r % (24 * MiB)) + 1;
                p[i] = get(&f, sz[i], S1);
                pages_touch(&pc, (uintptr_t)p[i], sz[i], +1);
            }
            cmb_cmb_counters c = counters(&f);
            if (c.mapped_pages - c.cached_pages != pc.touched)
                fail_msg("step %d: the policy counts %llu needed pages, live blocks touch %llu", step,
                         (unsigned long long)(c.mapped_pages - c.cached_pages), (unsigned long long)pc.touched);
        }
        cmb_cmb_counters c = counters(&f);
        assert_int_equal(c.hwm_pages, pc.peak);
        assert_int_equal(c.over_budget, 0);
        uint64_t bound = pc.peak + (uint64_t)((double)pc.peak * slacks[k]);
        if ((uint64_t)f.up->stats.held_peak > bound * PAGE)
            fail_msg("slack %g: held %lld B at the peak, bound %llu pages", slacks[k],
                     (long long)f.up->stats.held_peak, (unsigned long long)bound);
        assert_true(c.budget_unmaps > 0);
        for (int i = 0; i < 512; i++)
            if (p[i])
                put(&f, p[i], sz[i], S1);
        cmb_hashmap_free(&pc.refs);
        close_fx(&f);
    }
}

/* --- stream order, over events the test completes ---------------------------------------- */

/* The sim upstream with its events and stream syncs under the test's control:
 * an event completes once the test opens the gate or its stream is synced. */
static struct gate {
    const cmb_upstream_ops *sim_ops;
    int open;
    int synced[8];    /* stream index -> synchronized since the last free on it */
    uintptr_t watch;  /* a block whose pages must stay mapped until ... */
    size_t watch_len;
    int watch_stream; /* ... this stream was synchronized or the gate opened */
    int violations;
} gate;

static cmb_status gate_event_record(cmb_upstream *u, cmb_stream s, cmb_event *ev)
{
    (void)u;
    *ev = (cmb_event)((uintptr_t)s + 1);
    return CMB_OK;
}

static cmb_status gate_event_rerecord(cmb_upstream *u, cmb_stream s, cmb_event ev)
{
    (void)u;
    (void)s;
    (void)ev;
    return CMB_OK;
}

static cmb_status gate_event_query(cmb_upstream *u, cmb_event ev)
{
    (void)u;
    int s = (int)((uintptr_t)ev - 1);
    return gate.open || gate.synced[s] ? CMB_OK : CMB_ERR_STATE;
}

static cmb_status gate_stream_sync(cmb_upstream *u, cmb_stream s)
{
    (void)u;
    gate.synced[(uintptr_t)s] = 1;
    return CMB_OK;
}

static cmb_status gate_unmap(cmb_upstream *u, void *va, size_t size)
{
    uintptr_t a = (uintptr_t)va;
    if (gate.watch && a < gate.watch + gate.watch_len && gate.watch < a + size && !gate.open &&
        !gate.synced[gate.watch_stream])
        gate.violations++;
    return gate.sim_ops->unmap(u, va, size);
}

static cmb_upstream_ops gate_ops;

static fx open_gated(const char *options, uint64_t capacity)
{
    fx f = open_fx(options, capacity);
    memset(&gate, 0, sizeof gate);
    gate.sim_ops = f.up->ops;
    gate_ops = *f.up->ops;
    gate_ops.event_record = gate_event_record;
    gate_ops.event_rerecord = gate_event_rerecord;
    gate_ops.event_query = gate_event_query;
    gate_ops.stream_sync = gate_stream_sync;
    gate_ops.unmap = gate_unmap;
    f.up->ops = &gate_ops;
    return f;
}

static void close_gated(fx *f)
{
    f->up->ops = gate.sim_ops;
    close_fx(f);
}

/* A block freed on S1 goes back to S1 at once and to S2 only after an event
 * recorded on S1 after the free has completed. */
static void freed_block_waits_for_its_stream(void **state)
{
    (void)state;
    fx f = open_gated(NULL, 0);
    void *x = get(&f, 8 * MiB, S1);
    put(&f, x, 8 * MiB, S1);
    void *y = get(&f, 8 * MiB, S2);
    assert_ptr_not_equal(y, x); /* S1's work on x may still run */
    void *x2 = get(&f, 8 * MiB, S1);
    assert_ptr_equal(x2, x); /* the same stream: ordered by the stream itself */
    put(&f, x2, 8 * MiB, S1);
    put(&f, y, 8 * MiB, S2);
    void *z = get(&f, 8 * MiB, S2);
    assert_ptr_equal(z, y); /* S2's own block, not x */
    gate.open = 1;          /* S1's event completes */
    void *w = get(&f, 8 * MiB, S2);
    assert_ptr_equal(w, x);
    assert_true(counters(&f).events > 0);
    put(&f, w, 8 * MiB, S2);
    put(&f, z, 8 * MiB, S2);
    close_gated(&f);
}

/* A block allocated on S1 and freed on S2 needs both streams' order: neither
 * stream reuses it before then (safe under PyTorch's rule and cudaFreeAsync's). */
static void cross_stream_free_needs_both(void **state)
{
    (void)state;
    fx f = open_gated("slack=1", 0); /* the budget never unmaps (it would synchronize) */
    void *x = get(&f, 6 * MiB, S1);
    put(&f, x, 6 * MiB, S2);
    void *a = get(&f, 6 * MiB, S1);
    void *b = get(&f, 6 * MiB, S2);
    assert_ptr_not_equal(a, x);
    assert_ptr_not_equal(b, x);
    gate.synced[2] = 1; /* S2 done, S1 still running */
    void *c = get(&f, 6 * MiB, S2);
    assert_ptr_not_equal(c, x);
    gate.synced[1] = 1;
    void *d = get(&f, 6 * MiB, S2);
    assert_ptr_equal(d, x);
    put(&f, a, 6 * MiB, S1);
    put(&f, b, 6 * MiB, S2);
    put(&f, c, 6 * MiB, S2);
    put(&f, d, 6 * MiB, S2);
    close_gated(&f);
}

/* Pages are never unmapped before the frees on them are ordered: the budget
 * synchronizes the stream a cached page was freed on before it unmaps it
 * (so it holds what sim predicts), trim() synchronizes first too. */
static void unmapping_waits_for_order(void **state)
{
    (void)state;
    fx f = open_gated("fast_bins=false", 0);
    void *a = get(&f, 20 * MiB, S1);
    void *s = get(&f, 2 * MiB, S1); /* a is not the neighbour of the hole b grows into */
    put(&f, a, 20 * MiB, S1);       /* 10 cached pages, S1 still running */
    gate.watch = (uintptr_t)a;
    gate.watch_len = 20 * MiB;
    gate.watch_stream = 1;
    void *b = get(&f, 40 * MiB, S2); /* a's pages move under b once S1 is done */
    assert_int_equal(gate.violations, 0);
    assert_int_equal(gate.synced[1], 1);
    assert_int_equal(gate.synced[2], 0); /* only the stream the pages wait for */
    cmb_cmb_counters c = counters(&f);
    assert_int_equal(c.over_budget, 0);
    assert_int_equal(c.syncs, 1);
    assert_int_equal(c.budget_unmaps, 10);
    assert_int_equal(RESERVED(&f), 42 * MiB);
    void *d = get(&f, 20 * MiB, S1);
    put(&f, d, 20 * MiB, S1); /* 10 cached pages again, S1 running again */
    gate.synced[1] = 0;
    gate.watch = (uintptr_t)d;
    assert_int_equal(f.m->trim(f.st), CMB_OK); /* synchronizes S1, then unmaps */
    assert_int_equal(gate.violations, 0);
    assert_int_equal(counters(&f).syncs, 2);
    assert_int_equal(RESERVED(&f), 42 * MiB);
    put(&f, b, 40 * MiB, S2);
    put(&f, s, 2 * MiB, S1);
    close_gated(&f);
}

/* Pages freed on the stream that grows move under its new block without a
 * synchronization: park_after leaves their old range mapped behind the
 * stream's queued work (stream order keeps that work before the new
 * block's); the pages themselves are never unmapped early. */
static void same_stream_moves_without_waiting(void **state)
{
    (void)state;
    fx f = open_gated("fast_bins=false", 0);
    void *a = get(&f, 20 * MiB, S1);
    void *s = get(&f, 2 * MiB, S1);
    put(&f, a, 20 * MiB, S1); /* 10 cached pages, S1 still running */
    gate.watch = (uintptr_t)a;
    gate.watch_len = 20 * MiB;
    gate.watch_stream = 1;
    void *b = get(&f, 40 * MiB, S1);
    assert_int_equal(gate.violations, 0);
    assert_int_equal(gate.synced[1], 0);
    cmb_cmb_counters c = counters(&f);
    assert_int_equal(c.syncs, 0);
    assert_true(c.parked_after > 0);
    assert_true(c.moved > 0);
    assert_int_equal(c.budget_unmaps, 10);
    assert_int_equal(RESERVED(&f), 42 * MiB);
    put(&f, b, 40 * MiB, S1);
    put(&f, s, 2 * MiB, S1);
    close_gated(&f);
}

/* --- the sample traces ----------------------------------------------------------------------- */

/* Replays a trace `passes` times (what is live at the end of a pass is
 * freed, as the replay scenario does) and returns the upstream calls of
 * passes `from` to the last, and the peak reserved / peak requested. */
static uint64_t replay_calls(const char *path, const char *options, int passes, int from, double *ratio)
{
    cmb_trace_reader r;
    cmb_trace_event ev;
    char err[640];
    fx f = open_fx(options, 80ull << 30);
    void **ptr = NULL;
    size_t *sz = NULL, n_ptr = 0;
    int64_t live = 0, peak = 0;
    uint64_t calls_before = 0;
    for (int pass = 0; pass < passes; pass++) {
        if (pass == from)
            calls_before = f.up->stats.alloc_calls + f.up->stats.free_calls;
        if (cmb_trace_open(&r, path, err, sizeof err))
            fail_msg("%s", err);
        int rc;
        while ((rc = cmb_trace_next(&r, &ev, err, sizeof err)) == 1) {
            if (ev.op == CMB_TRACE_SYNC)
                continue;
            if (ev.slot >= n_ptr) {
                size_t n = (ev.slot + 1) * 2;
                ptr = realloc(ptr, n * sizeof *ptr);
                sz = realloc(sz, n * sizeof *sz);
                memset(ptr + n_ptr, 0, (n - n_ptr) * sizeof *ptr);
                n_ptr = n;
            }
            cmb_stream s = (cmb_stream)(uintptr_t)(ev.stream + 1);
            if (ev.op == CMB_TRACE_ALLOC) {
                ptr[ev.slot] = get(&f, ev.size, s);
                sz[ev.slot] = ev.size;
                live += (int64_t)ev.size;
                peak = live > peak ? live : peak;
            } else {
                put(&f, ptr[ev.slot], ev.size, s);
                ptr[ev.slot] = NULL;
                live -= (int64_t)ev.size;
            }
        }
        assert_int_equal(rc, 0);
        cmb_trace_close(&r);
        for (size_t i = 0; i < n_ptr; i++) /* the pass's leftovers */
            if (ptr[i]) {
                put(&f, ptr[i], sz[i], S1);
                live -= (int64_t)sz[i];
                ptr[i] = NULL;
            }
    }
    uint64_t calls = f.up->stats.alloc_calls + f.up->stats.free_calls - calls_before;
    *ratio = (double)f.up->stats.held_peak / (double)peak;
    free(ptr);
    free(sz);
    close_fx(&f);
    return calls;
}

/* Replays a trace once over the sim upstream (an 80 GiB device) and returns
 * peak reserved / peak requested. */
static double replay_ratio(const char *path)
{
    double ratio;
    replay_calls(path, NULL, 1, 0, &ratio);
    return ratio;
}

/* The two training traces cmb was designed on, and the two recorded later
 * (a convnet, an LLM decode loop), which it was not tuned on; those two are
 * checked where the tree has them. */
static void sample_traces_within_two_percent(void **state)
{
    (void)state;
    const char *const *traces = cmb_test_torch_traces;
    for (size_t i = 0; i < CMB_TEST_TORCH_TRACES; i++) {
        char path[1024];
        if (!cmb_test_sample(traces[i], path, sizeof path) && i >= 2) {
            print_message("%s: not in this tree\n", traces[i]);
            continue;
        }
        double ratio = replay_ratio(path);
        print_message("%s: peak reserved / peak requested = %.4f\n", traces[i], ratio);
        if (ratio > 1.02)
            fail_msg("%s: peak reserved is %.4f x peak requested, above 1.02", traces[i], ratio);
    }
}


/* The budget's hysteresis (keep): the LLM decode loop, replayed again and
 * again, moves pages back and forth every pass under a budget of
 * (1 + slack) x its peak need; once its need has stopped rising the budget
 * widens by what the growths map, so from the fourth pass on nothing is
 * mapped or unmapped, and the peak stays within (1 + keep) x requested plus
 * what the first pass held. Without the widening (keep=0) every pass calls. */
static void keep_stops_pages_circulating(void **state)
{
    (void)state;
    char path[1024];
    if (!cmb_test_sample("torch_llm_decode.trace", path, sizeof path)) {
        print_message("torch_llm_decode.trace: not in this tree\n");
        skip();
    }
    double r0, r1;
    uint64_t without = replay_calls(path, "keep=0", 10, 3, &r0);
    uint64_t with = replay_calls(path, NULL, 10, 3, &r1);
    print_message("passes 4-10: %llu upstream calls with keep=0 (peak %.4f x requested), %llu with the default (%.4f)\n",
                  (unsigned long long)without, r0, (unsigned long long)with, r1);
    assert_true(without > 0);
    assert_int_equal(with, 0);
    assert_true(r1 <= 1.02);
}

/* The widening waits until the need has stopped rising for as long as it
 * took to reach its peak, and stops at (1 + keep) x the peak requested:
 * a growing sequence keeps the plain budget, a repeated one widens. */
static void keep_waits_for_a_steady_need(void **state)
{
    (void)state;
    /* slack=0, a page per handle: the plain budget is exactly the peak need */
    fx f = open_fx("fast_bins=false:chunk=1:slack=0:keep=0.5", 0);
    void *p[8];
    /* the need rises with every allocation: no widening */
    for (int i = 0; i < 8; i++)
        p[i] = get(&f, 4 * MiB, S1);
    assert_int_equal(counters(&f).widened, 0);
    for (int i = 0; i < 8; i += 2)
        put(&f, p[i], 4 * MiB, S1);
    /* 8 allocations without a new peak need (the bins are off: best fit
     * serves them from the freed blocks) */
    for (int k = 0; k < 8; k++) {
        void *q = get(&f, 4 * MiB, S1);
        put(&f, q, 4 * MiB, S1);
    }
    assert_int_equal(counters(&f).widened, 0);
    /* a block no free block fits: the need is steady, so the growth widens
     * the budget instead of unmapping the cached 4 MiB blocks */
    uint64_t unmaps = counters(&f).unmap_calls;
    void *big = get(&f, 8 * MiB, S1);
    cmb_cmb_counters c = counters(&f);
    assert_true(c.widened > 0);
    assert_int_equal(c.unmap_calls, unmaps);
    assert_int_equal(c.budget_unmaps, 0);
    /* never above (1 + keep) x the peak requested */
    cmb_alloc_stats st = stats(&f);
    assert_true((double)st.reserved.peak <= 1.5 * (double)st.requested.peak + PAGE);
    put(&f, big, 8 * MiB, S1);
    for (int i = 1; i < 8; i += 2)
        put(&f, p[i], 4 * MiB, S1);
    close_fx(&f);

    /* keep=0, the same sequence: the growth unmaps cached pages instead */
    fx g = open_fx("fast_bins=false:chunk=1:slack=0:keep=0", 0);
    for (int i = 0; i < 8; i++)
        p[i] = get(&g, 4 * MiB, S1);
    for (int i = 0; i < 8; i += 2)
        put(&g, p[i], 4 * MiB, S1);
    for (int k = 0; k < 8; k++) {
        void *q = get(&g, 4 * MiB, S1);
        put(&g, q, 4 * MiB, S1);
    }
    big = get(&g, 8 * MiB, S1);
    assert_int_equal(counters(&g).widened, 0);
    assert_true(counters(&g).budget_unmaps > 0);
    put(&g, big, 8 * MiB, S1);
    for (int i = 1; i < 8; i += 2)
        put(&g, p[i], 4 * MiB, S1);
    close_fx(&g);
}

/* --- a layout planned from a recording (option layout) ----------------------------------- */

static fx open_layout(const char *path, const char *more, uint64_t capacity)
{
    char opts[640];
    snprintf(opts, sizeof opts, "layout=%s%s%s", path, more ? ":" : "", more ? more : "");
    return open_fx(opts, capacity);
}

/* Replayed again, a recording is served from its layout: no upstream call
 * after the range is mapped, and the peak is the layout's (the transformer
 * sweep's best order holds 1.0011 x requested in 2 MiB pages,
 * results/sim/cmb-steady/alias-and-plan-bounds/plan.txt). */
static void layout_serves_its_recording(void **state)
{
    (void)state;
    char path[512], opts[600];
    if (!cmb_test_sample("torch_transformer_sweep.trace", path, sizeof path))
        fail_msg("torch_transformer_sweep.trace: not in this tree");
    snprintf(opts, sizeof opts, "layout=%s", path);
    double ratio, plain;
    uint64_t calls = replay_calls(path, opts, 3, 1, &ratio);
    print_message("layout: passes 2-3 made %llu upstream calls, peak %.4f x requested\n",
                  (unsigned long long)calls, ratio);
    assert_int_equal(calls, 0);
    assert_true(ratio <= 1.002);
    uint64_t without = replay_calls(path, NULL, 3, 1, &plain);
    assert_true(without > 0 && ratio < plain);
}

/* Placement by hand: a request takes the place of the recording's next
 * allocation of its size, passing over at most CMB_LAY_LOOKAHEAD (16) the
 * run does not repeat; one the recording does not have goes to the heaps. */
static void layout_follows_a_different_run(void **state)
{
    (void)state;
    static const char *const ev[] = {"a 1 1048576 0", "a 2 2097152 0", "a 3 3145728 0", "a 4 4194304 0",
                                     "f 1 0",         "f 2 0",         "f 3 0",         "f 4 0"};
    char path[512];
    fx f = open_layout(cmb_test_trace_of(path, sizeof path, ev, 8), NULL, 0);
    void *a = get(&f, 1 * MiB, S1);
    void *x = get(&f, 5 * MiB, S1); /* not in the recording */
    void *b = get(&f, 2 * MiB, S1);
    void *d = get(&f, 4 * MiB, S1); /* the recording's 3 MiB passed over */
    cmb_cmb_counters c = counters(&f);
    assert_int_equal(c.lay_hits, 3);
    assert_int_equal(c.lay_misses, 1);
    assert_int_equal(c.lay_skipped, 1);
    /* largest first, side by side: 4 MiB at the range's start, then 3, 2 and
     * 1 MiB (the 3 MiB place stays empty); x is outside the range */
    uintptr_t lo = (uintptr_t)d;
    assert_int_equal((uintptr_t)b, lo + 7 * MiB);
    assert_int_equal((uintptr_t)a, lo + 9 * MiB);
    assert_true((uintptr_t)x + 5 * MiB <= lo || (uintptr_t)x >= lo + 10 * MiB);
    put(&f, a, 1 * MiB, S1);
    put(&f, x, 5 * MiB, S1);
    put(&f, b, 2 * MiB, S1);
    put(&f, d, 4 * MiB, S1);
    /* the recording ended: the next request starts it again, at a's place */
    void *a2 = get(&f, 1 * MiB, S1);
    assert_ptr_equal(a2, a);
    put(&f, a2, 1 * MiB, S1);
    unlink(path);
    close_fx(&f);
}

/* A planned place freed on S1 goes to S2 only once S1's event completes,
 * as a free block of the heaps does; S1 itself takes it again at once. */
static void layout_keeps_stream_order(void **state)
{
    (void)state;
    static const char *const ev[] = {"a 1 8388608 0", "f 1 0", "a 2 8388608 1", "f 2 1"};
    char path[512];
    cmb_test_trace_of(path, sizeof path, ev, 4);
    char opts[600];
    snprintf(opts, sizeof opts, "layout=%s", path);
    fx f = open_gated(opts, 0);
    void *x = get(&f, 8 * MiB, S1);
    put(&f, x, 8 * MiB, S1);
    void *y = get(&f, 8 * MiB, S2); /* planned at x's place: S1's work may still run */
    assert_ptr_not_equal(y, x);
    assert_int_equal(counters(&f).lay_refused, 1);
    put(&f, y, 8 * MiB, S2);
    void *x2 = get(&f, 8 * MiB, S1); /* the recording again: S1 at x's place */
    assert_ptr_equal(x2, x);
    put(&f, x2, 8 * MiB, S1);
    gate.open = 1; /* S1's event completes */
    void *w = get(&f, 8 * MiB, S2);
    assert_ptr_equal(w, x);
    put(&f, w, 8 * MiB, S2);
    unlink(path);
    close_gated(&f);
}

/* A layout the device cannot hold is dropped at its first use; every
 * request then takes cmb's own path. */
static void layout_too_large_is_dropped(void **state)
{
    (void)state;
    static const char *const ev[] = {"a 1 41943040 0", "a 2 41943040 0", "f 1 0", "f 2 0"};
    char path[512];
    fx f = open_layout(cmb_test_trace_of(path, sizeof path, ev, 4), NULL, 64 * MiB);
    void *a = get(&f, 40 * MiB, S1);
    cmb_cmb_counters c = counters(&f);
    assert_int_equal(c.lay_dropped, 1);
    assert_int_equal(c.lay_hits, 0);
    assert_true(stats(&f).reserved.current <= (int64_t)(42 * MiB));
    put(&f, a, 40 * MiB, S1);
    unlink(path);
    close_fx(&f);
}

/* A layout option naming no readable trace, or one without an allocation,
 * is refused at creation with the path in the message. */
static void layout_bad_trace_is_refused(void **state)
{
    (void)state;
    static const char *const ev[] = {"a 1 1024 0", "f 1 0"};
    char path[512], err[512];
    err[0] = '\0';
    assert_int_equal(try_create("layout", "/nonexistent/run.trace", err, sizeof err), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "/nonexistent/run.trace"));
    cmb_test_trace_of(path, sizeof path, ev, 0);
    err[0] = '\0';
    assert_int_equal(try_create("layout", path, err, sizeof err), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "no allocation"));
    unlink(path);
    cmb_test_trace_of(path, sizeof path, ev, 2);
    assert_int_equal(try_create("layout", path, err, sizeof err), CMB_OK);
    unlink(path);
}

/* Random traffic on three streams, with fault injection, over a layout
 * whose sizes it repeats often (sizes up to 4 KiB: eight rounded sizes),
 * so requests take planned places, are refused them and miss them. */
static void layout_conformance(void **state)
{
    (void)state;
    enum { N = 4000 };
    unsigned long long live[64];
    int n_live = 0;
    uint64_t x = 12345;
    cmb_test_trace t;
    cmb_test_trace_open(&t);
    for (unsigned long long id = 1, n = 0; n < 2 * N - 64; n++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        if (n_live < 64 && (x >> 60) < 9) {
            cmb_test_trace_alloc(&t, id, (x >> 20) % 4096 + 1, (int)((x >> 40) % 3));
            live[n_live++] = id++;
        } else if (n_live) {
            int k = (int)((x >> 30) % (uint64_t)n_live);
            cmb_test_trace_free(&t, live[k], 0);
            live[k] = live[--n_live];
        } else {
            n--; /* nothing live to free: draw again */
        }
    }
    char path[512], opts[600];
    snprintf(path, sizeof path, "%s", cmb_test_trace_close(&t));
    snprintf(opts, sizeof opts, "layout=%s", path);
    cmb_conformance c = {.allocator = "cmb", .options = opts, .ops = 100000, .max_size = 4096, .streams = 3,
                         .seed = 52};
    cmb_conformance_random(&c);
    cmb_conformance f = {.allocator = "cmb", .options = opts, .ops = 40000, .max_size = 4096, .streams = 3,
                         .seed = 53};
    cmb_conformance_faults(&f);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conformance_default),
        cmocka_unit_test(conformance_options),
        cmocka_unit_test(conformance_tight),
        cmocka_unit_test(options_are_checked),
        cmocka_unit_test(needs_virtual_memory),
        cmocka_unit_test(packing_shares_pages),
        cmocka_unit_test(fast_bin_and_coalescing),
        cmocka_unit_test(growth_maps_only_missing_pages),
        cmocka_unit_test(checkerboard_then_one_large_block),
        cmocka_unit_test(stitching_moves_handles),
        cmocka_unit_test(oom_releases_cache_and_retries),
        cmocka_unit_test(bad_frees_are_refused),
        cmocka_unit_test(budget_bounds_reserved),
        cmocka_unit_test(live_block_pins_its_handle),
        cmocka_unit_test(freed_block_waits_for_its_stream),
        cmocka_unit_test(cross_stream_free_needs_both),
        cmocka_unit_test(unmapping_waits_for_order),
        cmocka_unit_test(same_stream_moves_without_waiting),
        cmocka_unit_test(sample_traces_within_two_percent),
        cmocka_unit_test(keep_stops_pages_circulating),
        cmocka_unit_test(keep_waits_for_a_steady_need),
        cmocka_unit_test(layout_serves_its_recording),
        cmocka_unit_test(layout_follows_a_different_run),
        cmocka_unit_test(layout_keeps_stream_order),
        cmocka_unit_test(layout_too_large_is_dropped),
        cmocka_unit_test(layout_bad_trace_is_refused),
        cmocka_unit_test(layout_conformance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
