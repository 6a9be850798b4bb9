/* alloc_torch_caching.c - "torch-caching": PyTorch's CUDA caching allocator
 * (DeviceCachingAllocator in c10/cuda/CUDACachingAllocator.cpp, options from
 * c10/cuda/CUDAAllocatorConfig.{h,cpp} and c10/core/AllocatorConfig.cpp).
 *
 * Algorithm, rule for rule as PyTorch runs it:
 *  - round_size: requests below 512 B (kMinBlockSize) take 512 B; others
 *    round up to a multiple of 512 B, or, when roundup_power2_divisions gives
 *    the request's power-of-two interval d > 1 divisions and the request is
 *    above 512*d, up to the next of d equal steps between two powers of two.
 *  - pools: rounded sizes <= 1 MiB (kSmallSize) go to the small pool, the
 *    rest to the large pool. Each pool is an ordered set of free blocks keyed
 *    by (stream, size, address); a request takes the first block of its own
 *    stream that is not smaller (best fit, lowest address on a tie).
 *  - segment sizes (get_allocation_size) when no cached block fits: 2 MiB
 *    (kSmallBuffer) for the small pool; 20 MiB (kLargeBuffer) for requests
 *    below 10 MiB (kMinLargeAlloc); above that the request rounded up to
 *    2 MiB (kRoundLarge). One upstream alloc (cudaMalloc) per segment.
 *  - split (should_split): a small-pool block splits when the remainder is
 *    >= 512 B; a large-pool block when the request is below max_split_size
 *    and the remainder is > 1 MiB. The allocation takes the front.
 *  - oversize blocks (>= max_split_size) never serve requests below
 *    max_split_size, and serve larger ones only when at most
 *    max_non_split_rounding_size (default 20 MiB) bigger than the request.
 *  - free: the block coalesces with free neighbours of its segment and goes
 *    back to its pool. A block used on other streams (cmb_torch_record_stream)
 *    returns only after events recorded on those streams complete.
 *  - when the upstream refuses a segment: with max_split_size set, free one
 *    oversize cached block big enough, or the largest oversize ones until
 *    enough is freed, and retry; then free every cached unsplit segment
 *    (empty_cache) after waiting for outstanding events, and retry once more
 *    (counted in oom_retries = PyTorch's num_alloc_retries); then OOM.
 *  - per_process_memory_fraction caps the bytes held at fraction * device
 *    total (set_per_process_memory_fraction); garbage_collection_threshold,
 *    which PyTorch honours only under such a cap, frees unsplit cached
 *    large blocks older than the average before asking for a new segment
 *    once more than threshold * cap is held.
 *  - trim() = torch.cuda.empty_cache(): frees every cached unsplit segment.
 *
 * Bounds: allocate and free are O(log n) in the number of free blocks (one
 * ordered-set search, at most two merges); a free is a hash lookup. stats()
 * is O(s log n) for s streams. Memory: one block record per piece of segment.
 *
 * Options: max_split_size (bytes, >= 20MiB; or max_split_size_mb),
 * max_non_split_rounding_size (or max_non_split_rounding_mb),
 * roundup_power2_divisions (N, or per interval as MB=N/MB=N/>=N for
 * PyTorch's [MB:N,MB:N,>:N]), garbage_collection_threshold (0..1),
 * per_process_memory_fraction (0..1). See docs/torch.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_size.h"
#include "../common/cmb_assert.h"
#include "../common/cmb_units.h"
#include "cmb_torch.h"
#include "options.h"
#include "torch_caching.h"

#define BLK(n) cmb_rb_entry((n), _cmb_tc_block, node)
#define TC_MB ((size_t)1 << 20)
#define TC_SLAB_BLOCKS 256

struct _cmb_tc_slab {
    _cmb_tc_slab *next;
    _cmb_tc_block b[TC_SLAB_BLOCKS];
};

/* --- ordered sets ----------------------------------------------------------------- */

typedef struct tc_key {
    uintptr_t stream;
    size_t size;
    uintptr_t ptr;
} tc_key;

static inline int cmp_uptr(uintptr_t a, uintptr_t b)
{
    return (a > b) - (a < b);
}

/* BlockComparatorSize: (stream, size, address). */
static int size_key_cmp(const void *key, const cmb_rbnode *n)
{
    const tc_key *k = key;
    const _cmb_tc_block *b = BLK(n);
    if (k->stream != (uintptr_t)b->stream)
        return cmp_uptr(k->stream, (uintptr_t)b->stream);
    if (k->size != b->size)
        return k->size < b->size ? -1 : 1;
    return cmp_uptr(k->ptr, b->ptr);
}

/* BlockComparatorAddress: (stream, address), for unmapped ranges. */
static int addr_cmp(const cmb_rbnode *x, const cmb_rbnode *y)
{
    const _cmb_tc_block *a = BLK(x), *b = BLK(y);
    if (a->stream != b->stream)
        return cmp_uptr((uintptr_t)a->stream, (uintptr_t)b->stream);
    return cmp_uptr(a->ptr, b->ptr);
}

/* The hot paths order blocks inline rather than through size_cmp. */
static inline int block_less(const _cmb_tc_block *a, const _cmb_tc_block *b)
{
    if (a->stream != b->stream)
        return (uintptr_t)a->stream < (uintptr_t)b->stream;
    if (a->size != b->size)
        return a->size < b->size;
    return a->ptr < b->ptr;
}

/* First free block not ordered before (stream, size, 0): best fit. */
static inline cmb_rbnode *best_fit(const cmb_rbtree *t, cmb_stream stream, size_t size)
{
    cmb_rbnode *n = t->root, *found = NULL;
    while (n) {
        const _cmb_tc_block *b = BLK(n);
        int below = b->stream != stream ? (uintptr_t)b->stream < (uintptr_t)stream : b->size < size;
        if (below) {
            n = n->right;
        } else {
            found = n;
            n = n->left;
        }
    }
    return found;
}

void _cmb_tc_insert_free(_cmb_tc_block *b)
{
    cmb_rbtree *t = &b->pool->blocks;
    cmb_rbnode *parent = NULL, **link = &t->root;
    while (*link) {
        parent = *link;
        link = block_less(b, BLK(parent)) ? &parent->left : &parent->right;
    }
    b->gc_count_base = b->pool->get_free_blocks_call_count;
    cmb_rb_link(t, &b->node, parent, link);
    b->where = TC_IN_BLOCKS;
}

void _cmb_tc_insert_unmapped(_cmb_tc_block *b)
{
    cmb_rb_insert(&b->pool->unmapped, &b->node, addr_cmp);
    b->where = TC_IN_UNMAPPED;
}

void _cmb_tc_erase(_cmb_tc_block *b)
{
    if (b->where == TC_IN_BLOCKS)
        cmb_rb_erase(&b->pool->blocks, &b->node);
    else if (b->where == TC_IN_UNMAPPED)
        cmb_rb_erase(&b->pool->unmapped, &b->node);
    b->where = TC_IN_NONE;
}

/* --- block records ------------------------------------------------------------------ */

_cmb_tc_block *_cmb_tc_block_new(_cmb_tc_state *st)
{
    if (!st->free_structs) {
        _cmb_tc_slab *s = calloc(1, sizeof *s);
        if (!s)
            return NULL;
        s->next = st->slabs;
        st->slabs = s;
        for (size_t i = TC_SLAB_BLOCKS; i-- > 0;) {
            s->b[i].next = st->free_structs;
            st->free_structs = &s->b[i];
        }
    }
    _cmb_tc_block *b = st->free_structs;
    st->free_structs = b->next;
    *b = (_cmb_tc_block){.in_use = 1, .mapped = 1};
    return b;
}

void _cmb_tc_block_free(_cmb_tc_state *st, _cmb_tc_block *b)
{
    free(b->uses);
    b->uses = NULL;
    b->in_use = 0;
    b->next = st->free_structs;
    st->free_structs = b;
}

static inline int is_split(const _cmb_tc_block *b)
{
    return b->prev || b->next;
}

/* Block::splice: put b between before and after. */
void _cmb_tc_splice(_cmb_tc_block *b, _cmb_tc_block *before, _cmb_tc_block *after)
{
    if (before)
        before->next = b;
    b->prev = before;
    if (after)
        after->prev = b;
    b->next = after;
}

/* try_merge_blocks: dst absorbs its neighbour src when src is free, has no
 * pending stream uses and the same mapped state. Returns the bytes taken. */
size_t _cmb_tc_try_merge(_cmb_tc_state *st, _cmb_tc_block *dst, _cmb_tc_block *src)
{
    if (!src || src->allocated || src->event_count > 0 || src->n_uses || dst->mapped != src->mapped)
        return 0;
    if (dst->prev == src) {
        dst->ptr = src->ptr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
    } else {
        dst->next = src->next;
        if (dst->next)
            dst->next->prev = dst;
    }
    size_t subsumed = src->size;
    dst->size += subsumed;
    _cmb_tc_erase(src);
    _cmb_tc_block_free(st, src);
    return subsumed;
}

/* --- sizes ------------------------------------------------------------------------------ */

static inline int log2_floor(size_t x)
{
    return 63 - __builtin_clzll((unsigned long long)x);
}

/* CUDAAllocatorConfig::roundup_power2_divisions(size): the setting of the
 * power-of-two interval holding size; intervals start at 1 MiB. */
static size_t divisions_for(const _cmb_tc_state *st, size_t size)
{
    int log_size = log2_floor(size);
    size_t index = log_size > TC_ROUNDUP_START_LOG2 ? (size_t)(log_size - TC_ROUNDUP_START_LOG2) : 0;
    if (index > TC_ROUNDUP_INTERVALS - 1)
        index = TC_ROUNDUP_INTERVALS - 1;
    return st->divisions[index];
}

/* roundup_power2_next_division: e.g. 1200 with 4 divisions between 1024 and
 * 2048 (1024, 1280, 1536, 1792) gives 1280. */
static size_t roundup_power2_next_division(size_t size, size_t divisions)
{
    if (size <= 4 || divisions <= 1)
        return size;
    if ((size & (size - 1)) == 0)
        return size;
    size_t power2_floor = (size_t)1 << log2_floor(size);
    size_t step = power2_floor >> log2_floor(divisions);
    if (step == 0)
        return power2_floor << 1;
    size_t floor = size & ~(step - 1);
    return floor == size ? size : floor + step;
}

static size_t round_size(const _cmb_tc_state *st, size_t size)
{
    if (size < TC_MIN_BLOCK_SIZE)
        return TC_MIN_BLOCK_SIZE;
    size_t divisions = divisions_for(st, size);
    if (divisions > 1 && size > TC_MIN_BLOCK_SIZE * divisions)
        return roundup_power2_next_division(size, divisions);
    return cmb_size_round_up_sat(size, TC_MIN_BLOCK_SIZE);
}

static size_t allocation_size(size_t size)
{
    if (size <= TC_SMALL_SIZE)
        return TC_SMALL_BUFFER;
    if (size < TC_MIN_LARGE_ALLOC)
        return TC_LARGE_BUFFER;
    return cmb_size_round_up_sat(size, TC_ROUND_LARGE);
}

static inline size_t add_sat(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* --- finding a cached block ---------------------------------------------------------------- */

static inline size_t expandable_size(const _cmb_tc_block *b)
{
    return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}

/* get_free_block */
static int get_free_block(_cmb_tc_state *st, _cmb_tc_params *p)
{
    _cmb_tc_pool *pool = p->pool;
    if (st->set_fraction && st->gc_threshold > 0.0)
        pool->get_free_blocks_call_count++;
    cmb_rbnode *n = best_fit(&pool->blocks, p->stream, p->size);
    if (!n || BLK(n)->stream != p->stream)
        return 0;
    if (BLK(n)->es) {
        /* a block followed by unmapped space counts as the size it can grow
         * to: take the next candidate while that one is smaller */
        cmb_rbnode *next = cmb_rb_next(n);
        while (BLK(n)->es && next && BLK(next)->stream == p->stream &&
               expandable_size(BLK(next)) < expandable_size(BLK(n))) {
            n = next;
            next = cmb_rb_next(next);
        }
    }
    _cmb_tc_block *b = BLK(n);
    if (p->size < st->max_split_size && b->size >= st->max_split_size)
        return 0; /* no oversize block for a smaller request */
    if (p->size >= st->max_split_size && b->size >= add_sat(p->size, st->max_non_split_rounding_size))
        return 0; /* oversize blocks round a request up only so far */
    _cmb_tc_erase(b);
    p->block = b;
    return 1;
}

static int should_split(const _cmb_tc_state *st, const _cmb_tc_block *b, size_t size)
{
    size_t remaining = b->size - size;
    if (b->pool->is_small || st->expandable)
        return remaining >= TC_MIN_BLOCK_SIZE;
    return size < st->max_split_size && remaining > TC_SMALL_SIZE;
}

/* --- segments from the upstream -------------------------------------------------------------- */

/* alloc_block */
static cmb_status alloc_block(_cmb_tc_state *st, _cmb_tc_params *p, int is_retry)
{
    if (is_retry)
        st->num_alloc_retries++;
    if (st->set_fraction && add_sat(st->total_allocated_memory, p->alloc_size) > st->allowed_memory_maximum)
        return CMB_ERR_OOM;
    if (st->expandable)
        return _cmb_tc_es_allocate(st, p);

    _cmb_tc_block *b = _cmb_tc_block_new(st);
    if (!b)
        return CMB_ERR_HOST_NOMEM;
    void *ptr;
    cmb_status s = cmb_up_alloc(st->up, p->alloc_size, p->stream, &ptr);
    if (s != CMB_OK) {
        _cmb_tc_block_free(st, b);
        return s;
    }
    st->total_allocated_memory += p->alloc_size;
    b->ptr = (uintptr_t)ptr;
    b->size = p->alloc_size;
    b->stream = p->stream;
    b->pool = p->pool;
    p->block = b;
    return CMB_OK;
}

/* release_block: cudaFree of a cached, unsplit segment. */
static cmb_status release_block(_cmb_tc_state *st, _cmb_tc_block *b)
{
    cmb_status s = cmb_up_free(st->up, (void *)b->ptr, b->size, b->stream);
    if (s != CMB_OK)
        return s;
    st->total_allocated_memory -= b->size;
    _cmb_tc_erase(b);
    _cmb_tc_block_free(st, b);
    return CMB_OK;
}

/* release_available_cached_blocks: with max_split_size set, free one oversize
 * block that covers the request, or the largest oversize blocks until their
 * sizes add up to it. *released says whether a retry makes sense. */
static cmb_status release_available_cached_blocks(_cmb_tc_state *st, const _cmb_tc_params *p, int *released)
{
    *released = 0;
    if (st->max_split_size == SIZE_MAX)
        return CMB_OK;
    cmb_rbtree *blocks = &p->pool->blocks;
    size_t want = p->size < st->max_split_size ? st->max_split_size : p->size;
    tc_key key = {(uintptr_t)p->stream, want, 0};
    cmb_rbnode *n = cmb_rb_lower_bound(blocks, &key, size_key_cmp);
    if (n && BLK(n)->stream == p->stream && !BLK(n)->es && !is_split(BLK(n))) {
        cmb_status s = release_block(st, BLK(n));
        if (s == CMB_OK)
            *released = 1;
        return s;
    }
    /* no single block is large enough: free oversize ones, largest first */
    cmb_rbnode *first = cmb_rb_first(blocks);
    if (n == first)
        return CMB_OK;
    cmb_rbnode *it = n ? cmb_rb_prev(n) : cmb_rb_last(blocks);
    size_t total = 0;
    while (total < want && BLK(it)->size >= st->max_split_size && BLK(it)->stream == p->stream) {
        cmb_rbnode *cur = it;
        int is_first = cur == first;
        if (!is_first)
            it = cmb_rb_prev(it);
        if (!BLK(cur)->es && !is_split(BLK(cur))) {
            size_t size = BLK(cur)->size;
            cmb_status s = release_block(st, BLK(cur));
            if (s != CMB_OK)
                return s;
            total += size;
        }
        if (is_first)
            break;
    }
    *released = total >= want;
    return CMB_OK;
}

/* release_blocks: free every unsplit cached segment of a pool; for
 * expandable segments unmap every fully free page instead. */
static cmb_status release_blocks(_cmb_tc_state *st, _cmb_tc_pool *pool)
{
    _cmb_tc_block **to_unmap = NULL;
    size_t n_unmap = 0;
    cmb_status s = CMB_OK;
    if (st->expandable && pool->blocks.count) {
        to_unmap = malloc(pool->blocks.count * sizeof *to_unmap);
        if (!to_unmap)
            return CMB_ERR_HOST_NOMEM;
    }
    for (cmb_rbnode *n = cmb_rb_first(&pool->blocks); n;) {
        _cmb_tc_block *b = BLK(n);
        n = cmb_rb_next(n);
        if (b->es)
            to_unmap[n_unmap++] = b;
        else if (!is_split(b) && (s = release_block(st, b)) != CMB_OK)
            goto out;
    }
    for (size_t i = 0; i < n_unmap; i++) {
        _cmb_tc_block *b = to_unmap[i];
        if ((s = _cmb_tc_es_unmap_block(st, b)) != CMB_OK)
            goto out;
        if (!is_split(b) && (s = _cmb_tc_es_release(st, b)) != CMB_OK)
            goto out;
    }
out:
    free(to_unmap);
    return s;
}

/* --- stream uses and events --------------------------------------------------------------------- */

static void free_block(_cmb_tc_state *st, _cmb_tc_block *b);

static cmb_status push_event(_cmb_tc_state *st, cmb_stream stream, cmb_event ev, _cmb_tc_block *b)
{
    if (st->n_events == st->cap_events) {
        size_t cap = st->cap_events ? st->cap_events * 2 : 16;
        _cmb_tc_event *grown = realloc(st->events, cap * sizeof *grown);
        if (!grown)
            return CMB_ERR_HOST_NOMEM;
        st->events = grown;
        st->cap_events = cap;
    }
    st->events[st->n_events++] = (_cmb_tc_event){stream, ev, b};
    return CMB_OK;
}

/* insert_events: one event per stream that used the block; the block comes
 * back when the last of them completes. */
static cmb_status insert_events(_cmb_tc_state *st, _cmb_tc_block *b)
{
    cmb_status s = CMB_OK;
    for (uint32_t i = 0; i < b->n_uses && s == CMB_OK; i++) {
        cmb_event ev;
        s = cmb_up_event_record(st->up, b->uses[i], &ev);
        if (s != CMB_OK)
            break;
        s = push_event(st, b->uses[i], ev, b);
        if (s != CMB_OK)
            cmb_up_event_destroy(st->up, ev);
        else
            b->event_count++;
    }
    b->n_uses = 0;
    if (b->event_count == 0)
        free_block(st, b);
    return s;
}

static void event_done(_cmb_tc_state *st, _cmb_tc_event *e)
{
    cmb_up_event_destroy(st->up, e->ev);
    if (--e->block->event_count == 0)
        free_block(st, e->block);
}

static int stream_blocked(const _cmb_tc_state *st, size_t kept, cmb_stream s)
{
    for (size_t j = 0; j < kept; j++)
        if (st->events[j].stream == s)
            return 1;
    return 0;
}

/* process_events: per stream, completed events from the front of its queue
 * free their blocks; the first pending one stops that stream's queue. */
static cmb_status process_events(_cmb_tc_state *st)
{
    size_t kept = 0, i = 0;
    cmb_status s = CMB_OK;
    for (; i < st->n_events; i++) {
        _cmb_tc_event e = st->events[i];
        if (!stream_blocked(st, kept, e.stream)) {
            s = cmb_up_event_query(st->up, e.ev);
            if (s == CMB_OK) {
                event_done(st, &e);
                continue;
            }
            if (s != CMB_ERR_STATE)
                break;
            s = CMB_OK;
        }
        st->events[kept++] = e;
    }
    for (; i < st->n_events; i++)
        st->events[kept++] = st->events[i];
    st->n_events = kept;
    return s;
}

/* synchronize_and_free_events: wait for every outstanding event. */
static cmb_status synchronize_and_free_events(_cmb_tc_state *st)
{
    size_t i = 0;
    cmb_status s = CMB_OK;
    for (; i < st->n_events; i++) {
        s = cmb_up_stream_sync(st->up, st->events[i].stream);
        if (s != CMB_OK)
            break;
        event_done(st, &st->events[i]);
    }
    if (i && st->n_events > i) /* memmove of a NULL array is undefined even for 0 bytes */
        memmove(st->events, st->events + i, (st->n_events - i) * sizeof *st->events);
    st->n_events -= i;
    return s;
}

/* release_cached_blocks (empty_cache) */
static cmb_status release_cached_blocks(_cmb_tc_state *st)
{
    cmb_status s = synchronize_and_free_events(st);
    if (s == CMB_OK)
        s = release_blocks(st, &st->large);
    if (s == CMB_OK)
        s = release_blocks(st, &st->small);
    return s;
}

/* garbage_collect_cached_blocks: under a memory fraction, once more than
 * threshold * cap is held, free unsplit cached large blocks whose age (in
 * get_free_block calls since they were cached) is at least the average,
 * repeating until enough is reclaimed. */
static cmb_status garbage_collect_cached_blocks(_cmb_tc_state *st)
{
    _cmb_tc_pool *pool = &st->large;
    size_t threshold = (size_t)(st->gc_threshold * (double)st->allowed_memory_maximum);
    if (st->total_allocated_memory <= threshold)
        return CMB_OK;
    size_t target = st->total_allocated_memory - threshold, reclaimed = 0, total_age = 0;
    int64_t freeable = 0;
    for (cmb_rbnode *n = cmb_rb_first(&pool->blocks); n; n = cmb_rb_next(n)) {
        if (!is_split(BLK(n))) {
            total_age += pool->get_free_blocks_call_count - BLK(n)->gc_count_base;
            freeable++;
        }
    }
    int block_freed = 1;
    while (reclaimed < target && block_freed && freeable > 0) {
        double age_threshold = (double)total_age / (double)freeable;
        block_freed = 0;
        for (cmb_rbnode *n = cmb_rb_first(&pool->blocks); n;) {
            _cmb_tc_block *b = BLK(n);
            n = cmb_rb_next(n);
            size_t age = pool->get_free_blocks_call_count - b->gc_count_base;
            if (is_split(b) || b->es || (double)age < age_threshold)
                continue;
            size_t size = b->size;
            cmb_status s = release_block(st, b);
            if (s != CMB_OK)
                return s;
            block_freed = 1;
            reclaimed += size;
            total_age -= age;
            freeable--;
        }
    }
    return CMB_OK;
}

/* --- allocate and free ------------------------------------------------------------------------------ */

/* The cache missed: new segment, then the two release-and-retry steps. */
static cmb_status alloc_with_retries(_cmb_tc_state *st, _cmb_tc_params *p)
{
    cmb_status s;
    int released;
    if (st->set_fraction && st->gc_threshold > 0.0 && (s = garbage_collect_cached_blocks(st)) != CMB_OK)
        return s;
    s = alloc_block(st, p, 0);
    if (s != CMB_ERR_OOM)
        return s;
    if ((s = release_available_cached_blocks(st, p, &released)) != CMB_OK)
        return s;
    if (released && (s = alloc_block(st, p, 0)) != CMB_ERR_OOM)
        return s;
    if ((s = release_cached_blocks(st)) != CMB_OK)
        return s;
    return alloc_block(st, p, 1);
}

/* alloc_found_block: split off the front when the rules say so. */
static cmb_status alloc_found_block(_cmb_tc_state *st, _cmb_tc_params *p, size_t orig_size, void **ptr)
{
    _cmb_tc_block *b = p->block, *taken = b;
    if (should_split(st, b, p->size)) {
        taken = _cmb_tc_block_new(st);
        if (!taken)
            goto out_nomem;
    }
    if (cmb_hashmap_put(&st->live, (uint64_t)b->ptr, (uint64_t)(uintptr_t)taken))
        goto out_nomem;
    if (taken != b) {
        taken->ptr = b->ptr;
        taken->size = p->size;
        taken->stream = p->stream;
        taken->pool = p->pool;
        taken->es = b->es;
        _cmb_tc_splice(taken, b->prev, b);
        b->ptr += p->size;
        b->size -= p->size;
        _cmb_tc_insert_free(b);
    }
    taken->allocated = 1;
    taken->requested = orig_size;
    cmb_stat_increase(&st->allocated, (int64_t)taken->size);
    cmb_stat_increase(&st->requested, (int64_t)orig_size);
    cmb_stat_increase(&st->blocks, 1);
    *ptr = (void *)taken->ptr;
    CMB_VALIDATE_TICK(st->ops, _cmb_tc_walk, st);
    return CMB_OK;

out_nomem:
    if (taken && taken != b)
        _cmb_tc_block_free(st, taken);
    _cmb_tc_insert_free(b); /* back to the cache, as it was */
    return CMB_ERR_HOST_NOMEM;
}

static void set_oom_message(_cmb_tc_state *st, const _cmb_tc_params *p)
{
    char want[32], seg[32], res[32], used[32], cap[32] = "?";
    size_t free_bytes, total_bytes;
    if (cmb_up_mem_info(st->up, &free_bytes, &total_bytes) == CMB_OK)
        cmb_format_size(st->set_fraction ? st->allowed_memory_maximum : total_bytes, cap, sizeof cap);
    snprintf(st->err, sizeof st->err,
             "out of memory: tried to allocate %s (segment %s); %s reserved, %s allocated, capacity %s",
             cmb_format_size(p->size, want, sizeof want), cmb_format_size(p->alloc_size, seg, sizeof seg),
             cmb_format_size(st->total_allocated_memory, res, sizeof res),
             cmb_format_size((uint64_t)st->allocated.current, used, sizeof used), cap);
}

/* DeviceCachingAllocator::malloc */
cmb_status _cmb_tc_allocate(void *state, size_t orig_size, cmb_stream stream, void **ptr)
{
    _cmb_tc_state *st = state;
    cmb_status s;
    if (orig_size == 0 || !ptr)
        return CMB_ERR_INVALID;
    if (st->n_events && (s = process_events(st)) != CMB_OK)
        return s;
    if (orig_size > SIZE_MAX / 4) {
        snprintf(st->err, sizeof st->err, "out of memory: %zu bytes cannot be served", orig_size);
        st->num_ooms++;
        return CMB_ERR_OOM;
    }
    _cmb_tc_params p;
    p.size = round_size(st, orig_size);
    p.pool = p.size <= TC_SMALL_SIZE ? &st->small : &st->large;
    p.alloc_size = allocation_size(p.size);
    p.stream = stream;
    p.block = NULL;
    if (!get_free_block(st, &p)) {
        s = alloc_with_retries(st, &p);
        if (s == CMB_ERR_OOM) {
            st->num_ooms++;
            set_oom_message(st, &p);
        }
        if (s != CMB_OK)
            return s;
    }
    return alloc_found_block(st, &p, orig_size, ptr);
}

/* free_block: coalesce with free neighbours, back into the pool. */
static void free_block(_cmb_tc_state *st, _cmb_tc_block *b)
{
    _cmb_tc_block *prev = b->prev, *next = b->next;
    _cmb_tc_try_merge(st, b, prev);
    _cmb_tc_try_merge(st, b, next);
    _cmb_tc_insert_free(b);
}

/* DeviceCachingAllocator::free */
cmb_status _cmb_tc_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    _cmb_tc_state *st = state;
    uint64_t v;
    (void)stream;
    if (!cmb_hashmap_remove(&st->live, (uint64_t)(uintptr_t)ptr, &v)) {
        snprintf(st->err, sizeof st->err, "free of %p, which is not a live block", ptr);
        return CMB_ERR_INVALID;
    }
    _cmb_tc_block *b = (_cmb_tc_block *)(uintptr_t)v;
    if (size != b->requested) {
        cmb_hashmap_put(&st->live, (uint64_t)(uintptr_t)ptr, v); /* the entry's slot is free: no growth */
        snprintf(st->err, sizeof st->err, "free of %p with size %zu; it was allocated with %zu", ptr, size,
                 b->requested);
        return CMB_ERR_INVALID;
    }
    b->allocated = 0;
    cmb_stat_decrease(&st->allocated, (int64_t)b->size);
    cmb_stat_decrease(&st->requested, (int64_t)b->requested);
    cmb_stat_decrease(&st->blocks, 1);
    if (b->n_uses)
        return insert_events(st, b);
    free_block(st, b);
    CMB_VALIDATE_TICK(st->ops, _cmb_tc_walk, st);
    return CMB_OK;
}

cmb_status cmb_torch_record_stream(const cmb_allocator_methods *m, void *state, void *ptr, cmb_stream stream)
{
    extern const cmb_allocator_methods cmb_torch_caching_methods, cmb_torch_expandable_methods;
    _cmb_tc_state *st = state;
    uint64_t v;
    if (m != &cmb_torch_caching_methods && m != &cmb_torch_expandable_methods)
        return CMB_ERR_UNSUPPORTED;
    if (!cmb_hashmap_get(&st->live, (uint64_t)(uintptr_t)ptr, &v))
        return CMB_ERR_INVALID;
    _cmb_tc_block *b = (_cmb_tc_block *)(uintptr_t)v;
    if (stream == b->stream)
        return CMB_OK; /* uses on the allocation stream need no event */
    for (uint32_t i = 0; i < b->n_uses; i++)
        if (b->uses[i] == stream)
            return CMB_OK;
    if (b->n_uses == b->cap_uses) {
        uint32_t cap = b->cap_uses ? b->cap_uses * 2 : 2;
        cmb_stream *grown = realloc(b->uses, cap * sizeof *grown);
        if (!grown)
            return CMB_ERR_HOST_NOMEM;
        b->uses = grown;
        b->cap_uses = cap;
    }
    b->uses[b->n_uses++] = stream;
    return CMB_OK;
}

cmb_status _cmb_tc_trim(void *state)
{
    CMB_VALIDATE_NOW(_cmb_tc_walk, state);
    cmb_status s = release_cached_blocks(state);
    CMB_VALIDATE_NOW(_cmb_tc_walk, state);
    return s;
}

/* --- invariants ----------------------------------------------------------------------------------------- */

static int block_cmp(const cmb_rbnode *x, const cmb_rbnode *y)
{
    return block_less(BLK(x), BLK(y)) ? -1 : block_less(BLK(y), BLK(x)) ? 1 : 0;
}

typedef struct tc_count {
    uint64_t held, allocated, allocated_bytes, cached[2], unmapped[2], segs;
} tc_count;

static int mergeable(const _cmb_tc_block *b)
{
    return !b->allocated && b->event_count == 0 && !b->n_uses;
}

/* One block of a segment: in the set its state says, linked both ways to a
 * contiguous neighbour of the same segment; never two free neighbours of
 * the same mapped state (a free merges them). */
static int walk_block(const _cmb_tc_state *st, const _cmb_tc_block *c, cmb_walk *w, tc_count *n)
{
    uint64_t v;
    const _cmb_tc_block *nx = c->next;
    CMB_WALK_CHECK(w, c->size > 0 && (c->es || c->mapped));
    CMB_WALK_CHECK(w, !nx || (nx->prev == c && c->ptr + c->size == nx->ptr && nx->es == c->es && nx->pool == c->pool));
    CMB_WALK_CHECK(w, !nx || !mergeable(c) || !mergeable(nx) || c->mapped != nx->mapped);
    int idx = c->pool == &st->small;
    if (c->allocated) {
        CMB_WALK_CHECK(w, c->where == TC_IN_NONE && cmb_hashmap_get(&st->live, (uint64_t)c->ptr, &v) && v == (uint64_t)(uintptr_t)c);
        n->allocated++;
        n->allocated_bytes += c->size;
    } else if (c->event_count) {
        CMB_WALK_CHECK(w, c->where == TC_IN_NONE); /* waits for its streams' events */
    } else if (c->mapped) {
        CMB_WALK_CHECK(w, c->where == TC_IN_BLOCKS);
        n->cached[idx]++;
    } else {
        CMB_WALK_CHECK(w, c->where == TC_IN_UNMAPPED); /* on whole pages: _cmb_tc_es_walk */
        n->unmapped[idx]++;
    }
    return 0;
}

/* One segment from its first block: a cudaMalloc'd one counts whole, an
 * expandable one by its mapped pages (_cmb_tc_es_walk). */
static int walk_segment(const _cmb_tc_state *st, const _cmb_tc_block *head, cmb_walk *w, tc_count *n)
{
    size_t bytes = 0;
    for (const _cmb_tc_block *c = head; c; c = c->next) {
        if (walk_block(st, c, w, n))
            return 1;
        bytes += c->size;
    }
    if (!head->es) {
        n->held += bytes;
        return 0;
    }
    n->segs++;
    return _cmb_tc_es_walk(head, w, &n->held);
}

/* Every segment (its first block has no prev), then the sets and counters
 * against the recount. */
int _cmb_tc_walk(const void *state, cmb_walk *w)
{
    const _cmb_tc_state *st = state;
    tc_count n = {0};
    for (const _cmb_tc_slab *sl = st->slabs; sl; sl = sl->next)
        for (size_t i = 0; i < TC_SLAB_BLOCKS; i++)
            if (sl->b[i].in_use && !sl->b[i].prev && walk_segment(st, &sl->b[i], w, &n))
                return 1;
    const _cmb_tc_pool *pools[2] = {&st->large, &st->small};
    for (int i = 0; i < 2; i++) {
        CMB_WALK_CHECK(w, cmb_rb_validate(&pools[i]->blocks, block_cmp) >= 0 && pools[i]->blocks.count == n.cached[i]);
        CMB_WALK_CHECK(w, cmb_rb_validate(&pools[i]->unmapped, addr_cmp) >= 0 && pools[i]->unmapped.count == n.unmapped[i]);
    }
    CMB_WALK_CHECK(w, n.held == st->total_allocated_memory && n.segs == st->n_segs);
    CMB_WALK_CHECK(w, n.allocated == st->live.count && (int64_t)n.allocated == st->blocks.current);
    CMB_WALK_CHECK(w, (int64_t)n.allocated_bytes == st->allocated.current);
    return 0;
}

/* --- statistics --------------------------------------------------------------------------------------- */

/* The largest free block of a pool: the last block of each stream, found
 * by stepping from stream to stream with floor searches. */
static size_t largest_in(const cmb_rbtree *t)
{
    size_t best = 0;
    for (cmb_rbnode *n = cmb_rb_last(t); n;) {
        if (BLK(n)->size > best)
            best = BLK(n)->size;
        tc_key below = {(uintptr_t)BLK(n)->stream, 0, 0};
        cmb_rbnode *prev = cmb_rb_floor(t, &below, size_key_cmp);
        n = prev;
    }
    return best;
}

cmb_status _cmb_tc_stats(void *state, cmb_alloc_stats *out)
{
    _cmb_tc_state *st = state;
    const cmb_upstream_stats *u = &st->up->stats;
    size_t small = largest_in(&st->small.blocks), large = largest_in(&st->large.blocks);
    memset(out, 0, sizeof *out);
    out->requested = st->requested;
    out->allocated = st->allocated;
    out->blocks = st->blocks;
    out->reserved.current = u->held_current;
    out->reserved.peak = u->held_peak;
    out->reserved.total = u->held_total;
    out->largest_free = small > large ? small : large;
    out->upstream_allocs = u->alloc_calls;
    out->upstream_frees = u->free_calls;
    out->oom_retries = st->num_alloc_retries;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                 CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM | CMB_STAT_OOM_RETRIES;
    return CMB_OK;
}

const char *_cmb_tc_last_error(void *state)
{
    _cmb_tc_state *st = state;
    return st->err[0] ? st->err : NULL;
}

/* --- options ------------------------------------------------------------------------------------------- */

static int is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

/* roundup_power2_divisions: "N" for every interval, or PyTorch's per
 * interval list [MB:N,MB:N,>:N] written MB=N/MB=N/>=N (':' and ',' separate
 * allocator options and specs on the command line). As PyTorch parses it:
 * the first entry also fills the intervals below it, '>' fills the ones
 * above the last entry, intervals in between stay 0 (no rounding). */
static int parse_divisions(const char *text, size_t out[TC_ROUNDUP_INTERVALS], char *err, size_t errlen)
{
    char buf[256];
    uint64_t v;
    memset(out, 0, TC_ROUNDUP_INTERVALS * sizeof *out);
    if (!strchr(text, '=')) {
        if (cmb_parse_u64(text, &v) || (v && !is_pow2(v)))
            goto bad;
        for (size_t i = 0; i < TC_ROUNDUP_INTERVALS; i++)
            out[i] = v;
        return 0;
    }
    if (strlen(text) >= sizeof buf)
        goto bad;
    snprintf(buf, sizeof buf, "%s", text);
    size_t last_index = 0;
    int first = 1;
    char *save = NULL;
    for (char *e = strtok_r(buf, "/", &save); e; e = strtok_r(NULL, "/", &save)) {
        char *eq = strchr(e, '=');
        if (!eq)
            goto bad;
        *eq = '\0';
        if (cmb_parse_u64(eq + 1, &v) || (v && !is_pow2(v)))
            goto bad;
        if (!strcmp(e, ">") || !strcmp(e, "rest")) {
            for (size_t i = last_index + 1; i < TC_ROUNDUP_INTERVALS; i++)
                out[i] = v;
            continue;
        }
        uint64_t boundary;
        if (cmb_parse_u64(e, &boundary) || !is_pow2(boundary))
            goto bad;
        size_t index = (size_t)log2_floor(boundary);
        if (index > TC_ROUNDUP_INTERVALS - 1)
            index = TC_ROUNDUP_INTERVALS - 1;
        if (first) {
            for (size_t i = 0; i < index; i++)
                out[i] = v;
            first = 0;
        }
        out[index] = v;
        last_index = index;
    }
    return 0;
bad:
    snprintf(err, errlen,
             "option roundup_power2_divisions=%s: expected a power of two N, or MB=N/MB=N/>=N with "
             "power-of-two MB boundaries and N a power of two or 0",
             text);
    return -1;
}

/* CUDAAllocatorConfig (c10/cuda/CUDAAllocatorConfig.cpp, c10/core/AllocatorConfig.cpp):
 * max_split_size_mb unlimited, max_non_split_rounding_mb 20 (kLargeBuffer),
 * both at least 20 MiB; no roundup_power2_divisions; garbage collection
 * off; no memory fraction. Each size may be given in bytes or, as PyTorch
 * spells it, in MiB. */
const cmb_option_decl _cmb_tc_options[] = {
    CMB_OPTION_EX("max_split_size", CMB_OPT_SIZE, "max", "20MiB", "max", "B",
     "blocks at least this large are never split (PyTorch's max_split_size_mb)", NULL, CMB_OPT_MAX_OK,
     "max_split_size_mb"),
    CMB_OPTION_EX("max_split_size_mb", CMB_OPT_INT, "(none)", "20", NULL, "MiB", "the same in MiB, as PyTorch spells it", NULL,
     0, "max_split_size"),
    CMB_OPTION_EX("max_non_split_rounding_size", CMB_OPT_SIZE, "20MiB", "20MiB", "max", "B",
     "an oversize block serves a request at most this much smaller (max_non_split_rounding_mb)", NULL,
     CMB_OPT_MAX_OK, "max_non_split_rounding_mb"),
    CMB_OPTION_EX("max_non_split_rounding_mb", CMB_OPT_INT, "(none)", "20", NULL, "MiB", "the same in MiB, as PyTorch spells it",
     NULL, 0, "max_non_split_rounding_size"),
    CMB_OPTION("roundup_power2_divisions", CMB_OPT_STRING, "(none: 512 B rounding)", NULL, NULL, NULL,
     "N (a power of two) for every interval, or MB=N/MB=N/>=N per interval (PyTorch's [MB:N,...,>:N])"),
    CMB_OPTION("garbage_collection_threshold", CMB_OPT_REAL, "0", "0", "1", "fraction, below 1",
     "with a memory fraction: free old cached blocks once this share of it is held; 0: off"),
    CMB_OPTION("per_process_memory_fraction", CMB_OPT_REAL, "(none: the whole device)", "0", "1", "fraction",
     "setMemoryFraction: share of the device the allocator may hold"),
    CMB_OPTION_END};

/* A size given in bytes or in MiB (never both: the declarations exclude
 * it). PyTorch caps MiB values at SIZE_MAX / 1 MiB. */
static size_t size_or_mb(const cmb_options *o, const char *key, const char *key_mb)
{
    if (!cmb_opt_given(o, key_mb))
        return (size_t)cmb_opt_size(o, key);
    uint64_t mb = (uint64_t)cmb_opt_int(o, key_mb);
    return mb >= SIZE_MAX / TC_MB ? SIZE_MAX : (size_t)mb * TC_MB;
}

static cmb_status read_options(_cmb_tc_state *st, const cmb_config *cfg, const char *name)
{
    cmb_options o;
    cmb_status s = cmb_options_read(&o, name, _cmb_tc_options, cfg);
    if (s != CMB_OK)
        return s;
    st->max_split_size = size_or_mb(&o, "max_split_size", "max_split_size_mb");
    st->max_non_split_rounding_size = size_or_mb(&o, "max_non_split_rounding_size", "max_non_split_rounding_mb");
    const char *div = cmb_opt_str(&o, "roundup_power2_divisions");
    double gc = cmb_opt_real(&o, "garbage_collection_threshold");
    double fraction = cmb_opt_real(&o, "per_process_memory_fraction");
    int has_fraction = cmb_opt_given(&o, "per_process_memory_fraction");
    /* CUDAAllocatorConfig refuses split limits below kLargeBuffer */
    if (st->max_split_size < TC_LARGE_BUFFER || st->max_non_split_rounding_size < TC_LARGE_BUFFER) {
        snprintf(cfg->error, cfg->error_len,
                 "%s: max_split_size and max_non_split_rounding_size must be >= 20MiB (PyTorch's minimum)", name);
        return CMB_ERR_INVALID;
    }
    if (div && parse_divisions(div, st->divisions, cfg->error, cfg->error_len))
        return CMB_ERR_INVALID;
    if (gc != 0.0 && !(gc > 0.0 && gc < 1.0)) {
        snprintf(cfg->error, cfg->error_len, "%s: garbage_collection_threshold must lie in (0, 1)", name);
        return CMB_ERR_INVALID;
    }
    st->gc_threshold = gc;
    if (has_fraction) {
        size_t free_bytes, total_bytes;
        if (!(fraction >= 0.0 && fraction <= 1.0)) {
            snprintf(cfg->error, cfg->error_len, "%s: per_process_memory_fraction must lie in [0, 1]", name);
            return CMB_ERR_INVALID;
        }
        if ((s = cmb_up_mem_info(st->up, &free_bytes, &total_bytes)) != CMB_OK) {
            snprintf(cfg->error, cfg->error_len, "%s: the upstream does not report the device size", name);
            return s;
        }
        st->set_fraction = 1;
        st->allowed_memory_maximum = (size_t)(fraction * (double)total_bytes);
    }
    return CMB_OK;
}

/* --- life cycle ------------------------------------------------------------------------------------------ */

static size_t round_up(size_t x, size_t a)
{
    return cmb_size_round_up_sat(x, a); /* saturates: a huge x never wraps to a small one */
}

/* ExpandableSegment sizes: pages of 2 MiB (small pool) and 20 MiB (large
 * pool), rounded to the upstream's page; address space for 1 1/8 of the
 * device per segment, as PyTorch reserves. */
static cmb_status expandable_setup(_cmb_tc_state *st, const cmb_config *cfg, const char *name)
{
    size_t free_bytes, total_bytes, g = st->up->granularity;
    if (!g || !st->up->ops->map || cmb_up_mem_info(st->up, &free_bytes, &total_bytes) != CMB_OK) {
        snprintf(cfg->error, cfg->error_len, "%s needs an upstream with virtual memory (vmm or sim)", name);
        return CMB_ERR_UNSUPPORTED;
    }
    size_t space = total_bytes + total_bytes / 8;
    st->es_page_small = round_up(TC_SMALL_BUFFER, g);
    st->es_page_large = round_up(TC_LARGE_BUFFER, g);
    st->es_va_size_small = round_up(space, st->es_page_small);
    st->es_va_size_large = round_up(space, st->es_page_large);
    return CMB_OK;
}

cmb_status _cmb_tc_create(const cmb_config *cfg, cmb_upstream *up, void **state, int expandable, const char *name)
{
    cmb_status s;
    if (!up) {
        snprintf(cfg->error, cfg->error_len, "%s needs an upstream", name);
        return CMB_ERR_INVALID;
    }
    _cmb_tc_state *st = calloc(1, sizeof *st);
    if (!st)
        return CMB_ERR_HOST_NOMEM;
    st->up = up;
    st->expandable = expandable;
    st->large.is_small = 0;
    st->small.is_small = 1;
    cmb_rb_init(&st->large.blocks);
    cmb_rb_init(&st->large.unmapped);
    cmb_rb_init(&st->small.blocks);
    cmb_rb_init(&st->small.unmapped);
    if ((s = read_options(st, cfg, name)) != CMB_OK)
        goto out_free;
    if (expandable && (s = expandable_setup(st, cfg, name)) != CMB_OK)
        goto out_free;
    if (cmb_hashmap_init(&st->live, 1024)) {
        s = CMB_ERR_HOST_NOMEM;
        goto out_free;
    }
    *state = st;
    return CMB_OK;

out_free:
    free(st);
    return s;
}

/* Every cudaMalloc'd segment, live blocks included, goes back upstream. */
static cmb_status free_segments(_cmb_tc_state *st)
{
    cmb_status first = CMB_OK;
    for (_cmb_tc_slab *sl = st->slabs; sl; sl = sl->next) {
        for (size_t i = 0; i < TC_SLAB_BLOCKS; i++) {
            _cmb_tc_block *b = &sl->b[i];
            if (!b->in_use || b->es || b->prev)
                continue;
            size_t size = 0;
            for (_cmb_tc_block *c = b; c; c = c->next)
                size += c->size;
            cmb_status s = cmb_up_free(st->up, (void *)b->ptr, size, b->stream);
            if (s != CMB_OK && first == CMB_OK)
                first = s;
        }
    }
    return first;
}

cmb_status _cmb_tc_destroy(void *state)
{
    _cmb_tc_state *st = state;
    cmb_status first = CMB_OK, s;
    if (!st)
        return CMB_OK;
    CMB_VALIDATE_NOW(_cmb_tc_walk, st);
    for (size_t i = 0; i < st->n_events; i++)
        cmb_up_event_destroy(st->up, st->events[i].ev);
    first = free_segments(st);
    if (st->expandable && (s = _cmb_tc_es_destroy_all(st)) != CMB_OK && first == CMB_OK)
        first = s;
    for (_cmb_tc_slab *sl = st->slabs, *next; sl; sl = next) {
        next = sl->next;
        for (size_t i = 0; i < TC_SLAB_BLOCKS; i++)
            if (sl->b[i].in_use)
                free(sl->b[i].uses);
        free(sl);
    }
    cmb_hashmap_free(&st->live);
    free(st->events);
    free(st->segs);
    free(st);
    return first;
}

static cmb_status tc_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    return _cmb_tc_create(cfg, up, state, 0, "torch-caching");
}

const cmb_allocator_methods cmb_torch_caching_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "torch-caching",
    .summary = "PyTorch's CUDA caching allocator: 512 B rounding, 2 MiB / 20 MiB segments, best fit, split and merge",
    .flags = CMB_ALLOC_USES_UPSTREAM,
    .create = tc_create,
    .allocate = _cmb_tc_allocate,
    .deallocate = _cmb_tc_deallocate,
    .trim = _cmb_tc_trim,
    .stats = _cmb_tc_stats,
    .destroy = _cmb_tc_destroy,
    .last_error = _cmb_tc_last_error,
    .options = _cmb_tc_options,
    .free_account = _cmb_tc_free_account,
};

/* --- free memory by reason (--explain-oom) ------------------------------------------------ */

/* The reason a free block cannot serve `p`, in cmb_free_reason's order and
 * by get_free_block's own rules. */
static cmb_free_reason tc_free_reason(const _cmb_tc_state *st, const _cmb_tc_params *p, const _cmb_tc_block *b)
{
    if (b->pool != p->pool)
        return CMB_FREE_OTHER_POOL;
    if (b->stream != p->stream)
        return CMB_FREE_OTHER_STREAM;
    if (p->size < st->max_split_size && b->size >= st->max_split_size)
        return CMB_FREE_OVERSIZE;
    if (p->size >= st->max_split_size && b->size >= add_sat(p->size, st->max_non_split_rounding_size))
        return CMB_FREE_OVERSIZE;
    if (b->size < p->size)
        return st->expandable ? CMB_FREE_NOT_CONTIGUOUS : CMB_FREE_TOO_SMALL;
    return CMB_FREE_USABLE;
}

static void tc_account_pool(const _cmb_tc_state *st, const _cmb_tc_params *p, const _cmb_tc_pool *pool,
                            cmb_free_account *out)
{
    for (cmb_rbnode *n = cmb_rb_first(&pool->blocks); n; n = cmb_rb_next(n)) {
        const _cmb_tc_block *b = BLK(n);
        out->bytes[tc_free_reason(st, p, b)] += b->size;
        if (b->size > out->largest_free)
            out->largest_free = b->size;
    }
}

/* Every free byte of the reservation: the pools' blocks, and blocks freed
 * but held until the events of the streams that used them complete. */
cmb_status _cmb_tc_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out)
{
    const _cmb_tc_state *st = state;
    if (!size || !out || size > SIZE_MAX / 4)
        return CMB_ERR_INVALID;
    memset(out, 0, sizeof *out);
    _cmb_tc_params p = {round_size(st, size), 0, stream, NULL, NULL};
    p.pool = p.size <= TC_SMALL_SIZE ? (_cmb_tc_pool *)&st->small : (_cmb_tc_pool *)&st->large;
    out->rounded = p.size;
    tc_account_pool(st, &p, &st->small, out);
    tc_account_pool(st, &p, &st->large, out);
    for (size_t i = 0; i < st->n_events; i++) {
        const _cmb_tc_block *b = st->events[i].block;
        size_t j = 0;
        while (j < i && st->events[j].block != b)
            j++;
        if (j == i) /* a block with several events counts once */
            out->bytes[CMB_FREE_EVENT_WAIT] += b->size;
    }
    return CMB_OK;
}
