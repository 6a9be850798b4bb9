/* alloc_torch_expandable.c - "torch-expandable": PyTorch's caching allocator
 * with expandable_segments:True (ExpandableSegment and the expandable paths
 * of DeviceCachingAllocator in c10/cuda/CUDACachingAllocator.cpp).
 *
 * Algorithm, as PyTorch runs it:
 *  - one expandable segment per (stream, pool) that needs one: a virtual
 *    address range reserved once (cmb_up_va_reserve) for 1 1/8 of the device
 *    memory, backed on demand by pages of 2 MiB for the small pool
 *    (kSmallBuffer) and 20 MiB for the large pool (kLargeBuffer), each page
 *    mapped with its own upstream call (cuMemCreate + cuMemMap), and one
 *    cuMemSetAccess over the pages one growth maps (defer_access).
 *  - the rules of torch-caching (512 B rounding, small/large pools, best fit
 *    by (stream, size, address), coalescing) apply inside the mapped part,
 *    with two differences PyTorch makes: every block splits when the
 *    remainder is >= 512 B (should_split ignores max_split_size), and best
 *    fit counts a free block followed by unmapped space at the size it can
 *    grow to.
 *  - when no free block fits, find_expandable_block takes the lowest address
 *    of the stream's segments where free and unmapped space together hold
 *    the request (starting from each unmapped range, with the free block
 *    just before it), maps the missing pages there and merges them with
 *    their free neighbours; only when no segment has room does a new one
 *    get reserved.
 *  - when the upstream refuses a page (out of memory), the pages mapped by
 *    that call are returned; the caching allocator then empties its cache:
 *    every fully free page of every segment is unmapped (after a stream
 *    synchronization, as PyTorch does before cuMemUnmap), segments left
 *    with no mapped page are released, and the request is retried once.
 *    trim() does the same.
 *
 * Bounds: a cache hit costs what torch-caching's does; growing costs one
 * upstream map per page and one access call per growth. Reserved = mapped
 * bytes only.
 *
 * Options: those of torch-caching (see alloc_torch_caching.c, docs/torch.md).
 */
#include <stdlib.h>
#include <string.h>

#include "torch_caching.h"

#define BLK(n) cmb_rb_entry((n), _cmb_tc_block, node)

struct _cmb_tc_expseg {
    uintptr_t base;      /* reserved address range              */
    size_t va_size;
    size_t page;         /* segment_size_: 2 MiB or 20 MiB       */
    size_t max_handles;  /* pages in the range                    */
    cmb_stream stream;
    uint8_t *mapped;     /* one flag per page (handles_)          */
};

/* --- the segment: page ranges ----------------------------------------------------- */

/* ExpandableSegment::map: back the pages covering [ptr, ptr+size), all or
 * none, a handle per page and one access call over them all
 * (mapAndSetAccess then setAccess, c10/cuda/CUDACachingAllocator.cpp,
 * PyTorch 2.11): the access is deferred while the pages map. *out is the
 * mapped range's size (whole pages). */
static cmb_status es_map(_cmb_tc_state *st, _cmb_tc_expseg *es, uintptr_t ptr, size_t size, size_t *out)
{
    size_t begin = (ptr - es->base) / es->page;
    size_t end = (ptr + size - es->base + es->page - 1) / es->page, i = begin;
    if (begin == end)
        return CMB_ERR_OOM; /* PyTorch reports an empty range as a failed map */
    cmb_status s = cmb_up_defer_access(st->up, 1);
    if (s != CMB_OK)
        return s;
    for (; i < end; i++) { /* pages [begin, i) mapped */
        if ((s = cmb_up_map(st->up, (void *)(es->base + i * es->page), es->page)) != CMB_OK)
            break;
        es->mapped[i] = 1;
    }
    cmb_status access = cmb_up_defer_access(st->up, 0);
    if (s == CMB_OK && access != CMB_OK)
        s = access;
    if (s != CMB_OK) {
        for (size_t j = begin; j < i; j++) {
            cmb_up_unmap(st->up, (void *)(es->base + j * es->page), es->page);
            es->mapped[j] = 0;
        }
        return s;
    }
    *out = (end - begin) * es->page;
    return CMB_OK;
}

/* The whole pages inside [ptr, ptr+size) (ExpandableSegment::unmap's range). */
static void es_inner_pages(const _cmb_tc_expseg *es, uintptr_t ptr, size_t size, size_t *begin, size_t *end)
{
    *begin = (ptr - es->base + es->page - 1) / es->page;
    *end = (ptr + size - es->base) / es->page;
}

/* unmapHandles: wait for the segment's stream, then unmap page by page. */
static cmb_status es_unmap_pages(_cmb_tc_state *st, _cmb_tc_expseg *es, size_t begin, size_t end)
{
    cmb_status s = cmb_up_stream_sync(st->up, es->stream);
    for (size_t i = begin; i < end && s == CMB_OK; i++) {
        if (!es->mapped[i])
            continue;
        s = cmb_up_unmap(st->up, (void *)(es->base + i * es->page), es->page);
        if (s == CMB_OK)
            es->mapped[i] = 0;
    }
    return s;
}

static void es_free(_cmb_tc_expseg *es)
{
    free(es->mapped);
    free(es);
}

static cmb_status es_create(_cmb_tc_state *st, cmb_stream stream, const _cmb_tc_pool *pool, _cmb_tc_expseg **out)
{
    cmb_status s = CMB_ERR_HOST_NOMEM;
    _cmb_tc_expseg *es = calloc(1, sizeof *es);
    if (!es)
        return s;
    es->page = pool->is_small ? st->es_page_small : st->es_page_large;
    es->va_size = pool->is_small ? st->es_va_size_small : st->es_va_size_large;
    es->max_handles = es->va_size / es->page;
    es->stream = stream;
    es->mapped = calloc(es->max_handles, 1);
    if (!es->mapped)
        goto out_free;
    if (st->n_segs == st->cap_segs) {
        size_t cap = st->cap_segs ? st->cap_segs * 2 : 4;
        _cmb_tc_expseg **grown = realloc(st->segs, cap * sizeof *grown);
        if (!grown)
            goto out_free;
        st->segs = grown;
        st->cap_segs = cap;
    }
    void *va;
    if ((s = cmb_up_va_reserve(st->up, es->va_size, &va)) != CMB_OK)
        goto out_free;
    es->base = (uintptr_t)va;
    st->segs[st->n_segs++] = es;
    *out = es;
    return CMB_OK;

out_free:
    es_free(es);
    return s;
}

/* --- blocks over the segment ------------------------------------------------------- */

static int allocatable(const _cmb_tc_block *b)
{
    return b && !b->allocated && b->event_count == 0 && !b->n_uses;
}

static int has_available_address_space(const _cmb_tc_block *b, size_t size)
{
    size_t bytes = 0;
    while (bytes < size && allocatable(b)) {
        bytes += b->size;
        b = b->next;
    }
    return bytes >= size;
}

typedef struct addr_key {
    uintptr_t stream;
    uintptr_t ptr;
} addr_key;

static int addr_key_cmp(const void *key, const cmb_rbnode *n)
{
    const addr_key *k = key;
    const _cmb_tc_block *b = BLK(n);
    if (k->stream != (uintptr_t)b->stream)
        return (k->stream > (uintptr_t)b->stream) - (k->stream < (uintptr_t)b->stream);
    return (k->ptr > b->ptr) - (k->ptr < b->ptr);
}

/* find_expandable_block: the lowest address, in the stream's segments of
 * this pool, where free and unmapped space hold `size`; else a new segment
 * whose whole range is one unmapped block. */
static cmb_status find_expandable_block(_cmb_tc_state *st, cmb_stream stream, _cmb_tc_pool *pool, size_t size,
                                        _cmb_tc_block **out)
{
    addr_key key = {(uintptr_t)stream, 0};
    for (cmb_rbnode *n = cmb_rb_lower_bound(&pool->unmapped, &key, addr_key_cmp);
         n && BLK(n)->stream == stream; n = cmb_rb_next(n)) {
        _cmb_tc_block *c = BLK(n);
        if (allocatable(c->prev))
            c = c->prev;
        if (has_available_address_space(c, size)) {
            *out = c;
            return CMB_OK;
        }
    }
    _cmb_tc_block *c = _cmb_tc_block_new(st);
    if (!c)
        return CMB_ERR_HOST_NOMEM;
    _cmb_tc_expseg *es;
    cmb_status s = es_create(st, stream, pool, &es);
    if (s != CMB_OK) {
        _cmb_tc_block_free(st, c);
        return s;
    }
    c->ptr = es->base;
    c->size = es->va_size;
    c->stream = stream;
    c->pool = pool;
    c->es = es;
    c->mapped = 0;
    _cmb_tc_insert_unmapped(c);
    *out = c;
    return CMB_OK;
}

/* map_block: back the front `size` bytes (whole pages) of an unmapped block,
 * leave the rest unmapped, merge with free neighbours, cache the result. */
static cmb_status map_block(_cmb_tc_state *st, _cmb_tc_block *to_map, size_t size)
{
    _cmb_tc_block *rest = _cmb_tc_block_new(st); /* taken now: no failure after the map */
    if (!rest)
        return CMB_ERR_HOST_NOMEM;
    size_t mapped;
    cmb_status s = es_map(st, to_map->es, to_map->ptr, size, &mapped);
    if (s != CMB_OK) {
        _cmb_tc_block_free(st, rest);
        return s;
    }
    _cmb_tc_erase(to_map);
    to_map->mapped = 1;
    if (mapped < to_map->size) {
        rest->ptr = to_map->ptr + mapped;
        rest->size = to_map->size - mapped;
        rest->stream = to_map->stream;
        rest->pool = to_map->pool;
        rest->es = to_map->es;
        rest->mapped = 0;
        _cmb_tc_splice(rest, to_map, to_map->next);
        _cmb_tc_insert_unmapped(rest);
        to_map->size = mapped;
    } else {
        _cmb_tc_block_free(st, rest);
    }
    _cmb_tc_try_merge(st, to_map, to_map->prev);
    _cmb_tc_try_merge(st, to_map, to_map->next);
    _cmb_tc_insert_free(to_map);
    st->total_allocated_memory += mapped;
    return CMB_OK;
}

/* try_allocate_expandable_block */
cmb_status _cmb_tc_es_allocate(_cmb_tc_state *st, _cmb_tc_params *p)
{
    _cmb_tc_block *c;
    cmb_status s = find_expandable_block(st, p->stream, p->pool, p->size, &c);
    if (s != CMB_OK)
        return s;
    /* c starts one of: unmapped -> end, unmapped -> free -> ..., free -> unmapped -> ... */
    if (!c->mapped && (s = map_block(st, c, c->size < p->size ? c->size : p->size)) != CMB_OK)
        return s;
    while (c->size < p->size) {
        _cmb_tc_block *next = c->next;
        size_t remaining = p->size - c->size;
        if (!next || next->mapped)
            return CMB_ERR_STATE; /* cannot happen: free space is always merged */
        if ((s = map_block(st, next, remaining < next->size ? remaining : next->size)) != CMB_OK)
            return s;
        c = next; /* it absorbed c */
    }
    _cmb_tc_erase(c);
    p->block = c;
    return CMB_OK;
}

/* unmap_block: unmap the whole pages inside a free block; the slivers before
 * and after stay cached as free blocks. */
cmb_status _cmb_tc_es_unmap_block(_cmb_tc_state *st, _cmb_tc_block *b)
{
    _cmb_tc_expseg *es = b->es;
    size_t begin, end;
    es_inner_pages(es, b->ptr, b->size, &begin, &end);
    if (begin >= end)
        return CMB_OK;
    uintptr_t uptr = es->base + begin * es->page;
    size_t usize = (end - begin) * es->page;
    size_t before = uptr - b->ptr, after = b->size - before - usize;
    _cmb_tc_block *bf = NULL, *af = NULL;
    if ((before && !(bf = _cmb_tc_block_new(st))) || (after && !(af = _cmb_tc_block_new(st)))) {
        if (bf)
            _cmb_tc_block_free(st, bf);
        return CMB_ERR_HOST_NOMEM;
    }
    cmb_status s = es_unmap_pages(st, es, begin, end);
    if (s != CMB_OK) {
        if (bf)
            _cmb_tc_block_free(st, bf);
        if (af)
            _cmb_tc_block_free(st, af);
        return s;
    }
    _cmb_tc_erase(b);
    if (bf) {
        bf->ptr = b->ptr;
        bf->size = before;
        bf->stream = b->stream;
        bf->pool = b->pool;
        bf->es = es;
        _cmb_tc_splice(bf, b->prev, b);
        _cmb_tc_insert_free(bf);
    }
    if (af) {
        af->ptr = uptr + usize;
        af->size = after;
        af->stream = b->stream;
        af->pool = b->pool;
        af->es = es;
        _cmb_tc_splice(af, b, b->next);
        _cmb_tc_insert_free(af);
    }
    b->ptr = uptr;
    b->size = usize;
    b->mapped = 0;
    _cmb_tc_try_merge(st, b, b->prev);
    _cmb_tc_try_merge(st, b, b->next);
    _cmb_tc_insert_unmapped(b);
    st->total_allocated_memory -= usize;
    return CMB_OK;
}

/* release_expandable_segment: b is the segment's whole, unmapped range. */
cmb_status _cmb_tc_es_release(_cmb_tc_state *st, _cmb_tc_block *b)
{
    _cmb_tc_expseg *es = b->es;
    if (b->mapped || b->size != es->va_size)
        return CMB_ERR_STATE;
    cmb_status s = cmb_up_va_release(st->up, (void *)es->base, es->va_size);
    if (s != CMB_OK)
        return s;
    for (size_t i = 0; i < st->n_segs; i++) {
        if (st->segs[i] == es) {
            st->segs[i] = st->segs[--st->n_segs];
            break;
        }
    }
    _cmb_tc_erase(b);
    _cmb_tc_block_free(st, b);
    es_free(es);
    return CMB_OK;
}

cmb_status _cmb_tc_es_destroy_all(_cmb_tc_state *st)
{
    cmb_status first = CMB_OK;
    for (size_t i = 0; i < st->n_segs; i++) {
        _cmb_tc_expseg *es = st->segs[i];
        cmb_status s = es_unmap_pages(st, es, 0, es->max_handles);
        if (s == CMB_OK)
            s = cmb_up_va_release(st->up, (void *)es->base, es->va_size);
        if (s != CMB_OK && first == CMB_OK)
            first = s;
        es_free(es);
    }
    st->n_segs = 0;
    return first;
}

/* --- invariants ------------------------------------------------------------------------ */

int _cmb_tc_es_walk(const _cmb_tc_block *head, cmb_walk *w, size_t *held)
{
    const _cmb_tc_expseg *es = head->es;
    size_t bytes = 0;
    CMB_WALK_CHECK(w, head->ptr == es->base);
    for (const _cmb_tc_block *c = head; c; c = c->next) {
        size_t p0 = (c->ptr - es->base) / es->page, p1 = (c->ptr + c->size - es->base + es->page - 1) / es->page;
        CMB_WALK_CHECK(w, c->es == es && p1 <= es->max_handles);
        CMB_WALK_CHECK(w, c->mapped || ((c->ptr - es->base) % es->page == 0 && c->size % es->page == 0));
        for (size_t p = p0; p < p1; p++)
            CMB_WALK_CHECK(w, es->mapped[p] == c->mapped);
        bytes += c->size;
    }
    CMB_WALK_CHECK(w, bytes == es->va_size);
    for (size_t p = 0; p < es->max_handles; p++)
        *held += es->mapped[p] ? es->page : 0;
    return 0;
}

/* --- the table ------------------------------------------------------------------------- */

static cmb_status te_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    return _cmb_tc_create(cfg, up, state, 1, "torch-expandable");
}

const cmb_allocator_methods cmb_torch_expandable_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "torch-expandable",
    .summary = "PyTorch's expandable segments: one growing VA range per stream and pool, 2 MiB / 20 MiB pages",
    .flags = CMB_ALLOC_USES_UPSTREAM | CMB_ALLOC_NEEDS_VMM,
    .create = te_create,
    .allocate = _cmb_tc_allocate,
    .deallocate = _cmb_tc_deallocate,
    .trim = _cmb_tc_trim,
    .stats = _cmb_tc_stats,
    .destroy = _cmb_tc_destroy,
    .last_error = _cmb_tc_last_error,
    .options = _cmb_tc_options,
    .free_account = _cmb_tc_free_account,
};
