/* test_sample_plugin.c - the sample plug-in (examples/plugin), loaded the
 * way the suite loads any plug-in (cmb_external_load), passes the shared
 * conformance checks and keeps its own promises: rounding, coalescing,
 * the largest free block, its option errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/external.h"
#include "support/conformance.h"

static const cmb_allocator_methods *plugin;

static int load_plugin(void **state)
{
    (void)state;
    char err[512];
    const char *path = getenv("CMB_SAMPLE_PLUGIN");
    if (!path) {
        print_error("CMB_SAMPLE_PLUGIN is not set (ctest sets it to build/examples/libcmb_sample_plugin.so)\n");
        return -1;
    }
    if (cmb_external_load(path, &plugin, err, sizeof err)) {
        print_error("%s\n", err);
        return -1;
    }
    return 0;
}

static void random_traffic(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "sample-pool", .methods = plugin, .ops = 100000, .streams = 2, .seed = 5};
    cmb_conformance_random(&c);
}

static void random_traffic_round_4k(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "sample-pool",
                         .methods = plugin,
                         .options = "round=4KiB:segment=8MiB",
                         .ops = 60000,
                         .streams = 3,
                         .seed = 6};
    cmb_conformance_random(&c);
}

static void fault_injection(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "sample-pool", .methods = plugin, .ops = 40000, .seed = 7};
    cmb_conformance_faults(&c);
}

static void fault_injection_small_device(void **state)
{
    (void)state;
    /* a device that fills up: OOM retries that free the cache must stay clean */
    cmb_conformance c = {.allocator = "sample-pool",
                         .methods = plugin,
                         .capacity = 256ull << 20,
                         .max_size = 16ull << 20,
                         .ops = 40000,
                         .seed = 8};
    cmb_conformance_faults(&c);
}

static void stats_of(void *st, cmb_alloc_stats *s)
{
    assert_int_equal(plugin->stats(st, s), CMB_OK);
}

static void rounding_and_coalescing(void **state)
{
    (void)state;
    cmb_upstream *up;
    void *st, *p[3];
    cmb_alloc_stats s;
    cmb_stream s1 = (cmb_stream)(uintptr_t)1;
    cmb_test_open_methods(plugin, "round=4096:segment=2MiB", 0, NULL, &up, &st);

    assert_int_equal(plugin->allocate(st, 1, s1, &p[0]), CMB_OK);
    stats_of(st, &s);
    assert_int_equal(s.requested.current, 1);
    assert_int_equal(s.allocated.current, 4096);
    assert_int_equal(s.reserved.current, 2 << 20);
    assert_int_equal(s.largest_free, (2 << 20) - 4096);
    assert_int_equal(plugin->deallocate(st, p[0], 1, s1), CMB_OK);

    /* three 512 KiB blocks and a 512 KiB tail in one 2 MiB segment */
    for (int i = 0; i < 3; i++)
        assert_int_equal(plugin->allocate(st, 512 << 10, s1, &p[i]), CMB_OK);
    stats_of(st, &s);
    assert_int_equal(s.reserved.current, 2 << 20);
    assert_int_equal(s.largest_free, 512 << 10);
    assert_int_equal(plugin->deallocate(st, p[1], 512 << 10, s1), CMB_OK);
    stats_of(st, &s);
    assert_int_equal(s.largest_free, 512 << 10);
    assert_int_equal(plugin->deallocate(st, p[0], 512 << 10, s1), CMB_OK);
    stats_of(st, &s);
    assert_int_equal(s.largest_free, 1 << 20); /* p0 + p1 merged */
    assert_int_equal(plugin->deallocate(st, p[2], 512 << 10, s1), CMB_OK);
    stats_of(st, &s);
    assert_int_equal(s.largest_free, 2 << 20); /* the whole segment again */
    assert_int_equal(s.blocks.current, 0);

    assert_int_equal(plugin->trim(st), CMB_OK);
    stats_of(st, &s);
    assert_int_equal(s.reserved.current, 0);
    assert_int_equal(s.largest_free, 0);
    assert_int_equal(plugin->destroy(st), CMB_OK);
    assert_int_equal(cmb_upstream_close(up), 0);
}

static void refuses_bad_options(void **state)
{
    (void)state;
    static const struct {
        cmb_option opt;
        const char *says;
    } bad[] = {
        {{"bogus", "1"}, "bogus"},
        {{"round", "300"}, "power of two"},
        {{"round", "128"}, "power of two"},
        {{"round", "4 KiB"}, "expected a size"},
        {{"segment", "100"}, "segment"},
    };
    cmb_upstream_config ucfg;
    cmb_upstream *up;
    char err[256];
    void *st;
    cmb_upstream_config_default(&ucfg);
    assert_int_equal(cmb_upstream_open(&ucfg, &up, err, sizeof err), CMB_OK);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        cmb_config cfg = {.options = &bad[i].opt, .n_options = 1, .sim = 1, .error = err, .error_len = sizeof err};
        assert_int_equal(plugin->create(&cfg, up, &st), CMB_ERR_INVALID);
        if (!strstr(err, bad[i].says))
            fail_msg("%s=%s: error '%s' does not mention '%s'", bad[i].opt.key, bad[i].opt.value, err, bad[i].says);
    }
    cmb_upstream_close(up);
}

static void refuses_foreign_pointer(void **state)
{
    (void)state;
    cmb_upstream *up;
    void *st, *p;
    cmb_test_open_methods(plugin, NULL, 0, NULL, &up, &st);
    assert_int_equal(plugin->allocate(st, 1000, NULL, &p), CMB_OK);
    assert_int_equal(plugin->deallocate(st, (char *)p + 256, 1000, NULL), CMB_ERR_INVALID);
    assert_int_equal(plugin->deallocate(st, p, 4096, NULL), CMB_ERR_INVALID); /* larger than its block */
    assert_int_equal(plugin->deallocate(st, p, 1000, NULL), CMB_OK);
    assert_int_equal(plugin->destroy(st), CMB_OK);
    assert_int_equal(cmb_upstream_close(up), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_traffic),
        cmocka_unit_test(random_traffic_round_4k),
        cmocka_unit_test(fault_injection),
        cmocka_unit_test(fault_injection_small_device),
        cmocka_unit_test(rounding_and_coalescing),
        cmocka_unit_test(refuses_bad_options),
        cmocka_unit_test(refuses_foreign_pointer),
    };
    return cmocka_run_group_tests(tests, load_plugin, NULL);
}
