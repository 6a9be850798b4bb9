/* alloc_arena.c - "arena": RMM's arena_memory_resource.
 *
 * rmm::mr::arena_memory_resource (include/rmm/mr/device/arena_memory_resource.hpp,
 * detail/arena.hpp) splits one upstream allocation between a global arena
 * and per-stream arenas (per-thread arenas in RMM for the per-thread default
 * stream; every stream has its own arena here, as RMM gives every
 * non-default stream). The rules reproduced here:
 *
 *  - Creation takes ONE upstream block of `arena_size` bytes, by default
 *    free / 2 of the device, aligned down to 256 B; it must hold at least
 *    one superblock. The arena never asks the upstream for more and never
 *    gives memory back before destroy (trim does nothing).
 *  - Requests are rounded up to 256 B, or with `size_classes` to RMM's
 *    jemalloc-like table of 116 size classes (RMM_ARENA_USE_SIZE_CLASSES).
 *  - Memory is cut into superblocks of at least 1 MiB. The global arena
 *    keeps an address-ordered set of superblocks; empty, address-adjacent
 *    superblocks merge when they come back to it.
 *  - Requests above the superblock size go straight to the global arena:
 *    address-ordered first fit over its superblocks; an empty superblock
 *    with room for the request plus one more superblock is split so the
 *    request gets a superblock of exactly its size. Freeing one synchronises
 *    the stream it is freed on, then returns it to its superblock; a
 *    superblock that becomes empty merges back into the global set.
 *  - Smaller requests go to the stream's arena: address-ordered first fit
 *    over the arena's superblocks, first fit inside the superblock (split,
 *    remainder stays); when nothing fits the arena acquires a superblock
 *    from the global arena (first fit; an empty one is split to 1 MiB).
 *    Freed blocks coalesce with their free neighbours in the superblock;
 *    superblocks stay in the arena, even when empty.
 *  - A free on a stream whose arena does not hold the block synchronises
 *    that stream and searches the other arenas, then the global arena.
 *  - Out of memory: synchronise the device, return every superblock of
 *    every arena (empty or not) to the global arena ("defragment"), retry
 *    once, then fail; the dump RMM can write to a log goes to last_error.
 *
 * Constants (include/rmm/mr/device/detail/arena.hpp):
 *   superblock::minimum_size = 1 MiB    (also the small/large threshold)
 *   superblock::maximum_size = 1 TiB    (a sanity bound)
 *   global_arena default_size() = free / 2, aligned down to 256 B
 *   CUDA_ALLOCATION_ALIGNMENT = 256 B   (include/rmm/aligned.hpp)
 *
 * Bounds: RMM scans its std::sets linearly; here the superblock sets and
 * the free blocks of every superblock are treaps augmented with the largest
 * free block of each subtree, so address-ordered first fit is O(log n) and
 * picks the same block. A free searches the owning superblock by address
 * (floor) in O(log n). stats() is O(streams).
 *
 * The per-stream arenas live in the shared stream table of stream_ordered.h
 * (its lookup and teardown only: an arena records no events and has no
 * cross-stream search of stream_ordered_memory_resource, as in RMM, where
 * arena_memory_resource derives from device_memory_resource directly).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_size.h"
#include "cmb_allocator.h"
#include "options.h"
#include "stream_ordered.h"
#include "../common/cmb_assert.h"
#include "../common/cmb_fittree.h"

/* CUDA_ALLOCATION_ALIGNMENT = 256 B (include/rmm/aligned.hpp) */
#define ARENA_ALIGN 256u
/* superblock::minimum_size = 1 MiB (include/rmm/mr/device/detail/arena.hpp) */
#define SUPERBLOCK_MIN (1ull << 20)
/* superblock::maximum_size = 1 TiB (include/rmm/mr/device/detail/arena.hpp) */
#define SUPERBLOCK_MAX (1ull << 40)

/* --- size classes (detail/arena.hpp align_to_size_class) ----------------------------- */

#define KiB(x) ((uint64_t)(x) << 10)
#define MiB(x) ((uint64_t)(x) << 20)
#define GiB(x) ((uint64_t)(x) << 30)

/* jemalloc-style classes: four per doubling. 54 KiB (not 56) is as in RMM's table. */
static const uint64_t size_classes[] = {
    256, 512, 768, 1024, 1280, 1536, 1792, 2048,                             /* spacing 256 B */
    2560, 3072, 3584, 4096,                                                  /* 512 B */
    KiB(5), KiB(6), KiB(7), KiB(8), KiB(10), KiB(12), KiB(14), KiB(16),     /* 1, 2 KiB */
    KiB(20), KiB(24), KiB(28), KiB(32), KiB(40), KiB(48), KiB(54), KiB(64), /* 4, 8 KiB */
    KiB(80), KiB(96), KiB(112), KiB(128), KiB(160), KiB(192), KiB(224), KiB(256),
    KiB(320), KiB(384), KiB(448), KiB(512), KiB(640), KiB(768), KiB(896), MiB(1),
    KiB(1280), KiB(1536), KiB(1792), MiB(2), KiB(2560), MiB(3), KiB(3584), MiB(4),
    MiB(5), MiB(6), MiB(7), MiB(8), MiB(10), MiB(12), MiB(14), MiB(16),
    MiB(20), MiB(24), MiB(28), MiB(32), MiB(40), MiB(48), MiB(56), MiB(64),
    MiB(80), MiB(96), MiB(112), MiB(128), MiB(160), MiB(192), MiB(224), MiB(256),
    MiB(320), MiB(384), MiB(448), MiB(512), MiB(640), MiB(768), MiB(896), GiB(1),
    MiB(1280), MiB(1536), MiB(1792), GiB(2), MiB(2560), GiB(3), MiB(3584), GiB(4),
    GiB(5), GiB(6), GiB(7), GiB(8), GiB(10), GiB(12), GiB(14), GiB(16),
    GiB(20), GiB(24), GiB(28), GiB(32), GiB(40), GiB(48), GiB(56), GiB(64),
    GiB(80), GiB(96), GiB(112), GiB(128), GiB(160), GiB(192), GiB(224), GiB(256),
};
#define N_SIZE_CLASSES (sizeof size_classes / sizeof size_classes[0])

static uint64_t align_to_size_class(uint64_t v)
{
    size_t lo = 0, hi = N_SIZE_CLASSES;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (size_classes[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < N_SIZE_CLASSES ? size_classes[lo] : UINT64_MAX; /* RMM's catch-all */
}

/* --- types ------------------------------------------------------------------------- */

typedef struct superblock {
    cmb_ftnode node; /* in a set of superblocks: key = start, size = largest free block */
    uint64_t size;   /* bytes the superblock spans */
    cmb_fittree free; /* its free blocks: key = start, size = bytes */
} superblock;

typedef struct stream_arena {
    cmb_so_list so; /* the stream (no event: arenas synchronise instead) */
    cmb_fittree supers;
} stream_arena;

typedef struct arena_mr {
    cmb_upstream *up;
    uintptr_t base;     /* the one upstream block */
    uint64_t arena_size;
    uint64_t sb_min;    /* superblock::minimum_size */
    int use_size_classes;
    cmb_fittree global; /* the global arena's superblocks */
    cmb_stream_ordered arenas; /* the stream arenas (stream_arena) */
    cmb_ftnode *spare_blocks; /* recycled records, linked through left */
    superblock *spare_supers;
    cmb_alloc_stats st;
    char last_error[240];
    CMB_DEBUG_ONLY(uint64_t ops;)
} arena_mr;

static inline uint64_t align_up(uint64_t x, uint64_t a)
{
    return cmb_size_round_up_sat(x, a); /* saturates: a huge x never wraps to a small one */
}

/* --- records -------------------------------------------------------------------------- */

static cmb_ftnode *node_new(arena_mr *a, uint64_t key, uint64_t size)
{
    cmb_ftnode *n = a->spare_blocks;
    if (n)
        a->spare_blocks = n->left;
    else if (!(n = malloc(sizeof *n)))
        return NULL;
    n->key = key;
    n->size = size;
    return n;
}

static void node_put(arena_mr *a, cmb_ftnode *n)
{
    n->left = a->spare_blocks;
    a->spare_blocks = n;
}

static superblock *super_new(arena_mr *a, uint64_t start, uint64_t size)
{
    superblock *s = a->spare_supers;
    if (s)
        a->spare_supers = (superblock *)s->node.left;
    else if (!(s = malloc(sizeof *s)))
        return NULL;
    cmb_ftnode *whole = node_new(a, start, size);
    if (!whole) {
        s->node.left = (cmb_ftnode *)a->spare_supers;
        a->spare_supers = s;
        return NULL;
    }
    cmb_ft_init(&s->free);
    cmb_ft_insert(&s->free, whole);
    s->node.key = start;
    s->node.size = size;
    s->size = size;
    return s;
}

static void super_put(arena_mr *a, superblock *s)
{
    s->node.left = (cmb_ftnode *)a->spare_supers;
    a->spare_supers = s;
}

/* --- superblock ----------------------------------------------------------------------- */

static inline superblock *super_of(cmb_ftnode *n)
{
    return cmb_ft_entry(n, superblock, node);
}

static int super_empty(const superblock *s)
{
    return s->free.count == 1 && s->free.root->size == s->size;
}

static int super_contains(const superblock *s, uint64_t ptr, uint64_t bytes)
{
    return s->node.key <= ptr && ptr + bytes <= s->node.key + s->size;
}

/* superblock::first_fit: first free block by address that fits; split it. */
static uint64_t super_first_fit(arena_mr *a, superblock *s, uint64_t bytes)
{
    cmb_ftnode *b = cmb_ft_first_fit(&s->free, bytes);
    uint64_t ptr = b->key;
    if (b->size > bytes) {
        cmb_ft_update(&s->free, b, b->key + bytes, b->size - bytes);
    } else {
        cmb_ft_erase(&s->free, b);
        node_put(a, b);
    }
    return ptr;
}

/* superblock::coalesce: give [ptr, ptr+bytes) back, merging with neighbours. */
static cmb_status super_coalesce(arena_mr *a, superblock *s, uint64_t ptr, uint64_t bytes)
{
    cmb_ftnode *prev = cmb_ft_floor(&s->free, ptr);
    cmb_ftnode *next = cmb_ft_ceil(&s->free, ptr);
    int merge_prev = prev && prev->key + prev->size == ptr;
    int merge_next = next && ptr + bytes == next->key;

    if (merge_prev && merge_next) {
        uint64_t size = prev->size + bytes + next->size;
        cmb_ft_erase(&s->free, next);
        node_put(a, next);
        cmb_ft_update(&s->free, prev, prev->key, size);
    } else if (merge_prev) {
        cmb_ft_update(&s->free, prev, prev->key, prev->size + bytes);
    } else if (merge_next) {
        cmb_ft_update(&s->free, next, ptr, next->size + bytes);
    } else {
        cmb_ftnode *n = node_new(a, ptr, bytes);
        if (!n)
            return CMB_ERR_HOST_NOMEM;
        cmb_ft_insert(&s->free, n);
    }
    return CMB_OK;
}

/* The superblock's largest free block changed: tell the set it is in. */
static void super_refresh(cmb_fittree *set, superblock *s)
{
    uint64_t m = cmb_ft_max(&s->free);
    if (m != s->node.size)
        cmb_ft_update(set, &s->node, s->node.key, m);
}

static void super_link(cmb_fittree *set, superblock *s)
{
    s->node.size = cmb_ft_max(&s->free);
    cmb_ft_insert(set, &s->node);
}

/* The superblock of `set` holding [ptr, ptr+bytes), or NULL. */
static superblock *super_find(const cmb_fittree *set, uint64_t ptr, uint64_t bytes)
{
    cmb_ftnode *n = cmb_ft_floor(set, ptr);
    if (!n || !super_contains(super_of(n), ptr, bytes))
        return NULL;
    return super_of(n);
}

/* An empty superblock absorbs the empty superblock that follows it. */
static void super_absorb(arena_mr *a, superblock *s, superblock *t)
{
    uint64_t size = s->size + t->size;
    cmb_ft_update(&s->free, s->free.root, s->node.key, size);
    s->size = size;
    cmb_ftnode *whole = t->free.root;
    cmb_ft_erase(&t->free, whole);
    node_put(a, whole);
    super_put(a, t);
}

/* --- global arena ------------------------------------------------------------------- */

/* global_arena::coalesce: put s back, merging with empty neighbours. */
static void global_coalesce(arena_mr *a, superblock *s)
{
    cmb_fittree *g = &a->global;
    int empty = super_empty(s);
    cmb_ftnode *pn = cmb_ft_floor(g, s->node.key);
    cmb_ftnode *nn = cmb_ft_ceil(g, s->node.key);
    superblock *prev = pn ? super_of(pn) : NULL, *next = nn ? super_of(nn) : NULL;
    int merge_prev = empty && prev && super_empty(prev) && prev->node.key + prev->size == s->node.key;
    int merge_next = empty && next && super_empty(next) && s->node.key + s->size == next->node.key;

    if (merge_next) {
        cmb_ft_erase(g, &next->node);
        super_absorb(a, s, next);
    }
    if (merge_prev) {
        cmb_ft_erase(g, &prev->node);
        super_absorb(a, prev, s);
        s = prev;
    }
    super_link(g, s);
}

/* global_arena::first_fit: the first superblock that fits, taken out of the
 * set; an empty one big enough is split to max(minimum, bytes). */
static superblock *global_first_fit(arena_mr *a, uint64_t bytes)
{
    cmb_ftnode *n = cmb_ft_first_fit(&a->global, bytes);
    if (!n)
        return NULL;
    superblock *s = super_of(n);
    cmb_ft_erase(&a->global, n);
    uint64_t min_size = bytes > a->sb_min ? bytes : a->sb_min;
    if (super_empty(s) && s->size >= min_size + a->sb_min) {
        superblock *tail = super_new(a, s->node.key + min_size, s->size - min_size);
        if (tail) {
            s->size = min_size;
            cmb_ft_update(&s->free, s->free.root, s->node.key, min_size);
            super_link(&a->global, tail);
        } /* host OOM: hand out the whole superblock */
    }
    s->node.size = cmb_ft_max(&s->free);
    return s;
}

/* global_arena::allocate: a large block directly from the global arena. */
static uint64_t global_allocate(arena_mr *a, uint64_t bytes)
{
    superblock *s = global_first_fit(a, bytes);
    if (!s)
        return 0;
    uint64_t ptr = super_first_fit(a, s, bytes);
    super_link(&a->global, s);
    return ptr;
}

/* global_arena::deallocate (without the stream synchronisation). */
static int global_deallocate(arena_mr *a, uint64_t ptr, uint64_t bytes, cmb_status *st)
{
    superblock *s = super_find(&a->global, ptr, bytes);
    if (!s)
        return 0;
    cmb_ft_erase(&a->global, &s->node);
    *st = super_coalesce(a, s, ptr, bytes);
    if (super_empty(s))
        global_coalesce(a, s);
    else
        super_link(&a->global, s);
    return 1;
}

/* --- stream arenas -------------------------------------------------------------------- */

static stream_arena *arena_get(arena_mr *a, cmb_stream s)
{
    return (stream_arena *)cmb_so_list_of(&a->arenas, s);
}

static inline stream_arena *arena_at(const arena_mr *a, size_t i)
{
    return (stream_arena *)cmb_so_at(&a->arenas, i);
}

/* arena::allocate. */
static uint64_t arena_allocate(arena_mr *a, stream_arena *ar, uint64_t bytes)
{
    if (bytes > a->sb_min)
        return global_allocate(a, bytes);
    cmb_ftnode *n = cmb_ft_first_fit(&ar->supers, bytes);
    if (n) {
        superblock *s = super_of(n);
        uint64_t ptr = super_first_fit(a, s, bytes);
        super_refresh(&ar->supers, s);
        return ptr;
    }
    /* expand_arena: acquire a superblock from the global arena */
    superblock *s = global_first_fit(a, bytes);
    if (!s)
        return 0;
    uint64_t ptr = super_first_fit(a, s, bytes);
    super_link(&ar->supers, s);
    return ptr;
}

/* arena::deallocate(ptr, size): from this arena's own superblocks. */
static int arena_deallocate_own(arena_mr *a, stream_arena *ar, uint64_t ptr, uint64_t bytes, cmb_status *st)
{
    superblock *s = super_find(&ar->supers, ptr, bytes);
    if (!s)
        return 0;
    *st = super_coalesce(a, s, ptr, bytes);
    super_refresh(&ar->supers, s);
    return 1;
}

/* arena::clean: every superblock back to the global arena. */
static void arena_clean(arena_mr *a, stream_arena *ar)
{
    cmb_ftnode *n;
    while ((n = cmb_ft_first(&ar->supers))) {
        cmb_ft_erase(&ar->supers, n);
        global_coalesce(a, super_of(n));
    }
}

/* defragment: cudaDeviceSynchronize, then clean every arena. */
static void defragment(arena_mr *a)
{
    cmb_up_stream_sync(a->up, NULL);
    for (size_t i = 0; i < cmb_so_count(&a->arenas); i++)
        cmb_up_stream_sync(a->up, arena_at(a, i)->so.stream);
    for (size_t i = 0; i < cmb_so_count(&a->arenas); i++)
        arena_clean(a, arena_at(a, i));
}

/* --- out-of-memory dump (RMM writes it to rmm_arena_memory_dump.log) ---------------- */

static void note_oom(arena_mr *a, uint64_t bytes)
{
    uint64_t total_free = 0, max_free = 0, count = 0;
    for (cmb_ftnode *n = cmb_ft_first(&a->global); n; n = cmb_ft_ceil(&a->global, n->key + 1)) {
        superblock *s = super_of(n);
        for (cmb_ftnode *b = cmb_ft_first(&s->free); b; b = cmb_ft_ceil(&s->free, b->key + 1))
            total_free += b->size;
        if (s->node.size > max_free)
            max_free = s->node.size;
        count++;
    }
    double frag = total_free ? (1.0 - (double)max_free / (double)total_free) * 100.0 : 0.0;
    snprintf(a->last_error, sizeof a->last_error,
             "arena: out of memory allocating %llu B; global arena of %llu B: %llu superblocks, "
             "%llu B free, largest free block %llu B, fragmentation %.2f%%",
             (unsigned long long)bytes, (unsigned long long)a->arena_size, (unsigned long long)count,
             (unsigned long long)total_free, (unsigned long long)max_free, frag);
}

/* --- invariants ------------------------------------------------------------------------ */

/* One superblock: its free blocks sorted, coalesced and inside it; the set
 * it is in knows its largest free block. */
static int walk_super(const superblock *s, cmb_walk *w, uint64_t *free_bytes)
{
    CMB_WALK_CHECK(w, cmb_ft_validate(&s->free) == (long)s->free.count);
    CMB_WALK_CHECK(w, s->node.size == cmb_ft_max(&s->free));
    uint64_t end = s->node.key;
    int first = 1;
    for (cmb_ftnode *b = cmb_ft_first(&s->free); b; b = cmb_ft_ceil(&s->free, b->key + 1)) {
        CMB_WALK_CHECK(w, b->size > 0 && b->key % ARENA_ALIGN == 0);
        CMB_WALK_CHECK(w, b->key >= end && (first || b->key > end)); /* disjoint, coalesced */
        CMB_WALK_CHECK(w, super_contains(s, b->key, b->size));
        end = b->key + b->size;
        first = 0;
        *free_bytes += b->size;
    }
    return 0;
}

/* A set of superblocks: disjoint, inside the arena's one upstream block. */
static int walk_set(const arena_mr *a, const cmb_fittree *set, cmb_walk *w, uint64_t *spanned, uint64_t *free_bytes)
{
    uint64_t end = a->base;
    CMB_WALK_CHECK(w, cmb_ft_validate(set) == (long)set->count);
    for (cmb_ftnode *n = cmb_ft_first(set); n; n = cmb_ft_ceil(set, n->key + 1)) {
        const superblock *s = super_of(n);
        CMB_WALK_CHECK(w, s->node.key >= end && s->node.key + s->size <= a->base + a->arena_size);
        if (walk_super(s, w, free_bytes))
            return 1;
        end = s->node.key + s->size;
        *spanned += s->size;
    }
    return 0;
}

/* The superblocks of every set cover the arena exactly once (the sets are
 * disjoint by address: their spans add up to the arena), and the arena is
 * its free blocks plus its allocated bytes. */
int _cmb_arena_walk(const void *state, cmb_walk *w)
{
    const arena_mr *a = state;
    uint64_t spanned = 0, free_bytes = 0;
    if (walk_set(a, &a->global, w, &spanned, &free_bytes))
        return 1;
    for (size_t i = 0; i < cmb_so_count(&a->arenas); i++)
        if (walk_set(a, &arena_at(a, i)->supers, w, &spanned, &free_bytes))
            return 1;
    CMB_WALK_CHECK(w, spanned == a->arena_size);
    CMB_WALK_CHECK(w, free_bytes + (uint64_t)a->st.allocated.current == a->arena_size);
    return 0;
}

/* --- the method table ------------------------------------------------------------------ */

static cmb_status arena_destroy(void *state);
static const cmb_so_hooks arena_table_hooks; /* below, beside arena_destroy */

/* arena_memory_resource(upstream, arena_size) and detail/arena.hpp's
 * superblock::minimum_size (1 MiB) and maximum_size (1 TiB). */
static const cmb_option_decl arena_options[] = {
    CMB_OPTION("arena_size", CMB_OPT_SIZE, "(half the free memory)", "0", NULL, "B",
     "the one upstream allocation the arena lives in (RMM's global_arena default_size: free / 2)"),
    CMB_OPTION("superblock_size", CMB_OPT_SIZE, "1MiB", "4KiB", "1TiB", "B",
     "superblock::minimum_size: the smallest superblock, and the size above which requests skip the "
     "per-stream arenas; a multiple of 256"),
    CMB_OPTION("size_classes", CMB_OPT_BOOL, "false", NULL, NULL, NULL,
     "round requests to RMM's 116 size classes (RMM_ARENA_USE_SIZE_CLASSES) instead of to 256 B"),
    CMB_OPTION_END};

static cmb_status read_options(arena_mr *a, const cmb_config *cfg)
{
    cmb_options o;
    cmb_status st = cmb_options_read(&o, "arena", arena_options, cfg);
    if (st != CMB_OK)
        return st;
    int has_size = cmb_opt_given(&o, "arena_size");
    uint64_t size = cmb_opt_size(&o, "arena_size");
    a->sb_min = cmb_opt_size(&o, "superblock_size");
    a->use_size_classes = cmb_opt_bool(&o, "size_classes");
    if (a->sb_min < 4096 || a->sb_min % ARENA_ALIGN || a->sb_min > SUPERBLOCK_MAX) {
        snprintf(cfg->error, cfg->error_len, "arena: superblock_size must be a multiple of 256 B, "
                                             "from 4KiB to 1TiB");
        return CMB_ERR_INVALID;
    }
    if (!has_size) {
        size_t free_b = 0, total_b = 0;
        st = cmb_up_mem_info(a->up, &free_b, &total_b);
        if (st != CMB_OK) {
            snprintf(cfg->error, cfg->error_len, "arena: cannot read free device memory: %s", cmb_status_str(st));
            return st;
        }
        size = free_b / 2;
    }
    a->arena_size = size / ARENA_ALIGN * ARENA_ALIGN;
    if (a->arena_size < a->sb_min) {
        snprintf(cfg->error, cfg->error_len, "arena: arena size %llu B is smaller than the minimum superblock size",
                 (unsigned long long)a->arena_size);
        return CMB_ERR_INVALID;
    }
    return CMB_OK;
}

static cmb_status arena_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    if (!up)
        return CMB_ERR_INVALID;
    arena_mr *a = calloc(1, sizeof *a);
    if (!a)
        return CMB_ERR_HOST_NOMEM;
    a->up = up;
    cmb_ft_init(&a->global);
    cmb_so_init(&a->arenas, up, &arena_table_hooks, a);
    cmb_status st = read_options(a, cfg);
    if (st != CMB_OK)
        goto out_free;
    void *base;
    st = cmb_up_alloc(up, a->arena_size, NULL, &base);
    if (st != CMB_OK) {
        snprintf(cfg->error, cfg->error_len, "arena: the upstream cannot give the arena of %llu B: %s",
                 (unsigned long long)a->arena_size, cmb_status_str(st));
        goto out_free;
    }
    a->base = (uintptr_t)base;
    superblock *s = super_new(a, a->base, a->arena_size);
    if (!s) {
        st = CMB_ERR_HOST_NOMEM;
        goto out_destroy;
    }
    super_link(&a->global, s);
    *state = a;
    return CMB_OK;

out_destroy:
    arena_destroy(a);
    return st;
out_free:
    free(a);
    return st;
}

static uint64_t round_request(const arena_mr *a, uint64_t size)
{
    return a->use_size_classes ? align_to_size_class(size) : align_up(size, ARENA_ALIGN);
}

static cmb_status arena_alloc_method(void *state, size_t size, cmb_stream stream, void **ptr)
{
    arena_mr *a = state;
    if (size == 0)
        return CMB_ERR_INVALID;
    if (cmb_size_refuse(size, "arena", a->last_error, sizeof a->last_error))
        return CMB_ERR_OOM;
    uint64_t bytes = round_request(a, size);
    stream_arena *ar = arena_get(a, stream);
    if (!ar)
        return CMB_ERR_HOST_NOMEM;
    uint64_t p = bytes <= a->arena_size ? arena_allocate(a, ar, bytes) : 0;
    if (!p) {
        defragment(a);
        a->st.oom_retries++;
        p = bytes <= a->arena_size ? arena_allocate(a, ar, bytes) : 0;
        if (!p) {
            note_oom(a, bytes);
            return CMB_ERR_OOM;
        }
    }
    *ptr = (void *)(uintptr_t)p;
    cmb_stat_increase(&a->st.requested, (int64_t)size);
    cmb_stat_increase(&a->st.allocated, (int64_t)bytes);
    cmb_stat_increase(&a->st.blocks, 1);
    CMB_VALIDATE_TICK(a->ops, _cmb_arena_walk, a);
    return CMB_OK;
}

/* deallocate_from_other_arena: the block moved out of this stream's arena. */
static int free_elsewhere(arena_mr *a, uint64_t ptr, uint64_t bytes, cmb_status *st)
{
    for (size_t i = 0; i < cmb_so_count(&a->arenas); i++)
        if (arena_deallocate_own(a, arena_at(a, i), ptr, bytes, st))
            return 1;
    return global_deallocate(a, ptr, bytes, st);
}

static cmb_status arena_free_method(void *state, void *ptr, size_t size, cmb_stream stream)
{
    arena_mr *a = state;
    cmb_status st = CMB_OK;
    if (!ptr || size == 0)
        return CMB_ERR_INVALID;
    uint64_t bytes = round_request(a, size), p = (uint64_t)(uintptr_t)ptr;
    stream_arena *ar = arena_get(a, stream);
    if (!ar)
        return CMB_ERR_HOST_NOMEM;
    int found = 0;
    if (bytes > a->sb_min) {
        cmb_up_stream_sync(a->up, stream); /* global_arena::deallocate(ptr, size, stream) */
        found = global_deallocate(a, p, bytes, &st);
    }
    if (!found)
        found = arena_deallocate_own(a, ar, p, bytes, &st);
    if (!found) {
        cmb_up_stream_sync(a->up, stream); /* another arena will reuse it */
        found = free_elsewhere(a, p, bytes, &st);
    }
    if (!found) {
        snprintf(a->last_error, sizeof a->last_error, "arena: free of %p (%zu B): allocation not found", ptr, size);
        return CMB_ERR_INVALID;
    }
    cmb_stat_decrease(&a->st.requested, (int64_t)size);
    cmb_stat_decrease(&a->st.allocated, (int64_t)bytes);
    cmb_stat_decrease(&a->st.blocks, 1);
    CMB_VALIDATE_TICK(a->ops, _cmb_arena_walk, a);
    return st;
}

/* RMM's arena never gives memory back before it is destroyed. */
static cmb_status arena_trim(void *state)
{
    CMB_VALIDATE_NOW(_cmb_arena_walk, state);
    (void)state;
    return CMB_OK;
}

static cmb_status arena_stats(void *state, cmb_alloc_stats *out)
{
    arena_mr *a = state;
    *out = a->st;
    out->reserved.current = a->up->stats.held_current;
    out->reserved.peak = a->up->stats.held_peak;
    out->reserved.total = a->up->stats.held_total;
    out->largest_free = cmb_ft_max(&a->global);
    for (size_t i = 0; i < cmb_so_count(&a->arenas); i++) {
        uint64_t m = cmb_ft_max(&arena_at(a, i)->supers);
        if (m > out->largest_free)
            out->largest_free = m;
    }
    out->upstream_allocs = a->up->stats.alloc_calls;
    out->upstream_frees = a->up->stats.free_calls;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                 CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM | CMB_STAT_OOM_RETRIES;
    return CMB_OK;
}

static void free_node(cmb_ftnode *n, void *arg)
{
    (void)arg;
    free(n);
}

static void free_super(cmb_ftnode *n, void *arg)
{
    superblock *s = super_of(n);
    (void)arg;
    cmb_ft_clear(&s->free, free_node, NULL);
    free(s);
}

static void stream_arena_init(void *ctx, cmb_so_list *l)
{
    (void)ctx;
    cmb_ft_init(&((stream_arena *)l)->supers);
}

static void stream_arena_fini(void *ctx, cmb_so_list *l)
{
    (void)ctx;
    cmb_ft_clear(&((stream_arena *)l)->supers, free_super, NULL);
}

/* Only the stream table of the helper: no get_block hooks. */
static const cmb_so_hooks arena_table_hooks = {
    .list_size = sizeof(stream_arena),
    .list_init = stream_arena_init,
    .list_fini = stream_arena_fini,
};

static cmb_status arena_destroy(void *state)
{
    arena_mr *a = state;
    cmb_status st = CMB_OK;
    cmb_so_destroy(&a->arenas); /* each arena's superblocks: stream_arena_fini */
    cmb_ft_clear(&a->global, free_super, NULL);
    if (a->base)
        st = cmb_up_free(a->up, (void *)a->base, a->arena_size, NULL);
    while (a->spare_blocks) {
        cmb_ftnode *n = a->spare_blocks;
        a->spare_blocks = n->left;
        free(n);
    }
    while (a->spare_supers) {
        superblock *s = a->spare_supers;
        a->spare_supers = (superblock *)s->node.left;
        free(s);
    }
    free(a);
    return st;
}

static const char *arena_last_error(void *state)
{
    arena_mr *a = state;
    return a->last_error[0] ? a->last_error : NULL;
}

static cmb_status arena_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out);

const cmb_allocator_methods cmb_arena_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "arena",
    .summary = "RMM arena_memory_resource: global arena of 1 MiB+ superblocks, per-stream arenas, "
               "address-ordered first fit",
    .flags = CMB_ALLOC_USES_UPSTREAM,
    .create = arena_create,
    .allocate = arena_alloc_method,
    .deallocate = arena_free_method,
    .trim = arena_trim,
    .stats = arena_stats,
    .destroy = arena_destroy,
    .last_error = arena_last_error,
    .options = arena_options,
    .free_account = arena_free_account,
};

/* --- free memory by reason (--explain-oom) ------------------------------------------- */

static void account_super(const superblock *s, uint64_t rounded, cmb_free_reason other, cmb_free_account *out)
{
    for (const cmb_ftnode *n = cmb_ft_first(&s->free); n; n = cmb_ft_ceil(&s->free, n->key + 1)) {
        out->bytes[other != CMB_FREE_USABLE ? other : n->size >= rounded ? CMB_FREE_USABLE : CMB_FREE_TOO_SMALL] +=
            n->size;
        if (n->size > out->largest_free)
            out->largest_free = n->size;
    }
}

static void account_supers(const cmb_fittree *t, uint64_t rounded, cmb_free_reason other, cmb_free_account *out)
{
    for (const cmb_ftnode *n = cmb_ft_first(t); n; n = cmb_ft_ceil(t, n->key + 1))
        account_super((const superblock *)(const void *)n, rounded, other, out);
}

/* Free blocks of another stream's arena serve only that stream; in the
 * global arena and the request's own, a block smaller than the rounded
 * request is too small (the failed request already returned every
 * superblock to the global arena, RMM's defragment). */
static cmb_status arena_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out)
{
    const arena_mr *a = state;
    if (!size || !out || size > SUPERBLOCK_MAX)
        return CMB_ERR_INVALID;
    memset(out, 0, sizeof *out);
    out->rounded = a->use_size_classes ? align_to_size_class(size) : align_up(size, ARENA_ALIGN);
    account_supers(&a->global, out->rounded, CMB_FREE_USABLE, out);
    for (size_t i = 0; i < cmb_so_count(&a->arenas); i++) {
        const stream_arena *sa = (const stream_arena *)cmb_so_at(&a->arenas, i);
        account_supers(&sa->supers, out->rounded, sa->so.stream == stream ? CMB_FREE_USABLE : CMB_FREE_OTHER_STREAM,
                       out);
    }
    return CMB_OK;
}
