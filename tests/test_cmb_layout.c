/* test_cmb_layout.c - the planner behind cmb:layout (allocators/cmb_layout.c)
 * on the sample traces, checked against the recording itself:
 *
 *  - every allocation has a place, its rounded size as recorded, inside the
 *    range;
 *  - no two allocations live at the same time share a byte (the recording
 *    walked again, each new block against every live one);
 *  - the peak the planner reports is the recording's peak of live rounded
 *    bytes, and the range is at least that;
 *  - a layout shared through cmb_layout_get is one object per unchanged file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/cmb_layout.h"
#include "support/run.h"
#include "traces/trace.h"

#define ROUND 512u /* cmb's rounding (CMB_ROUND in allocators/alloc_cmb.c) */

static uint64_t rounded(uint64_t s)
{
    return (s + ROUND - 1) & ~(uint64_t)(ROUND - 1);
}

/* The recording at samples/name walked against its layout. */
static void check_sample(const char *name)
{
    char path[1024], err[512];
    cmb_trace_loaded t;
    cmb_layout l;
    snprintf(path, sizeof path, "%s/traces/samples/%s", cmb_test_src(), name);
    if (cmb_trace_load(&t, path, err, sizeof err))
        fail_msg("%s", err);
    if (cmb_layout_plan(&l, &t, ROUND, err, sizeof err))
        fail_msg("%s: %s", name, err);
    size_t *at = malloc((t.slots ? t.slots : 1) * sizeof *at); /* slot -> its allocation, live */
    uint32_t *live = malloc((t.slots ? t.slots : 1) * sizeof *live), n_live = 0;
    assert_non_null(at);
    assert_non_null(live);
    size_t k = 0;
    uint64_t cur = 0, peak = 0;
    for (size_t e = 0; e < t.n; e++) {
        const cmb_trace_packed *ev = &t.ev[e];
        if (ev->op == CMB_TRACE_ALLOC) {
            assert_true(k < l.n);
            assert_int_equal(l.size[k], rounded(ev->size));
            uint64_t lo = l.off[k], hi = lo + l.size[k];
            assert_true(hi <= l.top);
            for (uint32_t i = 0; i < n_live; i++) {
                size_t j = at[live[i]];
                if (lo < l.off[j] + l.size[j] && l.off[j] < hi)
                    fail_msg("%s: allocation %zu [%llu, %llu) overlaps live allocation %zu at %llu", name, k,
                             (unsigned long long)lo, (unsigned long long)hi, j, (unsigned long long)l.off[j]);
            }
            at[ev->slot] = k++;
            live[n_live++] = ev->slot;
            cur += l.size[at[ev->slot]];
            peak = cur > peak ? cur : peak;
        } else if (ev->op == CMB_TRACE_FREE) {
            for (uint32_t i = 0; i < n_live; i++)
                if (live[i] == ev->slot) {
                    cur -= l.size[at[ev->slot]];
                    live[i] = live[--n_live];
                    break;
                }
        }
    }
    assert_int_equal(k, l.n);
    assert_int_equal(l.peak, peak);
    assert_true(l.top >= l.peak);
    assert_non_null(l.order);
    print_message("%-34s %6zu allocations: top %.4f x the live peak (order: %s)\n", name, l.n,
                  (double)l.top / (double)l.peak, l.order);
    free(live);
    free(at);
    cmb_layout_free(&l);
    cmb_trace_unload(&t);
}

static void samples_have_disjoint_places(void **state)
{
    (void)state;
    static const char *names[] = {"torch_mlp_sweep_default.trace", "torch_convnet.trace", "torch_llm_decode.trace",
                                  "torch_transformer_sweep.trace", "churn_small.trace"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        check_sample(names[i]);
}

static void shared_per_file(void **state)
{
    (void)state;
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/traces/samples/torch_convnet.trace", cmb_test_src());
    const cmb_layout *a = cmb_layout_get(path, ROUND, err, sizeof err);
    const cmb_layout *b = cmb_layout_get(path, ROUND, err, sizeof err);
    assert_non_null(a);
    assert_ptr_equal(a, b);
    cmb_layout_put(b);
    cmb_layout_put(a);
    assert_null(cmb_layout_get("/proc/nope/run.trace", ROUND, err, sizeof err));
    assert_non_null(strstr(err, "/proc/nope/run.trace"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(samples_have_disjoint_places),
        cmocka_unit_test(shared_per_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
