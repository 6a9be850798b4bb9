/* alloc_binning.c - "binning": RMM's binning_memory_resource over a pool.
 *
 * rmm::mr::binning_memory_resource (include/rmm/mr/device/binning_memory_resource.hpp)
 * sends each request to the smallest bin whose size is >= the request, and
 * everything larger than the largest bin to its upstream. Each bin is a
 * fixed_size_memory_resource (fixed_size_memory_resource.hpp,
 * detail/fixed_size_free_list.hpp) over the same upstream. The setup here
 * is RMM's usual one (benchmarks/random_allocations/random_allocations.cpp,
 * tests/mr/device/mr_test.hpp: binning_memory_resource(pool, 18, 22)):
 * bins of 2^min .. 2^max bytes in front of an "rmm-pool"
 * (alloc_rmm_pool.c), which also supplies the bins' memory.
 *
 *  - Bins: 2^e for e in [min_bin_exp, max_bin_exp], each rounded up to
 *    256 B (add_bin; duplicates are ignored). A request of n bytes goes to
 *    the first bin with size >= n (std::map::lower_bound), else to the pool.
 *  - A bin hands out whole blocks of its size. It takes them from the pool
 *    in chunks of blocks_to_preallocate blocks (128), one chunk at
 *    construction on the default stream and one more each time a stream
 *    finds no free block anywhere; chunks are never given back.
 *  - A bin is stream ordered like the pool (stream_ordered_memory_resource,
 *    here the shared helper of stream_ordered.h): one free list per stream,
 *    each with the event of its last free; a request takes the front of its
 *    own list, else the front of another stream's list after waiting for its
 *    event, else merges other lists into its own, else grows by a chunk. The
 *    lists are FIFO: a freed block goes to the back, a request takes the
 *    front (std::list push_back / pop_front in fixed_size_free_list).
 *
 * Constants:
 *   default_blocks_to_preallocate = 128 (fixed_size_memory_resource.hpp)
 *   bins 2^18 .. 2^22 = 256 KiB .. 4 MiB (random_allocations.cpp, mr_test.hpp)
 *   CUDA_ALLOCATION_ALIGNMENT = 256 B (include/rmm/aligned.hpp)
 *   the pool's constants: see alloc_rmm_pool.c.
 *
 * Bounds: a bin request or free is O(1) after the stream lookup (O(streams)
 * on a miss of the last-stream cache); the pool path is the pool's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_size.h"
#include "cmb_allocator.h"
#include "options.h"
#include "stream_ordered.h"
#include "../common/cmb_assert.h"

/* CUDA_ALLOCATION_ALIGNMENT = 256 B (include/rmm/aligned.hpp) */
#define BIN_ALIGN 256u
/* defaults, in binning_options below:
 *   default_blocks_to_preallocate = 128 (fixed_size_memory_resource.hpp)
 *   binning_memory_resource(pool, 18, 22) (benchmarks/random_allocations/random_allocations.cpp)
 * max_bin_exp <= 40 here; RMM computes 1 << e in an int, so 30 there. */

extern const cmb_allocator_methods cmb_rmm_pool_methods;

/* --- FIFO free lists ------------------------------------------------------------- */

typedef struct fs_node {
    struct fs_node *next;
    uintptr_t ptr;
} fs_node;

typedef struct fs_list {
    fs_node *head, *tail;
    uint64_t count;
} fs_list;

typedef struct bin_stream {
    cmb_so_list so; /* the stream and the event of its last free of this bin */
    fs_list free;
} bin_stream;

struct binning;

typedef struct bin {
    struct binning *owner;
    uint64_t block_size;
    uint64_t chunk_size;  /* upstream_chunk_size_ = block_size * blocks_to_preallocate */
    cmb_stream_ordered so; /* the per-stream free lists */
    uint64_t free_blocks;  /* over all streams */
    uint64_t chunks;       /* taken from the pool */
} bin;

typedef struct binning {
    cmb_upstream *up;
    const cmb_allocator_methods *pool_m;
    void *pool;
    bin *bins;
    unsigned n_bins;
    unsigned low_exp; /* exponent of bins[0] after the 256 B rounding */
    uint64_t blocks_per_chunk;
    fs_node *spare;
    cmb_alloc_stats st;
    uint64_t chunk_bytes; /* pool bytes held by bins */
    char last_error[200];
    CMB_DEBUG_ONLY(uint64_t ops;)
} binning;

static inline uint64_t align_up(uint64_t x, uint64_t a)
{
    return cmb_size_round_up_sat(x, a); /* saturates: a huge x never wraps to a small one */
}

static unsigned ceil_log2(uint64_t x)
{
    return x <= 1 ? 0 : 64u - (unsigned)__builtin_clzll(x - 1);
}

/* --- list operations ----------------------------------------------------------------- */

static int list_push(binning *b, fs_list *l, uintptr_t ptr)
{
    fs_node *n = b->spare;
    if (n)
        b->spare = n->next;
    else if (!(n = malloc(sizeof *n)))
        return -1;
    n->ptr = ptr;
    n->next = NULL;
    if (l->tail)
        l->tail->next = n;
    else
        l->head = n;
    l->tail = n;
    l->count++;
    return 0;
}

static uintptr_t list_pop(binning *b, fs_list *l)
{
    fs_node *n = l->head;
    l->head = n->next;
    if (!l->head)
        l->tail = NULL;
    l->count--;
    uintptr_t ptr = n->ptr;
    n->next = b->spare;
    b->spare = n;
    return ptr;
}

/* --- growth ---------------------------------------------------------------------------- */

/* blocks_from_upstream: one chunk from the pool, cut into blocks at the back of l. */
static cmb_status bin_grow(bin *bn, bin_stream *own)
{
    binning *b = bn->owner;
    void *chunk;
    cmb_status st = b->pool_m->allocate(b->pool, bn->chunk_size, own->so.stream, &chunk);
    if (st != CMB_OK)
        return st;
    b->chunk_bytes += bn->chunk_size;
    bn->chunks++;
    uint64_t n = bn->chunk_size / bn->block_size;
    for (uint64_t i = 0; i < n; i++) {
        if (list_push(b, &own->free, (uintptr_t)chunk + i * bn->block_size))
            return CMB_ERR_HOST_NOMEM; /* the chunk stays with the pool until destroy */
        bn->free_blocks++;
    }
    return CMB_OK;
}

/* --- the hooks of the stream-ordered helper (fixed_size_free_list) ----------------------- */

static int hook_list_empty(const cmb_so_list *l)
{
    return ((const bin_stream *)l)->free.count == 0;
}

/* Every block of a bin fits: the front of the list, if any. */
static void *hook_find(void *ctx, cmb_so_list *l, uint64_t size)
{
    (void)ctx;
    (void)size;
    return ((bin_stream *)l)->free.head;
}

static void *hook_take(void *ctx, cmb_so_list *l, void *b, uint64_t size)
{
    bin *bn = ctx;
    (void)b;
    (void)size;
    bn->free_blocks--;
    return (void *)list_pop(bn->owner, &((bin_stream *)l)->free);
}

/* free_list::insert(free_list&&): src's blocks go to the back of dst. The
 * helper merges only when no other list had a block, so for a bin (where
 * every block fits) it never runs; it is here for completeness. */
static void hook_merge(void *ctx, cmb_so_list *dst, cmb_so_list *src)
{
    fs_list *d = &((bin_stream *)dst)->free, *o = &((bin_stream *)src)->free;
    (void)ctx;
    if (!o->head)
        return;
    if (d->tail)
        d->tail->next = o->head;
    else
        d->head = o->head;
    d->tail = o->tail;
    d->count += o->count;
    o->head = o->tail = NULL;
    o->count = 0;
}

/* expand_pool: a chunk of blocks, then the front one. */
static cmb_status hook_expand(void *ctx, cmb_so_list *own, uint64_t size, void **out)
{
    bin *bn = ctx;
    cmb_status st = bin_grow(bn, (bin_stream *)own);
    if (st != CMB_OK)
        return st;
    *out = hook_take(ctx, own, NULL, size);
    return CMB_OK;
}

static void hook_list_fini(void *ctx, cmb_so_list *l)
{
    bin_stream *bs = (bin_stream *)l;
    (void)ctx;
    while (bs->free.head) {
        fs_node *n = bs->free.head;
        bs->free.head = n->next;
        free(n);
    }
}

static const cmb_so_hooks bin_hooks = {
    .list_size = sizeof(bin_stream),
    .list_fini = hook_list_fini,
    .list_empty = hook_list_empty,
    .find = hook_find,
    .take = hook_take,
    .merge = hook_merge,
    .expand = hook_expand,
};

/* The bin for a request of n bytes, or NULL for the pool. */
static bin *bin_for(binning *b, uint64_t n)
{
    if (!b->n_bins)
        return NULL;
    unsigned e = ceil_log2(n);
    unsigned i = e <= b->low_exp ? 0 : e - b->low_exp;
    return i < b->n_bins ? &b->bins[i] : NULL;
}

/* --- invariants ------------------------------------------------------------------------ */

int _cmb_rmm_pool_walk(const void *state, cmb_walk *w);

/* One FIFO list: its count and tail are what a walk finds. */
static int walk_fifo(const fs_list *l, cmb_walk *w)
{
    uint64_t n = 0;
    const fs_node *last = NULL;
    for (const fs_node *x = l->head; x; x = x->next, n++) {
        CMB_WALK_CHECK(w, x->ptr % BIN_ALIGN == 0);
        last = x;
    }
    CMB_WALK_CHECK(w, n == l->count && last == l->tail);
    return 0;
}

/* Every bin's lists, the bytes the bins hold against the pool's own
 * count, then the pool. */
int _cmb_binning_walk(const void *state, cmb_walk *w)
{
    const binning *b = state;
    uint64_t chunk_bytes = 0, live_bin_bytes = 0;
    for (unsigned i = 0; i < b->n_bins; i++) {
        const bin *bn = &b->bins[i];
        uint64_t free_blocks = 0;
        for (size_t j = 0; j < cmb_so_count(&bn->so); j++) {
            const bin_stream *bs = (const bin_stream *)cmb_so_at(&bn->so, j);
            if (walk_fifo(&bs->free, w))
                return 1;
            free_blocks += bs->free.count;
        }
        CMB_WALK_CHECK(w, free_blocks == bn->free_blocks);
        CMB_WALK_CHECK(w, free_blocks * bn->block_size <= bn->chunks * bn->chunk_size);
        chunk_bytes += bn->chunks * bn->chunk_size;
        live_bin_bytes += bn->chunks * bn->chunk_size - free_blocks * bn->block_size;
    }
    CMB_WALK_CHECK(w, chunk_bytes == b->chunk_bytes);
    cmb_alloc_stats ps;
    CMB_WALK_CHECK(w, b->pool_m->stats(b->pool, &ps) == CMB_OK);
    /* the pool serves the chunks and every request too large for a bin */
    CMB_WALK_CHECK(w, ps.allocated.current + (int64_t)live_bin_bytes ==
                          (int64_t)chunk_bytes + b->st.allocated.current);
    return _cmb_rmm_pool_walk(b->pool, w);
}

/* --- the method table --------------------------------------------------------------------- */

static cmb_status binning_destroy(void *state);

/* The pool's own options travel to it unchanged. */
static cmb_status create_pool(binning *b, const cmb_config *cfg)
{
    cmb_option opt[2];
    size_t n = 0;
    static const char *const keys[] = {"initial_pool_size", "maximum_pool_size"};
    for (size_t i = 0; i < 2; i++) {
        const char *v = cmb_config_get(cfg, keys[i]);
        if (v) {
            opt[n].key = keys[i];
            opt[n].value = v;
            n++;
        }
    }
    cmb_config pcfg = *cfg;
    pcfg.options = opt;
    pcfg.n_options = n;
    b->pool_m = &cmb_rmm_pool_methods;
    return b->pool_m->create(&pcfg, b->up, &b->pool);
}

extern const cmb_option_decl _cmb_rmm_pool_options[];

/* The bins' own options, then the pool's (alloc_rmm_pool.c), which travel
 * to it unchanged. min_bin_exp > max_bin_exp means no bins. */
static const cmb_option_decl binning_options[] = {
    CMB_OPTION("min_bin_exp", CMB_OPT_INT, "18", "0", "41", NULL,
     "smallest bin 2^N bytes (RMM's usual binning_memory_resource(pool, 18, 22)); above max_bin_exp: no bins"),
    CMB_OPTION("max_bin_exp", CMB_OPT_INT, "22", "0", "40", NULL, "largest bin 2^N bytes"),
    CMB_OPTION("blocks_to_preallocate", CMB_OPT_INT, "128", "1", "1048576", "blocks",
     "blocks per chunk a bin takes from the pool (fixed_size_memory_resource's default_blocks_to_preallocate)"),
    CMB_OPTION("initial_pool_size", CMB_OPT_SIZE, "(50% of free memory)", "0", NULL, "B",
     "the pool behind the bins: bytes at creation, a multiple of 256 (as rmm-pool)"),
    CMB_OPTION_EX("maximum_pool_size", CMB_OPT_SIZE, "(none)", "0", "max", "B",
     "the pool behind the bins: its maximum, a multiple of 256; 0 or max: none", NULL, CMB_OPT_MAX_OK, NULL),
    CMB_OPTION_END};

static cmb_status read_options(binning *b, const cmb_config *cfg, unsigned *min_exp, unsigned *max_exp)
{
    cmb_options o;
    cmb_status st = cmb_options_read(&o, "binning", binning_options, cfg);
    if (st != CMB_OK)
        return st;
    *min_exp = (unsigned)cmb_opt_int(&o, "min_bin_exp");
    *max_exp = (unsigned)cmb_opt_int(&o, "max_bin_exp");
    b->blocks_per_chunk = (uint64_t)cmb_opt_int(&o, "blocks_to_preallocate");
    return CMB_OK;
}

/* add_bin for 2^min .. 2^max; sizes below 256 B collapse into the 256 B bin. */
static cmb_status make_bins(binning *b, unsigned min_exp, unsigned max_exp)
{
    if (min_exp > max_exp)
        return CMB_OK;
    b->low_exp = min_exp < 8 ? 8 : min_exp;
    b->n_bins = max_exp < b->low_exp ? 1 : max_exp - b->low_exp + 1;
    b->bins = calloc(b->n_bins, sizeof *b->bins);
    if (!b->bins)
        return CMB_ERR_HOST_NOMEM;
    for (unsigned i = 0; i < b->n_bins; i++) {
        bin *bn = &b->bins[i];
        bn->owner = b;
        bn->block_size = align_up(1ull << (b->low_exp + i), BIN_ALIGN);
        bn->chunk_size = bn->block_size * b->blocks_per_chunk;
        cmb_so_init(&bn->so, b->up, &bin_hooks, bn);
        /* the constructor preallocates one chunk on the default stream */
        bin_stream *legacy = (bin_stream *)cmb_so_list_of(&bn->so, NULL);
        if (!legacy)
            return CMB_ERR_HOST_NOMEM;
        cmb_status st = bin_grow(bn, legacy);
        if (st != CMB_OK)
            return st;
    }
    return CMB_OK;
}

static cmb_status binning_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    unsigned min_exp, max_exp;
    if (!up)
        return CMB_ERR_INVALID;
    binning *b = calloc(1, sizeof *b);
    if (!b)
        return CMB_ERR_HOST_NOMEM;
    b->up = up;
    cmb_status st = read_options(b, cfg, &min_exp, &max_exp);
    if (st != CMB_OK) {
        free(b);
        return st;
    }
    st = create_pool(b, cfg);
    if (st != CMB_OK) {
        free(b);
        return st;
    }
    st = make_bins(b, min_exp, max_exp);
    if (st != CMB_OK) {
        snprintf(cfg->error, cfg->error_len, "binning: preallocating the bins failed: %s", cmb_status_str(st));
        goto out_destroy;
    }
    *state = b;
    return CMB_OK;

out_destroy:
    binning_destroy(b);
    return st;
}

static cmb_status binning_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    binning *b = state;
    if (size == 0)
        return CMB_ERR_INVALID;
    if (cmb_size_refuse(size, "binning", b->last_error, sizeof b->last_error))
        return CMB_ERR_OOM;
    bin *bn = bin_for(b, size);
    uint64_t charged;
    if (bn) {
        cmb_so_list *own = cmb_so_list_of(&bn->so, stream);
        cmb_status st = own ? cmb_so_get_block(&bn->so, own, bn->block_size, ptr) : CMB_ERR_HOST_NOMEM;
        if (st != CMB_OK) {
            snprintf(b->last_error, sizeof b->last_error, "binning: bin of %llu B cannot grow: %s",
                     (unsigned long long)bn->block_size, cmb_status_str(st));
            return st;
        }
        charged = bn->block_size;
    } else {
        cmb_status st = b->pool_m->allocate(b->pool, size, stream, ptr);
        if (st != CMB_OK)
            return st;
        charged = align_up(size, BIN_ALIGN);
    }
    cmb_stat_increase(&b->st.requested, (int64_t)size);
    cmb_stat_increase(&b->st.allocated, (int64_t)charged);
    cmb_stat_increase(&b->st.blocks, 1);
    CMB_VALIDATE_TICK(b->ops, _cmb_binning_walk, b);
    return CMB_OK;
}

static cmb_status binning_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    binning *b = state;
    if (!ptr || size == 0)
        return CMB_ERR_INVALID;
    bin *bn = bin_for(b, size);
    uint64_t charged;
    if (bn) {
        bin_stream *own = (bin_stream *)cmb_so_list_of(&bn->so, stream);
        if (!own)
            return CMB_ERR_HOST_NOMEM;
        cmb_so_record_free(&bn->so, &own->so);
        if (list_push(b, &own->free, (uintptr_t)ptr))
            return CMB_ERR_HOST_NOMEM;
        bn->free_blocks++;
        charged = bn->block_size;
    } else {
        cmb_status st = b->pool_m->deallocate(b->pool, ptr, size, stream);
        if (st != CMB_OK)
            return st;
        charged = align_up(size, BIN_ALIGN);
    }
    cmb_stat_decrease(&b->st.requested, (int64_t)size);
    cmb_stat_decrease(&b->st.allocated, (int64_t)charged);
    cmb_stat_decrease(&b->st.blocks, 1);
    CMB_VALIDATE_TICK(b->ops, _cmb_binning_walk, b);
    return CMB_OK;
}

/* Neither the bins nor the pool give memory back before destroy. */
static cmb_status binning_trim(void *state)
{
    CMB_VALIDATE_NOW(_cmb_binning_walk, state);
    (void)state;
    return CMB_OK;
}

static cmb_status binning_stats(void *state, cmb_alloc_stats *out)
{
    binning *b = state;
    cmb_alloc_stats ps;
    cmb_status st = b->pool_m->stats(b->pool, &ps);
    if (st != CMB_OK)
        return st;
    *out = b->st;
    out->reserved = ps.reserved;
    out->largest_free = ps.largest_free;
    for (unsigned i = 0; i < b->n_bins; i++)
        if (b->bins[i].free_blocks && b->bins[i].block_size > out->largest_free)
            out->largest_free = b->bins[i].block_size;
    out->upstream_allocs = ps.upstream_allocs;
    out->upstream_frees = ps.upstream_frees;
    out->oom_retries = 0;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                 CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM | CMB_STAT_OOM_RETRIES;
    return CMB_OK;
}

static cmb_status binning_destroy(void *state)
{
    binning *b = state;
    for (unsigned i = 0; b->bins && i < b->n_bins; i++)
        cmb_so_destroy(&b->bins[i].so);
    free(b->bins);
    while (b->spare) {
        fs_node *n = b->spare;
        b->spare = n->next;
        free(n);
    }
    /* the pool returns every upstream block, the bins' chunks included */
    cmb_status st = b->pool ? b->pool_m->destroy(b->pool) : CMB_OK;
    free(b);
    return st;
}

static const char *binning_last_error(void *state)
{
    binning *b = state;
    if (b->last_error[0])
        return b->last_error;
    return b->pool_m->last_error(b->pool);
}

static cmb_status binning_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out);

const cmb_allocator_methods cmb_binning_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "binning",
    .summary = "RMM binning_memory_resource: power-of-two fixed-size bins (chunks of 128 blocks) over an "
               "rmm-pool for larger requests",
    .flags = CMB_ALLOC_USES_UPSTREAM | CMB_ALLOC_STREAM_ORDERED,
    .create = binning_create,
    .allocate = binning_allocate,
    .deallocate = binning_deallocate,
    .trim = binning_trim,
    .stats = binning_stats,
    .destroy = binning_destroy,
    .last_error = binning_last_error,
    .options = binning_options,
    .free_account = binning_free_account,
};

/* --- free memory by reason (--explain-oom) --------------------------------------------- */

/* A bin's free blocks serve only its own size: those of other bins are in
 * another pool. The pool's own free blocks are accounted by the pool for
 * what the request asks of it (a chunk of the bin, or the request). */
static cmb_status binning_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out)
{
    const binning *b = state;
    if (!size || !out)
        return CMB_ERR_INVALID;
    const bin *want = bin_for((binning *)b, size);
    cmb_status st = b->pool_m->free_account(b->pool, want ? want->chunk_size : size, stream, out);
    if (st != CMB_OK)
        return st;
    if (want)
        out->rounded = want->block_size;
    for (unsigned i = 0; i < b->n_bins; i++) {
        const bin *bn = &b->bins[i];
        uint64_t bytes = bn->free_blocks * bn->block_size;
        out->bytes[bn == want ? CMB_FREE_USABLE : CMB_FREE_OTHER_POOL] += bytes;
        if (bn->free_blocks && bn->block_size > out->largest_free)
            out->largest_free = bn->block_size;
    }
    return CMB_OK;
}
