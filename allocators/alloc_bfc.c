/* alloc_bfc.c - "bfc": TensorFlow's best-fit-with-coalescing allocator
 * (BFCAllocator, as GPUBFCAllocator configures it for a GPU).
 *
 * Algorithm (tensorflow/tsl/framework/bfc_allocator.{h,cc}, now
 * xla/tsl/framework/bfc_allocator.{h,cc}):
 *  - every request is rounded up to a multiple of 256 B;
 *  - memory comes from the upstream in regions; a region is cut into chunks
 *    that cover it without gaps and are linked to their physical neighbours;
 *  - free chunks sit in 21 bins; bin b holds sizes in [256 << b, 256 << (b+1))
 *    and the last bin everything from 256 MiB up; each bin is ordered by
 *    (size, address);
 *  - allocation scans bins from the request's bin upward and takes the first
 *    chunk that fits: the smallest fitting size, lowest address among equal
 *    sizes (best fit);
 *  - the chunk is split when it is at least twice the rounded request, or
 *    when the remainder would be at least the internal-fragmentation cap
 *    (128 MiB, or fragmentation_fraction x memory_limit); the remainder goes
 *    back into its bin;
 *  - a freed chunk merges with its free neighbours in the same region;
 *  - no chunk fits: Extend() takes a new region from the upstream. With
 *    allow_growth the region size starts at 2 MiB and doubles (to at least
 *    the request, and once more after each extension that did not need to
 *    grow it); without it one region of the whole memory limit. Never more
 *    than memory_limit in all. When the upstream refuses, the region size
 *    backs off by x0.9 (rounded up to 256 B) until it would be smaller than
 *    the request ("backpedal"). Which failures backpedal is the `backpedal`
 *    option: `once` (the default) only the first in the allocator's life,
 *    later ones fail at once, as TensorFlow up to 2.13 does
 *    (tensorflow/tsl/framework/bfc_allocator.cc, started_backpedal_: "Only
 *    backpedal once"); `always` every one, as TensorFlow's later tsl
 *    (third_party/xla/third_party/tsl/tsl/framework/bfc_allocator.cc) and
 *    XLA/JAX (xla/tsl/framework/bfc_allocator.cc) do. Both step down by at
 *    least 256 B, as XLA now does, so a small region cannot loop forever;
 *  - still nothing: with garbage_collection (TF's GPU default) every region
 *    with no chunk in use is returned to the upstream and Extend() tried once
 *    more (counted as an oom_retry); then CMB_ERR_OOM.
 *  - trim() returns every region with no chunk in use (TF has no public
 *    empty_cache; this is what its garbage collection does);
 *  - largest_free is LargestFreeChunk(): the last chunk of the highest
 *    non-empty bin, so the harness's external fragmentation
 *    (reserved - allocated - largest_free) / (reserved - allocated) equals
 *    BFCAllocator::GetFragmentation().
 *
 * Memory limit (tensorflow/core/common_runtime/gpu/gpu_device.cc,
 * SingleVirtualDeviceMemoryLimit): memory_limit if given; else
 * memory_fraction x total; else free - MinSystemMemory(free), where
 * MinSystemMemory is 225 MiB below 2 GiB free and 1800 MiB otherwise (the
 * value for compute capability >= 9, the H100/H200 this suite targets; the
 * policy cannot see the GPU, so min_system_memory overrides it, as
 * TF_DEVICE_MIN_SYS_MEMORY_IN_MB does).
 *
 * Bounds: a cache hit is O(log n) in the free chunks of one bin (the bin
 * search falls back to a bitmap of non-empty bins, O(1)); a free is O(1)
 * hash lookup plus O(log n) bin updates. Internal fragmentation below the
 * split threshold: a chunk < 2x the request is handed out whole, so up to
 * ~50% of a block (capped at 128 MiB) can be padding. Host memory: one
 * chunk record per chunk.
 *
 * Not modelled: the timestamped ("freed_at_count") chunks and the
 * retry-after-sleep of AllocateRawInternalWithRetry (single-threaded
 * benchmark); region coalescing (only GpuVirtualMemAllocator supports it,
 * and gpu_process_state.cc compiles it out: TF's GPU BFC sits on
 * DeviceMemAllocator, i.e. cudaMalloc); streams (TF's GPU allocator serves
 * one compute stream, so the stream argument is ignored).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_size.h"
#include "../common/cmb_assert.h"
#include "../common/cmb_hashmap.h"
#include "../common/cmb_objpool.h"
#include "../common/cmb_rbtree.h"
#include "cmb_allocator.h"
#include "options.h"

/* --- constants ------------------------------------------------------------- */

/* kMinAllocationBits = 8, kMinAllocationSize = 256 (tsl/framework/bfc_allocator.h) */
#define BFC_MIN_ALLOCATION_BITS 8
#define BFC_MIN_ALLOCATION_SIZE (1ull << BFC_MIN_ALLOCATION_BITS)
/* kNumBins = 21 (tsl/framework/bfc_allocator.h) */
#define BFC_NUM_BINS 21
/* initial region with allow_growth: 2 MiB (BFCAllocator constructor, bfc_allocator.cc) */
#define BFC_INITIAL_REGION (2ull << 20)
/* internal-fragmentation cap when fragmentation_fraction is 0: 128 MiB
 * (FindChunkPtr / constructor, bfc_allocator.cc) */
#define BFC_MAX_INTERNAL_FRAGMENTATION (128ll << 20)
/* kBackpedalFactor = 0.9f (Extend, bfc_allocator.cc) */
#define BFC_BACKPEDAL_FACTOR 0.9f
/* MinSystemMemory: 225 MiB below 2 GiB available, 1800 MiB for compute
 * capability >= 9 (common_runtime/gpu/gpu_device.cc) */
#define BFC_SMALL_GPU_LIMIT (1ull << 31)
#define BFC_SMALL_GPU_SYSTEM_MEMORY (225ull << 20)
#define BFC_SYSTEM_MEMORY (1800ull << 20)
/* Region sizes double without bound in TF; saturate far above any GPU so
 * the doubling can never wrap to 0. */
#define BFC_REGION_SIZE_CAP (1ull << 62)

#define BFC_NO_BIN (-1)

/* --- data ------------------------------------------------------------------ */

typedef struct bfc_region bfc_region;

typedef struct bfc_chunk {
    cmb_rbnode node;        /* in bins[bin] while free            */
    uintptr_t ptr;
    uint64_t size;
    struct bfc_chunk *prev; /* physically adjacent, same region    */
    struct bfc_chunk *next;
    bfc_region *region;
    int bin;                /* BFC_NO_BIN while in use             */
    int in_use;
} bfc_chunk;

struct bfc_region {
    uintptr_t ptr;
    uint64_t size;
    bfc_chunk *first;
    uint64_t chunks_in_use; /* 0: garbage collection may return it */
    bfc_region *prev, *next;
};

typedef struct bfc {
    cmb_upstream *up;
    cmb_rbtree bins[BFC_NUM_BINS];
    uint32_t nonempty;          /* bit b set: bins[b] holds a chunk       */
    cmb_hashmap live;           /* chunk address -> bfc_chunk *, in use    */
    cmb_objpool chunk_pool;
    bfc_region *regions;
    uint64_t memory_limit;
    uint64_t curr_region_bytes; /* curr_region_allocation_bytes_           */
    uint64_t pool_bytes;        /* total_region_allocated_bytes_           */
    int64_t max_internal_frag;
    int allow_growth;
    int garbage_collection;
    int backpedal_always;       /* backpedal=always                         */
    int started_backpedal;      /* started_backpedal_: once has been used   */
    cmb_alloc_stats st;
    char err[256];
    CMB_DEBUG_ONLY(uint64_t ops;)
} bfc;

/* --- bins ------------------------------------------------------------------ */

static inline uint64_t round_bytes(uint64_t n)
{
    return (n + BFC_MIN_ALLOCATION_SIZE - 1) & ~(BFC_MIN_ALLOCATION_SIZE - 1);
}

/* BinNumForSize: floor(log2(max(size, 256) >> 8)), the last bin catching
 * everything larger. Exported for the tests. */
int _cmb_bfc_bin_for_size(uint64_t size)
{
    uint64_t v = (size < BFC_MIN_ALLOCATION_SIZE ? BFC_MIN_ALLOCATION_SIZE : size) >> BFC_MIN_ALLOCATION_BITS;
    int b = 63 - __builtin_clzll(v);
    return b < BFC_NUM_BINS - 1 ? b : BFC_NUM_BINS - 1;
}

static inline bfc_chunk *chunk_of(cmb_rbnode *n)
{
    return n ? cmb_rb_entry(n, bfc_chunk, node) : NULL;
}

/* Bin order: size, then address (Bin::ChunkComparator). */
static int chunk_cmp(const cmb_rbnode *a, const cmb_rbnode *b)
{
    const bfc_chunk *x = cmb_rb_entry(a, bfc_chunk, node), *y = cmb_rb_entry(b, bfc_chunk, node);
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return (x->ptr > y->ptr) - (x->ptr < y->ptr);
}

static int size_keycmp(const void *key, const cmb_rbnode *n)
{
    uint64_t k = *(const uint64_t *)key, s = cmb_rb_entry(n, bfc_chunk, node)->size;
    return (k > s) - (k < s);
}

static void bin_insert(bfc *a, bfc_chunk *c)
{
    int b = _cmb_bfc_bin_for_size(c->size);
    c->bin = b;
    cmb_rb_insert(&a->bins[b], &c->node, chunk_cmp);
    a->nonempty |= 1u << b;
}

static void bin_remove(bfc *a, bfc_chunk *c)
{
    cmb_rb_erase(&a->bins[c->bin], &c->node);
    if (!a->bins[c->bin].count)
        a->nonempty &= ~(1u << c->bin);
    c->bin = BFC_NO_BIN;
}

/* FindChunkPtr's search: in the request's bin the first chunk of size >=
 * rounded; in any higher bin its first chunk fits by construction. */
static bfc_chunk *find_chunk(bfc *a, uint64_t rounded)
{
    int b = _cmb_bfc_bin_for_size(rounded);
    if (a->nonempty & (1u << b)) {
        bfc_chunk *c = chunk_of(cmb_rb_lower_bound(&a->bins[b], &rounded, size_keycmp));
        if (c)
            return c;
    }
    uint32_t higher = a->nonempty & ~((2u << b) - 1);
    if (!higher)
        return NULL;
    return chunk_of(cmb_rb_first(&a->bins[__builtin_ctz(higher)]));
}

static uint64_t largest_free_chunk(const bfc *a)
{
    if (!a->nonempty)
        return 0;
    int b = 31 - __builtin_clz(a->nonempty);
    return chunk_of(cmb_rb_last(&a->bins[b]))->size;
}

/* --- regions --------------------------------------------------------------- */

static void region_link(bfc *a, bfc_region *r)
{
    r->prev = NULL;
    r->next = a->regions;
    if (a->regions)
        a->regions->prev = r;
    a->regions = r;
}

static void region_unlink(bfc *a, bfc_region *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        a->regions = r->next;
    if (r->next)
        r->next->prev = r->prev;
}

/* Returns the region's memory to the upstream; its free chunks leave the
 * bins. Live chunks (only at destroy) are dropped from the live table. */
static cmb_status region_release(bfc *a, bfc_region *r)
{
    bfc_chunk *c = r->first;
    while (c) {
        bfc_chunk *next = c->next;
        if (c->in_use)
            cmb_hashmap_remove(&a->live, (uint64_t)c->ptr, NULL);
        else
            bin_remove(a, c);
        cmb_objpool_put(&a->chunk_pool, c);
        c = next;
    }
    cmb_status st = cmb_up_free(a->up, (void *)r->ptr, r->size, NULL);
    a->pool_bytes -= r->size;
    a->st.upstream_frees++;
    region_unlink(a, r);
    free(r);
    return st;
}

static cmb_status region_add(bfc *a, void *mem, uint64_t bytes)
{
    bfc_region *r = malloc(sizeof *r);
    bfc_chunk *c = cmb_objpool_get(&a->chunk_pool);
    if (!r || !c) {
        free(r);
        if (c)
            cmb_objpool_put(&a->chunk_pool, c);
        cmb_up_free(a->up, mem, bytes, NULL);
        return CMB_ERR_HOST_NOMEM;
    }
    *c = (bfc_chunk){.ptr = (uintptr_t)mem, .size = bytes, .region = r, .bin = BFC_NO_BIN};
    *r = (bfc_region){.ptr = (uintptr_t)mem, .size = bytes, .first = c};
    region_link(a, r);
    a->pool_bytes += bytes;
    a->st.upstream_allocs++;
    bin_insert(a, c);
    return CMB_OK;
}

/* Extend(): one more region, at least `rounded` bytes. */
static cmb_status extend(bfc *a, uint64_t rounded)
{
    uint64_t available = a->memory_limit > a->pool_bytes ? a->memory_limit - a->pool_bytes : 0;
    available = available / BFC_MIN_ALLOCATION_SIZE * BFC_MIN_ALLOCATION_SIZE;
    if (rounded > available)
        return CMB_ERR_OOM;

    int increased = 0;
    while (rounded > a->curr_region_bytes) {
        a->curr_region_bytes *= 2;
        increased = 1;
    }
    uint64_t bytes = a->curr_region_bytes < available ? a->curr_region_bytes : available;
    void *mem = NULL;
    cmb_status st = cmb_up_alloc(a->up, bytes, NULL, &mem);
    if (st == CMB_ERR_OOM && !a->backpedal_always && a->started_backpedal)
        return CMB_ERR_OOM; /* TF <= 2.13 backpedals once per allocator */
    if (st == CMB_ERR_OOM)
        a->started_backpedal = 1;
    while (st == CMB_ERR_OOM) {
        /* TF multiplies in float; keep its rounding */
        uint64_t back = round_bytes((uint64_t)((float)bytes * BFC_BACKPEDAL_FACTOR));
        if (back >= bytes)
            back = bytes - BFC_MIN_ALLOCATION_SIZE;
        bytes = back;
        if (bytes < rounded)
            return CMB_ERR_OOM;
        st = cmb_up_alloc(a->up, bytes, NULL, &mem);
    }
    if (st != CMB_OK)
        return st;
    if (!increased && a->curr_region_bytes < BFC_REGION_SIZE_CAP)
        a->curr_region_bytes *= 2;
    return region_add(a, mem, bytes);
}

/* DeallocateFreeRegions(): 1 when regions were returned and Extend() may
 * now succeed. */
static int deallocate_free_regions(bfc *a, uint64_t rounded)
{
    if (!a->garbage_collection)
        return 0;
    uint64_t free_bytes = 0;
    for (bfc_region *r = a->regions; r; r = r->next)
        if (!r->chunks_in_use)
            free_bytes += r->size;
    if (!free_bytes)
        return 0;
    if (rounded > a->memory_limit - a->pool_bytes + free_bytes)
        return 0;
    for (bfc_region *r = a->regions, *next; r; r = next) {
        next = r->next;
        if (!r->chunks_in_use)
            region_release(a, r);
    }
    return 1;
}

/* --- invariants -------------------------------------------------------------- */

typedef struct bfc_count {
    uint64_t pool, in_use, in_use_bytes, free;
} bfc_count;

/* One region: its chunks cover it without gaps, linked both ways; no two
 * free chunks touch (they would have merged); a free chunk sits in the bin
 * of its size. */
static int walk_region(const bfc_region *r, cmb_walk *w, bfc_count *n)
{
    uint64_t at = r->ptr, in_use = 0;
    CMB_WALK_CHECK(w, r->first && !r->first->prev);
    for (const bfc_chunk *c = r->first; c; c = c->next) {
        CMB_WALK_CHECK(w, c->ptr == at && c->size > 0 && c->size % BFC_MIN_ALLOCATION_SIZE == 0);
        CMB_WALK_CHECK(w, c->region == r && (!c->next || c->next->prev == c));
        CMB_WALK_CHECK(w, c->in_use || !c->next || c->next->in_use);
        if (c->in_use) {
            CMB_WALK_CHECK(w, c->bin == BFC_NO_BIN);
            in_use++;
            n->in_use_bytes += c->size;
        } else {
            CMB_WALK_CHECK(w, c->bin == _cmb_bfc_bin_for_size(c->size));
            n->free++;
        }
        at += c->size;
    }
    CMB_WALK_CHECK(w, at == r->ptr + r->size && in_use == r->chunks_in_use);
    n->pool += r->size;
    n->in_use += in_use;
    return 0;
}

/* Every region, then the bins (sorted, the bitmap of non-empty bins right)
 * and the counters against the recount. */
int _cmb_bfc_walk(const void *state, cmb_walk *w)
{
    const bfc *a = state;
    bfc_count n = {0};
    for (const bfc_region *r = a->regions; r; r = r->next) {
        CMB_WALK_CHECK(w, !r->next || r->next->prev == r);
        if (walk_region(r, w, &n))
            return 1;
    }
    size_t binned = 0;
    for (int b = 0; b < BFC_NUM_BINS; b++) {
        CMB_WALK_CHECK(w, !!a->bins[b].count == !!(a->nonempty & (1u << b)));
        CMB_WALK_CHECK(w, cmb_rb_validate(&a->bins[b], chunk_cmp) >= 0);
        binned += a->bins[b].count;
    }
    CMB_WALK_CHECK(w, binned == n.free);
    CMB_WALK_CHECK(w, n.pool == a->pool_bytes && n.pool <= a->memory_limit);
    CMB_WALK_CHECK(w, n.in_use == a->live.count && (int64_t)n.in_use == a->st.blocks.current);
    CMB_WALK_CHECK(w, (int64_t)n.in_use_bytes == a->st.allocated.current);
    return 0;
}

/* --- allocate / deallocate ------------------------------------------------- */

/* SplitChunk(): c keeps `rounded` bytes, the rest becomes a free chunk. */
static void split_chunk(bfc *a, bfc_chunk *c, bfc_chunk *rest, uint64_t rounded)
{
    *rest = (bfc_chunk){.ptr = c->ptr + rounded, .size = c->size - rounded, .prev = c, .next = c->next,
                        .region = c->region, .bin = BFC_NO_BIN};
    if (c->next)
        c->next->prev = rest;
    c->next = rest;
    c->size = rounded;
    bin_insert(a, rest);
}

static int should_split(const bfc *a, uint64_t chunk_size, uint64_t rounded)
{
    return chunk_size >= rounded * 2 || (int64_t)(chunk_size - rounded) >= a->max_internal_frag;
}

static cmb_status take_chunk(bfc *a, bfc_chunk *c, uint64_t rounded, size_t size, void **ptr)
{
    bfc_chunk *rest = NULL;
    if (should_split(a, c->size, rounded) && !(rest = cmb_objpool_get(&a->chunk_pool)))
        return CMB_ERR_HOST_NOMEM;
    if (cmb_hashmap_put(&a->live, (uint64_t)c->ptr, (uint64_t)(uintptr_t)c)) {
        if (rest)
            cmb_objpool_put(&a->chunk_pool, rest);
        return CMB_ERR_HOST_NOMEM;
    }
    bin_remove(a, c);
    if (rest)
        split_chunk(a, c, rest, rounded);
    c->in_use = 1;
    c->region->chunks_in_use++;
    cmb_stat_increase(&a->st.requested, (int64_t)size);
    cmb_stat_increase(&a->st.allocated, (int64_t)c->size);
    cmb_stat_increase(&a->st.blocks, 1);
    *ptr = (void *)c->ptr;
    CMB_VALIDATE_TICK(a->ops, _cmb_bfc_walk, a);
    return CMB_OK;
}

static cmb_status bfc_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    bfc *a = state;
    (void)stream;
    if (!size)
        return CMB_ERR_INVALID;
    if (cmb_size_refuse(size, "bfc", a->err, sizeof a->err))
        return CMB_ERR_OOM;
    uint64_t rounded = round_bytes(size);
    bfc_chunk *c = find_chunk(a, rounded);
    if (c)
        return take_chunk(a, c, rounded, size, ptr);

    cmb_status st = extend(a, rounded);
    if (st == CMB_OK)
        c = find_chunk(a, rounded);
    else if (st != CMB_ERR_OOM)
        return st;
    if (!c && deallocate_free_regions(a, rounded)) {
        a->st.oom_retries++;
        st = extend(a, rounded);
        if (st == CMB_OK)
            c = find_chunk(a, rounded);
        else if (st != CMB_ERR_OOM)
            return st;
    }
    if (!c) {
        snprintf(a->err, sizeof a->err,
                 "bfc: out of memory allocating %zu B (rounded to %llu): %llu B in regions, limit %llu B",
                 size, (unsigned long long)rounded, (unsigned long long)a->pool_bytes,
                 (unsigned long long)a->memory_limit);
        return CMB_ERR_OOM;
    }
    return take_chunk(a, c, rounded, size, ptr);
}

/* Merge(): c2 (c1's next) joins c1. */
static void merge(bfc *a, bfc_chunk *c1, bfc_chunk *c2)
{
    cmb_assert_internal(c1->next == c2 && c1->ptr + c1->size == c2->ptr && c1->region == c2->region);
    c1->size += c2->size;
    c1->next = c2->next;
    if (c2->next)
        c2->next->prev = c1;
    cmb_objpool_put(&a->chunk_pool, c2);
}

static cmb_status bfc_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    bfc *a = state;
    uint64_t v;
    (void)stream;
    if (!cmb_hashmap_remove(&a->live, (uint64_t)(uintptr_t)ptr, &v)) {
        snprintf(a->err, sizeof a->err, "bfc: free of %p, which is not a live allocation", ptr);
        return CMB_ERR_INVALID;
    }
    bfc_chunk *c = (bfc_chunk *)(uintptr_t)v;
    c->in_use = 0;
    c->region->chunks_in_use--;
    cmb_stat_decrease(&a->st.requested, (int64_t)size);
    cmb_stat_decrease(&a->st.allocated, (int64_t)c->size);
    cmb_stat_decrease(&a->st.blocks, 1);
    /* TryToCoalesce(): next into c, then c into prev */
    if (c->next && !c->next->in_use) {
        bin_remove(a, c->next);
        merge(a, c, c->next);
    }
    if (c->prev && !c->prev->in_use) {
        bfc_chunk *p = c->prev;
        bin_remove(a, p);
        merge(a, p, c);
        c = p;
    }
    bin_insert(a, c);
    CMB_VALIDATE_TICK(a->ops, _cmb_bfc_walk, a);
    return CMB_OK;
}

/* --- trim / stats / lifetime ----------------------------------------------- */

static cmb_status bfc_trim(void *state)
{
    bfc *a = state;
    cmb_status first = CMB_OK;
    CMB_VALIDATE_NOW(_cmb_bfc_walk, a);
    for (bfc_region *r = a->regions, *next; r; r = next) {
        next = r->next;
        if (!r->chunks_in_use) {
            cmb_status st = region_release(a, r);
            if (st != CMB_OK && first == CMB_OK)
                first = st;
        }
    }
    return first;
}

static cmb_status bfc_stats(void *state, cmb_alloc_stats *out)
{
    bfc *a = state;
    *out = a->st;
    out->reserved.current = a->up->stats.held_current;
    out->reserved.peak = a->up->stats.held_peak;
    out->reserved.total = a->up->stats.held_total;
    out->largest_free = largest_free_chunk(a);
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                 CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM | CMB_STAT_OOM_RETRIES;
    return CMB_OK;
}

static cmb_status bfc_destroy(void *state)
{
    bfc *a = state;
    cmb_status first = CMB_OK;
    CMB_VALIDATE_NOW(_cmb_bfc_walk, a);
    while (a->regions) {
        cmb_status st = region_release(a, a->regions);
        if (st != CMB_OK && first == CMB_OK)
            first = st;
    }
    cmb_hashmap_free(&a->live);
    cmb_objpool_destroy(&a->chunk_pool);
    free(a);
    return first;
}

static const char *bfc_last_error(void *state)
{
    bfc *a = state;
    return a->err[0] ? a->err : NULL;
}

/* SingleVirtualDeviceMemoryLimit() without a GPU description. */
static cmb_status memory_limit_of(cmb_upstream *up, uint64_t limit, double fraction, uint64_t system,
                                  uint64_t *out, char *err, size_t errlen)
{
    size_t free_b = 0, total_b = 0;
    if (limit) {
        *out = limit;
        return CMB_OK;
    }
    if (cmb_up_mem_info(up, &free_b, &total_b) != CMB_OK) {
        snprintf(err, errlen, "bfc: cannot read the device's free memory; give memory_limit=SIZE");
        return CMB_ERR_UNSUPPORTED;
    }
    if (fraction > 0) {
        *out = (uint64_t)((double)total_b * fraction);
        return CMB_OK;
    }
    if (system == UINT64_MAX)
        system = free_b < BFC_SMALL_GPU_LIMIT ? BFC_SMALL_GPU_SYSTEM_MEMORY : BFC_SYSTEM_MEMORY;
    *out = system < free_b ? free_b - system : free_b;
    return CMB_OK;
}

/* GPUBFCAllocator::Options and GPUOptions (tensorflow/core/protobuf/config.proto):
 * allow_growth false in TF (true here: "bfc" is TF with TF_FORCE_GPU_ALLOW_GROWTH;
 * "bfc-prealloc" is TF's default), garbage_collection true
 * (TF_ENABLE_GPU_GARBAGE_COLLECTION), per_process_gpu_memory_fraction 0,
 * fragmentation_fraction 0 (128 MiB cap). */
static const cmb_option_decl bfc_options[] = {
    CMB_OPTION("allow_growth", CMB_OPT_BOOL, "true", NULL, NULL, NULL,
     "regions start at 2 MiB and double (allow_growth); false: one region of the whole memory limit"),
    CMB_OPTION("garbage_collection", CMB_OPT_BOOL, "true", NULL, NULL, NULL,
     "on out of memory, return regions with no chunk in use and extend once more"),
    CMB_OPTION("memory_limit", CMB_OPT_SIZE, "(free - min_system_memory)", "0", NULL, "B",
     "the allocator's total memory (TF's memory_limit of a virtual device); 0: the rule"),
    CMB_OPTION_EX("memory_fraction", CMB_OPT_REAL, "0", "0", NULL, "fraction of total memory",
     "per_process_gpu_memory_fraction: the limit as a share of total memory; 0: the rule", NULL, 0,
     "memory_limit"),
    CMB_OPTION("min_system_memory", CMB_OPT_SIZE, "(225MiB below 2GiB free, else 1800MiB)", "0", NULL, "B",
     "memory left to the system by the default limit (TF_DEVICE_MIN_SYS_MEMORY_IN_MB)"),
    CMB_OPTION("fragmentation_fraction", CMB_OPT_REAL, "0", "0", "1", "fraction of the limit",
     "a chunk is split when the rest is at least this share of the limit; 0: 128 MiB"),
    CMB_OPTION_EX("backpedal", CMB_OPT_ENUM, "once", NULL, NULL, NULL,
     "when the upstream refuses a region, back off x0.9: once per allocator (TensorFlow <= 2.13) or always "
     "(TensorFlow's later tsl, XLA/JAX)", "once|always", 0, NULL),
    CMB_OPTION_END};

static cmb_status bfc_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    cmb_options o;
    cmb_status st = cmb_options_read(&o, "bfc", bfc_options, cfg);
    if (st != CMB_OK)
        return st;
    int allow_growth = cmb_opt_bool(&o, "allow_growth");
    int gc = cmb_opt_bool(&o, "garbage_collection");
    uint64_t limit = cmb_opt_size(&o, "memory_limit");
    double fraction = cmb_opt_real(&o, "memory_fraction");
    uint64_t system = cmb_opt_given(&o, "min_system_memory") ? cmb_opt_size(&o, "min_system_memory") : UINT64_MAX;
    double frag_fraction = cmb_opt_real(&o, "fragmentation_fraction");
    int backpedal_always = !strcmp(cmb_opt_str(&o, "backpedal"), "always");
    if (!up)
        return CMB_ERR_INVALID;

    uint64_t memory_limit;
    st = memory_limit_of(up, limit, fraction, system, &memory_limit, cfg->error, cfg->error_len);
    if (st != CMB_OK)
        return st;
    if (memory_limit > BFC_REGION_SIZE_CAP)
        memory_limit = BFC_REGION_SIZE_CAP;

    bfc *a = calloc(1, sizeof *a);
    if (!a)
        return CMB_ERR_HOST_NOMEM;
    if (cmb_hashmap_init(&a->live, 1024)) {
        free(a);
        return CMB_ERR_HOST_NOMEM;
    }
    for (int b = 0; b < BFC_NUM_BINS; b++)
        cmb_rb_init(&a->bins[b]);
    cmb_objpool_init(&a->chunk_pool, sizeof(bfc_chunk));
    a->up = up;
    a->memory_limit = memory_limit;
    a->allow_growth = allow_growth;
    a->garbage_collection = gc;
    a->backpedal_always = backpedal_always;
    a->curr_region_bytes = round_bytes(allow_growth && memory_limit > BFC_INITIAL_REGION ? BFC_INITIAL_REGION
                                                                                          : memory_limit);
    if (!a->curr_region_bytes)
        a->curr_region_bytes = BFC_MIN_ALLOCATION_SIZE;
    a->max_internal_frag =
        frag_fraction > 0 ? (int64_t)(frag_fraction * (double)memory_limit) : BFC_MAX_INTERNAL_FRAGMENTATION;
    *state = a;
    return CMB_OK;
}

static cmb_status bfc_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out);

const cmb_allocator_methods cmb_bfc_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "bfc",
    .summary = "TensorFlow BFC: 256 B rounding, 21 power-of-two bins, best fit, coalescing, allow_growth doubling",
    .flags = CMB_ALLOC_USES_UPSTREAM,
    .create = bfc_create,
    .allocate = bfc_allocate,
    .deallocate = bfc_deallocate,
    .trim = bfc_trim,
    .stats = bfc_stats,
    .destroy = bfc_destroy,
    .last_error = bfc_last_error,
    .options = bfc_options,
    .free_account = bfc_free_account,
};

/* --- free memory by reason (--explain-oom) --------------------------------- */

/* One pool, no streams: a free chunk either fits the rounded request or is
 * too small for it. The bytes no region holds yet are the upstream's. */
static cmb_status bfc_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out)
{
    const bfc *a = state;
    (void)stream;
    if (!size || !out)
        return CMB_ERR_INVALID;
    memset(out, 0, sizeof *out);
    out->rounded = round_bytes(size);
    for (int b = 0; b < BFC_NUM_BINS; b++) {
        for (cmb_rbnode *n = cmb_rb_first(&a->bins[b]); n; n = cmb_rb_next(n)) {
            const bfc_chunk *c = chunk_of(n);
            out->bytes[c->size >= out->rounded ? CMB_FREE_USABLE : CMB_FREE_TOO_SMALL] += c->size;
        }
    }
    out->largest_free = largest_free_chunk(a);
    return CMB_OK;
}
