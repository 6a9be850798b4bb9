/* test_policy_long.c - the randomized differential test at length: one
 * million random operations per policy on the sim upstream, every
 * invariant (no overlap, inside the reservation, 256 B alignment,
 * statistics equal to an independent count, no upstream misuse) checked
 * after every operation, for every allocator that runs in sim mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "allocators/registry.h"
#include "support/conformance.h"

static void every_policy_a_million_operations(void **state)
{
    (void)state;
    for (size_t i = 0; i < cmb_allocator_count(); i++) {
        const cmb_allocator_entry *e = cmb_allocator_at(i);
        if (cmb_allocator_sim_skip_reason(e->methods))
            continue;
        print_message("%s\n", e->name);
        cmb_conformance c = {
            .allocator = e->name,
            .ops = 1000000,
            .capacity = 16ull << 30,
            .max_size = 256u << 20,
            .streams = 3,
            .seed = 1000 + i,
        };
        cmb_conformance_random(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_policy_a_million_operations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
