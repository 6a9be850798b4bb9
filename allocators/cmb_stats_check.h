/* cmb_stats_check.h - statistics an allocator reports that cannot be true.
 *
 * A policy or plug-in fills cmb_alloc_stats (cmb_allocator.h); a broken one
 * may report a negative count, a peak below its current value or bits of
 * `valid` no field has (all 0xff bytes, published as peak_reserved_bytes
 * = -1). cmb_stats_check clears the `valid` bit of every such field, so
 * nothing reads it as a number, and says what the first one was. The
 * harness (harness/metered.c) and libcmb_pluggable (pluggable/pl_stats.c)
 * read every policy's statistics through it. Header-only.
 */
#ifndef CMB_STATS_CHECK_H
#define CMB_STATS_CHECK_H

#include <stdint.h>
#include <stdio.h>

#include "cmb_allocator.h"

#define CMB_STAT_KNOWN_BITS                                                                                  \
    (CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS | CMB_STAT_LARGEST_FREE | \
     CMB_STAT_UPSTREAM | CMB_STAT_OOM_RETRIES)

static inline int _cmb_stats_count_bad(cmb_alloc_stats *st, uint32_t bit, const cmb_stat_count *c,
                                       const char *what, char *why, size_t whylen, int found)
{
    if (!(st->valid & bit) || (c->current >= 0 && c->peak >= c->current))
        return found;
    if (!found && why)
        snprintf(why, whylen, "%s current %lld, peak %lld", what, (long long)c->current, (long long)c->peak);
    st->valid &= ~bit;
    return found + 1;
}

/* The number of impossible fields (0: all can be true); their `valid` bits
 * are cleared (unknown bits: all of them), the first one's reason is in why. */
static inline int cmb_stats_check(cmb_alloc_stats *st, char *why, size_t whylen)
{
    int found = 0;
    if (st->valid & ~(uint32_t)CMB_STAT_KNOWN_BITS) {
        if (why)
            snprintf(why, whylen, "unknown valid bits 0x%x", (unsigned)st->valid);
        st->valid = 0;
        return 1;
    }
    found = _cmb_stats_count_bad(st, CMB_STAT_REQUESTED, &st->requested, "requested", why, whylen, found);
    found = _cmb_stats_count_bad(st, CMB_STAT_ALLOCATED, &st->allocated, "allocated", why, whylen, found);
    found = _cmb_stats_count_bad(st, CMB_STAT_RESERVED, &st->reserved, "reserved", why, whylen, found);
    found = _cmb_stats_count_bad(st, CMB_STAT_BLOCKS, &st->blocks, "blocks", why, whylen, found);
    if ((st->valid & CMB_STAT_LARGEST_FREE) && st->largest_free > (uint64_t)INT64_MAX) {
        if (!found && why)
            snprintf(why, whylen, "largest_free %llu", (unsigned long long)st->largest_free);
        st->valid &= ~(uint32_t)CMB_STAT_LARGEST_FREE;
        found++;
    }
    return found;
}

#endif /* CMB_STATS_CHECK_H */
