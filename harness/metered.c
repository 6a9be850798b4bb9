/* metered.c - timing and bookkeeping around the allocator under test. */
#include "metered.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../allocators/cmb_stats_check.h"
#include "../common/cmb_clock.h"
#include "../scenarios/scenario.h"

/* --- counting upstream calls ------------------------------------------------------------------- */

static const char *const up_kind_names[CMB_UPK_COUNT] = {
    "alloc", "free", "map", "unmap", "va_reserve", "va_release", "event_record", "event_query", "stream_sync",
    "park", "unpark", "drop_parked", "map_noaccess", "unpark_noaccess", "set_access"};

const char *cmb_up_kind_name(cmb_up_kind k)
{
    return k < CMB_UPK_COUNT ? up_kind_names[k] : "?";
}

/* The counting table is the first member of cmb_up_counts: u->ops leads
 * back to the counts. */
static cmb_up_counts *counts_of(cmb_upstream *u)
{
    return (cmb_up_counts *)(void *)((char *)u->ops - offsetof(cmb_up_counts, ops));
}

/* One call of kind k and `size`; its bucket. */
static int count(cmb_upstream *u, cmb_up_kind k, size_t size)
{
    cmb_up_counts *n = counts_of(u);
    int b = 0;
    while (b + 1 < CMB_UP_BUCKETS && size >> (b + 1))
        b++;
    __atomic_fetch_add(&n->calls[k][b], 1, __ATOMIC_RELAXED); /* scenarios with threads */
    __atomic_fetch_add(&n->bytes[k][b], size, __ATOMIC_RELAXED);
    return b;
}

#define COUNTED(op, kind, size, params, args)                          \
    static cmb_status count_##op params                                \
    {                                                                  \
        cmb_status st = counts_of(u)->orig->op args;                   \
        if (st == CMB_OK)                                              \
            count(u, kind, size);                                      \
        return st;                                                     \
    }
COUNTED(alloc, CMB_UPK_ALLOC, size, (cmb_upstream * u, size_t size, cmb_stream s, void **p), (u, size, s, p))
COUNTED(free, CMB_UPK_FREE, size, (cmb_upstream * u, void *p, size_t size, cmb_stream s), (u, p, size, s))
COUNTED(va_reserve, CMB_UPK_VA_RESERVE, size, (cmb_upstream * u, size_t size, void **va), (u, size, va))
COUNTED(va_release, CMB_UPK_VA_RELEASE, size, (cmb_upstream * u, void *va, size_t size), (u, va, size))

COUNTED(unmap, CMB_UPK_UNMAP, size, (cmb_upstream * u, void *va, size_t size), (u, va, size))
COUNTED(event_record, CMB_UPK_EVENT_RECORD, 1, (cmb_upstream * u, cmb_stream s, cmb_event * ev), (u, s, ev))
COUNTED(event_rerecord, CMB_UPK_EVENT_RECORD, 1, (cmb_upstream * u, cmb_stream s, cmb_event ev), (u, s, ev))
COUNTED(event_query, CMB_UPK_EVENT_QUERY, 1, (cmb_upstream * u, cmb_event ev), (u, ev))
COUNTED(stream_sync, CMB_UPK_STREAM_SYNC, 1, (cmb_upstream * u, cmb_stream s), (u, s))
COUNTED(park, CMB_UPK_PARK, size, (cmb_upstream * u, void *va, size_t size), (u, va, size))
/* park_after is park's driver calls, later: counted and priced as park */
COUNTED(park_after, CMB_UPK_PARK, size, (cmb_upstream * u, void *va, size_t size, cmb_stream s), (u, va, size, s))
#undef COUNTED

/* map and unpark: without their access call while deferred (defer_access) */
static cmb_status count_mapping(cmb_upstream *u, void *va, size_t size, int unpark)
{
    cmb_up_counts *n = counts_of(u);
    cmb_status st = unpark ? n->orig->unpark(u, va, size) : n->orig->map(u, va, size);
    if (st != CMB_OK)
        return st;
    if (n->deferring) { /* one handle: a created one mapped, or a kept one */
        count(u, unpark ? CMB_UPK_UNPARK_NOACCESS : CMB_UPK_MAP_NOACCESS, size);
        __atomic_fetch_add(&n->deferred_bytes, size, __ATOMIC_RELAXED);
        __atomic_fetch_add(&n->deferred_handles, 1, __ATOMIC_RELAXED);
    } else {
        count(u, unpark ? CMB_UPK_UNPARK : CMB_UPK_MAP, size);
    }
    return CMB_OK;
}

static cmb_status count_map(cmb_upstream *u, void *va, size_t size)
{
    return count_mapping(u, va, size, 0);
}

static cmb_status count_unpark(cmb_upstream *u, void *va, size_t size)
{
    return count_mapping(u, va, size, 1);
}

/* defer_access(0): the access calls it made (one per contiguous range),
 * each counted at the mean size of what was deferred and covering the
 * mean number of its handles (the remainder one more each to the first):
 * a growth of cmb or torch-expandable is one range, so exactly. */
static cmb_status count_defer_access(cmb_upstream *u, int on)
{
    cmb_up_counts *n = counts_of(u);
    uint64_t before = u->driver.set_access;
    cmb_status st = n->orig->defer_access(u, on);
    n->deferring = on && st == CMB_OK;
    if (on) {
        if (st == CMB_OK) { /* the upstream forgets what an unfinished window left */
            __atomic_store_n(&n->deferred_bytes, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&n->deferred_handles, 0, __ATOMIC_RELAXED);
        }
        return st;
    }
    uint64_t runs = u->driver.set_access - before, bytes = __atomic_exchange_n(&n->deferred_bytes, 0, __ATOMIC_RELAXED);
    uint64_t handles = __atomic_exchange_n(&n->deferred_handles, 0, __ATOMIC_RELAXED);
    for (uint64_t i = 0; i < runs; i++) {
        int b = count(u, CMB_UPK_SET_ACCESS, (size_t)(bytes / runs));
        __atomic_fetch_add(&n->access_handles[b], handles / runs + (i < handles % runs), __ATOMIC_RELAXED);
    }
    return st;
}

/* drop_parked releases every kept handle of at most `size`: counted per
 * handle released (one cuMemRelease each), at a page each */
static cmb_status count_drop_parked(cmb_upstream *u, size_t size)
{
    uint64_t before = u->driver.mem_release;
    cmb_status st = counts_of(u)->orig->drop_parked(u, size);
    for (uint64_t n = u->driver.mem_release - before; n; n--)
        count(u, CMB_UPK_DROP_PARKED, u->granularity);
    return st;
}

static void attach_counts(cmb_metered *mt)
{
    if (!mt->up)
        return; /* nothing predicted beyond the allocator's own work */
    cmb_up_counts *n = &mt->up_count_store;
    n->orig = mt->up->ops;
    n->ops = *n->orig;
    n->ops.alloc = count_alloc;
    n->ops.free = count_free;
    n->ops.va_reserve = count_va_reserve;
    n->ops.va_release = count_va_release;
    n->ops.map = count_map;
    n->ops.unmap = count_unmap;
    n->ops.event_record = n->orig->event_record ? count_event_record : NULL;
    n->ops.event_rerecord = n->orig->event_rerecord ? count_event_rerecord : NULL;
    n->ops.event_query = n->orig->event_query ? count_event_query : NULL;
    n->ops.stream_sync = n->orig->stream_sync ? count_stream_sync : NULL;
    n->ops.park = n->orig->park ? count_park : NULL;
    n->ops.park_after = n->orig->park_after ? count_park_after : NULL;
    n->ops.unpark = n->orig->unpark ? count_unpark : NULL;
    n->ops.drop_parked = n->orig->drop_parked ? count_drop_parked : NULL;
    n->ops.defer_access = n->orig->defer_access ? count_defer_access : NULL;
    n->deferring = 0;
    n->deferred_bytes = 0;
    n->deferred_handles = 0;
    mt->up->ops = &n->ops;
    mt->up_counts = n;
}

/* --- the meters ------------------------------------------------------------------------------------ */

cmb_status cmb_metered_init(cmb_metered *mt, const cmb_allocator_methods *m, void *state,
                            cmb_upstream *up, size_t latency_cap, uint64_t seed)
{
    memset(mt, 0, sizeof *mt);
    mt->m = m;
    mt->state = state;
    mt->up = up;
    mt->time_ops = 1;
    if (cmb_hashmap_init(&mt->live, 4096))
        goto out_nomem;
    if (cmb_latency_init(&mt->alloc_ns, latency_cap, seed))
        goto out_free_map;
    if (cmb_latency_init(&mt->free_ns, latency_cap, seed + 1))
        goto out_free_alloc_lat;
    attach_counts(mt);
    return CMB_OK;

out_free_alloc_lat:
    cmb_latency_free(&mt->alloc_ns);
out_free_map:
    cmb_hashmap_free(&mt->live);
out_nomem:
    return CMB_ERR_HOST_NOMEM;
}

/* The instance whose allocation failed last (cmb_case_free_account): a
 * case's process runs one scenario at a time, on one thread. */
static cmb_metered *last_refused;

void cmb_metered_free(cmb_metered *mt)
{
    if (last_refused == mt)
        last_refused = NULL;
    cmb_latency_free(&mt->alloc_ns);
    cmb_latency_free(&mt->free_ns);
    cmb_hashmap_free(&mt->live);
}

int cmb_metered_add_observer(cmb_metered *mt, cmb_observer_fn fn, void *ctx)
{
    if (mt->n_observers == (int)(sizeof mt->observers / sizeof mt->observers[0]))
        return -1;
    mt->observers[mt->n_observers] = fn;
    mt->observer_ctx[mt->n_observers] = ctx;
    mt->n_observers++;
    return 0;
}

static void notify(cmb_metered *mt, cmb_op_kind kind, void *ptr, size_t size, cmb_stream s)
{
    for (int i = 0; i < mt->n_observers; i++)
        mt->observers[i](mt->observer_ctx[i], kind, ptr, size, s, mt);
}

static void snapshot_peak(cmb_metered *mt)
{
    cmb_alloc_stats st;
    if (cmb_metered_stats(mt, &st) != CMB_OK)
        return;
    if (!(st.valid & CMB_STAT_LARGEST_FREE))
        return;
    mt->at_peak = st;
    mt->have_peak_snapshot = 1;
}

cmb_status cmb_metered_alloc(cmb_metered *mt, size_t size, cmb_stream s, void **ptr)
{
    uint64_t t0 = mt->time_ops ? cmb_now_ns() : 0;
    cmb_status st = mt->m->allocate(mt->state, size, s, ptr);
    uint64_t t1 = mt->time_ops ? cmb_now_ns() : 0;

    if (st != CMB_OK) {
        mt->failed_allocs++;
        mt->last_failure = st;
        last_refused = mt;
        notify(mt, CMB_OP_ALLOC_FAILED, NULL, size, s);
        return st;
    }
    if (mt->time_ops)
        cmb_latency_add(&mt->alloc_ns, t1 - t0);
    mt->allocs++;
    if (cmb_hashmap_put(&mt->live, (uint64_t)(uintptr_t)*ptr, size)) {
        mt->m->deallocate(mt->state, *ptr, size, s);
        return CMB_ERR_HOST_NOMEM;
    }
    int new_peak = mt->requested.current + (int64_t)size > mt->requested.peak;
    cmb_stat_increase(&mt->requested, (int64_t)size);
    cmb_stat_increase(&mt->blocks, 1);
    if (new_peak || mt->sample_device || mt->n_observers) {
        uint64_t h0 = cmb_now_ns();
        if (new_peak)
            snapshot_peak(mt);
        if (mt->sample_device) {
            uint64_t used = mt->sample_device(mt->sample_ctx); /* cudaMemGetInfo: microseconds */
            if (used > mt->device_peak)
                mt->device_peak = used;
        }
        notify(mt, CMB_OP_ALLOC, *ptr, size, s);
        mt->overhead_ns += cmb_now_ns() - h0;
    }
    return CMB_OK;
}

cmb_status cmb_metered_dealloc(cmb_metered *mt, void *ptr, cmb_stream s)
{
    uint64_t size;
    /* one lookup: take the block out of the table, put it back on failure */
    if (!cmb_hashmap_remove(&mt->live, (uint64_t)(uintptr_t)ptr, &size)) {
        mt->failed_frees++;
        return CMB_ERR_INVALID;
    }
    uint64_t t0 = mt->time_ops ? cmb_now_ns() : 0;
    cmb_status st = mt->m->deallocate(mt->state, ptr, (size_t)size, s);
    uint64_t t1 = mt->time_ops ? cmb_now_ns() : 0;
    if (st != CMB_OK) {
        cmb_hashmap_put(&mt->live, (uint64_t)(uintptr_t)ptr, size);
        mt->failed_frees++;
        mt->last_failure = st;
        return st;
    }
    if (mt->time_ops)
        cmb_latency_add(&mt->free_ns, t1 - t0);
    mt->frees++;
    cmb_stat_decrease(&mt->requested, (int64_t)size);
    cmb_stat_decrease(&mt->blocks, 1);
    if (mt->n_observers) {
        uint64_t h0 = cmb_now_ns();
        notify(mt, CMB_OP_FREE, ptr, (size_t)size, s);
        mt->overhead_ns += cmb_now_ns() - h0;
    }
    return CMB_OK;
}

/* --- impossible statistics --------------------------------------------------------------- */

/* A policy's statistics as it reports them, less what cannot be true
 * (allocators/cmb_stats_check.h): such values are never published as
 * numbers (a peak of -1 from all-0xff bytes); the first reason is kept. */
static void check_stats(cmb_metered *mt, cmb_alloc_stats *st)
{
    char why[sizeof mt->impossible_why];
    int n = cmb_stats_check(st, why, sizeof why);
    if (n && !mt->impossible_stats)
        memcpy(mt->impossible_why, why, sizeof why);
    mt->impossible_stats += (uint64_t)n;
}

cmb_status cmb_metered_stats(cmb_metered *mt, cmb_alloc_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!mt->m->stats)
        return CMB_OK;
    cmb_status st = mt->m->stats(mt->state, out);
    if (st == CMB_OK)
        check_stats(mt, out);
    return st;
}

cmb_status cmb_metered_free_account(cmb_metered *mt, size_t size, cmb_stream s, cmb_free_account *out)
{
    memset(out, 0, sizeof *out);
    if (!mt->m->free_account)
        return CMB_ERR_UNSUPPORTED; /* a table of ABI version < 3, or a policy with no account */
    return mt->m->free_account(mt->state, size, s, out);
}

/* scenario.h: kept here, beside the meters that saw the failure */
cmb_status cmb_case_free_account(cmb_case *c, size_t size, cmb_stream s, cmb_free_account *out)
{
    (void)c; /* the instance is the one that refused last: the case's own, or its fresh trial's */
    if (!last_refused) {
        memset(out, 0, sizeof *out);
        return CMB_ERR_STATE;
    }
    return cmb_metered_free_account(last_refused, size, s, out);
}

/* One probe: 1 when `size` can be allocated now (and is freed again), 0
 * when not, -1 on an error that is not an out-of-memory. */
static int try_size(cmb_metered *mt, uint64_t size, cmb_stream s, cmb_status *err)
{
    void *p;
    cmb_status st = mt->m->allocate(mt->state, (size_t)size, s, &p);
    if (st == CMB_ERR_OOM)
        return 0;
    if (st != CMB_OK) {
        *err = st;
        return -1;
    }
    st = mt->m->deallocate(mt->state, p, (size_t)size, s);
    if (st != CMB_OK) {
        *err = st;
        return -1;
    }
    return 1;
}

cmb_status cmb_metered_probe_largest(cmb_metered *mt, uint64_t upper, uint64_t resolution,
                                     cmb_stream s, uint64_t *largest)
{
    cmb_status err = CMB_OK;
    uint64_t ok = 0, fail_at;
    if (resolution == 0)
        resolution = 1;
    *largest = 0;
    upper = upper / resolution * resolution;
    if (upper == 0)
        return CMB_OK;
    int r = try_size(mt, upper, s, &err);
    if (r < 0)
        return err;
    if (r) {
        *largest = upper;
        return CMB_OK;
    }
    fail_at = upper;
    while (fail_at - ok > resolution) {
        uint64_t mid = (ok + (fail_at - ok) / 2) / resolution * resolution;
        if (mid <= ok)
            mid = ok + resolution;
        if (mid >= fail_at)
            break;
        r = try_size(mt, mid, s, &err);
        if (r < 0)
            return err;
        if (r)
            ok = mid;
        else
            fail_at = mid;
    }
    *largest = ok;
    return CMB_OK;
}

uint64_t cmb_metered_free_all(cmb_metered *mt, cmb_stream s)
{
    uint64_t failures = 0, key, val;
    size_t it = 0;
    while (cmb_hashmap_next(&mt->live, &it, &key, &val)) {
        if (mt->m->deallocate(mt->state, (void *)(uintptr_t)key, (size_t)val, s) != CMB_OK)
            failures++;
    }
    cmb_hashmap_clear(&mt->live);
    mt->requested.current = 0;
    mt->blocks.current = 0;
    return failures;
}
