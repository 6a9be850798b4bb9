/* test_policy_rmm.c - RMM's pool ("rmm-pool"), arena ("arena") and binning
 * ("binning") resources: the shared conformance checks, and hand-built
 * cases whose placements, peaks and largest free blocks follow from RMM's
 * rules (see docs/rmm.md). All on the sim upstream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/cmb_fittree.h"
#include "common/cmb_rng.h"
#include "allocators/registry.h"
#include "support/conformance.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* sim streams are small integers; NULL is the legacy default stream */
#define S1 ((cmb_stream)(uintptr_t)1)
#define S2 ((cmb_stream)(uintptr_t)2)

/* --- a small harness over one allocator instance ---------------------------------- */

typedef struct inst {
    cmb_upstream *up;
    const cmb_allocator_methods *m;
    void *st;
} inst;

static inst open_inst(const char *name, const char *options, uint64_t capacity)
{
    inst i;
    cmb_test_open(name, options, capacity, NULL, &i.up, &i.m, &i.st);
    return i;
}

static void close_inst(inst *i)
{
    assert_int_equal(i->m->destroy(i->st), CMB_OK);
    assert_int_equal(i->up->stats.held_current, 0);
    assert_int_equal(cmb_upstream_misuse_count(i->up), 0);
    cmb_upstream_close(i->up);
}

static uintptr_t get(inst *i, size_t size, cmb_stream s)
{
    void *p = NULL;
    cmb_status st = i->m->allocate(i->st, size, s, &p);
    if (st != CMB_OK)
        fail_msg("%s: allocate(%zu) failed: %s", i->m->name, size, cmb_status_str(st));
    return (uintptr_t)p;
}

static cmb_status try_get(inst *i, size_t size, cmb_stream s)
{
    void *p = NULL;
    return i->m->allocate(i->st, size, s, &p);
}

static void put(inst *i, uintptr_t p, size_t size, cmb_stream s)
{
    assert_int_equal(i->m->deallocate(i->st, (void *)p, size, s), CMB_OK);
}

static cmb_alloc_stats stats(inst *i)
{
    cmb_alloc_stats s;
    assert_int_equal(i->m->stats(i->st, &s), CMB_OK);
    return s;
}

/* --- conformance ------------------------------------------------------------------- */

static void pool_random(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "rmm-pool", .ops = 100000, .streams = 3, .seed = 11};
    cmb_conformance_random(&c);
}

static void pool_random_growing(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "rmm-pool", .options = "initial_pool_size=0", .ops = 100000,
                         .streams = 2, .seed = 12};
    cmb_conformance_random(&c);
}

static void pool_faults(void **state)
{
    (void)state;
    /* a pool asks the upstream rarely (it doubles); a small device makes it
     * reach its limit, where every miss tries halving sizes */
    cmb_conformance c = {.allocator = "rmm-pool", .options = "initial_pool_size=0", .capacity = 256 * MiB,
                         .ops = 40000, .streams = 2, .seed = 13};
    cmb_conformance_faults(&c);
}

static void arena_random(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "arena", .ops = 100000, .streams = 3, .seed = 21};
    cmb_conformance_random(&c);
}

static void arena_random_size_classes(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "arena", .options = "size_classes=true", .ops = 60000, .streams = 2,
                         .seed = 22};
    cmb_conformance_random(&c);
}

static void arena_faults(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "arena", .ops = 40000, .streams = 2, .seed = 23};
    cmb_conformance_faults(&c);
}

static void binning_random(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "binning", .ops = 100000, .streams = 3, .seed = 31};
    cmb_conformance_random(&c);
}

static void binning_random_small_bins(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "binning", .options = "min_bin_exp=8:max_bin_exp=16:initial_pool_size=0",
                         .ops = 100000, .streams = 2, .max_size = 1 << 20, .seed = 32};
    cmb_conformance_random(&c);
}

static void binning_faults(void **state)
{
    (void)state;
    /* the bins' first chunks come from the initial pool: one upstream call */
    cmb_conformance c = {.allocator = "binning", .options = "initial_pool_size=64MiB:min_bin_exp=10:max_bin_exp=14",
                         .capacity = 256 * MiB, .ops = 40000, .streams = 2, .seed = 33};
    cmb_conformance_faults(&c);
}


/* --- the fit tree under random operations, against a linear scan -------------------- */

static void fittree_random(void **state)
{
    (void)state;
    enum { N = 1500 };
    static cmb_ftnode nodes[N];
    static int in_tree[N];
    cmb_fittree t;
    cmb_rng r;
    cmb_ft_init(&t);
    cmb_rng_seed(&r, 5);
    memset(in_tree, 0, sizeof in_tree);
    for (int step = 0; step < 40000; step++) {
        int i = (int)cmb_rng_range(&r, 0, N - 1);
        if (in_tree[i]) {
            if (cmb_rng_uniform(&r) < 0.5) {
                cmb_ft_erase(&t, &nodes[i]);
                in_tree[i] = 0;
            } else {
                cmb_ft_update(&t, &nodes[i], nodes[i].key, cmb_rng_range(&r, 1, 1000));
            }
        } else {
            nodes[i].key = (uint64_t)i * 16; /* unique keys */
            nodes[i].size = cmb_rng_range(&r, 1, 1000);
            cmb_ft_insert(&t, &nodes[i]);
            in_tree[i] = 1;
        }
        if (step % 101 == 0)
            assert_true(cmb_ft_validate(&t) >= 0);
        if (step % 7 == 0) {
            uint64_t want = cmb_rng_range(&r, 1, 1100), q = cmb_rng_range(&r, 0, N * 16);
            int first = -1, fl = -1, ce = -1;
            uint64_t max = 0;
            for (int j = 0; j < N; j++) {
                if (!in_tree[j])
                    continue;
                if (nodes[j].size >= want && first < 0)
                    first = j;
                if (nodes[j].key <= q)
                    fl = j;
                if (nodes[j].key >= q && ce < 0)
                    ce = j;
                if (nodes[j].size > max)
                    max = nodes[j].size;
            }
            cmb_ftnode *f = cmb_ft_first_fit(&t, want);
            assert_ptr_equal(f, first < 0 ? NULL : &nodes[first]);
            assert_ptr_equal(cmb_ft_floor(&t, q), fl < 0 ? NULL : &nodes[fl]);
            assert_ptr_equal(cmb_ft_ceil(&t, q), ce < 0 ? NULL : &nodes[ce]);
            assert_int_equal(cmb_ft_max(&t), max);
        }
    }
    assert_true(cmb_ft_validate(&t) >= 0);
    cmb_ft_clear(&t, NULL, NULL);
    assert_int_equal(t.count, 0);
}

/* --- rmm-pool: initial size, growth, best fit, coalescing, streams -------------------- */

/* Creates `name` over an upstream the test opened itself. */
static void create_on(inst *i, const char *name, cmb_option *opt, size_t n)
{
    char err[256] = "";
    const cmb_allocator_entry *e = cmb_allocator_find(name);
    assert_non_null(e);
    cmb_config cfg = {.options = opt, .n_options = n, .sim = 1, .error = err, .error_len = sizeof err};
    i->m = e->methods;
    if (i->m->create(&cfg, i->up, &i->st) != CMB_OK)
        fail_msg("creating %s: %s", name, err);
}

static cmb_status create_fails(const char *name, cmb_option *opt, size_t n, char *err, size_t errlen)
{
    cmb_upstream_config ucfg;
    cmb_upstream *up;
    void *st;
    cmb_upstream_config_default(&ucfg);
    ucfg.sim_capacity = 1 * GiB;
    assert_int_equal(cmb_upstream_open(&ucfg, &up, err, errlen), CMB_OK);
    cmb_config cfg = {.options = opt, .n_options = n, .sim = 1, .error = err, .error_len = errlen};
    cmb_status s = cmb_allocator_find(name)->methods->create(&cfg, up, &st);
    assert_int_not_equal(s, CMB_OK);
    assert_int_equal(up->stats.held_current, 0);
    cmb_upstream_close(up);
    return s;
}

static void pool_initial_size(void **state)
{
    (void)state;
    /* default: half of an 8 GiB device */
    inst i = open_inst("rmm-pool", NULL, 8 * GiB);
    cmb_alloc_stats s = stats(&i);
    assert_int_equal(s.reserved.current, 4 * GiB);
    assert_int_equal(s.upstream_allocs, 1);
    assert_int_equal(s.largest_free, 4 * GiB);
    close_inst(&i);

    /* percent_of_free_device_memory(50) (RMM >= 24.02): half the FREE
     * memory. 700 MiB of a 1 GiB device already in use: 162 MiB, where
     * RMM 23.12's min(free, total / 2) took all 324 MiB left */
    cmb_upstream_config ucfg;
    char err[256];
    void *used;
    cmb_upstream_config_default(&ucfg);
    ucfg.sim_capacity = 1 * GiB;
    assert_int_equal(cmb_upstream_open(&ucfg, &i.up, err, sizeof err), CMB_OK);
    assert_int_equal(cmb_up_alloc(i.up, 700 * MiB, NULL, &used), CMB_OK);
    create_on(&i, "rmm-pool", NULL, 0);
    s = stats(&i);
    assert_int_equal(s.reserved.current, 700 * MiB + 162 * MiB);
    assert_int_equal(s.largest_free, 162 * MiB);
    assert_int_equal(i.m->destroy(i.st), CMB_OK);
    assert_int_equal(cmb_up_free(i.up, used, 700 * MiB, NULL), CMB_OK);
    assert_int_equal(cmb_upstream_close(i.up), 0);

    /* aligned DOWN to 256 B: 8 GiB + 300 B free -> 4 GiB + 150 B -> 4 GiB
     * (23.12 would have aligned up, to 4 GiB + 256 B) */
    ucfg.sim_capacity = 8 * GiB + 300;
    assert_int_equal(cmb_upstream_open(&ucfg, &i.up, err, sizeof err), CMB_OK);
    create_on(&i, "rmm-pool", NULL, 0);
    assert_int_equal(stats(&i).reserved.current, 4 * GiB);
    assert_int_equal(i.m->destroy(i.st), CMB_OK);
    assert_int_equal(cmb_upstream_close(i.up), 0);

    /* binning's pool follows the same rule */
    ucfg.sim_capacity = 1 * GiB;
    assert_int_equal(cmb_upstream_open(&ucfg, &i.up, err, sizeof err), CMB_OK);
    assert_int_equal(cmb_up_alloc(i.up, 700 * MiB, NULL, &used), CMB_OK);
    cmb_option no_bins[2] = {{"min_bin_exp", "20"}, {"max_bin_exp", "19"}}; /* the bare pool */
    create_on(&i, "binning", no_bins, 2);
    assert_int_equal(stats(&i).reserved.current, 700 * MiB + 162 * MiB);
    assert_int_equal(i.m->destroy(i.st), CMB_OK);
    assert_int_equal(cmb_up_free(i.up, used, 700 * MiB, NULL), CMB_OK);
    assert_int_equal(cmb_upstream_close(i.up), 0);
}

static void pool_grows_by_doubling(void **state)
{
    (void)state;
    inst i = open_inst("rmm-pool", "initial_pool_size=1MiB", 1 * GiB);
    /* eight 1 MiB requests: growth max(size, pool_size) gives 1+1+2+4 MiB */
    for (int k = 0; k < 8; k++)
        get(&i, 1 * MiB, NULL);
    cmb_alloc_stats s = stats(&i);
    assert_int_equal(s.reserved.current, 8 * MiB);
    assert_int_equal(s.upstream_allocs, 4);
    assert_int_equal(s.largest_free, 0);
    /* 256 B: the pool doubles to 16 MiB; 8 MiB - 256 B stay free */
    get(&i, 1, NULL);
    s = stats(&i);
    assert_int_equal(s.reserved.current, 16 * MiB);
    assert_int_equal(s.largest_free, 8 * MiB - 256);
    assert_int_equal(s.allocated.current, 8 * MiB + 256);
    assert_int_equal(s.requested.current, 8 * MiB + 1);
    /* a request larger than the pool grows by exactly its size */
    get(&i, 40 * MiB, NULL);
    s = stats(&i);
    assert_int_equal(s.reserved.current, 56 * MiB);
    assert_int_equal(s.reserved.peak, 56 * MiB);
    close_inst(&i);
}

static void pool_grows_toward_maximum(void **state)
{
    (void)state;
    inst i = open_inst("rmm-pool", "initial_pool_size=0:maximum_pool_size=64MiB", 1 * GiB);
    assert_int_equal(stats(&i).reserved.current, 0);
    get(&i, 1 * MiB, S1); /* max(1 MiB, 64 / 2) = 32 MiB */
    assert_int_equal(stats(&i).reserved.current, 32 * MiB);
    assert_int_equal(try_get(&i, 40 * MiB, S1), CMB_ERR_OOM); /* 40 > remaining 32 */
    assert_int_equal(stats(&i).reserved.current, 32 * MiB);
    get(&i, 20 * MiB, S1); /* fits: 31 MiB free */
    get(&i, 20 * MiB, S1); /* 11 free: grow max(20, 32 / 2) = 20 */
    assert_int_equal(stats(&i).reserved.current, 52 * MiB);
    assert_int_equal(try_get(&i, 13 * MiB, S1), CMB_ERR_OOM); /* 11 free, 12 remaining */
    get(&i, 12 * MiB, S1);                                    /* grows by max(12, 6) */
    cmb_alloc_stats s = stats(&i);
    assert_int_equal(s.reserved.current, 64 * MiB);
    assert_int_equal(s.upstream_allocs, 3);
    assert_int_equal(s.largest_free, 11 * MiB);
    close_inst(&i);
}

static void pool_backs_off_by_halving(void **state)
{
    (void)state;
    inst i = open_inst("rmm-pool", "initial_pool_size=4MiB", 6 * MiB);
    get(&i, 4 * MiB, NULL);
    get(&i, 1 * MiB, NULL); /* tries 4 MiB (fails: 2 MiB left), then 2 MiB */
    cmb_alloc_stats s = stats(&i);
    assert_int_equal(s.reserved.current, 6 * MiB);
    assert_int_equal(s.upstream_allocs, 2);
    assert_int_equal(i.up->stats.failed_calls, 1);
    assert_int_equal(s.largest_free, 1 * MiB);
    /* nothing left: 2 MiB fails at 2 MiB (the pool's 6 MiB), 4 MiB, 2 MiB */
    assert_int_equal(try_get(&i, 2 * MiB, NULL), CMB_ERR_OOM);
    assert_non_null(i.m->last_error(i.st));
    close_inst(&i);
}

static void pool_best_fit(void **state)
{
    (void)state;
    inst i = open_inst("rmm-pool", "initial_pool_size=16MiB", 1 * GiB);
    uintptr_t a = get(&i, 1 * MiB, NULL);
    uintptr_t b = get(&i, 3 * MiB, NULL);
    uintptr_t c = get(&i, 1 * MiB, NULL);
    uintptr_t d = get(&i, 2 * MiB, NULL);
    uintptr_t e = get(&i, 1 * MiB, NULL);
    uintptr_t f = get(&i, 2 * MiB, NULL);
    uintptr_t g = get(&i, 1 * MiB, NULL);
    assert_int_equal(b, a + 1 * MiB); /* split from the front, in order */
    assert_int_equal(g, a + 10 * MiB);
    put(&i, b, 3 * MiB, NULL);
    put(&i, d, 2 * MiB, NULL);
    put(&i, f, 2 * MiB, NULL);
    /* free: b 3 MiB, d 2 MiB, f 2 MiB, tail 5 MiB. 1.5 MiB: the smallest
     * fitting block, the lowest address among equals: d (first fit: b) */
    assert_int_equal(get(&i, 3 * MiB / 2, NULL), d);
    assert_int_equal(get(&i, 2 * MiB, NULL), f);
    assert_int_equal(get(&i, 3 * MiB, NULL), b);
    assert_int_equal(get(&i, 4 * MiB, NULL), g + 1 * MiB);
    assert_int_equal(stats(&i).largest_free, 1 * MiB);
    (void)c;
    (void)e;
    close_inst(&i);
}

static void pool_coalesces_neighbours(void **state)
{
    (void)state;
    inst i = open_inst("rmm-pool", "initial_pool_size=4MiB", 1 * GiB);
    uintptr_t x = get(&i, 1 * MiB, S1), y = get(&i, 1 * MiB, S1), z = get(&i, 1 * MiB, S1);
    uintptr_t w = get(&i, 1 * MiB, S1);
    put(&i, x, 1 * MiB, S1);
    put(&i, z, 1 * MiB, S1);
    assert_int_equal(stats(&i).largest_free, 1 * MiB);
    put(&i, y, 1 * MiB, S1); /* merges with both neighbours */
    assert_int_equal(stats(&i).largest_free, 3 * MiB);
    put(&i, w, 1 * MiB, S1);
    assert_int_equal(stats(&i).largest_free, 4 * MiB);
    assert_int_equal(get(&i, 4 * MiB, S1), x); /* one block again: no growth */
    cmb_alloc_stats s = stats(&i);
    assert_int_equal(s.reserved.peak, 4 * MiB);
    assert_int_equal(s.upstream_allocs, 1);
    close_inst(&i);
}

static void pool_keeps_upstream_blocks_apart(void **state)
{
    (void)state;
    inst i = open_inst("rmm-pool", "initial_pool_size=1MiB", 1 * GiB);
    uintptr_t a = get(&i, 1 * MiB, NULL);
    uintptr_t b = get(&i, 1 * MiB, NULL); /* a second upstream block */
    assert_int_equal(b, a + 1 * MiB);     /* adjacent in the sim address space */
    put(&i, a, 1 * MiB, NULL);
    put(&i, b, 1 * MiB, NULL);
    assert_int_equal(stats(&i).largest_free, 1 * MiB); /* b heads its block */
    get(&i, 2 * MiB, NULL);                            /* so 2 MiB needs growth */
    cmb_alloc_stats s = stats(&i);
    assert_int_equal(s.reserved.current, 4 * MiB);
    assert_int_equal(s.upstream_allocs, 3);
    /* trim gives nothing back */
    assert_int_equal(i.m->trim(i.st), CMB_OK);
    assert_int_equal(stats(&i).reserved.current, 4 * MiB);
    close_inst(&i);
}

static void pool_streams(void **state)
{
    (void)state;
    inst i = open_inst("rmm-pool", "initial_pool_size=4MiB", 1 * GiB);
    /* S1 takes the initial pool (the default stream's list) */
    uintptr_t a = get(&i, 2 * MiB, S1), b = get(&i, 2 * MiB, S1);
    /* stream-local reuse */
    put(&i, a, 2 * MiB, S1);
    assert_int_equal(get(&i, 2 * MiB, S1), a);
    put(&i, a, 2 * MiB, S1);
    /* S2 finds nothing of its own: it takes S1's block, the rest stays with S1 */
    assert_int_equal(get(&i, 1 * MiB, S2), a);
    assert_int_equal(get(&i, 1 * MiB, S1), a + 1 * MiB);
    assert_int_equal(stats(&i).reserved.current, 4 * MiB);
    put(&i, a, 1 * MiB, S2);
    put(&i, a + 1 * MiB, 1 * MiB, S1);
    /* 2 MiB on S1: its own 1 MiB and S2's 1 MiB fit only once merged */
    assert_int_equal(stats(&i).largest_free, 1 * MiB);
    assert_int_equal(get(&i, 2 * MiB, S1), a);
    cmb_alloc_stats s = stats(&i);
    assert_int_equal(s.reserved.peak, 4 * MiB);
    assert_int_equal(s.upstream_allocs, 1);
    put(&i, b, 2 * MiB, S2);
    close_inst(&i);
}

static void pool_options(void **state)
{
    (void)state;
    char err[256];
    cmb_option bad_align = {"initial_pool_size", "1000"};
    assert_int_equal(create_fails("rmm-pool", &bad_align, 1, err, sizeof err), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "256"));
    cmb_option too_big[2] = {{"initial_pool_size", "64MiB"}, {"maximum_pool_size", "32MiB"}};
    assert_int_equal(create_fails("rmm-pool", too_big, 2, err, sizeof err), CMB_ERR_INVALID);
    cmb_option bogus = {"bogus", "1"};
    assert_int_equal(create_fails("rmm-pool", &bogus, 1, err, sizeof err), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "bogus"));
    cmb_option huge = {"initial_pool_size", "2GiB"};
    assert_int_equal(create_fails("rmm-pool", &huge, 1, err, sizeof err), CMB_ERR_OOM);
}

/* --- arena: superblocks, first fit, the large path, defragmentation ------------------ */

static void arena_superblocks(void **state)
{
    (void)state;
    inst i = open_inst("arena", "arena_size=64MiB", 1 * GiB);
    cmb_alloc_stats s = stats(&i);
    assert_int_equal(s.reserved.current, 64 * MiB);
    assert_int_equal(s.upstream_allocs, 1);
    assert_int_equal(s.largest_free, 64 * MiB);
    /* a small request takes a 1 MiB superblock from the front of the global arena */
    uintptr_t base = get(&i, 1, S1);
    assert_int_equal(get(&i, 1000, S1), base + 256);
    assert_int_equal(stats(&i).largest_free, 63 * MiB);
    /* another stream, another superblock */
    assert_int_equal(get(&i, 1, S2), base + 1 * MiB);
    /* address-ordered first fit: the lowest free address comes back */
    put(&i, base, 1, S1);
    assert_int_equal(get(&i, 256, S1), base);
    /* large requests go to the global arena: a superblock of exactly 3 MiB */
    uintptr_t big = get(&i, 3 * MiB, S1);
    assert_int_equal(big, base + 2 * MiB);
    assert_int_equal(stats(&i).largest_free, 59 * MiB);
    put(&i, big, 3 * MiB, S1); /* empty again: merges with the rest */
    assert_int_equal(stats(&i).largest_free, 62 * MiB);
    assert_int_equal(stats(&i).allocated.current, 256 + 1024 + 256);
    close_inst(&i);
}

static void arena_reuses_superblocks(void **state)
{
    (void)state;
    inst i = open_inst("arena", "arena_size=16MiB", 1 * GiB);
    uintptr_t p[5];
    for (int k = 0; k < 5; k++)
        p[k] = get(&i, 256 * KiB, S1);
    assert_int_equal(p[3], p[0] + 768 * KiB);
    assert_int_equal(p[4], p[0] + 1 * MiB); /* the second superblock */
    for (int k = 0; k < 5; k++)
        put(&i, p[k], 256 * KiB, S1);
    /* empty superblocks stay in the stream's arena and are reused */
    assert_int_equal(get(&i, 1 * MiB, S1), p[0]);
    assert_int_equal(get(&i, 1 * MiB, S1), p[0] + 1 * MiB);
    assert_int_equal(get(&i, 1 * MiB, S2), p[0] + 2 * MiB);
    assert_int_equal(stats(&i).largest_free, 13 * MiB);
    close_inst(&i);
}

static void arena_splits_large_superblocks(void **state)
{
    (void)state;
    inst i = open_inst("arena", "arena_size=8MiB", 1 * GiB);
    uintptr_t a = get(&i, 6 * MiB + 512 * KiB, S1); /* 8 >= 6.5 + 1: split */
    assert_int_equal(stats(&i).largest_free, 1536 * KiB);
    uintptr_t b = get(&i, 1200 * KiB, S1); /* 1.5 < 1.2 + 1: the whole superblock */
    assert_int_equal(b, a + 6 * MiB + 512 * KiB);
    assert_int_equal(stats(&i).largest_free, 336 * KiB);
    put(&i, a, 6 * MiB + 512 * KiB, S2); /* freed on another stream: still found */
    assert_int_equal(stats(&i).largest_free, 6 * MiB + 512 * KiB);
    put(&i, b, 1200 * KiB, S1);
    assert_int_equal(stats(&i).largest_free, 8 * MiB);
    close_inst(&i);
}

static void arena_defragments_on_oom(void **state)
{
    (void)state;
    inst i = open_inst("arena", "arena_size=4MiB", 1 * GiB);
    uintptr_t x = get(&i, 256, S1), y = get(&i, 256, S2);
    uintptr_t z = get(&i, 256, (cmb_stream)(uintptr_t)3);
    assert_int_equal(y, x + 1 * MiB);
    assert_int_equal(z, x + 2 * MiB);
    put(&i, x, 256, S1);
    put(&i, y, 256, S2);
    /* the global arena holds 1 MiB: 2 MiB only fits after the empty
     * superblocks of S1 and S2 come back and merge */
    assert_int_equal(stats(&i).largest_free, 1 * MiB);
    assert_int_equal(get(&i, 2 * MiB, S1), x);
    assert_int_equal(stats(&i).oom_retries, 1);
    /* nothing fits 3 MiB, even after defragmenting: out of memory */
    assert_int_equal(try_get(&i, 3 * MiB, S1), CMB_ERR_OOM);
    assert_int_equal(stats(&i).oom_retries, 2);
    const char *why = i.m->last_error(i.st);
    assert_non_null(why);
    assert_non_null(strstr(why, "out of memory"));
    /* z's superblock went to the global arena non-empty; its free still works */
    put(&i, z, 256, (cmb_stream)(uintptr_t)3);
    assert_int_equal(stats(&i).largest_free, 2 * MiB);
    assert_int_equal(stats(&i).blocks.current, 1);
    close_inst(&i);
}

static void arena_size_classes(void **state)
{
    (void)state;
    inst i = open_inst("arena", "arena_size=16MiB:size_classes=true", 1 * GiB);
    uintptr_t a = get(&i, 1000, S1);
    assert_int_equal(get(&i, 2100, S1), a + 1024);
    assert_int_equal(get(&i, 50 * KiB + 1, S1), a + 1024 + 2560);
    assert_int_equal(get(&i, 1, S1), a + 1024 + 2560 + 54 * KiB); /* RMM's 54 KiB class */
    assert_int_equal(stats(&i).allocated.current, 1024 + 2560 + 54 * KiB + 256);
    close_inst(&i);
}

static void arena_default_size_and_options(void **state)
{
    (void)state;
    inst i = open_inst("arena", NULL, 8 * GiB);
    assert_int_equal(stats(&i).reserved.current, 4 * GiB);
    close_inst(&i);
    char err[256];
    cmb_option tiny = {"arena_size", "512KiB"};
    assert_int_equal(create_fails("arena", &tiny, 1, err, sizeof err), CMB_ERR_INVALID);
    cmb_option sb = {"superblock_size", "1000"};
    assert_int_equal(create_fails("arena", &sb, 1, err, sizeof err), CMB_ERR_INVALID);
}

/* --- binning: bin rounding, chunks, FIFO lists, the pool behind ---------------------- */

static void binning_bins(void **state)
{
    (void)state;
    inst i = open_inst("binning", "initial_pool_size=1GiB", 4 * GiB);
    /* five bins preallocate 128 blocks each: 128 * (256K+...+4M) = 992 MiB */
    cmb_alloc_stats s = stats(&i);
    assert_int_equal(s.reserved.current, 1 * GiB);
    assert_int_equal(s.upstream_allocs, 1);
    assert_int_equal(s.allocated.current, 0);
    assert_int_equal(s.largest_free, 32 * MiB); /* the pool's rest */
    uintptr_t a = get(&i, 1, NULL);
    uintptr_t b = get(&i, 200 * KiB, NULL);
    assert_int_equal(b, a + 256 * KiB);
    get(&i, 256 * KiB + 1, NULL);
    get(&i, 4 * MiB, NULL);
    get(&i, 4 * MiB + 1, NULL); /* above the largest bin: the pool */
    s = stats(&i);
    assert_int_equal(s.allocated.current, 256 * KiB + 256 * KiB + 512 * KiB + 4 * MiB + 4 * MiB + 256);
    assert_int_equal(s.requested.current, 1 + 200 * KiB + 256 * KiB + 1 + 4 * MiB + 4 * MiB + 1);
    assert_int_equal(s.reserved.current, 1 * GiB);
    /* FIFO: a freed block goes to the back of the list */
    put(&i, a, 1, NULL);
    assert_int_equal(get(&i, 1, NULL), a + 512 * KiB);
    close_inst(&i);
}

static void binning_grows_in_chunks(void **state)
{
    (void)state;
    inst i = open_inst("binning", "initial_pool_size=4MiB:min_bin_exp=18:max_bin_exp=18:blocks_to_preallocate=2",
                       1 * GiB);
    uintptr_t b1 = get(&i, 1, NULL), b2 = get(&i, 1, NULL);
    uintptr_t b3 = get(&i, 1, NULL); /* a second chunk, from the pool */
    assert_int_equal(b2, b1 + 256 * KiB);
    assert_int_equal(b3, b1 + 512 * KiB);
    assert_int_equal(stats(&i).largest_free, 3 * MiB); /* pool: 4 - 2 * 512 KiB */
    /* S2 has no list: it takes the default stream's block, then S1's */
    put(&i, b1, 1, S1);
    assert_int_equal(get(&i, 1, S2), b3 + 256 * KiB);
    assert_int_equal(get(&i, 1, S2), b1);
    /* a large request goes to the pool, which doubles */
    get(&i, 4 * MiB, S2);
    cmb_alloc_stats s = stats(&i);
    assert_int_equal(s.reserved.current, 8 * MiB);
    assert_int_equal(s.upstream_allocs, 2);
    assert_int_equal(s.blocks.current, 5);
    close_inst(&i);
}

static void binning_options(void **state)
{
    (void)state;
    char err[256];
    cmb_option big = {"max_bin_exp", "50"};
    assert_int_equal(create_fails("binning", &big, 1, err, sizeof err), CMB_ERR_INVALID);
    /* min > max: no bins at all, everything goes to the pool */
    inst i = open_inst("binning", "initial_pool_size=8MiB:min_bin_exp=20:max_bin_exp=19", 1 * GiB);
    assert_int_equal(stats(&i).largest_free, 8 * MiB);
    uintptr_t a = get(&i, 100, S1);
    assert_int_equal(get(&i, 100, S1), a + 256);
    close_inst(&i);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_random),
        cmocka_unit_test(pool_random_growing),
        cmocka_unit_test(pool_faults),
        cmocka_unit_test(arena_random),
        cmocka_unit_test(arena_random_size_classes),
        cmocka_unit_test(arena_faults),
        cmocka_unit_test(binning_random),
        cmocka_unit_test(binning_random_small_bins),
        cmocka_unit_test(binning_faults),
        cmocka_unit_test(fittree_random),
        cmocka_unit_test(pool_initial_size),
        cmocka_unit_test(pool_grows_by_doubling),
        cmocka_unit_test(pool_grows_toward_maximum),
        cmocka_unit_test(pool_backs_off_by_halving),
        cmocka_unit_test(pool_best_fit),
        cmocka_unit_test(pool_coalesces_neighbours),
        cmocka_unit_test(pool_keeps_upstream_blocks_apart),
        cmocka_unit_test(pool_streams),
        cmocka_unit_test(pool_options),
        cmocka_unit_test(arena_superblocks),
        cmocka_unit_test(arena_reuses_superblocks),
        cmocka_unit_test(arena_splits_large_superblocks),
        cmocka_unit_test(arena_defragments_on_oom),
        cmocka_unit_test(arena_size_classes),
        cmocka_unit_test(arena_default_size_and_options),
        cmocka_unit_test(binning_bins),
        cmocka_unit_test(binning_grows_in_chunks),
        cmocka_unit_test(binning_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
