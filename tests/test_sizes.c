/* test_sizes.c - requests near SIZE_MAX (common/cmb_size.h).
 *
 * A property over every registered policy that runs over the sim upstream,
 * and over the sim upstream itself: a request above CMB_SIZE_MAX_REQUEST
 * (SIZE_MAX, SIZE_MAX - 100, 2^63, ..., and 200 random sizes per policy,
 * half of them within 1 MiB of SIZE_MAX) is refused with CMB_ERR_OOM or
 * CMB_ERR_INVALID, hands out no pointer, leaves the statistics as they were
 * (requested never negative) and leaves the policy serving ordinary
 * requests at addresses no live block holds. The sim device is as large as
 * the suite allows, so no capacity check hides a wrapped round-up.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/cmb_option_check.h"
#include "allocators/registry.h"
#include "allocators/upstream.h"
#include "common/cmb_rng.h"
#include "common/cmb_size.h"
#include "common/cmb_units.h"
#include "support/conformance.h"

static const size_t huge_sizes[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 100, SIZE_MAX - 255, SIZE_MAX - 511, SIZE_MAX - (2u << 20),
    SIZE_MAX / 2 + 1, SIZE_MAX / 2, (size_t)1 << 62, CMB_SIZE_MAX_REQUEST + 1,
};
#define N_HUGE (sizeof huge_sizes / sizeof huge_sizes[0])

/* Random sizes above the limit: half within 1 MiB of SIZE_MAX (where the
 * round-ups wrap), half spread log-uniformly over the rest. */
#define N_RANDOM 200
static size_t random_huge(cmb_rng *r)
{
    if (cmb_rng_next(r) & 1)
        return SIZE_MAX - (size_t)cmb_rng_range(r, 0, 1u << 20);
    return (size_t)cmb_rng_log_uniform(r, CMB_SIZE_MAX_REQUEST + 1, SIZE_MAX >> 1); /* no double reaches 2^64 */
}

/* --- the helpers ---------------------------------------------------------------------- */

static void round_up_checked(void **state)
{
    (void)state;
    uint64_t out = 7;
    assert_true(cmb_size_round_up(1000, 512, &out));
    assert_int_equal(out, 1024);
    assert_true(cmb_size_round_up(0, 512, &out));
    assert_int_equal(out, 0);
    assert_false(cmb_size_round_up(UINT64_MAX, 512, &out));
    assert_false(cmb_size_round_up(UINT64_MAX - 100, 256, &out));
    assert_false(cmb_size_round_up(UINT64_MAX - 510, 512, &out));
    assert_true(cmb_size_round_up(UINT64_MAX - 511, 512, &out));
    assert_int_equal(out, UINT64_MAX - 511);
    assert_true(cmb_size_request_ok(CMB_SIZE_MAX_REQUEST));
    assert_false(cmb_size_request_ok(CMB_SIZE_MAX_REQUEST + 1));
    assert_false(cmb_size_request_ok(SIZE_MAX));
    /* the bound of allocator size options that declare none is the same */
    char why[128];
    assert_int_equal(cmb_optck_size(CMB_OPT_SIZE_MAX_IMPLIED, NULL, 0, &out, why, sizeof why), 0);
    assert_int_equal(out, CMB_SIZE_MAX_REQUEST);
    assert_int_equal(cmb_parse_size(CMB_SIZE_MAX_REQUEST_TEXT, &out), 0);
    assert_int_equal(out, CMB_SIZE_MAX_REQUEST);
    assert_int_equal(cmb_parse_size(CMB_SIZE_MAX_CAPACITY_TEXT, &out), 0);
    assert_int_equal(out, CMB_SIZE_MAX_CAPACITY);
}

/* --- the sim upstream ----------------------------------------------------------------- */

static void upstream_refuses_huge(void **state)
{
    (void)state;
    cmb_upstream_config cfg;
    cmb_upstream_config_default(&cfg);
    cfg.sim_capacity = CMB_SIZE_MAX_CAPACITY;
    cmb_upstream *up;
    char err[256];
    assert_int_equal(cmb_upstream_open(&cfg, &up, err, sizeof err), CMB_OK);
    for (size_t i = 0; i < N_HUGE; i++) {
        void *p = (void *)1, *va = (void *)1;
        size_t sz = huge_sizes[i];
        cmb_status s = cmb_up_alloc(up, sz, NULL, &p);
        if (s == CMB_OK)
            fail_msg("sim alloc(%zu) returned %p", sz, p);
        s = cmb_up_va_reserve(up, sz, &va);
        if (s == CMB_OK)
            fail_msg("sim va_reserve(%zu) returned %p", sz, va);
        assert_int_equal(cmb_upstream_held(up), 0);
        assert_true(cmb_upstream_device_used(up) == 0);
    }
    void *a, *b;
    assert_int_equal(cmb_up_alloc(up, 4096, NULL, &a), CMB_OK);
    assert_int_equal(cmb_up_alloc(up, 4096, NULL, &b), CMB_OK);
    assert_true(a != b);
    assert_int_equal(cmb_up_free(up, a, 4096, NULL), CMB_OK);
    assert_int_equal(cmb_up_free(up, b, 4096, NULL), CMB_OK);
    assert_int_equal(cmb_upstream_misuse_count(up), 0);
    assert_int_equal(cmb_upstream_close(up), 0);
}

/* --- every policy --------------------------------------------------------------------- */

static void check_policy(const cmb_allocator_entry *e)
{
    cmb_upstream *up;
    const cmb_allocator_methods *m;
    void *st;
    cmb_test_open(e->name, NULL, CMB_SIZE_MAX_CAPACITY, NULL, &up, &m, &st);
    void *live;
    assert_int_equal(m->allocate(st, 1 << 20, NULL, &live), CMB_OK);
    cmb_alloc_stats before = {0}, after = {0};
    m->stats(st, &before);
    cmb_rng rng;
    cmb_rng_seed(&rng, 42);
    for (size_t i = 0; i < N_HUGE + N_RANDOM; i++) {
        void *p = NULL;
        size_t sz = i < N_HUGE ? huge_sizes[i] : random_huge(&rng);
        cmb_status s = m->allocate(st, sz, NULL, &p);
        if (s == CMB_OK)
            fail_msg("%s: allocate(%zu) returned %p instead of refusing", e->name, sz, p);
        if (s != CMB_ERR_OOM && s != CMB_ERR_INVALID)
            fail_msg("%s: allocate(%zu) gave %s, not out of memory or invalid", e->name, sz, cmb_status_str(s));
        memset(&after, 0, sizeof after);
        m->stats(st, &after);
        if (after.requested.current != before.requested.current || after.requested.current < 0)
            fail_msg("%s: allocate(%zu) moved requested from %lld to %lld", e->name, sz,
                     (long long)before.requested.current, (long long)after.requested.current);
        if (after.allocated.current != before.allocated.current)
            fail_msg("%s: allocate(%zu) moved allocated", e->name, sz);
    }
    /* still serving, never the live block's address */
    void *a = NULL, *b = NULL;
    assert_int_equal(m->allocate(st, 1 << 20, NULL, &a), CMB_OK);
    assert_int_equal(m->allocate(st, 1 << 20, NULL, &b), CMB_OK);
    if (a == live || b == live || a == b)
        fail_msg("%s: the same address handed out twice after huge requests", e->name);
    assert_int_equal(m->deallocate(st, a, 1 << 20, NULL), CMB_OK);
    assert_int_equal(m->deallocate(st, b, 1 << 20, NULL), CMB_OK);
    assert_int_equal(m->deallocate(st, live, 1 << 20, NULL), CMB_OK);
    assert_int_equal(m->destroy(st), CMB_OK);
    assert_int_equal(cmb_upstream_misuse_count(up), 0);
    assert_int_equal(cmb_upstream_close(up), 0);
}

static void every_policy_refuses_huge(void **state)
{
    (void)state;
    size_t checked = 0;
    for (size_t i = 0; i < cmb_allocator_count(); i++) {
        const cmb_allocator_entry *e = cmb_allocator_at(i);
        if (cmb_allocator_sim_skip_reason(e->methods))
            continue;
        check_policy(e);
        checked++;
    }
    assert_true(checked >= 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_up_checked),
        cmocka_unit_test(upstream_refuses_huge),
        cmocka_unit_test(every_policy_refuses_huge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
