/* pl_stats.c - the statistics of one device's instance.
 *
 * Current values come from the policy's stats() (allocated, reserved,
 * largest free, retries) and from the upstream's accounting layer (calls);
 * requested bytes and live blocks are the library's own count, independent
 * of the policy, as the harness keeps them (harness/metered.c).
 *
 * Peaks. Until the first reset the policy's and the upstream's own
 * high-water marks are exact and cost nothing per call. A reset cannot
 * lower them, so from then on the library also reads the policy's stats
 * after every allocation (allocated and reserved rise only there) and
 * keeps the highest values since the reset; a peak is then the policy's
 * own peak if that rose past its value at the reset (the new high-water
 * mark was reached after the reset), else the highest value seen since.
 * Requested bytes and blocks are counted here and reset directly.
 */
#include <string.h>

#include "../allocators/cmb_stats_check.h"
#include "pl_internal.h"

/* The policy's statistics less those that cannot be true (a plug-in's
 * all-0xff bytes): never handed to the program as numbers. */
/* Zeroes the fields whose `valid` bit is off, so none reaches the
 * program, whatever it reads. */
static void clear_invalid(cmb_alloc_stats *ps)
{
    static const cmb_stat_count zero;
    if (!(ps->valid & CMB_STAT_REQUESTED))
        ps->requested = zero;
    if (!(ps->valid & CMB_STAT_ALLOCATED))
        ps->allocated = zero;
    if (!(ps->valid & CMB_STAT_RESERVED))
        ps->reserved = zero;
    if (!(ps->valid & CMB_STAT_BLOCKS))
        ps->blocks = zero;
    if (!(ps->valid & CMB_STAT_LARGEST_FREE))
        ps->largest_free = 0;
    if (!(ps->valid & CMB_STAT_UPSTREAM))
        ps->upstream_allocs = ps->upstream_frees = 0;
    if (!(ps->valid & CMB_STAT_OOM_RETRIES))
        ps->oom_retries = 0;
}

static void policy_stats(pl_device *d, cmb_alloc_stats *ps)
{
    memset(ps, 0, sizeof *ps);
    if (d->m->stats(d->policy, ps) != CMB_OK)
        memset(ps, 0, sizeof *ps);
    if (cmb_stats_check(ps, NULL, 0))
        clear_invalid(ps);
    if (d->up && !(ps->valid & CMB_STAT_RESERVED)) {
        /* A policy's reserved bytes are exactly its upstream's held bytes. */
        ps->reserved.current = d->up->stats.held_current;
        ps->reserved.peak = d->up->stats.held_peak;
        ps->valid |= CMB_STAT_RESERVED;
    }
}

void _cmb_pl_sample_device(pl_device *d)
{
    int64_t free_b, total_b;
    if (_cmb_pl_mem_info(&free_b, &total_b))
        return;
    int64_t used = total_b - free_b, seen = atomic_load_explicit(&d->device_used_peak, memory_order_relaxed);
    while (used > seen &&
           !atomic_compare_exchange_weak_explicit(&d->device_used_peak, &seen, used, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

int _cmb_pl_after_alloc(pl_device *d, int64_t held_before)
{
    /* Device memory in use can only have grown when the policy took more
     * from its upstream: the caller samples it then, after the lock (a
     * cudaMemGetInfo costs microseconds; growth is rare next to cached
     * allocations). */
    int grew = d->real && d->up && d->up->stats.held_current > held_before &&
               !atomic_load_explicit(&d->pools_active, memory_order_relaxed); /* no cudaMemGetInfo in a capture */
    if (d->peaks_reset) {
        cmb_alloc_stats ps;
        policy_stats(d, &ps);
        if (ps.allocated.current > d->allocated_since)
            d->allocated_since = ps.allocated.current;
        if (ps.reserved.current > d->reserved_since)
            d->reserved_since = ps.reserved.current;
    }
    return grew;
}

void _cmb_pl_reset_peaks_locked(pl_device *d)
{
    cmb_alloc_stats ps;
    policy_stats(d, &ps);
    d->peaks_reset = 1;
    d->allocated_base = ps.allocated.peak;
    d->reserved_base = ps.reserved.peak;
    d->allocated_since = ps.allocated.current;
    d->reserved_since = ps.reserved.current;
    d->requested.peak = d->requested.current;
    d->blocks.peak = d->blocks.current;
    atomic_store_explicit(&d->device_used_peak, 0, memory_order_relaxed);
}

static int64_t peak_since(int64_t policy_peak, int64_t base, int64_t since)
{
    return policy_peak > base ? policy_peak : since;
}

void _cmb_pl_fill_stats(pl_device *d, cmb_pluggable_memstats *out)
{
    cmb_alloc_stats ps;
    policy_stats(d, &ps);
    out->active = 1;
    out->valid = ps.valid;
    pl_tc_sums tc;
    _cmb_pl_tc_sum_locked(d, &tc); /* the threads' caches: what the program did there */
    out->requested_current = d->requested.current + tc.requested;
    out->requested_peak = d->requested.peak > out->requested_current ? d->requested.peak : out->requested_current;
    /* A graph's private pools are the library's own blocks beside the
     * policy's; a pool's segments come from the same upstream, whose held
     * bytes are the policy's reserved bytes (cmb_upstream.h), a pool's own
     * instance from a child of it, counted apart (pools_own). */
    out->allocated_current = ps.allocated.current + (int64_t)d->pools_allocated;
    out->reserved_current = ps.reserved.current + (int64_t)d->pools_direct + (int64_t)d->pools_own;
    if (d->peaks_reset) {
        out->allocated_peak = peak_since(ps.allocated.peak, d->allocated_base, d->allocated_since);
        out->reserved_peak = peak_since(ps.reserved.peak, d->reserved_base, d->reserved_since);
    } else {
        out->allocated_peak = ps.allocated.peak;
        out->reserved_peak = ps.reserved.peak;
    }
    if (out->allocated_peak < out->allocated_current)
        out->allocated_peak = out->allocated_current;
    if (out->reserved_peak < out->reserved_current)
        out->reserved_peak = out->reserved_current;
    out->blocks_current = d->blocks.current + tc.blocks;
    out->blocks_peak = d->blocks.peak > out->blocks_current ? d->blocks.peak : out->blocks_current;
    out->largest_free = (int64_t)ps.largest_free;
    if (d->up) {
        int64_t outstanding = (int64_t)d->up->stats.alloc_calls - (int64_t)d->up->stats.free_calls;
        out->segments_current = outstanding > 0 ? outstanding : 0;
        out->upstream_allocs = (int64_t)d->up->stats.alloc_calls;
        out->upstream_frees = (int64_t)d->up->stats.free_calls;
    } else if (ps.valid & CMB_STAT_UPSTREAM) {
        out->upstream_allocs = (int64_t)ps.upstream_allocs;
        out->upstream_frees = (int64_t)ps.upstream_frees;
    }
    out->oom_retries = (int64_t)ps.oom_retries + (int64_t)d->pool_trims; /* a pool's retry after a trim counts */
    out->allocs = d->allocs + tc.allocs;
    out->frees = d->frees + tc.frees;
    out->ooms = d->ooms;
    out->bad_frees = d->bad_frees;
    out->streams = (int64_t)d->n_streams - 1 + d->null_stream_used;
    out->device_used_peak = atomic_load_explicit(&d->device_used_peak, memory_order_relaxed);
    out->device_free_at_create = d->free_at_create;
    out->device_total = d->total;
}
