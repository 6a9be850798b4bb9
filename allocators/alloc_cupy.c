/* alloc_cupy.c - "cupy": CuPy's memory pool (SingleDeviceMemoryPool).
 *
 * Algorithm (cupy/cuda/memory.pyx):
 *  - every request is rounded up to a multiple of 512 B
 *    (_ALLOCATION_UNIT_SIZE, the alignment CuPy assumes of cudaMalloc);
 *  - free chunks are kept per stream ("arenas"): a chunk freed on stream S
 *    is only reused by requests on S;
 *  - in an arena the free lists are indexed by bin = (size - 1) / 512, so one
 *    bin holds exactly one size, and a sorted index of the non-empty bins
 *    finds the smallest bin >= the request's bin: best fit;
 *  - the chunk found is always split when larger: the front is returned, the
 *    remainder goes back to its free list (no merge at split time);
 *  - nothing fits: cudaMalloc of the rounded size (a new whole chunk). When
 *    that fails: free_all_blocks() and retry; when it fails again:
 *    gc.collect() (nothing to collect here), free_all_blocks() and a last
 *    retry. Each retry counts as an oom_retry;
 *  - the optional pool limit (set_limit / CUPY_GPU_MEMORY_LIMIT) is checked
 *    against the bytes taken from the upstream, cached ones included, before
 *    the cudaMalloc. Over it, the pool releases the same way: free_all_blocks()
 *    and check again, then gc.collect() + free_all_blocks() and check a last
 *    time (each an oom_retry), then out of memory. This is CuPy 14's
 *    _try_malloc (cupy/cuda/memory.pyx, _try_block_total_bytes); earlier
 *    releases raised OutOfMemoryError at the first check, cache or not;
 *  - free() merges the chunk with its next and previous neighbours when they
 *    are free (in the same arena, since split chunks inherit the stream);
 *  - free_all_blocks() (= trim) releases only free chunks that are not split,
 *    i.e. whole upstream allocations; a split allocation stays cached until
 *    all its pieces are free and merged back into one chunk.
 *
 * Within one bin CuPy pops an arbitrary element of a Python set (hash
 * order); this policy takes the lowest address instead, so runs are
 * deterministic. Streams are compared as the opaque handles the harness
 * passes; CuPy's per-thread default stream identifiers have no counterpart.
 *
 * Bounds: allocate and free are O(log n) in the free chunks of one arena
 * (one ordered tree per arena: (size, address)) plus an O(1) hash lookup;
 * free_all_blocks is O(free chunks). Internal fragmentation: < 512 B per
 * request. A split allocation is never returned to the upstream while any
 * piece of it is live: the reason CuPy pools show "unreleasable" memory.
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

/* ALLOCATION_UNIT_SIZE = 512 (cupy/cuda/memory.pyx) */
#define CUPY_ALLOCATION_UNIT 512ull
/* _try_malloc tries cudaMalloc three times: free_all_blocks() before the
 * second, gc.collect() + free_all_blocks() before the third; the limit
 * check the same, in CuPy 14 (cupy/cuda/memory.pyx) */
#define CUPY_MALLOC_RETRIES 2

/* --- data ------------------------------------------------------------------ */

typedef struct cupy_arena {
    cmb_stream stream;
    cmb_rbtree free; /* free chunks by (size, address) */
} cupy_arena;

typedef struct cupy_chunk {
    cmb_rbnode node;         /* in arena->free while free       */
    uintptr_t ptr;
    uint64_t size;
    struct cupy_chunk *prev; /* neighbours from the same upstream */
    struct cupy_chunk *next; /* allocation; NULL when not split   */
    cupy_arena *arena;
    int is_free;
} cupy_chunk;

typedef struct cupy {
    cmb_upstream *up;
    cupy_arena **arenas;
    size_t n_arenas, cap_arenas;
    cupy_arena *last_arena;  /* the common case: the same stream again */
    cmb_hashmap in_use;      /* chunk address -> cupy_chunk *         */
    cmb_hashmap mems;        /* upstream allocation -> its size       */
    cmb_objpool chunk_pool;
    uint64_t total_bytes;    /* _total_bytes: held from the upstream  */
    uint64_t limit;          /* _total_bytes_limit; 0 = none          */
    cmb_alloc_stats st;
    char err[256];
    CMB_DEBUG_ONLY(uint64_t ops;)
} cupy;

/* --- free lists ------------------------------------------------------------ */

static inline uint64_t round_size(uint64_t n)
{
    return (n + CUPY_ALLOCATION_UNIT - 1) / CUPY_ALLOCATION_UNIT * CUPY_ALLOCATION_UNIT;
}

static inline cupy_chunk *chunk_of(cmb_rbnode *n)
{
    return n ? cmb_rb_entry(n, cupy_chunk, node) : NULL;
}

/* Bin order (bin = (size - 1) / 512, one size per bin), then address. */
static int chunk_cmp(const cmb_rbnode *a, const cmb_rbnode *b)
{
    const cupy_chunk *x = cmb_rb_entry(a, cupy_chunk, node), *y = cmb_rb_entry(b, cupy_chunk, node);
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return (x->ptr > y->ptr) - (x->ptr < y->ptr);
}

static int size_keycmp(const void *key, const cmb_rbnode *n)
{
    uint64_t k = *(const uint64_t *)key, s = cmb_rb_entry(n, cupy_chunk, node)->size;
    return (k > s) - (k < s);
}

static void free_list_add(cupy_chunk *c)
{
    c->is_free = 1;
    cmb_rb_insert(&c->arena->free, &c->node, chunk_cmp);
}

static void free_list_remove(cupy_chunk *c)
{
    c->is_free = 0;
    cmb_rb_erase(&c->arena->free, &c->node);
}

static cupy_arena *arena_for(cupy *a, cmb_stream stream)
{
    if (a->last_arena && a->last_arena->stream == stream)
        return a->last_arena;
    for (size_t i = 0; i < a->n_arenas; i++)
        if (a->arenas[i]->stream == stream)
            return a->last_arena = a->arenas[i];
    if (a->n_arenas == a->cap_arenas) {
        size_t cap = a->cap_arenas ? a->cap_arenas * 2 : 4;
        cupy_arena **v = realloc(a->arenas, cap * sizeof *v);
        if (!v)
            return NULL;
        a->arenas = v;
        a->cap_arenas = cap;
    }
    cupy_arena *ar = calloc(1, sizeof *ar);
    if (!ar)
        return NULL;
    ar->stream = stream;
    cmb_rb_init(&ar->free);
    a->arenas[a->n_arenas++] = ar;
    return a->last_arena = ar;
}

/* --- releasing ------------------------------------------------------------- */

static cmb_status mem_release(cupy *a, cupy_chunk *c)
{
    cmb_status st = cmb_up_free(a->up, (void *)c->ptr, c->size, c->arena->stream);
    cmb_hashmap_remove(&a->mems, (uint64_t)c->ptr, NULL);
    a->total_bytes -= c->size;
    a->st.upstream_frees++;
    cmb_objpool_put(&a->chunk_pool, c);
    return st;
}

/* free_all_blocks(): every free chunk that is a whole upstream allocation. */
static cmb_status free_all_blocks(cupy *a)
{
    cmb_status first = CMB_OK;
    for (size_t i = 0; i < a->n_arenas; i++) {
        cmb_rbnode *n = cmb_rb_first(&a->arenas[i]->free);
        while (n) {
            cmb_rbnode *next = cmb_rb_next(n);
            cupy_chunk *c = chunk_of(n);
            if (!c->prev && !c->next) {
                free_list_remove(c);
                cmb_status st = mem_release(a, c);
                if (st != CMB_OK && first == CMB_OK)
                    first = st;
            }
            n = next;
        }
    }
    return first;
}

/* --- invariants ------------------------------------------------------------ */

typedef struct cupy_count {
    uint64_t free_bytes, used_bytes, used, heads;
} cupy_count;

/* A chunk and its neighbours: linked both ways, contiguous; a chunk that
 * starts its upstream allocation is one of `mems`, and its chain adds up to
 * that allocation's size. */
static int walk_chunk(const cupy *a, const cupy_chunk *c, cmb_walk *w, cupy_count *n)
{
    CMB_WALK_CHECK(w, c->size > 0 && c->size % CUPY_ALLOCATION_UNIT == 0);
    CMB_WALK_CHECK(w, !c->next || (c->next->prev == c && c->ptr + c->size == c->next->ptr));
    CMB_WALK_CHECK(w, !c->prev || c->prev->next == c);
    CMB_WALK_CHECK(w, !c->next || c->next->arena == c->arena);
    if (c->prev)
        return 0;
    uint64_t whole = 0, size;
    for (const cupy_chunk *x = c; x; x = x->next)
        whole += x->size;
    CMB_WALK_CHECK(w, cmb_hashmap_get(&a->mems, (uint64_t)c->ptr, &size) && size == whole);
    n->heads++;
    return 0;
}

/* The free chunks of every arena (sorted, merged with free neighbours), the
 * chunks in use, and the counters against the recount. */
int _cmb_cupy_walk(const void *state, cmb_walk *w)
{
    const cupy *a = state;
    cupy_count n = {0};
    uint64_t key, val, mem_bytes = 0;
    for (size_t i = 0; i < a->n_arenas; i++) {
        const cupy_arena *ar = a->arenas[i];
        CMB_WALK_CHECK(w, cmb_rb_validate(&ar->free, chunk_cmp) >= 0);
        for (cmb_rbnode *x = cmb_rb_first(&ar->free); x; x = cmb_rb_next(x)) {
            const cupy_chunk *c = chunk_of(x);
            CMB_WALK_CHECK(w, c->is_free && c->arena == ar);
            CMB_WALK_CHECK(w, (!c->prev || !c->prev->is_free) && (!c->next || !c->next->is_free));
            if (walk_chunk(a, c, w, &n))
                return 1;
            n.free_bytes += c->size;
        }
    }
    for (size_t it = 0; cmb_hashmap_next(&a->in_use, &it, &key, &val);) {
        const cupy_chunk *c = (const cupy_chunk *)(uintptr_t)val;
        CMB_WALK_CHECK(w, !c->is_free && c->ptr == key);
        if (walk_chunk(a, c, w, &n))
            return 1;
        n.used++;
        n.used_bytes += c->size;
    }
    for (size_t it = 0; cmb_hashmap_next(&a->mems, &it, &key, &val);)
        mem_bytes += val;
    CMB_WALK_CHECK(w, n.heads == a->mems.count && mem_bytes == a->total_bytes);
    CMB_WALK_CHECK(w, n.free_bytes + n.used_bytes == a->total_bytes);
    CMB_WALK_CHECK(w, (int64_t)n.used == a->st.blocks.current && (int64_t)n.used_bytes == a->st.allocated.current);
    CMB_WALK_CHECK(w, !a->limit || a->total_bytes <= a->limit);
    return 0;
}

/* --- allocate / deallocate ------------------------------------------------- */

/* _get_chunk(): smallest fitting free chunk of the arena, split. */
static cupy_chunk *get_chunk(cupy *a, cupy_arena *ar, uint64_t rounded, cupy_chunk **spare)
{
    cupy_chunk *c = chunk_of(cmb_rb_lower_bound(&ar->free, &rounded, size_keycmp));
    if (!c)
        return NULL;
    free_list_remove(c);
    if (c->size > rounded) {
        cupy_chunk *rest = *spare;
        *spare = NULL;
        *rest = (cupy_chunk){.ptr = c->ptr + rounded, .size = c->size - rounded, .prev = c, .next = c->next,
                             .arena = ar};
        if (c->next)
            c->next->prev = rest;
        c->next = rest;
        c->size = rounded;
        free_list_add(rest);
    }
    return c;
}

/* Within the limit, releasing cached chunks as CuPy does (see above). */
static cmb_status make_room(cupy *a, uint64_t rounded)
{
    for (int retry = 0; a->limit && a->total_bytes + rounded > a->limit; retry++) {
        if (retry == CUPY_MALLOC_RETRIES) {
            snprintf(a->err, sizeof a->err,
                     "cupy: out of memory allocating %llu B (allocated so far: %llu B, limit set to: %llu B)",
                     (unsigned long long)rounded, (unsigned long long)a->total_bytes, (unsigned long long)a->limit);
            return CMB_ERR_OOM;
        }
        free_all_blocks(a);
        a->st.oom_retries++;
    }
    return CMB_OK;
}

/* _try_malloc(): a new whole chunk from the upstream. */
static cmb_status try_malloc(cupy *a, cupy_arena *ar, uint64_t rounded, cupy_chunk *c)
{
    cmb_status limit_ok = make_room(a, rounded);
    if (limit_ok != CMB_OK)
        return limit_ok;
    a->total_bytes += rounded;
    void *p = NULL;
    cmb_status st = cmb_up_alloc(a->up, rounded, ar->stream, &p);
    for (int retry = 0; st == CMB_ERR_OOM && retry < CUPY_MALLOC_RETRIES; retry++) {
        free_all_blocks(a);
        a->st.oom_retries++;
        st = cmb_up_alloc(a->up, rounded, ar->stream, &p);
    }
    if (st != CMB_OK) {
        a->total_bytes -= rounded;
        if (st == CMB_ERR_OOM)
            snprintf(a->err, sizeof a->err, "cupy: out of memory allocating %llu B (allocated so far: %llu B)",
                     (unsigned long long)rounded, (unsigned long long)a->total_bytes);
        return st;
    }
    if (cmb_hashmap_put(&a->mems, (uint64_t)(uintptr_t)p, rounded)) {
        cmb_up_free(a->up, p, rounded, ar->stream);
        a->total_bytes -= rounded;
        return CMB_ERR_HOST_NOMEM;
    }
    a->st.upstream_allocs++;
    *c = (cupy_chunk){.ptr = (uintptr_t)p, .size = rounded, .arena = ar};
    return CMB_OK;
}

static void free_chunk(cupy_chunk *c, cmb_objpool *pool)
{
    cupy_chunk *n = c->next, *p = c->prev;
    if (n && n->is_free) {
        free_list_remove(n);
        c->size += n->size;
        c->next = n->next;
        if (n->next)
            n->next->prev = c;
        cmb_objpool_put(pool, n);
    }
    if (p && p->is_free) {
        free_list_remove(p);
        p->size += c->size;
        p->next = c->next;
        if (c->next)
            c->next->prev = p;
        cmb_objpool_put(pool, c);
        c = p;
    }
    free_list_add(c);
}

static cmb_status cupy_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    cupy *a = state;
    if (cmb_size_refuse(size, "cupy", a->err, sizeof a->err))
        return CMB_ERR_OOM;
    if (!size)
        return CMB_ERR_INVALID;
    uint64_t rounded = round_size(size);
    cupy_arena *ar = arena_for(a, stream);
    cupy_chunk *spare = cmb_objpool_get(&a->chunk_pool);
    if (!ar || !spare) {
        if (spare)
            cmb_objpool_put(&a->chunk_pool, spare);
        return CMB_ERR_HOST_NOMEM;
    }
    cupy_chunk *c = get_chunk(a, ar, rounded, &spare);
    if (!c) {
        cmb_status st = try_malloc(a, ar, rounded, spare);
        if (st != CMB_OK) {
            cmb_objpool_put(&a->chunk_pool, spare);
            return st;
        }
        c = spare;
        spare = NULL;
    }
    if (spare)
        cmb_objpool_put(&a->chunk_pool, spare);
    if (cmb_hashmap_put(&a->in_use, (uint64_t)c->ptr, (uint64_t)(uintptr_t)c)) {
        free_chunk(c, &a->chunk_pool); /* back to the cache, as if freed */
        return CMB_ERR_HOST_NOMEM;
    }
    cmb_stat_increase(&a->st.requested, (int64_t)size);
    cmb_stat_increase(&a->st.allocated, (int64_t)c->size);
    cmb_stat_increase(&a->st.blocks, 1);
    *ptr = (void *)c->ptr;
    CMB_VALIDATE_TICK(a->ops, _cmb_cupy_walk, a);
    return CMB_OK;
}

static cmb_status cupy_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    cupy *a = state;
    uint64_t v;
    (void)stream; /* the chunk's own arena, as CuPy's free() */
    if (!cmb_hashmap_remove(&a->in_use, (uint64_t)(uintptr_t)ptr, &v)) {
        snprintf(a->err, sizeof a->err, "cupy: cannot free out-of-pool memory %p", ptr);
        return CMB_ERR_INVALID;
    }
    cupy_chunk *c = (cupy_chunk *)(uintptr_t)v;
    cmb_stat_decrease(&a->st.requested, (int64_t)size);
    cmb_stat_decrease(&a->st.allocated, (int64_t)c->size);
    cmb_stat_decrease(&a->st.blocks, 1);
    free_chunk(c, &a->chunk_pool);
    CMB_VALIDATE_TICK(a->ops, _cmb_cupy_walk, a);
    return CMB_OK;
}

/* --- trim / stats / lifetime ----------------------------------------------- */

static cmb_status cupy_trim(void *state)
{
    CMB_VALIDATE_NOW(_cmb_cupy_walk, state);
    return free_all_blocks(state);
}

static cmb_status cupy_stats(void *state, cmb_alloc_stats *out)
{
    cupy *a = state;
    uint64_t largest = 0;
    for (size_t i = 0; i < a->n_arenas; i++) {
        cupy_chunk *c = chunk_of(cmb_rb_last(&a->arenas[i]->free));
        if (c && c->size > largest)
            largest = c->size;
    }
    *out = a->st;
    out->reserved.current = a->up->stats.held_current;
    out->reserved.peak = a->up->stats.held_peak;
    out->reserved.total = a->up->stats.held_total;
    out->largest_free = largest;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                 CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM | CMB_STAT_OOM_RETRIES;
    return CMB_OK;
}

/* The pool's destructor frees every upstream allocation, live or not. The
 * stream of a whole allocation is not known here any more: NULL, which the
 * cuda upstream treats as a synchronous cudaFree. */
static cmb_status cupy_destroy(void *state)
{
    cupy *a = state;
    cmb_status first = CMB_OK;
    uint64_t base, size;
    CMB_VALIDATE_NOW(_cmb_cupy_walk, a);
    for (size_t it = 0; cmb_hashmap_next(&a->mems, &it, &base, &size);) {
        cmb_status st = cmb_up_free(a->up, (void *)(uintptr_t)base, size, NULL);
        if (st != CMB_OK && first == CMB_OK)
            first = st;
    }
    for (size_t i = 0; i < a->n_arenas; i++)
        free(a->arenas[i]);
    free(a->arenas);
    cmb_hashmap_free(&a->in_use);
    cmb_hashmap_free(&a->mems);
    cmb_objpool_destroy(&a->chunk_pool);
    free(a);
    return first;
}

static const char *cupy_last_error(void *state)
{
    cupy *a = state;
    return a->err[0] ? a->err : NULL;
}

/* MemoryPool.set_limit(size=None, fraction=None) (cupy/cuda/memory.pyx):
 * both 0 by default (no limit), never both given. */
static const cmb_option_decl cupy_options[] = {
    CMB_OPTION("limit", CMB_OPT_SIZE, "0", "0", NULL, "B",
     "set_limit(size=...): bytes the pool may hold from the upstream, cached ones included; 0: no limit"),
    CMB_OPTION_EX("limit_fraction", CMB_OPT_REAL, "0", "0", "1", "fraction of total memory",
     "set_limit(fraction=...): the limit as a share of the device's total memory; 0: no limit", NULL, 0, "limit"),
    CMB_OPTION_END};

static cmb_status cupy_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    cmb_options o;
    cmb_status st = cmb_options_read(&o, "cupy", cupy_options, cfg);
    if (st != CMB_OK)
        return st;
    uint64_t limit = cmb_opt_size(&o, "limit");
    double fraction = cmb_opt_real(&o, "limit_fraction");
    if (!up)
        return CMB_ERR_INVALID;
    if (fraction > 0) {
        size_t free_b, total_b;
        if (cmb_up_mem_info(up, &free_b, &total_b) != CMB_OK) {
            snprintf(cfg->error, cfg->error_len, "cupy: cannot read the device's memory; give limit=SIZE");
            return CMB_ERR_UNSUPPORTED;
        }
        limit = (uint64_t)(fraction * (double)total_b);
    }
    cupy *a = calloc(1, sizeof *a);
    if (!a)
        return CMB_ERR_HOST_NOMEM;
    if (cmb_hashmap_init(&a->in_use, 1024) || cmb_hashmap_init(&a->mems, 64)) {
        cmb_hashmap_free(&a->in_use);
        free(a);
        return CMB_ERR_HOST_NOMEM;
    }
    cmb_objpool_init(&a->chunk_pool, sizeof(cupy_chunk));
    a->up = up;
    a->limit = limit;
    *state = a;
    return CMB_OK;
}

static cmb_status cupy_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out);

const cmb_allocator_methods cmb_cupy_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "cupy",
    .summary = "CuPy MemoryPool: 512 B bins, best fit per stream arena, split/merge, free_all_blocks on OOM",
    .flags = CMB_ALLOC_USES_UPSTREAM,
    .create = cupy_create,
    .allocate = cupy_allocate,
    .deallocate = cupy_deallocate,
    .trim = cupy_trim,
    .stats = cupy_stats,
    .destroy = cupy_destroy,
    .last_error = cupy_last_error,
    .options = cupy_options,
    .free_account = cupy_free_account,
};

/* --- free memory by reason (--explain-oom) --------------------------------- */

/* A chunk serves only its own stream's requests; in that arena, one smaller
 * than the rounded request is too small (free_all_blocks already returned
 * the whole ones before the request failed). */
static cmb_status cupy_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out)
{
    const cupy *a = state;
    if (!size || !out || size > UINT64_MAX - CUPY_ALLOCATION_UNIT)
        return CMB_ERR_INVALID;
    memset(out, 0, sizeof *out);
    out->rounded = round_size(size);
    for (size_t i = 0; i < a->n_arenas; i++) {
        const cupy_arena *ar = a->arenas[i];
        for (cmb_rbnode *n = cmb_rb_first(&ar->free); n; n = cmb_rb_next(n)) {
            const cupy_chunk *c = chunk_of(n);
            cmb_free_reason r = ar->stream != stream      ? CMB_FREE_OTHER_STREAM
                                : c->size < out->rounded ? CMB_FREE_TOO_SMALL
                                                         : CMB_FREE_USABLE;
            out->bytes[r] += c->size;
            if (c->size > out->largest_free)
                out->largest_free = c->size;
        }
    }
    return CMB_OK;
}
