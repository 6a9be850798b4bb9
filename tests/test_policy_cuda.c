/* test_policy_cuda.c - the passthrough allocator ("cuda") on the sim
 * upstream passes the shared conformance checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "support/conformance.h"

static void random_traffic(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "cuda", .ops = 100000, .streams = 2, .seed = 3};
    cmb_conformance_random(&c);
}

static void fault_injection(void **state)
{
    (void)state;
    cmb_conformance c = {.allocator = "cuda", .ops = 40000, .seed = 4};
    cmb_conformance_faults(&c);
}

static void unknown_option_is_refused(void **state)
{
    (void)state;
    cmb_upstream_config ucfg;
    cmb_upstream *up;
    char err[256] = "";
    void *st;
    cmb_upstream_config_default(&ucfg);
    assert_int_equal(cmb_upstream_open(&ucfg, &up, err, sizeof err), CMB_OK);
    cmb_option opt = {"bogus", "1"};
    cmb_config cfg = {.options = &opt, .n_options = 1, .sim = 1, .error = err, .error_len = sizeof err};
    extern const cmb_allocator_methods cmb_cuda_methods;
    assert_int_equal(cmb_cuda_methods.create(&cfg, up, &st), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "bogus"));
    cmb_upstream_close(up);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_traffic),
        cmocka_unit_test(fault_injection),
        cmocka_unit_test(unknown_option_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
