/* alloc_buddy.c - "buddy": a binary buddy system over one reservation.
 *
 * Algorithm (Knowlton 1965; Knuth TAOCP vol. 1, 2.5; the layout of SQLite's
 * mem5.c): one power-of-two pool P is taken from the upstream; a block of
 * order k has 2^k bytes and starts at a multiple of 2^k from the pool base.
 *  - a request of n bytes gets the block of order max(9, ceil(log2 n)),
 *    i.e. at least 512 B;
 *  - allocate: the smallest non-empty order >= the request's, lowest address
 *    in it; split in halves down to the request's order, each right half
 *    going free one order lower;
 *  - free: while the buddy (offset XOR 2^k) is free at the same order, take
 *    it out and merge, one order up; then the block goes free;
 *  - largest_free is 2^(highest non-empty order), O(1) from a bitmap of
 *    non-empty orders;
 *  - trim() returns the whole reservation when no block is live (the next
 *    allocation takes it again); destroy() always returns it.
 *
 * Pool size: pool_size if given (a power of two >= 512 B); else the largest
 * power of two not above fraction x the upstream's free memory at create,
 * fraction = 0.95 by default. A buddy pool must be a power of two; 5% of
 * free memory stays outside it for cuBLAS workspaces and other libraries
 * (the CUDA context is already outside "free"). Examples: 78.7 GiB free on
 * an H100 -> 64 GiB pool; 139 GiB on an H200 -> 128 GiB; the 80 GiB sim
 * device -> 64 GiB; 8 GiB -> 4 GiB. The pool covers between 47.5% and 95%
 * of free memory: capacity a buddy system loses by design.
 * The reservation is taken at create; when the upstream refuses it, each
 * allocation tries again (and fails with CMB_ERR_OOM until one succeeds).
 *
 * Bounds: allocate and free are O(log(P / 512)) bit operations: one
 * split or merge per order, each a constant number of word updates in a
 * two-bit-per-512 B hierarchical bitmap (find-first-set per order in
 * O(log64 blocks)). Internal fragmentation: up to 50% of a block (a request
 * of 2^k + 1 bytes takes 2^(k+1)); external fragmentation: a free block can
 * only merge with its buddy, so free memory can be split into many blocks
 * that cannot serve a large request. Host memory: about P / 2048 bytes of
 * bitmaps (32 MiB for a 64 GiB pool), taken lazily by the OS.
 * The stream is ignored: like a raw pool, blocks are reused across streams.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_size.h"
#include "../common/cmb_assert.h"
#include "cmb_allocator.h"
#include "options.h"

/* --- constants ------------------------------------------------------------- */

/* smallest block: 512 B, the alignment CUDA's allocator gives (CuPy's
 * ALLOCATION_UNIT_SIZE, cupy/cuda/memory.pyx; PyTorch's kMinBlockSize,
 * c10/cuda/CUDACachingAllocator.cpp) */
#define BUDDY_MIN_ORDER 9
/* default share of free memory the pool may take (this suite's choice) */
#define BUDDY_DEFAULT_FRACTION 0.95
/* largest pool: 256 TiB = 2^39 blocks of 512 B, which 7 levels of a
 * 64-ary hierarchical bitmap (64^7 = 2^42 bits) cover */
#define BUDDY_MAX_POOL (1ull << 48)
#define BUDDY_HB_DEPTH 7
#define BUDDY_MAX_LEVELS (64 - BUDDY_MIN_ORDER)

/* --- hierarchical bitmaps -------------------------------------------------- */

/* w[0] has one bit per block; w[d+1] one bit per non-zero word of w[d]. */
typedef struct hbits {
    uint64_t *w[BUDDY_HB_DEPTH];
    int depth;
} hbits;

static size_t hb_layout(uint64_t nbits, size_t nwords[BUDDY_HB_DEPTH], int *depth)
{
    size_t total = 0;
    int d = 0;
    uint64_t n = nbits;
    do {
        n = (n + 63) / 64;
        nwords[d++] = (size_t)n;
        total += (size_t)n;
    } while (n > 1 && d < BUDDY_HB_DEPTH);
    *depth = d;
    return total;
}

static inline int hb_test(const hbits *h, uint64_t i)
{
    return (int)((h->w[0][i >> 6] >> (i & 63)) & 1);
}

static inline void hb_set(hbits *h, uint64_t i)
{
    for (int d = 0; d < h->depth; d++) {
        uint64_t was = h->w[d][i >> 6];
        h->w[d][i >> 6] = was | (1ull << (i & 63));
        if (was)
            return;
        i >>= 6;
    }
}

static inline void hb_clear(hbits *h, uint64_t i)
{
    for (int d = 0; d < h->depth; d++) {
        h->w[d][i >> 6] &= ~(1ull << (i & 63));
        if (h->w[d][i >> 6])
            return;
        i >>= 6;
    }
}

/* Lowest set bit; the bitmap must not be empty. */
static inline uint64_t hb_first(const hbits *h)
{
    uint64_t i = 0;
    for (int d = h->depth - 1; d >= 0; d--)
        i = (i << 6) + (uint64_t)__builtin_ctzll(h->w[d][i]);
    return i;
}

/* --- data ------------------------------------------------------------------ */

typedef struct buddy {
    cmb_upstream *up;
    uint64_t pool_size;
    int top;                   /* levels 0..top; level j = order 9 + j */
    uintptr_t base;            /* 0 while not reserved                 */
    uint64_t *bits;            /* one calloc for every bitmap below    */
    hbits free_at[BUDDY_MAX_LEVELS];
    uint64_t free_count[BUDDY_MAX_LEVELS];
    uint64_t nonempty;         /* bit j: some block of level j is free */
    uint64_t *live;            /* bit per 512 B: a live block starts here */
    cmb_alloc_stats st;
    char err[256];
    CMB_DEBUG_ONLY(uint64_t ops;)
} buddy;

static inline int level_for(uint64_t size)
{
    if (size <= (1ull << BUDDY_MIN_ORDER))
        return 0;
    return 64 - __builtin_clzll(size - 1) - BUDDY_MIN_ORDER;
}

static inline void free_push(buddy *a, int j, uint64_t idx)
{
    hb_set(&a->free_at[j], idx);
    a->free_count[j]++;
    a->nonempty |= 1ull << j;
}

static inline void free_take(buddy *a, int j, uint64_t idx)
{
    hb_clear(&a->free_at[j], idx);
    if (!--a->free_count[j])
        a->nonempty &= ~(1ull << j);
}

/* --- the reservation ------------------------------------------------------- */

static cmb_status bitmaps_init(buddy *a)
{
    size_t nwords[BUDDY_MAX_LEVELS][BUDDY_HB_DEPTH];
    size_t total = 0;
    uint64_t atoms = a->pool_size >> BUDDY_MIN_ORDER;
    for (int j = 0; j <= a->top; j++)
        total += hb_layout(atoms >> j, nwords[j], &a->free_at[j].depth);
    size_t live_words = (size_t)((atoms + 63) / 64);
    a->bits = calloc(total + live_words, sizeof(uint64_t));
    if (!a->bits)
        return CMB_ERR_HOST_NOMEM;
    uint64_t *p = a->bits;
    for (int j = 0; j <= a->top; j++)
        for (int d = 0; d < a->free_at[j].depth; d++) {
            a->free_at[j].w[d] = p;
            p += nwords[j][d];
        }
    a->live = p;
    memset(a->free_count, 0, sizeof a->free_count);
    a->nonempty = 0;
    free_push(a, a->top, 0); /* the whole pool, one free block */
    return CMB_OK;
}

static cmb_status reserve(buddy *a)
{
    cmb_status st = bitmaps_init(a);
    if (st != CMB_OK)
        return st;
    void *p = NULL;
    st = cmb_up_alloc(a->up, a->pool_size, NULL, &p);
    if (st != CMB_OK) {
        free(a->bits);
        a->bits = NULL;
        snprintf(a->err, sizeof a->err, "buddy: the upstream refused the %llu B pool (%s)",
                 (unsigned long long)a->pool_size, cmb_status_str(st));
        return st;
    }
    a->base = (uintptr_t)p;
    a->st.upstream_allocs++;
    return CMB_OK;
}

static cmb_status release(buddy *a)
{
    cmb_status st = CMB_OK;
    if (a->base) {
        st = cmb_up_free(a->up, (void *)a->base, a->pool_size, NULL);
        a->st.upstream_frees++;
        a->base = 0;
    }
    free(a->bits);
    a->bits = NULL;
    return st;
}

/* --- invariants ------------------------------------------------------------- */

/* No live block starts inside atoms [first, first + count). */
static int atoms_clear(const uint64_t *live, uint64_t first, uint64_t count)
{
    for (uint64_t i = first; i < first + count;) {
        uint64_t word = live[i >> 6], bit = i & 63;
        uint64_t n = count - (i - first) < 64 - bit ? count - (i - first) : 64 - bit;
        uint64_t mask = (n == 64 ? ~0ull : ((1ull << n) - 1)) << bit;
        if (word & mask)
            return 0;
        i += n;
    }
    return 1;
}

/* One free block of level j: its buddy is not free (they would have
 * merged) and no live block starts inside it. */
static int walk_free_block(const buddy *a, int j, uint64_t idx, cmb_walk *w)
{
    CMB_WALK_CHECK(w, j == a->top || !hb_test(&a->free_at[j], idx ^ 1));
    CMB_WALK_CHECK(w, atoms_clear(a->live, idx << j, 1ull << j));
    return 0;
}

/* The free blocks of level j, found through the bitmap's second level
 * (only the non-zero words of the first are read). */
static int walk_level(const buddy *a, int j, cmb_walk *w, uint64_t *count)
{
    const hbits *h = &a->free_at[j];
    uint64_t words = ((a->pool_size >> (BUDDY_MIN_ORDER + j)) + 63) / 64;
    for (uint64_t wi = 0; wi < words; wi++) {
        if (h->depth > 1) {
            uint64_t up = h->w[1][wi >> 6];
            if (!up) {
                wi |= 63; /* 64 words of the first level, all clear */
                continue;
            }
            if (!((up >> (wi & 63)) & 1)) {
                CMB_WALK_CHECK(w, h->w[0][wi] == 0);
                continue;
            }
        }
        for (uint64_t bits = h->w[0][wi]; bits; bits &= bits - 1) {
            if (walk_free_block(a, j, wi * 64 + (uint64_t)__builtin_ctzll(bits), w))
                return 1;
            (*count)++;
        }
    }
    return 0;
}

/* Every level: its count and the non-empty bitmap agree with the blocks
 * found; free blocks plus allocated bytes are the pool; the live bitmap
 * counts the live blocks. */
int _cmb_buddy_walk(const void *state, cmb_walk *w)
{
    const buddy *a = state;
    if (!a->base)
        return a->st.blocks.current ? _cmb_walk_fail(w, "no pool but live blocks", __FILE__, __LINE__, __func__) : 0;
    uint64_t free_bytes = 0, live = 0;
    for (int j = 0; j <= a->top; j++) {
        uint64_t count = 0;
        if (walk_level(a, j, w, &count))
            return 1;
        CMB_WALK_CHECK(w, count == a->free_count[j] && !!count == !!(a->nonempty & (1ull << j)));
        free_bytes += count << (BUDDY_MIN_ORDER + j);
    }
    CMB_WALK_CHECK(w, (a->nonempty >> (a->top + 1)) == 0 || a->top == BUDDY_MAX_LEVELS - 1);
    for (uint64_t i = 0; i < ((a->pool_size >> BUDDY_MIN_ORDER) + 63) / 64; i++)
        live += (uint64_t)__builtin_popcountll(a->live[i]);
    CMB_WALK_CHECK(w, (int64_t)live == a->st.blocks.current);
    CMB_WALK_CHECK(w, free_bytes + (uint64_t)a->st.allocated.current == a->pool_size);
    return 0;
}

/* --- allocate / deallocate ------------------------------------------------- */

static cmb_status buddy_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    buddy *a = state;
    (void)stream;
    if (!size)
        return CMB_ERR_INVALID;
    if (cmb_size_refuse(size, "buddy", a->err, sizeof a->err))
        return CMB_ERR_OOM;
    if (!a->base) {
        cmb_status st = reserve(a);
        if (st != CMB_OK)
            return st;
    }
    int j = level_for(size);
    uint64_t usable = j <= a->top ? a->nonempty >> j : 0;
    if (!usable) {
        snprintf(a->err, sizeof a->err, "buddy: no free block for %zu B (largest free %llu B of a %llu B pool)", size,
                 a->nonempty ? (unsigned long long)1 << (BUDDY_MIN_ORDER + 63 - __builtin_clzll(a->nonempty)) : 0ull,
                 (unsigned long long)a->pool_size);
        return CMB_ERR_OOM;
    }
    int i = j + __builtin_ctzll(usable);
    uint64_t idx = hb_first(&a->free_at[i]);
    free_take(a, i, idx);
    while (i > j) { /* keep the left half, free the right one */
        i--;
        idx <<= 1;
        free_push(a, i, idx + 1);
    }
    uint64_t off = idx << (BUDDY_MIN_ORDER + j);
    a->live[off >> (BUDDY_MIN_ORDER + 6)] |= 1ull << ((off >> BUDDY_MIN_ORDER) & 63);
    cmb_stat_increase(&a->st.requested, (int64_t)size);
    cmb_stat_increase(&a->st.allocated, (int64_t)1 << (BUDDY_MIN_ORDER + j));
    cmb_stat_increase(&a->st.blocks, 1);
    *ptr = (void *)(a->base + off);
    CMB_VALIDATE_TICK(a->ops, _cmb_buddy_walk, a);
    return CMB_OK;
}

static cmb_status buddy_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    buddy *a = state;
    (void)stream;
    uintptr_t off = (uintptr_t)ptr - a->base;
    int j = level_for(size);
    uint64_t atom = off >> BUDDY_MIN_ORDER;
    if (!a->base || (uintptr_t)ptr < a->base || off >= a->pool_size || j > a->top ||
        (off & ((1ull << (BUDDY_MIN_ORDER + j)) - 1)) || !((a->live[atom >> 6] >> (atom & 63)) & 1)) {
        snprintf(a->err, sizeof a->err, "buddy: free of %p (%zu B), which is not a live block", ptr, size);
        return CMB_ERR_INVALID;
    }
    a->live[atom >> 6] &= ~(1ull << (atom & 63));
    cmb_stat_decrease(&a->st.requested, (int64_t)size);
    cmb_stat_decrease(&a->st.allocated, (int64_t)1 << (BUDDY_MIN_ORDER + j));
    cmb_stat_decrease(&a->st.blocks, 1);
    uint64_t idx = off >> (BUDDY_MIN_ORDER + j);
    while (j < a->top && hb_test(&a->free_at[j], idx ^ 1)) {
        free_take(a, j, idx ^ 1);
        idx >>= 1;
        j++;
    }
    free_push(a, j, idx);
    CMB_VALIDATE_TICK(a->ops, _cmb_buddy_walk, a);
    return CMB_OK;
}

/* --- trim / stats / lifetime ----------------------------------------------- */

static cmb_status buddy_trim(void *state)
{
    buddy *a = state;
    CMB_VALIDATE_NOW(_cmb_buddy_walk, a);
    if (!a->base || a->st.blocks.current)
        return CMB_OK;
    return release(a);
}

static cmb_status buddy_stats(void *state, cmb_alloc_stats *out)
{
    buddy *a = state;
    *out = a->st;
    out->reserved.current = a->up->stats.held_current;
    out->reserved.peak = a->up->stats.held_peak;
    out->reserved.total = a->up->stats.held_total;
    out->largest_free =
        a->base && a->nonempty ? 1ull << (BUDDY_MIN_ORDER + 63 - __builtin_clzll(a->nonempty)) : 0;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                 CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM | CMB_STAT_OOM_RETRIES;
    return CMB_OK;
}

static cmb_status buddy_destroy(void *state)
{
    buddy *a = state;
    CMB_VALIDATE_NOW(_cmb_buddy_walk, a);
    cmb_status st = release(a);
    free(a);
    return st;
}

static const char *buddy_last_error(void *state)
{
    buddy *a = state;
    return a->err[0] ? a->err : NULL;
}

static cmb_status pool_size_of(cmb_upstream *up, uint64_t pool_size, double fraction, uint64_t *out, char *err,
                               size_t errlen)
{
    if (pool_size) {
        if (pool_size & (pool_size - 1) || pool_size < (1ull << BUDDY_MIN_ORDER) || pool_size > BUDDY_MAX_POOL) {
            snprintf(err, errlen, "buddy: pool_size must be a power of two from 512 B to 256 TiB");
            return CMB_ERR_INVALID;
        }
        *out = pool_size;
        return CMB_OK;
    }
    size_t free_b = 0, total_b = 0;
    if (cmb_up_mem_info(up, &free_b, &total_b) != CMB_OK) {
        snprintf(err, errlen, "buddy: cannot read the device's free memory; give pool_size=SIZE");
        return CMB_ERR_UNSUPPORTED;
    }
    uint64_t share = (uint64_t)((double)free_b * fraction);
    if (share < (1ull << BUDDY_MIN_ORDER)) {
        snprintf(err, errlen, "buddy: %.2f of %zu B free is smaller than one 512 B block", fraction, free_b);
        return CMB_ERR_OOM;
    }
    *out = 1ull << (63 - __builtin_clzll(share));
    if (*out > BUDDY_MAX_POOL)
        *out = BUDDY_MAX_POOL;
    return CMB_OK;
}

/* The pool: BUDDY_MAX_POOL and BUDDY_DEFAULT_FRACTION above. */
static const cmb_option_decl buddy_options[] = {
    CMB_OPTION_EX("pool_size", CMB_OPT_SIZE, "(largest power of two <= fraction x free)", "512B", "256TiB", "B",
     "the one power-of-two reservation the buddy system splits", NULL, CMB_OPT_POW2, NULL),
    CMB_OPTION_EX("fraction", CMB_OPT_REAL, "0.95", "0", "1", "share of free memory, above 0",
     "the pool is the largest power of two not above this share of the free memory (this suite's choice)", NULL,
     0, "pool_size"),
    CMB_OPTION_END};

static cmb_status buddy_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    cmb_options o;
    cmb_status st = cmb_options_read(&o, "buddy", buddy_options, cfg);
    if (st != CMB_OK)
        return st;
    uint64_t pool_size = cmb_opt_size(&o, "pool_size");
    double fraction = cmb_opt_real(&o, "fraction");
    if (!(fraction > 0 && fraction <= 1)) {
        snprintf(cfg->error, cfg->error_len, "buddy: fraction must be in (0, 1]");
        return CMB_ERR_INVALID;
    }
    if (!up)
        return CMB_ERR_INVALID;
    uint64_t size;
    st = pool_size_of(up, pool_size, fraction, &size, cfg->error, cfg->error_len);
    if (st != CMB_OK)
        return st;

    buddy *a = calloc(1, sizeof *a);
    if (!a)
        return CMB_ERR_HOST_NOMEM;
    a->up = up;
    a->pool_size = size;
    a->top = 63 - __builtin_clzll(size) - BUDDY_MIN_ORDER;
    st = reserve(a);
    if (st == CMB_ERR_HOST_NOMEM) {
        free(a);
        return st;
    }
    /* an upstream refusal is retried by the first allocations */
    *state = a;
    return CMB_OK;
}

static cmb_status buddy_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out);

const cmb_allocator_methods cmb_buddy_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "buddy",
    .summary = "binary buddy system over one power-of-two reservation, 512 B minimum block",
    .flags = CMB_ALLOC_USES_UPSTREAM,
    .create = buddy_create,
    .allocate = buddy_allocate,
    .deallocate = buddy_deallocate,
    .trim = buddy_trim,
    .stats = buddy_stats,
    .destroy = buddy_destroy,
    .last_error = buddy_last_error,
    .options = buddy_options,
    .free_account = buddy_free_account,
};

/* --- free memory by reason (--explain-oom) --------------------------------- */

/* Free blocks of a lower order than the request's are too small: each can
 * merge only with its buddy, and that buddy is (part of) a live block. */
static cmb_status buddy_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out)
{
    const buddy *a = state;
    (void)stream;
    if (!size || !out)
        return CMB_ERR_INVALID;
    memset(out, 0, sizeof *out);
    int want = size > (1ull << 62) ? BUDDY_MAX_LEVELS : level_for(size);
    out->rounded = want < BUDDY_MAX_LEVELS ? 1ull << (want + BUDDY_MIN_ORDER) : UINT64_MAX;
    for (int j = 0; a->base && j <= a->top; j++) {
        uint64_t bytes = a->free_count[j] << (j + BUDDY_MIN_ORDER);
        out->bytes[j >= want ? CMB_FREE_USABLE : CMB_FREE_TOO_SMALL] += bytes;
        if (a->free_count[j])
            out->largest_free = 1ull << (j + BUDDY_MIN_ORDER);
    }
    return CMB_OK;
}
