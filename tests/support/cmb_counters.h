/* cmb_counters.h - the counters of "cmb" beyond cmb_alloc_stats, for its
 * tests: a mirror of cmb_cmb_counters in allocators/alloc_cmb.c, whose
 * accessor returns the struct's size so a test can check this copy still
 * matches it. */
#ifndef CMB_TEST_CMB_COUNTERS_H
#define CMB_TEST_CMB_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct cmb_cmb_counters {
    uint64_t bin_hits, tree_hits, grows, map_calls, unmap_calls, budget_unmaps, over_budget, widened, moved, events,
        syncs, parked_after, arenas, lay_hits, lay_misses, lay_refused, lay_skipped, lay_dropped,
        hwm_pages, mapped_pages, cached_pages;
} cmb_cmb_counters;
size_t _cmb_cmb_counters(void *state, cmb_cmb_counters *out);

#endif /* CMB_TEST_CMB_COUNTERS_H */
