/* test_metrics.c - the metric formulas on hand-worked cases, latency
 * quantiles, size parsing, and the metered allocator's own bookkeeping. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/registry.h"
#include "allocators/upstream.h"
#include "common/cmb_units.h"
#include "harness/latency.h"
#include "harness/metered.h"
#include "common/cmb_metrics.h"

static void fragmentation_ratio(void **state)
{
    (void)state;
    /* 3 GiB live at the peak, 4 GiB held: a quarter never asked for */
    assert_float_equal(cmb_frag_ratio(3ull << 30, 4ull << 30), 0.25, 1e-12);
    assert_float_equal(cmb_frag_ratio(100, 100), 0.0, 1e-12);
    assert_true(isnan(cmb_frag_ratio(0, 0)));
}

static void external_fragmentation(void **state)
{
    (void)state;
    /* 100 MiB reserved, 40 allocated: 60 free, the largest free block 45:
     * (60 - 45) / 60 = 0.25 */
    assert_float_equal(cmb_external_frag(100 << 20, 40 << 20, 45 << 20), 0.25, 1e-12);
    /* all free memory in one block: no external fragmentation */
    assert_float_equal(cmb_external_frag(100, 40, 60), 0.0, 1e-12);
    /* nothing free: undefined */
    assert_true(isnan(cmb_external_frag(100, 100, 0)));
}

static void capacity_ratio(void **state)
{
    (void)state;
    /* 80 GiB device, 20 GiB live, largest new block 30 GiB: 30/60 */
    assert_float_equal(cmb_capacity_ratio(30ull << 30, 80ull << 30, 20ull << 30), 0.5, 1e-12);
    assert_true(isnan(cmb_capacity_ratio(0, 10, 10)));
}

static void latency_quantiles(void **state)
{
    (void)state;
    cmb_latency l;
    assert_int_equal(cmb_latency_init(&l, 1000, 1), 0);
    assert_true(isnan(cmb_latency_quantile(&l, 0.5)));
    for (int i = 100; i >= 1; i--)
        cmb_latency_add(&l, (uint64_t)i);
    /* nearest rank: p50 of 1..100 is the 50th value, p99 the 99th */
    assert_float_equal(cmb_latency_quantile(&l, 0.5), 50, 0);
    assert_float_equal(cmb_latency_quantile(&l, 0.99), 99, 0);
    assert_float_equal(cmb_latency_quantile(&l, 1.0), 100, 0);
    assert_float_equal(cmb_latency_mean(&l), 50.5, 1e-12);
    cmb_latency_free(&l);

    /* beyond the cap a uniform reservoir keeps the quantiles close */
    assert_int_equal(cmb_latency_init(&l, 2000, 9), 0);
    for (int i = 0; i < 200000; i++)
        cmb_latency_add(&l, (uint64_t)(i % 1000));
    assert_int_equal(l.n, 2000);
    assert_int_equal(l.seen, 200000);
    assert_in_range((int)cmb_latency_quantile(&l, 0.5), 450, 550);
    cmb_latency_free(&l);
}

static void size_parsing(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(cmb_parse_size("4096", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(cmb_parse_size("2MiB", &v), 0);
    assert_int_equal(v, 2u << 20);
    assert_int_equal(cmb_parse_size("1.5GiB", &v), 0);
    assert_int_equal(v, 3ull << 29);
    assert_int_equal(cmb_parse_size("64k", &v), 0);
    assert_int_equal(v, 64u << 10);
    const char *bad[] = {"", "-1", "1.5", "MiB", "1 MiB", "1MiBx", "99999999999999999999", "0.3B", "1e3", NULL};
    for (int i = 0; bad[i]; i++)
        assert_int_equal(cmb_parse_size(bad[i], &v), -1);
}

/* The metered wrapper over the cuda (passthrough) allocator on the sim
 * upstream: requested peak, latency counts, live table, probe, free_all. */
static void metered_passthrough(void **state)
{
    (void)state;
    cmb_upstream_config ucfg;
    cmb_upstream *up;
    char err[256];
    cmb_upstream_config_default(&ucfg);
    ucfg.sim_capacity = 64u << 20;
    assert_int_equal(cmb_upstream_open(&ucfg, &up, err, sizeof err), CMB_OK);
    const cmb_allocator_methods *m = cmb_allocator_find("cuda")->methods;
    cmb_config cfg = {.error = err, .error_len = sizeof err, .sim = 1};
    void *st;
    assert_int_equal(m->create(&cfg, up, &st), CMB_OK);
    cmb_metered mt;
    assert_int_equal(cmb_metered_init(&mt, m, st, up, 1024, 1), CMB_OK);

    void *a, *b, *c;
    assert_int_equal(cmb_metered_alloc(&mt, 10u << 20, NULL, &a), CMB_OK);
    assert_int_equal(cmb_metered_alloc(&mt, 20u << 20, NULL, &b), CMB_OK);
    assert_int_equal(cmb_metered_dealloc(&mt, a, NULL), CMB_OK);
    assert_int_equal(cmb_metered_alloc(&mt, 5u << 20, NULL, &c), CMB_OK);
    assert_int_equal(cmb_metered_alloc(&mt, 60u << 20, NULL, &a), CMB_ERR_OOM);
    assert_int_equal(cmb_metered_dealloc(&mt, (void *)0x1234, NULL), CMB_ERR_INVALID);
    assert_int_equal(mt.requested.peak, 30 << 20);
    assert_int_equal(mt.requested.current, 25 << 20);
    assert_int_equal(mt.allocs, 3);
    assert_int_equal(mt.frees, 1);
    assert_int_equal(mt.failed_allocs, 1);
    assert_int_equal(mt.failed_frees, 1);
    assert_int_equal(mt.alloc_ns.seen, 3);
    cmb_alloc_stats s;
    assert_int_equal(cmb_metered_stats(&mt, &s), CMB_OK);
    assert_int_equal(s.reserved.peak, 30 << 20);
    assert_int_equal(s.requested.current, mt.requested.current);

    /* 64 MiB device, 25 MiB live: the largest block is the rest, exactly */
    uint64_t largest;
    assert_int_equal(cmb_metered_probe_largest(&mt, (64u - 25u) << 20, 512, NULL, &largest), CMB_OK);
    assert_int_equal(largest, 39u << 20);
    assert_int_equal(cmb_metered_free_all(&mt, NULL), 0);
    assert_int_equal(up->stats.held_current, 0);
    /* the probe itself shows in the allocator's peak: the harness reads
     * the peaks before it probes */
    assert_int_equal(cmb_metered_stats(&mt, &s), CMB_OK);
    assert_int_equal(s.reserved.peak, 64 << 20);
    cmb_metered_free(&mt);
    assert_int_equal(m->destroy(st), CMB_OK);
    assert_int_equal(cmb_upstream_close(up), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fragmentation_ratio), cmocka_unit_test(external_fragmentation),
        cmocka_unit_test(capacity_ratio),      cmocka_unit_test(latency_quantiles),
        cmocka_unit_test(size_parsing),        cmocka_unit_test(metered_passthrough),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
