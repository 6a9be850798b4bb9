/* test_policy_torch.c - "torch-caching" and "torch-expandable": the shared
 * conformance checks, then hand-built cases whose reserved bytes, splits
 * and largest free block follow from PyTorch's rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/cmb_torch.h"
#include "support/conformance.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define S1 ((cmb_stream)(uintptr_t)1)
#define S2 ((cmb_stream)(uintptr_t)2)

/* --- a small fixture -------------------------------------------------------------- */

typedef struct fx {
    cmb_upstream *up;
    const cmb_allocator_methods *m;
    void *st;
} fx;

static fx open_fx(const char *allocator, const char *options, uint64_t capacity)
{
    fx f;
    cmb_test_open(allocator, options, capacity, NULL, &f.up, &f.m, &f.st);
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

#define RESERVED(f) (stats(f).reserved.current)
#define ALLOCATED(f) (stats(f).allocated.current)
#define LARGEST_FREE(f) (stats(f).largest_free)

/* --- the shared checks --------------------------------------------------------------- */

static void conformance_caching(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "torch-caching", .ops = 200000, .streams = 2, .seed = 11};
    cmb_conformance_random(&c);
    cmb_conformance f = {.allocator = "torch-caching", .ops = 40000, .streams = 2, .seed = 12};
    cmb_conformance_faults(&f);
}

static void conformance_caching_options(void **state)
{
    (void)state;
    const char *opts = "max_split_size=64MiB:roundup_power2_divisions=4:garbage_collection_threshold=0.6:"
                       "per_process_memory_fraction=0.9";
    cmb_conformance c = {.allocator = "torch-caching", .options = opts, .ops = 100000, .streams = 3, .seed = 13};
    cmb_conformance_random(&c);
    cmb_conformance f = {.allocator = "torch-caching", .options = opts, .ops = 40000, .streams = 2, .seed = 14};
    cmb_conformance_faults(&f);
}

static void conformance_expandable(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "torch-expandable", .ops = 200000, .streams = 2, .seed = 21};
    cmb_conformance_random(&c);
    cmb_conformance f = {.allocator = "torch-expandable", .ops = 40000, .streams = 2, .seed = 22};
    cmb_conformance_faults(&f);
}

/* A device small enough that the random traffic hits OOM and the
 * release-and-retry paths (unmapping, for expandable) all the time. */
static void conformance_tight(void **state)
{
    (void)state;
    cmb_conformance a = {.allocator = "torch-caching", .options = "max_split_size=32MiB", .capacity = 1ull << 30,
                         .ops = 100000, .streams = 2, .seed = 31};
    cmb_conformance_random(&a);
    cmb_conformance b = {.allocator = "torch-expandable", .capacity = 1ull << 30, .ops = 100000, .streams = 2,
                         .seed = 32};
    cmb_conformance_random(&b);
}

/* --- options -------------------------------------------------------------------------------- */

static cmb_status try_create(const char *allocator, const char *key, const char *value, char *err, size_t len)
{
    extern const cmb_allocator_methods cmb_torch_caching_methods, cmb_torch_expandable_methods;
    const cmb_allocator_methods *m =
        !strcmp(allocator, "torch-caching") ? &cmb_torch_caching_methods : &cmb_torch_expandable_methods;
    cmb_upstream_config ucfg;
    cmb_upstream *up;
    void *st = NULL;
    cmb_upstream_config_default(&ucfg);
    assert_int_equal(cmb_upstream_open(&ucfg, &up, err, len), CMB_OK);
    cmb_option opt = {key, value};
    cmb_config cfg = {.options = &opt, .n_options = 1, .sim = 1, .error = err, .error_len = len};
    cmb_status s = m->create(&cfg, up, &st);
    if (s == CMB_OK)
        m->destroy(st);
    cmb_upstream_close(up);
    return s;
}

static void options_are_checked(void **state)
{
    (void)state;
    char err[256];
    static const char *const bad[][2] = {
        {"bogus", "1"},
        {"max_split_size", "8MiB"},          /* below PyTorch's 20 MB minimum */
        {"max_split_size_mb", "19"},
        {"max_non_split_rounding_mb", "4"},
        {"roundup_power2_divisions", "3"},   /* not a power of two */
        {"roundup_power2_divisions", "256=3/>=1"},
        {"roundup_power2_divisions", "100=4"}, /* boundary not a power of two */
        {"roundup_power2_divisions", "x"},
        {"garbage_collection_threshold", "1.5"},
        {"per_process_memory_fraction", "2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(try_create("torch-caching", bad[i][0], bad[i][1], err, sizeof err), CMB_ERR_INVALID);
        assert_true(strlen(err) > 0);
    }
    assert_int_equal(try_create("torch-caching", "bogus", "1", err, sizeof err), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "bogus"));
    static const char *const good[][2] = {
        {"max_split_size", "max"}, {"max_split_size_mb", "128"}, {"roundup_power2_divisions", "256=4/512=2/>=1"},
        {"roundup_power2_divisions", "8"}, {"garbage_collection_threshold", "0.8"},
        {"per_process_memory_fraction", "0.5"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (try_create("torch-expandable", good[i][0], good[i][1], err, sizeof err) != CMB_OK)
            fail_msg("%s=%s refused: %s", good[i][0], good[i][1], err);
    }
}

/* --- torch-caching by hand -------------------------------------------------------------------- */

/* kMinBlockSize: sizes round up to 512 B; the small pool lives in 2 MiB
 * segments (kSmallBuffer), split while the remainder is >= 512 B. */
static void small_pool_rounding_and_split(void **state)
{
    (void)state;
    fx f = open_fx("torch-caching", NULL, 0);
    void *a = get(&f, 1, S1);
    assert_int_equal(ALLOCATED(&f), 512);
    assert_int_equal(RESERVED(&f), 2 * MiB);
    void *b = get(&f, 513, S1);
    assert_int_equal(ALLOCATED(&f), 512 + 1024);
    assert_int_equal((uintptr_t)b, (uintptr_t)a + 512); /* best fit: the front of the remainder */
    put(&f, a, 1, S1);
    put(&f, b, 513, S1);
    assert_int_equal(LARGEST_FREE(&f), 2 * MiB); /* coalesced back to one free segment */

    /* a 1 MiB request is small: a 2 MiB segment, and a second one fits beside it */
    void *c = get(&f, 1 * MiB, S1);
    void *d = get(&f, 1 * MiB - 512, S1);
    assert_int_equal(RESERVED(&f), 2 * MiB);
    assert_int_equal(LARGEST_FREE(&f), 512); /* remainder of exactly 512 B is split off */
    void *e = get(&f, 100, S1);             /* and serves the next small request */
    assert_int_equal(RESERVED(&f), 2 * MiB);
    assert_int_equal(LARGEST_FREE(&f), 0);
    void *g = get(&f, 100, S1); /* full: a second small segment */
    assert_int_equal(RESERVED(&f), 4 * MiB);
    put(&f, c, 1 * MiB, S1);
    put(&f, d, 1 * MiB - 512, S1);
    put(&f, e, 100, S1);
    put(&f, g, 100, S1);
    assert_int_equal(f.m->trim(f.st), CMB_OK);
    assert_int_equal(RESERVED(&f), 0);
    close_fx(&f);
}

/* get_allocation_size: 1-10 MiB -> 20 MiB (kLargeBuffer); from 10 MiB up the
 * request rounded to 2 MiB (kRoundLarge). */
static void large_segment_sizes(void **state)
{
    (void)state;
    static const struct {
        size_t request, segment;
    } cases[] = {
        {1 * MiB + 1, 20 * MiB}, {9 * MiB, 20 * MiB},  {10 * MiB - 512, 20 * MiB},
        {10 * MiB, 10 * MiB},    {11 * MiB, 12 * MiB}, {33 * MiB + 1, 34 * MiB},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fx f = open_fx("torch-caching", NULL, 0);
        void *p = get(&f, cases[i].request, S1);
        if (RESERVED(&f) != (int64_t)cases[i].segment)
            fail_msg("%zu B took a %lld B segment, expected %zu", cases[i].request, (long long)RESERVED(&f),
                     cases[i].segment);
        put(&f, p, cases[i].request, S1);
        close_fx(&f);
    }
}

/* should_split, large pool: only a remainder above 1 MiB (kSmallSize) is split. */
static void large_split_rule(void **state)
{
    (void)state;
    fx f = open_fx("torch-caching", NULL, 0);
    void *a = get(&f, 9 * MiB, S1); /* 20 MiB segment, 11 MiB remainder: split */
    assert_int_equal(ALLOCATED(&f), 9 * MiB);
    assert_int_equal(LARGEST_FREE(&f), 11 * MiB);
    void *b = get(&f, 10 * MiB, S1); /* best fit: the 11 MiB remainder; 1 MiB left: not split */
    assert_int_equal(RESERVED(&f), 20 * MiB);
    assert_int_equal(ALLOCATED(&f), 20 * MiB);
    assert_int_equal(LARGEST_FREE(&f), 0);
    assert_int_equal((uintptr_t)b, (uintptr_t)a + 9 * MiB);
    put(&f, b, 10 * MiB, S1);
    assert_int_equal(LARGEST_FREE(&f), 11 * MiB);

    void *c = get(&f, 19 * MiB, S1); /* a 20 MiB segment of its own, not split */
    assert_int_equal(RESERVED(&f), 40 * MiB);
    assert_int_equal(ALLOCATED(&f), 9 * MiB + 20 * MiB);
    put(&f, c, 19 * MiB, S1);
    put(&f, a, 9 * MiB, S1);
    close_fx(&f);
}

/* free_block: neighbours coalesce until the segment is one free block again. */
static void coalescing(void **state)
{
    (void)state;
    fx f = open_fx("torch-caching", NULL, 0);
    void *a = get(&f, 5 * MiB, S1);
    void *b = get(&f, 5 * MiB, S1);
    void *c = get(&f, 5 * MiB, S1);
    assert_int_equal(RESERVED(&f), 20 * MiB);
    assert_int_equal(LARGEST_FREE(&f), 5 * MiB);
    put(&f, b, 5 * MiB, S1);
    assert_int_equal(LARGEST_FREE(&f), 5 * MiB);
    put(&f, a, 5 * MiB, S1);
    assert_int_equal(LARGEST_FREE(&f), 10 * MiB);
    assert_int_equal(f.m->trim(f.st), CMB_OK); /* still split: empty_cache keeps it */
    assert_int_equal(RESERVED(&f), 20 * MiB);
    put(&f, c, 5 * MiB, S1);
    assert_int_equal(LARGEST_FREE(&f), 20 * MiB);
    void *d = get(&f, 18 * MiB, S1); /* the whole coalesced block serves it */
    assert_ptr_equal(d, a);
    assert_int_equal(RESERVED(&f), 20 * MiB);
    put(&f, d, 18 * MiB, S1);
    assert_int_equal(f.m->trim(f.st), CMB_OK);
    assert_int_equal(RESERVED(&f), 0);
    assert_int_equal(f.up->stats.free_calls, 1);
    close_fx(&f);
}

/* Blocks are cached per stream: another stream never reuses them. */
static void per_stream_pools(void **state)
{
    (void)state;
    fx f = open_fx("torch-caching", NULL, 0);
    void *a = get(&f, 5 * MiB, S1);
    put(&f, a, 5 * MiB, S1);
    void *b = get(&f, 5 * MiB, S2);
    assert_int_equal(RESERVED(&f), 40 * MiB);
    void *c = get(&f, 5 * MiB, S1);
    assert_ptr_equal(c, a);
    put(&f, b, 5 * MiB, S2);
    put(&f, c, 5 * MiB, S1);
    close_fx(&f);
}

/* max_split_size: oversize blocks serve only requests of at least that size,
 * at most max_non_split_rounding_size bigger, and are never split. */
static void max_split_size_rules(void **state)
{
    (void)state;
    fx f = open_fx("torch-caching", "max_split_size=32MiB", 0);
    void *a = get(&f, 40 * MiB, S1);
    put(&f, a, 40 * MiB, S1);
    void *b = get(&f, 30 * MiB, S1); /* below the limit: the oversize block is refused */
    assert_int_equal(RESERVED(&f), 70 * MiB);
    void *c = get(&f, 33 * MiB, S1); /* oversize request: takes the 40 MiB block whole */
    assert_ptr_equal(c, a);
    assert_int_equal(ALLOCATED(&f), 30 * MiB + 40 * MiB);
    assert_int_equal(LARGEST_FREE(&f), 0);
    put(&f, c, 33 * MiB, S1);
    put(&f, b, 30 * MiB, S1);
    close_fx(&f);

    f = open_fx("torch-caching", "max_split_size=32MiB", 0);
    a = get(&f, 80 * MiB, S1);
    put(&f, a, 80 * MiB, S1);
    b = get(&f, 60 * MiB, S1); /* 80 >= 60 + 20: too much rounding, a new segment */
    assert_int_equal(RESERVED(&f), 140 * MiB);
    c = get(&f, 61 * MiB, S1); /* 80 < 61 + 20: served by the cached block */
    assert_int_equal(RESERVED(&f), 140 * MiB);
    put(&f, b, 60 * MiB, S1);
    put(&f, c, 61 * MiB, S1);
    close_fx(&f);

    /* a block split before it ever became oversize: the default limit splits it */
    f = open_fx("torch-caching", NULL, 0);
    a = get(&f, 80 * MiB, S1);
    put(&f, a, 80 * MiB, S1);
    b = get(&f, 30 * MiB, S1);
    assert_int_equal(RESERVED(&f), 80 * MiB);
    assert_int_equal(LARGEST_FREE(&f), 50 * MiB);
    put(&f, b, 30 * MiB, S1);
    close_fx(&f);
}

/* OOM: free the cache and retry; num_alloc_retries counts the last retry. */
static void oom_frees_cache_and_retries(void **state)
{
    (void)state;
    fx f = open_fx("torch-caching", NULL, 64 * MiB);
    void *a = get(&f, 40 * MiB, S1);
    put(&f, a, 40 * MiB, S1);
    void *b = get(&f, 30 * MiB, S2); /* 40 + 30 > 64: release_cached_blocks, retry */
    cmb_alloc_stats s = stats(&f);
    assert_int_equal(s.reserved.current, 30 * MiB);
    assert_int_equal(s.oom_retries, 1);
    assert_int_equal(s.upstream_frees, 1);
    put(&f, b, 30 * MiB, S2);

    void *p = NULL;
    assert_int_equal(f.m->allocate(f.st, 100 * MiB, S1, &p), CMB_ERR_OOM);
    assert_int_equal(stats(&f).oom_retries, 2);
    assert_int_equal(RESERVED(&f), 0); /* the retry emptied the cache */
    assert_non_null(f.m->last_error(f.st));
    assert_non_null(strstr(f.m->last_error(f.st), "out of memory"));
    close_fx(&f);

    /* with max_split_size, an oversize cached block is freed first, which
     * is not a counted retry */
    f = open_fx("torch-caching", "max_split_size=32MiB", 64 * MiB);
    a = get(&f, 40 * MiB, S1);
    put(&f, a, 40 * MiB, S1);
    void *small = get(&f, 5 * MiB, S1); /* a 20 MiB segment: 60 MiB held */
    b = get(&f, 30 * MiB, S1);
    s = stats(&f);
    assert_int_equal(s.reserved.current, 50 * MiB);
    assert_int_equal(s.oom_retries, 0);
    put(&f, b, 30 * MiB, S1);
    put(&f, small, 5 * MiB, S1);
    close_fx(&f);
}

/* roundup_power2_divisions: N steps between powers of two, per 1 MiB-based
 * interval in the list form. */
static void roundup_power2_divisions(void **state)
{
    (void)state;
    fx f = open_fx("torch-caching", "roundup_power2_divisions=4", 0);
    void *a = get(&f, 5 * MiB + 1, S1); /* between 4 and 8 MiB in 1 MiB steps: 6 MiB */
    assert_int_equal(ALLOCATED(&f), 6 * MiB);
    void *b = get(&f, 1200, S1); /* not above 512 * 4: plain 512 B rounding */
    assert_int_equal(ALLOCATED(&f), 6 * MiB + 1536);
    void *c = get(&f, 2049, S1); /* 2048..4096 in 512 B steps */
    assert_int_equal(ALLOCATED(&f), 6 * MiB + 1536 + 2560);
    put(&f, a, 5 * MiB + 1, S1);
    put(&f, b, 1200, S1);
    put(&f, c, 2049, S1);
    close_fx(&f);

    /* PyTorch's [4:2,>:8]: intervals below 4 MB take 2 too, above take 8 */
    f = open_fx("torch-caching", "roundup_power2_divisions=4=2/>=8", 0);
    a = get(&f, 5 * MiB + 1, S1); /* 4..8 MiB in 2 MiB steps: 6 MiB */
    assert_int_equal(ALLOCATED(&f), 6 * MiB);
    b = get(&f, 9 * MiB + 1, S1); /* 8..16 MiB in 1 MiB steps: 10 MiB */
    assert_int_equal(ALLOCATED(&f), 16 * MiB);
    c = get(&f, 3 * MiB + 1, S1); /* 2..4 MiB in 1 MiB steps: 4 MiB */
    assert_int_equal(ALLOCATED(&f), 20 * MiB);
    put(&f, a, 5 * MiB + 1, S1);
    put(&f, b, 9 * MiB + 1, S1);
    put(&f, c, 3 * MiB + 1, S1);
    close_fx(&f);
}

/* per_process_memory_fraction caps what is held; the garbage collector frees
 * old cached blocks once threshold * cap is exceeded. */
static void fraction_and_garbage_collection(void **state)
{
    (void)state;
    void *p = NULL;
    fx f = open_fx("torch-caching", "per_process_memory_fraction=0.25", 128 * MiB);
    assert_int_equal(f.m->allocate(f.st, 34 * MiB, S1, &p), CMB_ERR_OOM); /* 34 > 32 MiB allowed */
    void *a = get(&f, 32 * MiB, S1);
    put(&f, a, 32 * MiB, S1);
    close_fx(&f);

    /* cap 64 MiB, collect above 32 MiB: the 40 MiB cached block goes before
     * the new segment is taken, with no OOM on the way */
    f = open_fx("torch-caching", "per_process_memory_fraction=0.5:garbage_collection_threshold=0.5", 128 * MiB);
    a = get(&f, 40 * MiB, S1);
    put(&f, a, 40 * MiB, S1);
    void *b = get(&f, 12 * MiB, S2);
    cmb_alloc_stats s = stats(&f);
    assert_int_equal(s.reserved.current, 12 * MiB);
    assert_int_equal(s.upstream_frees, 1);
    assert_int_equal(s.oom_retries, 0);
    put(&f, b, 12 * MiB, S2);
    close_fx(&f);

    f = open_fx("torch-caching", "per_process_memory_fraction=0.5", 128 * MiB);
    a = get(&f, 40 * MiB, S1);
    put(&f, a, 40 * MiB, S1);
    b = get(&f, 12 * MiB, S2); /* no collector: both kept (52 <= 64 MiB) */
    assert_int_equal(RESERVED(&f), 52 * MiB);
    put(&f, b, 12 * MiB, S2);
    close_fx(&f);
}

/* record_stream: the free waits for an event on the other stream; sim
 * events complete at once, so the next allocate reclaims the block. */
static void record_stream_defers_free(void **state)
{
    (void)state;
    fx f = open_fx("torch-caching", NULL, 0);
    void *a = get(&f, 5 * MiB, S1);
    assert_int_equal(cmb_torch_record_stream(f.m, f.st, a, S2), CMB_OK);
    assert_int_equal(cmb_torch_record_stream(f.m, f.st, a, S1), CMB_OK); /* own stream: ignored */
    assert_int_equal(cmb_torch_record_stream(f.m, f.st, (char *)a + 512, S2), CMB_ERR_INVALID);
    put(&f, a, 5 * MiB, S1);
    assert_int_equal(LARGEST_FREE(&f), 15 * MiB); /* not back yet */
    assert_int_equal(ALLOCATED(&f), 0);
    void *b = get(&f, 512, S1); /* process_events returns it first */
    assert_int_equal(LARGEST_FREE(&f), 20 * MiB);
    put(&f, b, 512, S1);

    /* trim waits for outstanding events before it frees */
    a = get(&f, 5 * MiB, S1);
    assert_int_equal(cmb_torch_record_stream(f.m, f.st, a, S2), CMB_OK);
    put(&f, a, 5 * MiB, S1);
    assert_int_equal(f.m->trim(f.st), CMB_OK);
    assert_int_equal(RESERVED(&f), 0);

    /* a block with pending events at destroy is still returned */
    a = get(&f, 5 * MiB, S1);
    assert_int_equal(cmb_torch_record_stream(f.m, f.st, a, S2), CMB_OK);
    put(&f, a, 5 * MiB, S1);
    close_fx(&f);

    extern const cmb_allocator_methods cmb_cuda_methods;
    assert_int_equal(cmb_torch_record_stream(&cmb_cuda_methods, NULL, NULL, S2), CMB_ERR_UNSUPPORTED);
}

static void bad_frees_are_refused(void **state)
{
    (void)state;
    fx f = open_fx("torch-caching", NULL, 0);
    void *a = get(&f, 4096, S1);
    assert_int_equal(f.m->deallocate(f.st, (char *)a + 512, 4096, S1), CMB_ERR_INVALID);
    assert_int_equal(f.m->deallocate(f.st, a, 4095, S1), CMB_ERR_INVALID);
    put(&f, a, 4096, S1);
    assert_int_equal(f.m->deallocate(f.st, a, 4096, S1), CMB_ERR_INVALID);
    void *p;
    assert_int_equal(f.m->allocate(f.st, 0, S1, &p), CMB_ERR_INVALID);
    assert_int_equal(f.m->allocate(f.st, SIZE_MAX, S1, &p), CMB_ERR_OOM);
    close_fx(&f);
}

/* --- torch-expandable by hand ----------------------------------------------------------------- */

/* 2 MiB pages for the small pool, 20 MiB pages for the large pool, mapped
 * only as needed and at the end of what is mapped. */
static void expandable_pages(void **state)
{
    (void)state;
    fx f = open_fx("torch-expandable", NULL, 0);
    void *s1 = get(&f, 1 * MiB, S1);
    void *s2 = get(&f, 1 * MiB, S1);
    assert_int_equal(RESERVED(&f), 2 * MiB);
    assert_int_equal((uintptr_t)s2, (uintptr_t)s1 + 1 * MiB);

    void *a = get(&f, 9 * MiB, S1); /* one 20 MiB page; the rest splits off */
    assert_int_equal(RESERVED(&f), 22 * MiB);
    assert_int_equal(LARGEST_FREE(&f), 11 * MiB);
    void *b = get(&f, 11 * MiB, S1); /* exactly the rest */
    assert_int_equal(RESERVED(&f), 22 * MiB);
    assert_int_equal((uintptr_t)b, (uintptr_t)a + 9 * MiB);
    void *c = get(&f, 25 * MiB, S1); /* two more pages, right after */
    assert_int_equal(RESERVED(&f), 62 * MiB);
    assert_int_equal((uintptr_t)c, (uintptr_t)a + 20 * MiB);
    assert_int_equal(LARGEST_FREE(&f), 15 * MiB);

    put(&f, b, 11 * MiB, S1);
    put(&f, a, 9 * MiB, S1);
    put(&f, c, 25 * MiB, S1);
    assert_int_equal(LARGEST_FREE(&f), 60 * MiB); /* one free block over the three pages */
    put(&f, s1, 1 * MiB, S1);
    put(&f, s2, 1 * MiB, S1);
    assert_int_equal(f.m->trim(f.st), CMB_OK); /* unmaps every page, releases the segments */
    assert_int_equal(RESERVED(&f), 0);
    close_fx(&f);
}

/* A grown free block is reused in place before anything new is mapped; a
 * free block followed by unmapped space counts at the size it can grow to. */
static void expandable_grows_in_place(void **state)
{
    (void)state;
    fx f = open_fx("torch-expandable", NULL, 0);
    void *a = get(&f, 15 * MiB, S1);
    put(&f, a, 15 * MiB, S1); /* 20 MiB free at the end of the mapped part */
    void *b = get(&f, 30 * MiB, S1); /* grows the free block by one page */
    assert_ptr_equal(b, a);
    assert_int_equal(RESERVED(&f), 40 * MiB);
    put(&f, b, 30 * MiB, S1);
    close_fx(&f);
}

/* On OOM every fully free page is unmapped and the request retried; the
 * holes are filled again from the lowest address. */
static void expandable_oom_unmaps(void **state)
{
    (void)state;
    fx f = open_fx("torch-expandable", NULL, 64 * MiB);
    void *small = get(&f, 1 * MiB, S1);
    void *a = get(&f, 40 * MiB, S1);
    assert_int_equal(RESERVED(&f), 42 * MiB);
    put(&f, a, 40 * MiB, S1);
    void *b = get(&f, 22 * MiB, S2); /* its own segment: 42 + 40 > 64, unmap, retry */
    cmb_alloc_stats s = stats(&f);
    assert_int_equal(s.reserved.current, 42 * MiB);
    assert_int_equal(s.oom_retries, 1);
    put(&f, b, 22 * MiB, S2);
    put(&f, small, 1 * MiB, S1);
    close_fx(&f);

    f = open_fx("torch-expandable", NULL, 0);
    a = get(&f, 20 * MiB, S1);
    b = get(&f, 20 * MiB, S1);
    put(&f, a, 20 * MiB, S1);
    assert_int_equal(f.m->trim(f.st), CMB_OK); /* page 0 unmapped, page 1 still in use */
    assert_int_equal(RESERVED(&f), 20 * MiB);
    void *c = get(&f, 20 * MiB, S1); /* the hole at the lowest address comes first */
    assert_ptr_equal(c, a);
    assert_int_equal(RESERVED(&f), 40 * MiB);
    put(&f, b, 20 * MiB, S1);
    put(&f, c, 20 * MiB, S1);
    close_fx(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conformance_caching),
        cmocka_unit_test(conformance_caching_options),
        cmocka_unit_test(conformance_expandable),
        cmocka_unit_test(conformance_tight),
        cmocka_unit_test(options_are_checked),
        cmocka_unit_test(small_pool_rounding_and_split),
        cmocka_unit_test(large_segment_sizes),
        cmocka_unit_test(large_split_rule),
        cmocka_unit_test(coalescing),
        cmocka_unit_test(per_stream_pools),
        cmocka_unit_test(max_split_size_rules),
        cmocka_unit_test(oom_frees_cache_and_retries),
        cmocka_unit_test(roundup_power2_divisions),
        cmocka_unit_test(fraction_and_garbage_collection),
        cmocka_unit_test(record_stream_defers_free),
        cmocka_unit_test(bad_frees_are_refused),
        cmocka_unit_test(expandable_pages),
        cmocka_unit_test(expandable_grows_in_place),
        cmocka_unit_test(expandable_oom_unmaps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
