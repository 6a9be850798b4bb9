/* alloc_rmm_pool.c - "rmm-pool": RMM's pool_memory_resource.
 *
 * rmm::mr::pool_memory_resource is a coalescing best-fit suballocator built
 * on stream_ordered_memory_resource and coalescing_free_list
 * (include/rmm/mr/device/pool_memory_resource.hpp,
 * detail/stream_ordered_memory_resource.hpp, detail/coalescing_free_list.hpp).
 * The rules reproduced here:
 *
 *  - Every request is rounded up to 256 B. Blocks are split exactly: the
 *    allocation keeps `size` bytes from the front of the chosen block and
 *    the rest goes back to a free list.
 *  - One free list per stream, plus the list of the legacy default stream
 *    (NULL here), which receives the initial pool. A block freed on stream
 *    S goes to S's list, and S's event is recorded (RMM records one event
 *    per stream at every deallocation).
 *  - get_block(size, S):
 *      1. best fit in S's own list (no synchronisation needed);
 *      2. for every other list in turn, best fit in that list; on success
 *         S waits for that list's event and the remainder stays in the
 *         other list;
 *      3. for every other list in turn, wait for its event, merge the whole
 *         list into S's (coalescing), drop it, and try best fit again;
 *      4. grow the pool from the upstream (below) and split the new block.
 *  - Best fit: the smallest block >= size; among equal sizes the lowest
 *    address (std::min_element keeps the first, and the list is kept in
 *    address order).
 *  - Coalescing: a block inserted into a list merges with an address-
 *    adjacent free neighbour in the same list, unless the later of the two
 *    is the head of an upstream allocation (blocks of different upstream
 *    allocations never merge, even when adjacent in the address space).
 *  - Growth, size_to_grow(size): with a maximum pool size M,
 *      remaining = align_up(M - pool_size, 256);
 *      try = size <= remaining ? max(size, remaining / 2) : 0 (fails);
 *    without a maximum, try = max(size, pool_size) (the pool doubles).
 *    try_to_expand(try, size) asks the upstream for `try` bytes and on
 *    failure halves the attempt down to `size`, once at `size`; then
 *    out of memory. The whole upstream block joins the pool.
 *  - Initial pool: `initial_pool_size`, by default
 *    rmm::percent_of_free_device_memory(50) = align_down(free * 0.5, 256)
 *    from the upstream's memory info (include/rmm/cuda_device.hpp, RMM
 *    24.02 and later, where pool_memory_resource has no default initial size
 *    and RMM's docs, tests and benchmarks pass this one; RMM 23.12's default
 *    constructor took align_up(min(free, total / 2), 256)). No maximum
 *    unless given.
 *  - Memory is never returned to the upstream before destroy: trim does
 *    nothing, as RMM has no way to shrink a pool.
 *
 * Bounds: own-list hit O(log n) in the blocks of that list (RMM scans its
 * linked list: O(n)); a miss visits every other stream's list, O(s log n);
 * a merge moves k blocks in O(k log n). stats() is O(s log n) for s streams.
 *
 * The streams, their events and the search order of get_block are the
 * shared stream-ordered helper's (stream_ordered.h, RMM's
 * stream_ordered_memory_resource); this file fills its hooks with the
 * coalescing free list and the growth rule.
 *
 * Differences (see docs/rmm.md and stream_ordered.h): a wait on another
 * stream's event is a host wait; a halved growth attempt is rounded up to
 * 256 B so every block stays aligned.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_size.h"
#include "cmb_allocator.h"
#include "options.h"
#include "stream_ordered.h"
#include "../common/cmb_assert.h"
#include "../common/cmb_hashmap.h"
#include "../common/cmb_rbtree.h"

/* CUDA_ALLOCATION_ALIGNMENT = 256 B (include/rmm/aligned.hpp) */
#define POOL_ALIGN 256u
/* percent_of_free_device_memory(50): initial pool (include/rmm/cuda_device.hpp, RMM >= 24.02) */
#define POOL_DEFAULT_PERCENT 50u
/* no maximum_pool_size: std::nullopt (pool_memory_resource.hpp) */
#define POOL_NO_MAXIMUM UINT64_MAX

/* --- blocks and free lists --------------------------------------------------- */

typedef struct pool_block {
    cmb_rbnode by_addr;
    cmb_rbnode by_size;
    uintptr_t ptr;
    uint64_t size;
    int head; /* starts an upstream allocation: never merges with its predecessor */
} pool_block;

typedef struct pool_stream {
    cmb_so_list so;     /* the stream and its event (stream_ordered.h) */
    cmb_rbtree by_addr; /* the free list, in address order (coalescing) */
    cmb_rbtree by_size; /* the same blocks by (size, address) (best fit) */
} pool_stream;

typedef struct rmm_pool {
    cmb_upstream *up;
    uint64_t pool_size; /* current_pool_size_ */
    uint64_t maximum;   /* POOL_NO_MAXIMUM when unset */
    cmb_stream_ordered so;       /* the per-stream free lists */
    cmb_hashmap upstream_blocks; /* start -> size of every upstream allocation */
    pool_block *spare;           /* recycled block records, linked through ptr */
    cmb_alloc_stats st;
    char last_error[200];
    CMB_DEBUG_ONLY(uint64_t ops;)
} rmm_pool;

static inline uint64_t align_up(uint64_t x, uint64_t a)
{
    return cmb_size_round_up_sat(x, a); /* saturates: a huge x never wraps to a small one */
}

static int addr_cmp(const cmb_rbnode *a, const cmb_rbnode *b)
{
    uintptr_t x = cmb_rb_entry(a, pool_block, by_addr)->ptr, y = cmb_rb_entry(b, pool_block, by_addr)->ptr;
    return (x > y) - (x < y);
}

static int addr_key_cmp(const void *key, const cmb_rbnode *n)
{
    uintptr_t k = *(const uintptr_t *)key, y = cmb_rb_entry(n, pool_block, by_addr)->ptr;
    return (k > y) - (k < y);
}

static int size_cmp(const cmb_rbnode *a, const cmb_rbnode *b)
{
    const pool_block *x = cmb_rb_entry(a, pool_block, by_size), *y = cmb_rb_entry(b, pool_block, by_size);
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return (x->ptr > y->ptr) - (x->ptr < y->ptr);
}

static int size_key_cmp(const void *key, const cmb_rbnode *n)
{
    uint64_t k = *(const uint64_t *)key;
    const pool_block *y = cmb_rb_entry(n, pool_block, by_size);
    /* (k, 0) against (size, ptr): ties on size sort the key first */
    return k <= y->size ? -1 : 1;
}

static pool_block *block_new(rmm_pool *p, uintptr_t ptr, uint64_t size, int head)
{
    pool_block *b = p->spare;
    if (b)
        p->spare = (pool_block *)b->ptr;
    else if (!(b = malloc(sizeof *b)))
        return NULL;
    b->ptr = ptr;
    b->size = size;
    b->head = head;
    return b;
}

static void block_put(rmm_pool *p, pool_block *b)
{
    b->ptr = (uintptr_t)p->spare;
    p->spare = b;
}

static void list_link(pool_stream *l, pool_block *b)
{
    cmb_rb_insert(&l->by_addr, &b->by_addr, addr_cmp);
    cmb_rb_insert(&l->by_size, &b->by_size, size_cmp);
}

static void list_unlink(pool_stream *l, pool_block *b)
{
    cmb_rb_erase(&l->by_addr, &b->by_addr);
    cmb_rb_erase(&l->by_size, &b->by_size);
}

/* b's size (and maybe its address) changed: re-sort it by size, unless it
 * still sits between the same neighbours (the common case of a hot block). */
static void list_resize(pool_stream *l, pool_block *b, uint64_t size)
{
    b->size = size;
    cmb_rbnode *prev = cmb_rb_prev(&b->by_size), *next = cmb_rb_next(&b->by_size);
    if ((!prev || size_cmp(prev, &b->by_size) < 0) && (!next || size_cmp(&b->by_size, next) < 0))
        return;
    cmb_rb_erase(&l->by_size, &b->by_size);
    cmb_rb_insert(&l->by_size, &b->by_size, size_cmp);
}

static int contiguous(const pool_block *a, const pool_block *b)
{
    return a->ptr + a->size == b->ptr && !b->head;
}

/* coalescing_free_list::insert: merge with the neighbours it touches. */
static void list_insert(rmm_pool *p, pool_stream *l, pool_block *b)
{
    cmb_rbnode *pn = cmb_rb_floor(&l->by_addr, &b->ptr, addr_key_cmp);
    cmb_rbnode *nn = pn ? cmb_rb_next(pn) : cmb_rb_first(&l->by_addr);
    pool_block *prev = pn ? cmb_rb_entry(pn, pool_block, by_addr) : NULL;
    pool_block *next = nn ? cmb_rb_entry(nn, pool_block, by_addr) : NULL;
    int merge_prev = prev && contiguous(prev, b);
    int merge_next = next && contiguous(b, next);

    if (merge_prev && merge_next) {
        list_unlink(l, next);
        list_resize(l, prev, prev->size + b->size + next->size);
        block_put(p, next);
        block_put(p, b);
    } else if (merge_prev) {
        list_resize(l, prev, prev->size + b->size);
        block_put(p, b);
    } else if (merge_next) {
        /* next grows backwards: its place in address order is unchanged */
        next->ptr = b->ptr;
        next->head = b->head;
        list_resize(l, next, next->size + b->size);
        block_put(p, b);
    } else {
        list_link(l, b);
    }
}

/* coalescing_free_list::get_block: the best fit, still linked in l. */
static pool_block *list_best_fit(pool_stream *l, uint64_t size)
{
    cmb_rbnode *n = cmb_rb_lower_bound(&l->by_size, &size, size_key_cmp);
    return n ? cmb_rb_entry(n, pool_block, by_size) : NULL;
}

static uint64_t list_largest(const pool_stream *l)
{
    cmb_rbnode *n = cmb_rb_last(&l->by_size);
    return n ? cmb_rb_entry(n, pool_block, by_size)->size : 0;
}

/* --- growth ---------------------------------------------------------------------- */

static pool_block *block_from_upstream(rmm_pool *p, uint64_t size, cmb_stream s)
{
    void *ptr;
    if (size == 0 || cmb_up_alloc(p->up, size, s, &ptr) != CMB_OK)
        return NULL;
    pool_block *b = block_new(p, (uintptr_t)ptr, size, 1);
    if (!b || cmb_hashmap_put(&p->upstream_blocks, (uint64_t)(uintptr_t)ptr, size)) {
        if (b)
            block_put(p, b);
        cmb_up_free(p->up, ptr, size, s);
        return NULL;
    }
    p->pool_size += size;
    return b;
}

/* try_to_expand: `try_size`, halving on failure down to `min_size`. */
static pool_block *try_to_expand(rmm_pool *p, uint64_t try_size, uint64_t min_size, cmb_stream s)
{
    while (try_size >= min_size) {
        pool_block *b = block_from_upstream(p, try_size, s);
        if (b)
            return b;
        if (try_size == min_size)
            break;
        try_size = align_up(try_size / 2, POOL_ALIGN);
        if (try_size < min_size)
            try_size = min_size;
    }
    snprintf(p->last_error, sizeof p->last_error,
             "rmm-pool: maximum pool size exceeded growing a pool of %llu B for %llu B",
             (unsigned long long)p->pool_size, (unsigned long long)min_size);
    return NULL;
}

static uint64_t size_to_grow(const rmm_pool *p, uint64_t size)
{
    if (p->maximum != POOL_NO_MAXIMUM) {
        if (p->maximum < p->pool_size)
            return 0;
        uint64_t remaining = align_up(p->maximum - p->pool_size, POOL_ALIGN);
        uint64_t aligned = align_up(size, POOL_ALIGN);
        if (aligned > remaining)
            return 0;
        return aligned > remaining / 2 ? aligned : remaining / 2;
    }
    return size > p->pool_size ? size : p->pool_size;
}

/* --- handing out blocks --------------------------------------------------------------- */

/* allocate_and_insert_remainder for a block b of list l: keep `size` bytes
 * from its front and leave the rest in l. The rest keeps b's place in
 * address order, and it cannot touch another free block of l (a list is
 * always coalesced, and its end did not move), so RMM's coalescing insert
 * reduces to re-sorting it by size. */
static void *take_linked(rmm_pool *p, pool_stream *l, pool_block *b, uint64_t size)
{
    void *ptr = (void *)b->ptr;
    if (b->size > size) {
        b->ptr += size;
        b->head = 0;
        list_resize(l, b, b->size - size);
    } else {
        list_unlink(l, b);
        block_put(p, b);
    }
    return ptr;
}

/* The same for a block fresh from the upstream, in no list yet. */
static void *take_new(rmm_pool *p, pool_stream *l, pool_block *b, uint64_t size)
{
    void *ptr = (void *)b->ptr;
    if (b->size > size) {
        b->ptr += size;
        b->size -= size;
        b->head = 0;
        list_insert(p, l, b);
    } else {
        block_put(p, b);
    }
    return ptr;
}

/* --- the hooks of the stream-ordered helper ---------------------------------------------- */

static void hook_list_init(void *ctx, cmb_so_list *l)
{
    pool_stream *ps = (pool_stream *)l;
    (void)ctx;
    cmb_rb_init(&ps->by_addr);
    cmb_rb_init(&ps->by_size);
}

static int hook_list_empty(const cmb_so_list *l)
{
    return ((const pool_stream *)l)->by_addr.count == 0;
}

static void *hook_find(void *ctx, cmb_so_list *l, uint64_t size)
{
    (void)ctx;
    return list_best_fit((pool_stream *)l, size);
}

static void *hook_take(void *ctx, cmb_so_list *l, void *b, uint64_t size)
{
    return take_linked(ctx, (pool_stream *)l, b, size);
}

/* merge_lists: coalescing_free_list::insert(free_list&&), block by block. */
static void hook_merge(void *ctx, cmb_so_list *dst, cmb_so_list *src)
{
    pool_stream *d = (pool_stream *)dst, *o = (pool_stream *)src;
    cmb_rbnode *n;
    while ((n = cmb_rb_first(&o->by_addr))) {
        pool_block *b = cmb_rb_entry(n, pool_block, by_addr);
        list_unlink(o, b);
        list_insert(ctx, d, b);
    }
}

/* expand_pool: grow by size_to_grow, hand out the front of the new block. */
static cmb_status hook_expand(void *ctx, cmb_so_list *own, uint64_t size, void **out)
{
    rmm_pool *p = ctx;
    pool_block *b = try_to_expand(p, size_to_grow(p, size), size, own->stream);
    if (!b)
        return CMB_ERR_OOM;
    *out = take_new(p, (pool_stream *)own, b, size);
    return CMB_OK;
}

static void hook_list_fini(void *ctx, cmb_so_list *l)
{
    pool_stream *ps = (pool_stream *)l;
    cmb_rbnode *n;
    (void)ctx;
    while ((n = cmb_rb_first(&ps->by_addr))) {
        pool_block *b = cmb_rb_entry(n, pool_block, by_addr);
        list_unlink(ps, b);
        free(b);
    }
}

static const cmb_so_hooks pool_hooks = {
    .list_size = sizeof(pool_stream),
    .list_init = hook_list_init,
    .list_fini = hook_list_fini,
    .list_empty = hook_list_empty,
    .find = hook_find,
    .take = hook_take,
    .merge = hook_merge,
    .expand = hook_expand,
};

/* --- invariants ------------------------------------------------------------------------ */

typedef struct span {
    uintptr_t ptr;
    uint64_t size;
} span;

static int span_cmp(const void *x, const void *y)
{
    uintptr_t a = ((const span *)x)->ptr, b = ((const span *)y)->ptr;
    return (a > b) - (a < b);
}

/* One list: address order, aligned, coalesced, the size index the same set. */
static int walk_list(const pool_stream *l, cmb_walk *w, uint64_t *bytes)
{
    const pool_block *prev = NULL;
    CMB_WALK_CHECK(w, l->by_addr.count == l->by_size.count);
    for (cmb_rbnode *n = cmb_rb_first(&l->by_addr); n; n = cmb_rb_next(n)) {
        const pool_block *b = cmb_rb_entry(n, pool_block, by_addr);
        CMB_WALK_CHECK(w, b->size > 0 && b->ptr % POOL_ALIGN == 0 && b->size % POOL_ALIGN == 0);
        CMB_WALK_CHECK(w, !prev || prev->ptr + prev->size <= b->ptr);
        CMB_WALK_CHECK(w, !prev || !contiguous(prev, b));
        *bytes += b->size;
        prev = b;
    }
    const pool_block *ps = NULL;
    for (cmb_rbnode *n = cmb_rb_first(&l->by_size); n; n = cmb_rb_next(n)) {
        const pool_block *b = cmb_rb_entry(n, pool_block, by_size);
        CMB_WALK_CHECK(w, !ps || size_cmp(&ps->by_size, &b->by_size) < 0);
        ps = b;
    }
    return 0;
}

/* Every free list, then all of them together: no block of one list may
 * overlap a block of another, and the pool is its free blocks plus its
 * allocated bytes. */
static int pool_walk_lists(const rmm_pool *p, cmb_walk *w, span *all, size_t n_all)
{
    uint64_t free_bytes = 0, upstream_bytes = 0, key, size;
    size_t k = 0;
    for (size_t i = 0; i < cmb_so_count(&p->so); i++) {
        const pool_stream *l = (const pool_stream *)cmb_so_at(&p->so, i);
        if (walk_list(l, w, &free_bytes))
            return 1;
        for (cmb_rbnode *n = cmb_rb_first(&l->by_addr); n && all; n = cmb_rb_next(n), k++)
            all[k] = (span){cmb_rb_entry(n, pool_block, by_addr)->ptr, cmb_rb_entry(n, pool_block, by_addr)->size};
    }
    for (size_t it = 0; p->upstream_blocks.keys && cmb_hashmap_next(&p->upstream_blocks, &it, &key, &size);)
        upstream_bytes += size;
    CMB_WALK_CHECK(w, upstream_bytes == p->pool_size);
    CMB_WALK_CHECK(w, free_bytes + (uint64_t)p->st.allocated.current == p->pool_size);
    if (all) {
        qsort(all, n_all, sizeof *all, span_cmp);
        for (size_t i = 1; i < n_all; i++)
            CMB_WALK_CHECK(w, all[i - 1].ptr + all[i - 1].size <= all[i].ptr);
    }
    return 0;
}

int _cmb_rmm_pool_walk(const void *state, cmb_walk *w)
{
    const rmm_pool *p = state;
    size_t n = 0;
    for (size_t i = 0; i < cmb_so_count(&p->so); i++)
        n += ((const pool_stream *)cmb_so_at(&p->so, i))->by_addr.count;
    span *all = n > 1 ? malloc(n * sizeof *all) : NULL; /* host OOM: skip the cross-list check */
    int broken = pool_walk_lists(p, w, all, n);
    free(all);
    return broken;
}

/* --- the method table ---------------------------------------------------------------- */

static cmb_status pool_destroy(void *state);

/* pool_memory_resource(upstream, initial_pool_size, maximum_pool_size)
 * (include/rmm/mr/device/pool_memory_resource.hpp); binning's pool reads
 * the same two. */
const cmb_option_decl _cmb_rmm_pool_options[] = {
    CMB_OPTION("initial_pool_size", CMB_OPT_SIZE, "(50% of free memory)", "0", NULL, "B",
     "bytes taken from the upstream at creation, a multiple of 256; default RMM's "
     "percent_of_free_device_memory(50); 0 starts empty"),
    CMB_OPTION_EX("maximum_pool_size", CMB_OPT_SIZE, "(none)", "0", "max", "B",
     "the pool never grows past this, a multiple of 256; 0 or max: no maximum", NULL, CMB_OPT_MAX_OK, NULL),
    CMB_OPTION_END};

static cmb_status read_options(const cmb_config *cfg, cmb_upstream *up, uint64_t *initial, uint64_t *maximum)
{
    cmb_options o;
    cmb_status st = cmb_options_read(&o, "rmm-pool", _cmb_rmm_pool_options, cfg);
    if (st != CMB_OK)
        return st;
    int has_initial = cmb_opt_given(&o, "initial_pool_size");
    *initial = cmb_opt_size(&o, "initial_pool_size");
    *maximum = cmb_opt_given(&o, "maximum_pool_size") ? cmb_opt_size(&o, "maximum_pool_size") : POOL_NO_MAXIMUM;
    if (*maximum == 0)
        *maximum = POOL_NO_MAXIMUM;
    if ((has_initial && *initial % POOL_ALIGN) || (*maximum != POOL_NO_MAXIMUM && *maximum % POOL_ALIGN)) {
        snprintf(cfg->error, cfg->error_len, "rmm-pool: initial_pool_size and maximum_pool_size must be "
                                             "multiples of 256 bytes");
        return CMB_ERR_INVALID;
    }
    if (!has_initial) {
        size_t free_b = 0, total_b = 0;
        st = cmb_up_mem_info(up, &free_b, &total_b);
        if (st != CMB_OK) {
            snprintf(cfg->error, cfg->error_len, "rmm-pool: cannot read free device memory: %s",
                     cmb_status_str(st));
            return st;
        }
        /* percent_of_free_device_memory: in double, then aligned down */
        uint64_t share = (uint64_t)((double)free_b * (POOL_DEFAULT_PERCENT / 100.0));
        *initial = share / POOL_ALIGN * POOL_ALIGN;
    }
    if (*initial > *maximum) {
        snprintf(cfg->error, cfg->error_len, "rmm-pool: initial pool size exceeds the maximum pool size");
        return CMB_ERR_INVALID;
    }
    return CMB_OK;
}

static cmb_status pool_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    uint64_t initial, maximum;
    if (!up)
        return CMB_ERR_INVALID;
    cmb_status st = read_options(cfg, up, &initial, &maximum);
    if (st != CMB_OK)
        return st;
    rmm_pool *p = calloc(1, sizeof *p);
    if (!p)
        return CMB_ERR_HOST_NOMEM;
    p->up = up;
    p->maximum = maximum;
    cmb_so_init(&p->so, up, &pool_hooks, p);
    pool_stream *legacy;
    if (cmb_hashmap_init(&p->upstream_blocks, 64) || !(legacy = (pool_stream *)cmb_so_list_of(&p->so, NULL))) {
        st = CMB_ERR_HOST_NOMEM;
        goto out_destroy;
    }
    if (initial > 0) {
        pool_block *b = try_to_expand(p, initial, initial, NULL);
        if (!b) {
            snprintf(cfg->error, cfg->error_len, "rmm-pool: the upstream cannot give the initial pool of %llu B",
                     (unsigned long long)initial);
            st = CMB_ERR_OOM;
            goto out_destroy;
        }
        list_insert(p, legacy, b);
    }
    *state = p;
    return CMB_OK;

out_destroy:
    pool_destroy(p);
    return st;
}

static cmb_status pool_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    rmm_pool *p = state;
    if (cmb_size_refuse(size, "rmm-pool", p->last_error, sizeof p->last_error))
        return CMB_ERR_OOM;
    if (size == 0)
        return CMB_ERR_INVALID;
    uint64_t aligned = align_up(size, POOL_ALIGN);
    cmb_so_list *own = cmb_so_list_of(&p->so, stream);
    if (!own)
        return CMB_ERR_HOST_NOMEM;
    cmb_status st = cmb_so_get_block(&p->so, own, aligned, ptr);
    if (st != CMB_OK)
        return st;
    cmb_stat_increase(&p->st.requested, (int64_t)size);
    cmb_stat_increase(&p->st.allocated, (int64_t)aligned);
    cmb_stat_increase(&p->st.blocks, 1);
    CMB_VALIDATE_TICK(p->ops, _cmb_rmm_pool_walk, p);
    return CMB_OK;
}

static cmb_status pool_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    rmm_pool *p = state;
    if (!ptr || size == 0)
        return CMB_ERR_INVALID;
    uint64_t aligned = align_up(size, POOL_ALIGN);
    pool_stream *own = (pool_stream *)cmb_so_list_of(&p->so, stream);
    pool_block *b = block_new(p, (uintptr_t)ptr, aligned, 0);
    if (!own || !b) {
        if (b)
            block_put(p, b);
        return CMB_ERR_HOST_NOMEM;
    }
    /* free_block(): the head flag comes from the set of upstream blocks */
    b->head = cmb_hashmap_get(&p->upstream_blocks, (uint64_t)(uintptr_t)ptr, NULL);
    cmb_so_record_free(&p->so, &own->so);
    list_insert(p, own, b);
    cmb_stat_decrease(&p->st.requested, (int64_t)size);
    cmb_stat_decrease(&p->st.allocated, (int64_t)aligned);
    cmb_stat_decrease(&p->st.blocks, 1);
    CMB_VALIDATE_TICK(p->ops, _cmb_rmm_pool_walk, p);
    return CMB_OK;
}

/* RMM's pool never gives memory back before it is destroyed. */
static cmb_status pool_trim(void *state)
{
    CMB_VALIDATE_NOW(_cmb_rmm_pool_walk, state);
    (void)state;
    return CMB_OK;
}

static cmb_status pool_stats(void *state, cmb_alloc_stats *out)
{
    rmm_pool *p = state;
    *out = p->st;
    out->reserved.current = p->up->stats.held_current;
    out->reserved.peak = p->up->stats.held_peak;
    out->reserved.total = p->up->stats.held_total;
    out->largest_free = 0;
    for (size_t i = 0; i < cmb_so_count(&p->so); i++) {
        uint64_t l = list_largest((pool_stream *)cmb_so_at(&p->so, i));
        if (l > out->largest_free)
            out->largest_free = l;
    }
    out->upstream_allocs = p->up->stats.alloc_calls;
    out->upstream_frees = p->up->stats.free_calls;
    out->oom_retries = 0; /* it never frees cached memory to retry */
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                 CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM | CMB_STAT_OOM_RETRIES;
    return CMB_OK;
}

static cmb_status pool_destroy(void *state)
{
    rmm_pool *p = state;
    cmb_status result = CMB_OK;
    if (p->so.hooks) /* created: a failed create comes here half-built */
        CMB_VALIDATE_NOW(_cmb_rmm_pool_walk, p);
    cmb_so_destroy(&p->so); /* the lists' events and block records */
    /* release(): every upstream block, whether or not the program freed it */
    uint64_t key, size;
    for (size_t it = 0; p->upstream_blocks.keys && cmb_hashmap_next(&p->upstream_blocks, &it, &key, &size);) {
        cmb_status st = cmb_up_free(p->up, (void *)(uintptr_t)key, (size_t)size, NULL);
        if (st != CMB_OK && result == CMB_OK)
            result = st;
    }
    cmb_hashmap_free(&p->upstream_blocks);
    while (p->spare) {
        pool_block *b = p->spare;
        p->spare = (pool_block *)b->ptr;
        free(b);
    }
    free(p);
    return result;
}

static const char *pool_last_error(void *state)
{
    rmm_pool *p = state;
    return p->last_error[0] ? p->last_error : NULL;
}

static cmb_status pool_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out);

const cmb_allocator_methods cmb_rmm_pool_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "rmm-pool",
    .summary = "RMM pool_memory_resource: coalescing best fit, per-stream free lists, grows by doubling, "
               "never returns memory",
    .flags = CMB_ALLOC_USES_UPSTREAM | CMB_ALLOC_STREAM_ORDERED,
    .create = pool_create,
    .allocate = pool_allocate,
    .deallocate = pool_deallocate,
    .trim = pool_trim,
    .stats = pool_stats,
    .destroy = pool_destroy,
    .last_error = pool_last_error,
    .options = _cmb_rmm_pool_options,
    .free_account = pool_free_account,
};

/* --- free memory by reason (--explain-oom) ------------------------------------------ */

/* get_block takes a fitting block from any stream's list (waiting on its
 * event, merging whole lists), so after a failure no list holds one: every
 * free block is too small, the blocks of separate upstream allocations
 * never merging. */
static cmb_status pool_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out)
{
    rmm_pool *p = state;
    (void)stream;
    if (!size || !out || size > UINT64_MAX - POOL_ALIGN)
        return CMB_ERR_INVALID;
    memset(out, 0, sizeof *out);
    out->rounded = align_up(size, POOL_ALIGN);
    for (size_t i = 0; i < cmb_so_count(&p->so); i++) {
        const pool_stream *l = (const pool_stream *)cmb_so_at(&p->so, i);
        for (cmb_rbnode *n = cmb_rb_first(&l->by_size); n; n = cmb_rb_next(n)) {
            const pool_block *b = cmb_rb_entry(n, pool_block, by_size);
            out->bytes[b->size >= out->rounded ? CMB_FREE_USABLE : CMB_FREE_TOO_SMALL] += b->size;
            if (b->size > out->largest_free)
                out->largest_free = b->size;
        }
    }
    return CMB_OK;
}
