/* metered.h - the allocator under test, wrapped with the suite's meters.
 *
 * Every allocate and deallocate a scenario makes goes through here: the
 * call alone is timed on the monotonic clock, then (outside the timed
 * region) the live-block table, requested-byte counters, the snapshot at
 * the requested peak, device-usage sampling and any observer (trace
 * recorder, timeline) are updated. The requested-byte count kept here is
 * independent of the allocator's own statistics, so the two can be checked
 * against each other.
 */
#ifndef CMB_METERED_H
#define CMB_METERED_H

#include "../allocators/cmb_allocator.h"
#include "../common/cmb_hashmap.h"
#include "latency.h"

struct cmb_metered;

/* --- upstream calls by kind and size ----------------------------------------------------------- *
 * What the policy asks of its upstream while metered, counted by
 * interposing on the upstream's ops table (cmb_upstream.h): the facts a
 * cost file turns into predicted time (harness/costs.c). Sizes fall in
 * power-of-two buckets (bucket b holds sizes in [2^b, 2^(b+1))); bytes
 * per bucket give the mean size there. Calls the policy made before the
 * meters were attached (create's initial pool) are not counted. */
typedef enum cmb_up_kind {
    CMB_UPK_ALLOC, CMB_UPK_FREE, CMB_UPK_MAP, CMB_UPK_UNMAP, CMB_UPK_VA_RESERVE, CMB_UPK_VA_RELEASE,
    CMB_UPK_EVENT_RECORD, CMB_UPK_EVENT_QUERY, CMB_UPK_STREAM_SYNC,
    CMB_UPK_PARK, CMB_UPK_UNPARK, CMB_UPK_DROP_PARKED, /* moving handles: per handle for drop */
    /* under defer_access: map and unpark without their cuMemSetAccess, and
     * the one set at the end over each contiguous range (per range; the
     * handles each covers in cmb_up_counts.access_handles) */
    CMB_UPK_MAP_NOACCESS, CMB_UPK_UNPARK_NOACCESS, CMB_UPK_SET_ACCESS,
    CMB_UPK_COUNT
} cmb_up_kind;

#define CMB_UP_BUCKETS 48

typedef struct cmb_up_counts {
    const cmb_upstream_ops *orig; /* the table interposed on; NULL when not */
    cmb_upstream_ops ops;         /* the counting table                     */
    uint64_t calls[CMB_UPK_COUNT][CMB_UP_BUCKETS];
    uint64_t bytes[CMB_UPK_COUNT][CMB_UP_BUCKETS];
    /* CMB_UPK_SET_ACCESS's calls by the same buckets (of bytes): the
     * handles they covered, the map and unpark calls made while deferring
     * (the driver prices an access call per handle: docs/costs.md) */
    uint64_t access_handles[CMB_UP_BUCKETS];
    int deferring;             /* between defer_access(1) and (0)          */
    uint64_t deferred_bytes;   /* mapped since, the access left to set     */
    uint64_t deferred_handles; /* map and unpark calls since               */
} cmb_up_counts;

const char *cmb_up_kind_name(cmb_up_kind k);

typedef enum cmb_op_kind { CMB_OP_ALLOC = 0, CMB_OP_FREE = 1, CMB_OP_ALLOC_FAILED = 2 } cmb_op_kind;

typedef void (*cmb_observer_fn)(void *ctx, cmb_op_kind kind, void *ptr, size_t size, cmb_stream s,
                                const struct cmb_metered *mt);

typedef struct cmb_metered {
    const cmb_allocator_methods *m;
    void *state;
    cmb_upstream *up; /* NULL for allocators that take no upstream */

    cmb_stat_count requested;
    cmb_stat_count blocks;
    uint64_t allocs, frees, failed_allocs, failed_frees;
    cmb_status last_failure;

    cmb_latency alloc_ns;
    cmb_latency free_ns;
    cmb_hashmap live; /* ptr -> size */

    int have_peak_snapshot;
    cmb_alloc_stats at_peak; /* allocator stats when requested bytes peaked */

    uint64_t (*sample_device)(void *ctx); /* GPU: bytes in use on the device */
    void *sample_ctx;
    uint64_t device_peak;

    int time_ops; /* read the clock around each call (default 1) */

    /* Time the harness spent on its own bookkeeping inside alloc and free
     * (device sampling, peak snapshots, observers): cmb_case_clock leaves
     * it out of a scenario's timed region. */
    uint64_t overhead_ns;

    /* Statistics the allocator reported that cannot be true (a negative
     * count, a peak below its current value, unknown CMB_STAT_* bits):
     * cmb_metered_stats leaves those fields out of `valid`, counts them here
     * and keeps the first reason; harness/verify.c fails the case. */
    uint64_t impossible_stats;
    char impossible_why[160];

    /* The upstream's ops point into up_count_store while the instance
     * lives: the instance closes its upstream before it frees the meters,
     * so the store outlives every call through it and nothing is restored. */
    cmb_up_counts *up_counts; /* &up_count_store, or NULL without an upstream */
    cmb_up_counts up_count_store;

    cmb_observer_fn observers[4];
    void *observer_ctx[4];
    int n_observers;
} cmb_metered;

cmb_status cmb_metered_init(cmb_metered *mt, const cmb_allocator_methods *m, void *state,
                            cmb_upstream *up, size_t latency_cap, uint64_t seed);
void cmb_metered_free(cmb_metered *mt);

int cmb_metered_add_observer(cmb_metered *mt, cmb_observer_fn fn, void *ctx);

cmb_status cmb_metered_alloc(cmb_metered *mt, size_t size, cmb_stream s, void **ptr);
cmb_status cmb_metered_dealloc(cmb_metered *mt, void *ptr, cmb_stream s);

/* The allocator's own statistics (zeroed with valid == 0 when it has none). */
cmb_status cmb_metered_stats(cmb_metered *mt, cmb_alloc_stats *out);

/* The allocator's free bytes by reason for a request of `size` on `s`;
 * CMB_ERR_UNSUPPORTED when it gives no account. */
cmb_status cmb_metered_free_account(cmb_metered *mt, size_t size, cmb_stream s, cmb_free_account *out);

/* Largest single allocation the allocator serves now, found by trying:
 * `upper` first, then a binary search down to `resolution` bytes. The
 * probes bypass the meters. */
cmb_status cmb_metered_probe_largest(cmb_metered *mt, uint64_t upper, uint64_t resolution,
                                     cmb_stream s, uint64_t *largest);

/* Frees every block still live (bypassing the meters); returns the number
 * of frees that failed. */
uint64_t cmb_metered_free_all(cmb_metered *mt, cmb_stream s);

#endif /* CMB_METERED_H */
