/* sample_plugin.c - a sample allocator plug-in for cumembench: a
 * segregated-fit pool with coalescing, over the upstream it is given.
 *
 * Built as a shared library that exports cmb_plugin_allocator() and run
 * with `--allocator external:/path/libcmb_sample_plugin.so[:round=4KiB]`;
 * it needs nothing from the suite but the two ABI headers
 * (allocators/cmb_allocator.h, allocators/cmb_upstream.h). See
 * docs/plugins.md.
 *
 * Algorithm:
 *  - every request is rounded up to `round` bytes (a power of two >= 256);
 *  - free blocks sit in size classes, class k holding sizes in
 *    [2^k, 2^(k+1)), with a bitmap of the non-empty classes; a request of
 *    n bytes takes the first block that fits in n's own class, else the
 *    first block of the lowest non-empty class above it (every block there
 *    fits), found with one bit scan;
 *  - a block larger than needed is split when the rest is >= `round`;
 *  - when nothing fits, a segment of max(n, `segment`) bytes is taken from
 *    the upstream; on CMB_ERR_OOM every wholly free segment is returned to
 *    the upstream and the request retried once;
 *  - a freed block merges with free neighbours of the same stream; a free
 *    block is reused on another stream only after cmb_up_stream_sync() on
 *    the stream that freed it (so a GPU never sees a block in use by two
 *    streams at once);
 *  - segments go back to the upstream only on trim() and destroy().
 * Bounds: allocate is O(1) plus the first-fit scan of one class, free is
 * O(1) plus O(log n) for the largest-free heap; stats() is O(1).
 *
 * Constants:
 *  round   = 256 B default (CMB_SAMPLE_DEFAULT_ROUND): the alignment every
 *            allocator of the suite guarantees (cmb_allocator.h);
 *  segment = 2 MiB default: one page of the VMM upstream, the device's
 *            granularity on H100/H200 (cmb_upstream.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmb_allocator.h"

#ifndef CMB_SAMPLE_DEFAULT_ROUND
#define CMB_SAMPLE_DEFAULT_ROUND 256u
#endif
#define SAMPLE_DEFAULT_SEGMENT (2ull << 20)
#define SAMPLE_CLASSES 64

#define SAMPLE_EXPORT __attribute__((visibility("default")))

typedef struct segment segment;

typedef struct block {
    struct block *prev_phys, *next_phys; /* neighbours by address, in one segment */
    struct block *prev_free, *next_free; /* in its size class, while free       */
    segment *seg;
    uintptr_t addr;
    size_t size;
    size_t heap_index;                   /* in the largest-free heap, while free */
    cmb_stream stream;                   /* last stream that used it             */
    int free;
} block;

struct segment {
    segment *prev, *next;
    block *first;
    uintptr_t base;
    size_t size;
};

typedef struct live_map {                /* open addressing: addr -> live block */
    block **slots;
    size_t cap, n;
} live_map;

typedef struct free_heap {               /* max-heap of free blocks by size */
    block **items;
    size_t n, cap;
} free_heap;

typedef struct pool {
    cmb_upstream *up;
    size_t round;
    size_t segment_size;
    block *classes[SAMPLE_CLASSES];
    uint64_t class_bits;
    free_heap heap;
    live_map live;
    segment *segments;
    cmb_alloc_stats st;
} pool;

/* --- small helpers --------------------------------------------------------------------- */

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) & ~(a - 1);
}

static int class_of(size_t size)
{
    return 63 - __builtin_clzll((unsigned long long)size);
}

static int is_pow2(uint64_t x)
{
    return x && !(x & (x - 1));
}

/* --- options: the plug-in reads its own (it links nothing of the suite) ----------------- */

static int parse_size(const char *text, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {{"", 1}, {"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}};
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *text == '-')
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (!strcmp(end, units[i].suffix)) {
            if (v > UINT64_MAX / units[i].mult)
                return -1;
            *out = v * units[i].mult;
            return 0;
        }
    }
    return -1;
}

/* Declared for the suite (ABI version 2): it refuses a bad option before
 * a run and --list shows these; the plug-in still reads its own. */
static const cmb_option_decl sample_options[] = {
    CMB_OPTION_EX("round", CMB_OPT_SIZE, "(256B; CMB_SAMPLE_DEFAULT_ROUND as built)", "256B", "1GiB", "B",
                  "every request is rounded up to this, a power of two", NULL, CMB_OPT_POW2, NULL),
    CMB_OPTION("segment", CMB_OPT_SIZE, "2MiB", "0", "1TiB", "B",
               "the least the pool takes from the upstream at a time (at least round)"),
    CMB_OPTION_END};

static cmb_status read_options(const cmb_config *cfg, size_t *round, size_t *segment_size)
{
    uint64_t r = CMB_SAMPLE_DEFAULT_ROUND, s = SAMPLE_DEFAULT_SEGMENT;
    for (size_t i = 0; i < cfg->n_options; i++) {
        const cmb_option *o = &cfg->options[i];
        uint64_t *dst = !strcmp(o->key, "round") ? &r : !strcmp(o->key, "segment") ? &s : NULL;
        if (!dst) {
            snprintf(cfg->error, cfg->error_len, "sample-pool: unknown option '%s' (known: round, segment)",
                     o->key);
            return CMB_ERR_INVALID;
        }
        if (parse_size(o->value, dst)) {
            snprintf(cfg->error, cfg->error_len, "sample-pool: option %s=%s: expected a size such as 4096 or 4KiB",
                     o->key, o->value);
            return CMB_ERR_INVALID;
        }
    }
    if (!is_pow2(r) || r < 256 || r > (1ull << 30)) {
        snprintf(cfg->error, cfg->error_len, "sample-pool: round=%llu must be a power of two in [256 B, 1 GiB]",
                 (unsigned long long)r);
        return CMB_ERR_INVALID;
    }
    if (s < r || s > (1ull << 40)) {
        snprintf(cfg->error, cfg->error_len, "sample-pool: segment=%llu must lie in [round, 1 TiB]",
                 (unsigned long long)s);
        return CMB_ERR_INVALID;
    }
    *round = (size_t)r;
    *segment_size = round_up((size_t)s, (size_t)r);
    return CMB_OK;
}

/* --- live blocks: address -> block, linear probing with backward-shift delete ------------ */

static size_t map_slot(const live_map *m, uintptr_t addr)
{
    uint64_t h = (uint64_t)addr * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (m->cap - 1);
}

static int map_grow(live_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    block **slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    live_map bigger = {slots, cap, 0};
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i])
            continue;
        size_t j = map_slot(&bigger, m->slots[i]->addr);
        while (bigger.slots[j])
            j = (j + 1) & (cap - 1);
        bigger.slots[j] = m->slots[i];
        bigger.n++;
    }
    free(m->slots);
    *m = bigger;
    return 0;
}

static int map_put(live_map *m, block *b)
{
    if ((m->n + 1) * 2 > m->cap && map_grow(m))
        return -1;
    size_t i = map_slot(m, b->addr);
    while (m->slots[i])
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = b;
    m->n++;
    return 0;
}

static block *map_take(live_map *m, uintptr_t addr)
{
    if (!m->cap)
        return NULL;
    size_t i = map_slot(m, addr);
    while (m->slots[i] && m->slots[i]->addr != addr)
        i = (i + 1) & (m->cap - 1);
    block *found = m->slots[i];
    if (!found)
        return NULL;
    /* close the gap so later probes still find their entries */
    size_t hole = i;
    for (size_t j = (i + 1) & (m->cap - 1); m->slots[j]; j = (j + 1) & (m->cap - 1)) {
        size_t home = map_slot(m, m->slots[j]->addr);
        if (((j - home) & (m->cap - 1)) >= ((j - hole) & (m->cap - 1))) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole] = NULL;
    m->n--;
    return found;
}

/* --- largest free block: a max-heap by size ---------------------------------------------- */

static void heap_place(free_heap *h, size_t i, block *b)
{
    h->items[i] = b;
    b->heap_index = i;
}

static void heap_up(free_heap *h, size_t i)
{
    block *b = h->items[i];
    while (i > 0 && h->items[(i - 1) / 2]->size < b->size) {
        heap_place(h, i, h->items[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_place(h, i, b);
}

static void heap_down(free_heap *h, size_t i)
{
    block *b = h->items[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->items[c + 1]->size > h->items[c]->size)
            c++;
        if (h->items[c]->size <= b->size)
            break;
        heap_place(h, i, h->items[c]);
        i = c;
    }
    heap_place(h, i, b);
}

static int heap_push(free_heap *h, block *b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 256;
        block **items = realloc(h->items, cap * sizeof *items);
        if (!items)
            return -1;
        h->items = items;
        h->cap = cap;
    }
    heap_place(h, h->n++, b);
    heap_up(h, h->n - 1);
    return 0;
}

static void heap_remove(free_heap *h, block *b)
{
    size_t i = b->heap_index;
    block *last = h->items[--h->n];
    if (i == h->n)
        return;
    heap_place(h, i, last);
    heap_up(h, i);
    heap_down(h, last->heap_index);
}

/* --- free blocks: size classes plus the heap ----------------------------------------------- */

static int free_insert(pool *p, block *b)
{
    if (heap_push(&p->heap, b))
        return -1;
    int k = class_of(b->size);
    b->free = 1;
    b->prev_free = NULL;
    b->next_free = p->classes[k];
    if (b->next_free)
        b->next_free->prev_free = b;
    p->classes[k] = b;
    p->class_bits |= 1ull << k;
    return 0;
}

static void free_remove(pool *p, block *b)
{
    int k = class_of(b->size);
    if (b->prev_free)
        b->prev_free->next_free = b->next_free;
    else
        p->classes[k] = b->next_free;
    if (b->next_free)
        b->next_free->prev_free = b->prev_free;
    if (!p->classes[k])
        p->class_bits &= ~(1ull << k);
    heap_remove(&p->heap, b);
    b->free = 0;
}

static block *free_find(pool *p, size_t size)
{
    int k = class_of(size);
    for (block *b = p->classes[k]; b; b = b->next_free)
        if (b->size >= size)
            return b;
    uint64_t above = k + 1 < SAMPLE_CLASSES ? p->class_bits & (~0ull << (k + 1)) : 0;
    return above ? p->classes[__builtin_ctzll(above)] : NULL;
}

/* --- segments -------------------------------------------------------------------------------- */

static block *block_new(segment *s, uintptr_t addr, size_t size, cmb_stream stream)
{
    block *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->seg = s;
    b->addr = addr;
    b->size = size;
    b->stream = stream;
    return b;
}

static cmb_status segment_release(pool *p, segment *s)
{
    cmb_status st = cmb_up_free(p->up, (void *)s->base, s->size, s->first->stream);
    if (st != CMB_OK)
        return st;
    if (s->prev)
        s->prev->next = s->next;
    else
        p->segments = s->next;
    if (s->next)
        s->next->prev = s->prev;
    free(s->first);
    free(s);
    return CMB_OK;
}

/* Returns every wholly free segment to the upstream. */
static cmb_status release_free_segments(pool *p)
{
    cmb_status st = CMB_OK;
    for (segment *s = p->segments, *next; s; s = next) {
        next = s->next;
        if (!s->first->free || s->first->size != s->size)
            continue;
        free_remove(p, s->first);
        cmb_status r = segment_release(p, s);
        if (r != CMB_OK) {
            free_insert(p, s->first); /* keep it: the pool still owns it */
            st = r;
        }
    }
    return st;
}

static cmb_status segment_add(pool *p, size_t size, cmb_stream stream, block **out)
{
    segment *s = calloc(1, sizeof *s);
    if (!s)
        return CMB_ERR_HOST_NOMEM;
    void *base;
    cmb_status st = cmb_up_alloc(p->up, size, stream, &base);
    if (st == CMB_ERR_OOM && p->segments) {
        p->st.oom_retries++;
        release_free_segments(p);
        st = cmb_up_alloc(p->up, size, stream, &base);
    }
    if (st != CMB_OK)
        goto out_free_segment;
    s->base = (uintptr_t)base;
    s->size = size;
    s->first = block_new(s, s->base, size, stream);
    if (!s->first) {
        cmb_up_free(p->up, base, size, stream);
        st = CMB_ERR_HOST_NOMEM;
        goto out_free_segment;
    }
    s->next = p->segments;
    if (s->next)
        s->next->prev = s;
    p->segments = s;
    *out = s->first;
    return CMB_OK;

out_free_segment:
    free(s);
    return st;
}

/* --- the methods ------------------------------------------------------------------------------- */

static cmb_status sample_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    size_t round, segment_size;
    cmb_status st = read_options(cfg, &round, &segment_size);
    if (st != CMB_OK)
        return st;
    if (!up) {
        snprintf(cfg->error, cfg->error_len, "sample-pool: needs an upstream");
        return CMB_ERR_INVALID;
    }
    pool *p = calloc(1, sizeof *p);
    if (!p)
        return CMB_ERR_HOST_NOMEM;
    p->up = up;
    p->round = round;
    p->segment_size = segment_size;
    *state = p;
    return CMB_OK;
}

/* Merges b with its free neighbours of the same stream; returns the result. */
static block *coalesce(pool *p, block *b)
{
    block *n = b->next_phys, *prev = b->prev_phys;
    if (n && n->free && n->stream == b->stream) {
        free_remove(p, n);
        b->size += n->size;
        b->next_phys = n->next_phys;
        if (b->next_phys)
            b->next_phys->prev_phys = b;
        free(n);
    }
    if (prev && prev->free && prev->stream == b->stream) {
        free_remove(p, prev);
        prev->size += b->size;
        prev->next_phys = b->next_phys;
        if (prev->next_phys)
            prev->next_phys->prev_phys = prev;
        free(b);
        b = prev;
    }
    return b;
}

/* Carves `size` bytes off the front of free block b; the rest stays free. */
static cmb_status carve(pool *p, block *b, size_t size, cmb_stream stream)
{
    if (b->size - size >= p->round) {
        block *rest = block_new(b->seg, b->addr + size, b->size - size, b->stream);
        if (!rest)
            return CMB_ERR_HOST_NOMEM;
        if (free_insert(p, rest)) {
            free(rest);
            return CMB_ERR_HOST_NOMEM;
        }
        rest->prev_phys = b;
        rest->next_phys = b->next_phys;
        if (rest->next_phys)
            rest->next_phys->prev_phys = rest;
        b->next_phys = rest;
        b->size = size;
    }
    b->stream = stream;
    return CMB_OK;
}

static cmb_status sample_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    pool *p = state;
    if (size == 0 || size > SIZE_MAX - p->round)
        return CMB_ERR_INVALID;
    size_t need = round_up(size, p->round);
    block *b = free_find(p, need);
    cmb_status st;
    if (b) {
        if (b->stream != stream && (st = cmb_up_stream_sync(p->up, b->stream)) != CMB_OK)
            return st;
        free_remove(p, b);
    } else {
        size_t grow = need > p->segment_size ? need : p->segment_size;
        if ((st = segment_add(p, grow, stream, &b)) != CMB_OK)
            return st;
    }
    st = carve(p, b, need, stream);
    if (st == CMB_OK && map_put(&p->live, b))
        st = CMB_ERR_HOST_NOMEM;
    if (st != CMB_OK) {
        free_insert(p, coalesce(p, b));
        return st;
    }
    cmb_stat_increase(&p->st.requested, (int64_t)size);
    cmb_stat_increase(&p->st.allocated, (int64_t)b->size);
    cmb_stat_increase(&p->st.blocks, 1);
    *ptr = (void *)b->addr;
    return CMB_OK;
}

static cmb_status sample_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    pool *p = state;
    block *b = map_take(&p->live, (uintptr_t)ptr);
    if (!b)
        return CMB_ERR_INVALID;
    if (size > b->size) {
        map_put(&p->live, b); /* cannot fail: the slot was just freed */
        return CMB_ERR_INVALID;
    }
    cmb_stat_decrease(&p->st.requested, (int64_t)size);
    cmb_stat_decrease(&p->st.allocated, (int64_t)b->size);
    cmb_stat_decrease(&p->st.blocks, 1);
    b->stream = stream;
    b = coalesce(p, b);
    return free_insert(p, b) ? CMB_ERR_HOST_NOMEM : CMB_OK;
}

static cmb_status sample_trim(void *state)
{
    return release_free_segments(state);
}

static cmb_status sample_stats(void *state, cmb_alloc_stats *out)
{
    pool *p = state;
    *out = p->st;
    out->reserved.current = p->up->stats.held_current;
    out->reserved.peak = p->up->stats.held_peak;
    out->reserved.total = p->up->stats.held_total;
    out->largest_free = p->heap.n ? p->heap.items[0]->size : 0;
    out->upstream_allocs = p->up->stats.alloc_calls;
    out->upstream_frees = p->up->stats.free_calls;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                 CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM | CMB_STAT_OOM_RETRIES;
    return CMB_OK;
}

/* Returns every segment, live blocks included, as a pool destructor does. */
static cmb_status sample_destroy(void *state)
{
    pool *p = state;
    cmb_status st = CMB_OK;
    for (segment *s = p->segments, *next; s; s = next) {
        next = s->next;
        cmb_status r = cmb_up_free(p->up, (void *)s->base, s->size, s->first->stream);
        if (r != CMB_OK)
            st = r;
        for (block *b = s->first, *bn; b; b = bn) {
            bn = b->next_phys;
            free(b);
        }
        free(s);
    }
    free(p->live.slots);
    free(p->heap.items);
    free(p);
    return st;
}

static const cmb_allocator_methods sample_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "sample-pool",
    .summary = "sample plug-in: segregated-fit pool with coalescing (options round=, segment=)",
    .flags = CMB_ALLOC_USES_UPSTREAM,
    .create = sample_create,
    .allocate = sample_allocate,
    .deallocate = sample_deallocate,
    .trim = sample_trim,
    .stats = sample_stats,
    .destroy = sample_destroy,
    .last_error = NULL,
    .options = sample_options,
};

/* --- the entry point ------------------------------------------------------------------------- */

SAMPLE_EXPORT const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version)
{
    return abi_version == CMB_ALLOCATOR_ABI_VERSION ? &sample_methods : NULL;
}
