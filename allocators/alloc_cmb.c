/* alloc_cmb.c - "cmb": the suite's own allocator. Byte-granular placement in
 * virtual address space, page-granular physical memory, a budget that keeps
 * the pages held near the most the program ever needed, and stream-ordered
 * reuse. It needs an upstream with virtual memory (vmm on a GPU, or sim).
 *
 * Algorithm
 *  - Two heaps: requests below small_max (1 MiB, PyTorch's kSmallSize) and
 *    the rest, so long-lived small blocks do not pin pages among large ones.
 *    Each heap owns arenas: virtual ranges reserved once (cmb_up_va_reserve,
 *    as large as the device, twice that for the large heap). An arena is
 *    tiled by blocks: live, binned (see below), free, and holes. Requests are
 *    rounded to 512 B (PyTorch's kMinBlockSize) and packed next to each
 *    other, so neighbouring blocks share their boundary pages: memory is
 *    placed to the byte, while physical memory is taken and returned a page
 *    (the upstream's granularity, 2 MiB on H100/H200) at a time.
 *  - A free block is always mapped; a hole is a page-aligned range with no
 *    page mapped. Pages lying wholly inside free blocks are "cached": held,
 *    but serving no live block. needed = mapped - cached pages.
 *  - allocate: (1) a fast bin of the stream holding a block of exactly the
 *    rounded size (dlmalloc's fastbins, glibc malloc/malloc.c: freed blocks
 *    kept uncoalesced in per-size LIFO lists): O(1), no tree. (2) Otherwise
 *    the stream's bins are coalesced back, and the smallest free block that
 *    fits and that this stream may use is split (best fit by size, then
 *    address; no upstream call). (3) Otherwise every stream's bins are
 *    flushed, frees whose stream order is known complete are harvested
 *    (below), and (2) is tried again. (4) Otherwise the heap grows: every
 *    hole is a candidate, with the usable free blocks on either side of it
 *    (PyTorch's expandable segments grow a free block into the unmapped
 *    space after it: find_expandable_block in
 *    c10/cuda/CUDACachingAllocator.cpp, v2.11); the block goes where the
 *    fewest new pages must be mapped (left-aligned on the free block before
 *    the hole, or right-aligned on the one after it), ties to the tightest
 *    span. Only those pages are mapped.
 *  - Handles: a growth maps the pages its block covers wholly as handles of
 *    at most `chunk` pages (one upstream map call each: cuMemCreate + cuMemMap
 *    + cuMemSetAccess of one handle on vmm), and a page it shares with a
 *    neighbour at either end as a handle of its own, so the block's interior
 *    can go once it is freed while the neighbour keeps the boundary page.
 *    Only whole handles are unmapped (the driver cannot unmap part of one),
 *    back to back in one call. Larger handles mean fewer calls but coarser
 *    reclaim: a live block placed over part of a cached handle pins all of
 *    it (chunk=1 is one page per handle, the finest).
 *  - Budget, the unmapping policy: before mapping n pages, if the pages held
 *    would exceed (1 + slack) x the high-water mark of needed pages
 *    (including this request), cached pages elsewhere are unmapped first,
 *    smallest free blocks first so large cached runs survive; a page whose
 *    free may still be in use by queued work waits for its stream first
 *    (below), so the choice never depends on how far the device lags; only
 *    whole handles inside free blocks are candidates. Physical
 *    memory thus moves from scattered free fragments to the place a new
 *    block needs it: GMLake's virtual memory stitching (Guo et al.,
 *    ASPLOS'24, arXiv:2401.08156; github.com/intelligent-machine-learning/glake).
 *    The handles taken move: the budget parks them (cuMemUnmap, the handle
 *    kept) and the growth maps them under the new block (cuMemMap +
 *    cuMemSetAccess) wherever one fits a handle it would otherwise create
 *    without making more handles; what is left is released before anything
 *    new is created, so the physical footprint never grows for it. An
 *    upstream that cannot park falls back to unmapping.
 *    When the candidates hold too few whole handles, the growth goes over
 *    the budget (over_budget counts it).
 *  - Hysteresis (keep): once the need has not risen for as many allocations
 *    as it took to reach its peak, the traffic is taken to repeat, and each
 *    growth widens the budget by the pages it maps, up to (1 + keep) x the
 *    peak requested bytes: a repeated pass then finds mapped the pages the
 *    last one moved, instead of moving them again.
 *  - Out of memory (the upstream refuses a page, or mem_info says a growth
 *    of 32 pages or more cannot fit): every stream with unordered frees is
 *    synchronized, every cached page is unmapped, and the request is tried
 *    once more (oom_retries), as PyTorch's release_cached_blocks does. A
 *    request that would not fit even then (its pages exceed the free and
 *    cached ones) fails at once and keeps the cache. trim() does the same
 *    release.
 *  - deallocate: to the stream's fast bin when freed on the stream it was
 *    allocated on (at most 4 per bin, one size per bin), otherwise into the
 *    free tree, coalescing with free neighbours whose stream constraints
 *    allow it.
 *
 * Stream order (at least as strict as PyTorch, whose blocks go back to the
 * pool of their allocation stream only): a block freed on stream S is
 * reused at once by S only. Every free takes a sequence number; a stream's
 * event is recorded (re-recorded) when another stream needs memory or when
 * memory is to be unmapped, and when it has completed, the frees it covers
 * are usable by every stream and may be unmapped. A block freed on a stream
 * other than the one it was allocated on needs both streams' order before
 * anyone reuses it, so it is safe whether the program meant PyTorch's rule
 * (the free is ordered on the allocation stream) or cudaFreeAsync's (on the
 * freeing stream). Nothing is unmapped before its frees are ordered: the
 * budget synchronizes the streams of the pages it chose that are not
 * (PyTorch synchronizes before cuMemUnmap too, ExpandableSegment::unmapHandles
 * in c10/cuda/CUDACachingAllocator.cpp, v2.11), except where those frees are
 * all on the stream the growth is for: the range is then parked with
 * park_after (its handles move at once, the old mapping goes when that
 * stream's queued work is done; stream order keeps the old work before the
 * new block's), which takes a synchronization out of the host's path in
 * host-bound steps (results/nvidia-h200/cmb-park-after); out of memory and
 * trim() synchronize every stream. Sim events complete at once; on a GPU they
 * mostly have not when a step's own frees are unmapped, and a budget that
 * skipped those pages held 2% more than sim replay predicted (docs/cmb.md).
 * With one stream, what cmb does is therefore the same whenever the device
 * completes its work: sim replay predicts it exactly. With several, reuse
 * by another stream still depends on when events complete, as PyTorch's.
 *
 * Bounds
 *  - peak reserved <= max((1 + slack) x peak needed pages x page,
 *    (1 + keep) x peak requested bytes), except where
 *    the only cached pages border the hole a block grows into, lie in
 *    handles a live block pins (chunk > 1), or a stream could not be
 *    synchronized, and where the smallest free blocks' cached pages, which
 *    the budget counts page by page when it picks candidates, lie in pinned
 *    handles: it does not look past them (over_budget counts each). needed <= sum over live blocks of the pages each touches, at
 *    most ceil(size / page) + 1 per block, and shared boundary pages make it
 *    close to requested / page for packed blocks.
 *  - a fast-bin hit: O(1), one hash lookup on free; a tree hit: O(log n) and
 *    at most 64 skipped blocks of other streams; growth: O(holes) plus at
 *    most 2 + ceil(pages / chunk) map calls and one unmap call per cached
 *    run it takes pages from, none on a cache hit, and a
 *    stream synchronization per other stream whose pages it unmaps before
 *    they are known complete (tests/test_policy_cmb_lag.c prints how many each
 *    sample trace takes with a device that never finishes work unprompted:
 *    most in the steps where the shapes change, few in a pass replayed again).
 *  - host memory: one record per block and per hole, one byte per page of
 *    reserved virtual space.
 *
 * Anchors: PyTorch's expandable segments (growth into unmapped space, stream
 * sync before unmapping); GMLake (physical pages moved under fresh virtual
 * ranges instead of splitting cached segments); STAlloc (Huang et al.,
 * EuroSys'26, arXiv:2507.16274) plans placements offline from a profiled
 * step to reach >95% efficiency: this policy is online and gets there by
 * paying page remaps instead of a plan. Metadata lives on the host only
 * (no boundary tags in device memory), as every policy of this suite.
 *
 * Options: slack (real in [0, 1], default 0.005), keep (real in [0, 1],
 * default 0.01; 0: no widening), small_max (size, default
 * 1 MiB), fast_bins (bool, default true), page (size: the unit mapped per
 * upstream call, a power of two from the upstream's granularity; default the
 * granularity), chunk (pages per handle, default 4: 8 MiB handles with 2 MiB
 * pages; 0 = a whole growth in one handle), fresh (allocations, default 0:
 * off; a growth avoids the pages the budget moved within that many, where
 * another place fits, so that fewer maps wait for work on an old mapping),
 * layout (a trace recorded from the program, default none: its allocations
 * laid out ahead by allocators/cmb_layout.c in one range mapped once, where
 * the requests that repeat the recording go; STAlloc's plan, online only in
 * the matching). See docs/cmb.md.
 */
#include <pthread.h>
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
#include "cmb_layout.h"
#include "options.h"

/* --- constants ------------------------------------------------------------- */

/* rounding of every request: kMinBlockSize = 512 (c10/cuda/CUDACachingAllocator.cpp, v2.11) */
#define CMB_ROUND 512u
/* small heap below kSmallSize = 1 MiB (c10/cuda/CUDACachingAllocator.cpp, v2.11) */
#define CMB_SMALL_MAX_DEFAULT (1ull << 20)
/* cached pages allowed above the peak need: fixed on the transformer and MLP
 * sample traces (peak held 1.009 and 1.010 x requested; docs/cmb.md) */
#define CMB_SLACK_DEFAULT 0.005
/* the budget's widening once traffic repeats, as a share of the peak
 * requested (results/sim/cmb-steady/keep): 0.01 takes the LLM decode trace
 * from 2.4 upstream calls a pass after the first to 2 calls in 99 passes and
 * moves no other PyTorch sample trace past its memory goals; 0.015 takes the
 * MLP sweep to 1.0211 after 100 passes, 0.03 the transformer to 1.0371 */
#define CMB_KEEP_DEFAULT "0.01"
/* pages per handle (one map call): 8 MiB with 2 MiB pages. The fewest calls
 * that keep every PyTorch sample trace within 1.015 x requested in one pass
 * (results/sim/cmb-steady/chunk-sweep): the transformer holds 1.0112 with
 * 139.9 upstream calls a pass after the first; 2 holds 1.0096 with 272.0,
 * 16 holds 1.0196 with 56.3 */
#define CMB_CHUNK_DEFAULT "4"
/* handles of up to this many pages move (park, unpark) instead of being
 * released and created again; longer ones (chunk=0) are unmapped */
#define CMB_PARK_MAX 16
/* fast bins per stream (direct-mapped by size) and blocks per bin */
#define CMB_NBINS 64
#define CMB_BIN_DEPTH 4
/* best fit skips at most this many free blocks other streams still own */
#define CMB_FIT_PROBES 64
/* growth of this many pages or more asks mem_info first, so a request that
 * cannot fit fails without mapping and unmapping thousands of pages */
#define CMB_MEMINFO_PAGES 32
/* a full consistency walk every this many operations in debug builds */
#ifndef CMB_VALIDATE_EVERY
#define CMB_VALIDATE_EVERY 4096
#endif
/* ranges the budget moved pages out of, remembered for the growths that follow */
#define CMB_MOVED_RING 64
#define CMB_FRESH_DEFAULT "0"
/* with a layout, a request may skip this many of the recording's
 * allocations it does not repeat (a tensor the recorded run made and this
 * one does not) and still take its planned place */
#define CMB_LAY_LOOKAHEAD 16

enum { B_LIVE = 1, B_BINNED, B_FREE, B_HOLE };
enum { H_SMALL, H_LARGE, N_HEAPS, H_LAYOUT = N_HEAPS };

/* --- data ------------------------------------------------------------------ */

typedef struct sstream sstream;
typedef struct arena arena;

typedef struct blk {
    cmb_rbnode node;        /* FREE: heap->free by (size, ptr); HOLE: heap->holes by ptr */
    uintptr_t ptr;
    uint64_t size;
    struct blk *prev, *next; /* address neighbours: they tile the arena */
    arena *ar;
    sstream *owner;         /* LIVE: allocation stream; BINNED/FREE: the stream the
                               free is ordered on, NULL once ordered for all */
    sstream *also;          /* FREE: a second stream whose order it needs, or NULL */
    uint64_t seq;           /* BINNED/FREE: sequence number of the free */
    struct blk *link;       /* BINNED: next in the bin */
    uint8_t state;
    uint8_t heap;
} blk;

struct arena {
    uintptr_t base;         /* page-aligned start of the tiles */
    uint64_t size;
    void *res_va;           /* the reservation as the upstream gave it */
    uint64_t res_size;
    uint64_t pages;
    uint8_t *mapped;        /* one byte per page */
    struct blk *first;      /* the block at base */
    int heap;
};

typedef struct heap {
    arena **arenas;
    size_t n_arenas, cap_arenas;
    cmb_rbtree free;        /* FREE blocks by (size, ptr) */
    cmb_rbtree holes;       /* HOLE blocks by ptr */
    uint64_t arena_size;
} heap;

typedef struct bin {
    uint64_t size;
    blk *head;
    uint32_t n;
} bin;

struct sstream {
    cmb_stream handle;
    uint64_t bin_mask;      /* bit i: bins[i] holds a block */
    uint64_t last_free;     /* seq of the newest free ordered on this stream */
    uint64_t ordered;       /* frees with seq <= ordered are complete on the device */
    uint64_t ev_seq;        /* what the event in flight covers */
    cmb_event ev;
    int has_event, ev_in_flight;
    bin bins[CMB_NBINS];
};

/* Counters beyond cmb_alloc_stats, for tests and docs/cmb.md. */
typedef struct cmb_cmb_counters {
    uint64_t bin_hits;        /* allocations served by a fast bin            */
    uint64_t tree_hits;       /* allocations served by a free block          */
    uint64_t grows;           /* allocations that mapped pages               */
    uint64_t map_calls;       /* upstream map calls (one handle each)        */
    uint64_t unmap_calls;     /* upstream unmap calls (whole handles)        */
    uint64_t budget_unmaps;   /* pages unmapped to stay within the budget    */
    uint64_t over_budget;     /* growths that found too few ordered pages    */
    uint64_t widened;         /* pages the budget widened by (keep)          */
    uint64_t moved;           /* handles moved (unpark) instead of created   */
    uint64_t events;          /* event records and re-records                */
    uint64_t syncs;           /* stream synchronizations                     */
    uint64_t parked_after;    /* park_after calls: moved behind the stream's
                                 own work, with no synchronization          */
    uint64_t arenas;          /* virtual ranges reserved                     */
    uint64_t lay_hits;        /* layout: allocations served at their planned place */
    uint64_t lay_misses;      /* of another size than the recording's next ones */
    uint64_t lay_refused;     /* planned place still in use (or its free not
                                 yet ordered for this stream)                  */
    uint64_t lay_skipped;     /* recorded allocations passed over             */
    uint64_t lay_dropped;     /* 1 when the device could not hold the layout  */
    uint64_t hwm_pages;       /* high-water mark of needed pages             */
    uint64_t mapped_pages;    /* pages held now                              */
    uint64_t cached_pages;    /* of which serve no live block                */
} cmb_cmb_counters;

typedef struct cmbx {
    pthread_mutex_t lock;     /* one per instance: every entry point holds it */
    cmb_upstream *up;
    uint64_t page;
    unsigned shift;           /* log2(page) */
    uint64_t small_max;
    double slack;
    double keep;              /* the budget may widen to (1 + keep) x peak requested */
    uint64_t extra_pages;     /* how far it has widened (never narrows)          */
    uint64_t allocs;          /* allocations so far                              */
    uint64_t hwm_at;          /* allocations when hwm_pages last rose            */
    uint64_t chunk_pages;     /* the most pages one handle (map call) holds */
    int use_bins;
    heap heaps[N_HEAPS];
    sstream **streams;
    size_t n_streams, cap_streams;
    sstream *last;            /* the stream of the previous call */
    cmb_hashmap live;         /* ptr -> blk *, LIVE and BINNED */
    cmb_objpool pool;
    uint64_t seq;
    uint64_t mapped_pages, cached_pages, hwm_pages;
    cmb_cmb_counters ctr;
    cmb_alloc_stats st;
    int hopeless;             /* the last growth could not fit even after a release */
    int no_park;              /* the upstream cannot move handles: unmap instead */
    int no_park_after;        /* nor leave a range mapped behind a stream's work */
    uint64_t parked[CMB_PARK_MAX + 1]; /* handles parked by length, within a growth */
    /* the last ranges the budget moved pages out of (pages [lo, hi) of ar,
     * at allocation `at`): growths avoid them for `fresh` allocations */
    struct moved { const arena *ar; uint64_t lo, hi, at; } moved[CMB_MOVED_RING];
    unsigned n_moved;
    uint64_t fresh;
    /* a layout planned from a recording (option layout); lay is NULL when off */
    const cmb_layout *lay;
    uintptr_t lay_base;       /* the offsets count from here; [base, base + lay_bytes) is mapped once */
    uint64_t lay_bytes;
    int lay_mapped;
    void *lay_va;             /* the reservation as the upstream gave it */
    uint64_t lay_va_size;
    size_t lay_next;          /* the recording's allocation expected next */
    cmb_rbtree lay_occ;       /* blocks in the range by ptr: live, or freed and not yet covered again */
    CMB_DEBUG_ONLY(uint64_t ops;)
    char err[256];
} cmbx;

#define BLK(n) cmb_rb_entry((n), blk, node)

static inline uint64_t round_up(uint64_t x, uint64_t a)
{
    return cmb_size_round_up_sat(x, a); /* saturates: a huge x never wraps to a small one */
}

static inline uintptr_t blk_end(const blk *b)
{
    return b->ptr + b->size;
}

/* --- pages ----------------------------------------------------------------- */

/* Pages wholly inside [lo, hi). */
static inline uint64_t inner_pages(const cmbx *a, uintptr_t lo, uintptr_t hi)
{
    uint64_t first = (lo + a->page - 1) >> a->shift, last = hi >> a->shift;
    return last > first ? last - first : 0;
}

/* Pages wholly inside free block f that [lo, hi) touches: what a block
 * placed there turns from cached into needed. */
static uint64_t cached_in(const cmbx *a, const blk *f, uintptr_t lo, uintptr_t hi)
{
    if (!f)
        return 0;
    uint64_t i0 = (f->ptr + a->page - 1) >> a->shift, i1 = blk_end(f) >> a->shift;
    uint64_t j0 = lo >> a->shift, j1 = (hi + a->page - 1) >> a->shift;
    uint64_t lo_p = i0 > j0 ? i0 : j0, hi_p = i1 < j1 ? i1 : j1;
    return hi_p > lo_p ? hi_p - lo_p : 0;
}

static inline uint64_t needed_pages(const cmbx *a)
{
    cmb_assert_internal(a->cached_pages <= a->mapped_pages);
    return a->mapped_pages - a->cached_pages;
}

static void note_need(cmbx *a)
{
    uint64_t n = needed_pages(a);
    if (n > a->hwm_pages) {
        a->hwm_pages = n;
        a->hwm_at = a->allocs;
    }
}

/* ar->mapped[p]: 0 not mapped; PG_MAPPED; PG_MAPPED | PG_START on the first
 * page of a handle (one upstream map call). A handle runs from its start to
 * the next start or unmapped page; only whole handles are ever unmapped (the
 * driver cannot unmap part of one). */
#define PG_MAPPED 1u
#define PG_START 2u

static inline int pg_start(const arena *ar, uint64_t p)
{
    return p >= ar->pages || ar->mapped[p] != PG_MAPPED; /* a start, unmapped, or the end */
}

/* Pages [first, first + n) of ar are one handle now, mapped by one call. */
static void mark_handle(cmbx *a, arena *ar, uint64_t first, uint64_t n)
{
    ar->mapped[first] = PG_MAPPED | PG_START;
    for (uint64_t p = first + 1; p < first + n; p++) {
        cmb_assert_internal(!ar->mapped[p]);
        ar->mapped[p] = PG_MAPPED;
    }
    a->mapped_pages += n;
    a->ctr.map_calls++;
    a->st.upstream_allocs++;
}

/* Maps pages [first, first + n) of ar as one handle: one upstream call. */
static cmb_status map_handle(cmbx *a, arena *ar, uint64_t first, uint64_t n)
{
    cmb_assert_internal(n && first + n <= ar->pages);
    cmb_status s = cmb_up_map(a->up, (void *)(ar->base + (first << a->shift)), n << a->shift);
    if (s != CMB_OK)
        return s;
    mark_handle(a, ar, first, n);
    return CMB_OK;
}

/* Unmaps pages [first, first + n), whole handles back to back: one call. */
static cmb_status unmap_handles(cmbx *a, arena *ar, uint64_t first, uint64_t n)
{
    cmb_assert_internal(n && ar->mapped[first] == (PG_MAPPED | PG_START) && pg_start(ar, first + n));
    cmb_status s = cmb_up_unmap(a->up, (void *)(ar->base + (first << a->shift)), n << a->shift);
    if (s != CMB_OK)
        return s;
    memset(ar->mapped + first, 0, n);
    a->mapped_pages -= n;
    a->ctr.unmap_calls++;
    a->st.upstream_frees++;
    return CMB_OK;
}

static cmb_status sync_stream(cmbx *a, sstream *s);

/* Parks pages [first, first + n), whole handles of at most CMB_PARK_MAX
 * pages back to back: one call; the handles stay held until the growth
 * that asked for them maps them (unpark) or drops them. Falls back to
 * unmapping where the upstream cannot. `after`: the pages' frees are
 * ordered on that stream alone, not yet known complete, and the growth is
 * its own: the range may stay mapped behind that stream's work
 * (park_after, no synchronization); every other way waits for it first. */
static cmb_status park_handles(cmbx *a, arena *ar, uint64_t first, uint64_t n, sstream *after)
{
    uint64_t len[512], k = 0;
    int can_park = !a->no_park;
    for (uint64_t p = first, q; p < first + n && can_park; p = q) {
        for (q = p + 1; !pg_start(ar, q); q++)
            ;
        if (q - p > CMB_PARK_MAX || k == 512)
            can_park = 0;
        else
            len[k++] = q - p;
    }
    void *va = (void *)(ar->base + (first << a->shift));
    cmb_status s;
    if (can_park && after && !a->no_park_after) {
        if ((s = cmb_up_park_after(a->up, va, n << a->shift, after->handle)) == CMB_OK) {
            a->ctr.parked_after++;
            goto parked;
        }
        a->no_park_after = s == CMB_ERR_UNSUPPORTED;
    }
    if (after && (s = sync_stream(a, after)) != CMB_OK)
        return s;
    if (!can_park)
        return unmap_handles(a, ar, first, n);
    s = cmb_up_park(a->up, va, n << a->shift);
    if (s == CMB_ERR_UNSUPPORTED || s == CMB_ERR_HOST_NOMEM) {
        a->no_park = s == CMB_ERR_UNSUPPORTED;
        return unmap_handles(a, ar, first, n);
    }
    if (s != CMB_OK)
        return s;
parked:
    for (uint64_t i = 0; i < k; i++)
        a->parked[len[i]]++;
    memset(ar->mapped + first, 0, n);
    a->mapped_pages -= n;
    a->ctr.unmap_calls++;
    a->st.upstream_frees++;
    return CMB_OK;
}

/* Releases every parked handle not mapped again: one call. */
static void drop_parked(cmbx *a)
{
    uint64_t any = 0;
    for (int l = 1; l <= CMB_PARK_MAX; l++)
        any |= a->parked[l], a->parked[l] = 0;
    if (!any)
        return;
    cmb_up_drop_parked(a->up, SIZE_MAX);
    a->st.upstream_frees++;
}

/* One handle of a growth: pages [at, at + len), from a parked handle or new. */
typedef struct hplan {
    uint64_t at, len;
    int parked, done;
} hplan;

static inline uint64_t handles_for(uint64_t pages, uint64_t chunk)
{
    return pages ? (pages - 1) / chunk + 1 : 0;
}

/* Splits [lo, hi) into handles of at most `chunk` pages, taking a parked
 * handle where it makes no more handles than new ones would. */
static size_t plan_run(cmbx *a, uint64_t lo, uint64_t hi, uint64_t *avail, hplan *out)
{
    uint64_t chunk = a->chunk_pages;
    size_t k = 0;
    for (uint64_t at = lo, r; at < hi; at += out[k++].len) {
        r = hi - at;
        uint64_t full = r < chunk ? r : chunk, need = handles_for(r, chunk), l = 0;
        for (uint64_t c = full < CMB_PARK_MAX ? full : CMB_PARK_MAX; c && !l; c--)
            if (avail[c] && 1 + handles_for(r - c, chunk) == need)
                l = c;
        if (l)
            avail[l]--;
        out[k] = (hplan){at, l ? l : full, l != 0, 0};
    }
    return k;
}

/* Maps pages [first, first + n) of ar under a block [blo, bhi): the pages the
 * block covers wholly as one handle, and a page it shares with a neighbour
 * (at either end) as a handle of its own, so the block's interior can be
 * unmapped once it is freed while a neighbour still holds the boundary page.
 * All or none. */
static cmb_status map_pages(cmbx *a, arena *ar, uint64_t first, uint64_t n, uintptr_t blo, uintptr_t bhi)
{
    uint64_t cut[4], k = 0, end = first + n, avail[CMB_PARK_MAX + 1];
    cut[k++] = first;
    if (n > 1 && blo > ar->base + (first << a->shift))
        cut[k++] = first + 1;
    if (end - cut[k - 1] > 1 && bhi < ar->base + (end << a->shift))
        cut[k++] = end - 1;
    cut[k] = end;
    hplan *plan = malloc((n + 3) * sizeof *plan);
    if (!plan) {
        drop_parked(a);
        return CMB_ERR_HOST_NOMEM;
    }
    memcpy(avail, a->parked, sizeof avail);
    size_t np = 0;
    for (uint64_t i = 0; i < k; i++)
        np += plan_run(a, cut[i], cut[i + 1], avail, plan + np);
    /* moved handles first, then the rest given back, then new ones: the
     * memory held never exceeds what the growth ends with; the access set
     * once over each contiguous run they make, not once per handle */
    cmb_status s = cmb_up_defer_access(a->up, 1);
    if (s != CMB_OK) {
        free(plan);
        drop_parked(a);
        return s;
    }
    for (size_t i = 0; i < np; i++) {
        if (!plan[i].parked)
            continue;
        void *va = (void *)(ar->base + (plan[i].at << a->shift));
        if (cmb_up_unpark(a->up, va, plan[i].len << a->shift) != CMB_OK) {
            plan[i].parked = 0; /* made new below */
            continue;
        }
        a->parked[plan[i].len]--;
        mark_handle(a, ar, plan[i].at, plan[i].len);
        a->ctr.moved++;
        plan[i].done = 1;
    }
    drop_parked(a);
    for (size_t i = 0; i < np && s == CMB_OK; i++)
        if (!plan[i].done && (s = map_handle(a, ar, plan[i].at, plan[i].len)) == CMB_OK)
            plan[i].done = 1;
    cmb_status access = cmb_up_defer_access(a->up, 0);
    if (s == CMB_OK)
        s = access;
    if (s != CMB_OK) /* all or none */
        for (size_t i = 0; i < np; i++)
            if (plan[i].done)
                unmap_handles(a, ar, plan[i].at, plan[i].len);
    free(plan);
    return s;
}

/* --- streams and their order ----------------------------------------------- */

static sstream *stream_find(cmbx *a, cmb_stream s)
{
    for (size_t i = 0; i < a->n_streams; i++)
        if (a->streams[i]->handle == s)
            return a->last = a->streams[i];
    if (a->n_streams == a->cap_streams) {
        size_t cap = a->cap_streams ? a->cap_streams * 2 : 4;
        sstream **grown = realloc(a->streams, cap * sizeof *grown);
        if (!grown)
            return NULL;
        a->streams = grown;
        a->cap_streams = cap;
    }
    sstream *ss = calloc(1, sizeof *ss);
    if (!ss)
        return NULL;
    ss->handle = s;
    a->streams[a->n_streams++] = ss;
    return a->last = ss;
}

static inline sstream *stream_of(cmbx *a, cmb_stream s)
{
    if (a->last && a->last->handle == s)
        return a->last;
    return stream_find(a, s);
}

/* Drops the constraints whose stream has ordered the free. */
static inline void settle(blk *b)
{
    if (b->owner && b->seq <= b->owner->ordered)
        b->owner = NULL;
    if (b->also && b->seq <= b->also->ordered)
        b->also = NULL;
    if (!b->owner) {
        b->owner = b->also;
        b->also = NULL;
    }
}

/* May stream s hand out free block b now? */
static inline int usable(const blk *b, const sstream *s)
{
    return (!b->owner || b->owner == s || b->seq <= b->owner->ordered) &&
           (!b->also || b->also == s || b->seq <= b->also->ordered);
}

static inline int is_ordered(blk *b)
{
    settle(b);
    return !b->owner;
}

/* The mark only moves forward: an event recorded before a synchronization
 * may complete after it. */
static inline void order_up_to(sstream *s, uint64_t seq)
{
    if (seq > s->ordered)
        s->ordered = seq;
}

/* Advances each stream's ordered mark through its event: a completed event
 * orders the frees it covers; a stream with newer frees gets its event
 * (re-)recorded and queried once. Returns 1 when a mark moved. */
static int harvest(cmbx *a)
{
    int moved = 0;
    for (size_t i = 0; i < a->n_streams; i++) {
        sstream *s = a->streams[i];
        if (s->last_free <= s->ordered)
            continue;
        if (s->ev_in_flight && cmb_up_event_query(a->up, s->ev) == CMB_OK) {
            order_up_to(s, s->ev_seq);
            s->ev_in_flight = 0;
            moved = 1;
        }
        if (s->ev_in_flight || s->last_free <= s->ordered)
            continue;
        cmb_status st = s->has_event ? cmb_up_event_rerecord(a->up, s->handle, s->ev)
                                     : cmb_up_event_record(a->up, s->handle, &s->ev);
        if (st != CMB_OK)
            continue; /* no event: those frees wait for a synchronization */
        s->has_event = 1;
        s->ev_in_flight = 1;
        s->ev_seq = a->seq;
        a->ctr.events++;
        if (cmb_up_event_query(a->up, s->ev) == CMB_OK) {
            order_up_to(s, s->ev_seq);
            s->ev_in_flight = 0;
            moved = 1;
        }
    }
    return moved;
}

/* Waits for stream s: every free made on it so far is ordered, and the
 * event in flight, recorded before, has completed too. */
static cmb_status sync_stream(cmbx *a, sstream *s)
{
    uint64_t covers = a->seq;
    cmb_status st = cmb_up_stream_sync(a->up, s->handle);
    a->ctr.syncs++;
    if (st != CMB_OK)
        return st;
    order_up_to(s, covers);
    s->ev_in_flight = 0;
    return CMB_OK;
}

/* Synchronizes every stream with unordered frees (out of memory, trim, destroy). */
static cmb_status sync_streams(cmbx *a)
{
    cmb_status first = CMB_OK;
    for (size_t i = 0; i < a->n_streams; i++) {
        sstream *s = a->streams[i];
        if (s->last_free <= s->ordered)
            continue;
        cmb_status st = sync_stream(a, s);
        if (st != CMB_OK && first == CMB_OK)
            first = st;
    }
    return first;
}

/* Orders free block b's frees by waiting for the streams they are not yet
 * ordered on (the budget's unmapping: a page still in use by queued work
 * must not go). 1 when b is ordered. */
static int order_block(cmbx *a, blk *b)
{
    settle(b);
    if (b->owner && sync_stream(a, b->owner) != CMB_OK)
        return 0;
    if (b->also && sync_stream(a, b->also) != CMB_OK)
        return 0;
    return is_ordered(b);
}

/* The stream whose queued work alone may still use free block b, when it
 * is ss, the stream a growth is for: b's pages may then move under the new
 * block without waiting (stream order keeps the old work before the new).
 * NULL when b is ordered or needs another stream's order. */
static sstream *behind(blk *b, sstream *ss)
{
    settle(b);
    if (!b->owner && !b->also)
        return NULL;
    return (!b->owner || b->owner == ss) && (!b->also || b->also == ss) ? ss : NULL;
}

/* --- free blocks and holes -------------------------------------------------- */

static int free_cmp(const cmb_rbnode *x, const cmb_rbnode *y)
{
    const blk *p = BLK(x), *q = BLK(y);
    if (p->size != q->size)
        return p->size < q->size ? -1 : 1;
    return (p->ptr > q->ptr) - (p->ptr < q->ptr);
}

static int size_keycmp(const void *key, const cmb_rbnode *n)
{
    uint64_t k = *(const uint64_t *)key, s = BLK(n)->size;
    return (k > s) - (k < s);
}

static int hole_cmp(const cmb_rbnode *x, const cmb_rbnode *y)
{
    uintptr_t p = BLK(x)->ptr, q = BLK(y)->ptr;
    return (p > q) - (p < q);
}

static void free_insert(cmbx *a, blk *b)
{
    b->state = B_FREE;
    cmb_rb_insert(&a->heaps[b->heap].free, &b->node, free_cmp);
    a->cached_pages += inner_pages(a, b->ptr, blk_end(b));
}

static void free_erase(cmbx *a, blk *b)
{
    cmb_assert_internal(b->state == B_FREE);
    cmb_rb_erase(&a->heaps[b->heap].free, &b->node);
    a->cached_pages -= inner_pages(a, b->ptr, blk_end(b));
}

static void hole_insert(cmbx *a, blk *b)
{
    cmb_assert_internal(b->ptr % a->page == 0 && b->size % a->page == 0);
    b->state = B_HOLE;
    b->owner = b->also = NULL;
    cmb_rb_insert(&a->heaps[b->heap].holes, &b->node, hole_cmp);
}

static void hole_erase(cmbx *a, blk *b)
{
    cmb_assert_internal(b->state == B_HOLE);
    cmb_rb_erase(&a->heaps[b->heap].holes, &b->node);
}

/* Links n into the address list of its arena between p and q. */
static void splice(blk *n, blk *p, blk *q)
{
    n->prev = p;
    n->next = q;
    if (p)
        p->next = n;
    else
        n->ar->first = n;
    if (q)
        q->prev = n;
}

/* y (x's next, out of every tree) joins x. */
static void absorb(cmbx *a, blk *x, blk *y)
{
    cmb_assert_internal(x->next == y && blk_end(x) == y->ptr);
    x->size += y->size;
    x->next = y->next;
    if (y->next)
        y->next->prev = x;
    cmb_objpool_put(&a->pool, y);
}

/* Can free blocks x and y become one without loosening either's order? Both
 * settled; the merged block takes the constraints of the one that has any. */
static int mergeable(blk *x, blk *y)
{
    settle(x);
    settle(y);
    if (!x->owner || !y->owner)
        return 1;
    return x->owner == y->owner && x->also == y->also;
}

static void take_constraints(blk *into, const blk *from)
{
    if (!into->owner) {
        into->owner = from->owner;
        into->also = from->also;
    }
    if (from->seq > into->seq)
        into->seq = from->seq;
}

/* b (out of every tree, constraints set) becomes free: merged with free
 * neighbours it may join, then inserted. */
static void free_merge_insert(cmbx *a, blk *b)
{
    blk *n = b->next, *p = b->prev;
    if (n && n->state == B_FREE && mergeable(b, n)) {
        free_erase(a, n);
        take_constraints(b, n);
        absorb(a, b, n);
    }
    if (p && p->state == B_FREE && mergeable(p, b)) {
        free_erase(a, p);
        take_constraints(p, b);
        absorb(a, p, b);
        b = p;
    }
    free_insert(a, b);
}

/* h (out of the hole tree) becomes a hole, merged with neighbouring holes. */
static void hole_merge_insert(cmbx *a, blk *h)
{
    blk *n = h->next, *p = h->prev;
    if (n && n->state == B_HOLE) {
        hole_erase(a, n);
        absorb(a, h, n);
    }
    if (p && p->state == B_HOLE) {
        hole_erase(a, p);
        absorb(a, p, h);
        h = p;
    }
    hole_insert(a, h);
}

/* --- fast bins ----------------------------------------------------------------- */

static inline unsigned bin_index(uint64_t rounded)
{
    return (unsigned)(((rounded >> 9) * 0x9E3779B97F4A7C15ull) >> 58);
}

static void flush_bin(cmbx *a, sstream *s, unsigned i)
{
    bin *bn = &s->bins[i];
    blk *b = bn->head;
    while (b) {
        blk *next = b->link;
        cmb_hashmap_remove(&a->live, (uint64_t)b->ptr, NULL);
        b->also = NULL;
        free_merge_insert(a, b);
        b = next;
    }
    bn->head = NULL;
    bn->n = 0;
    s->bin_mask &= ~(1ull << i);
}

static void flush_bins(cmbx *a, sstream *s)
{
    while (s->bin_mask)
        flush_bin(a, s, (unsigned)__builtin_ctzll(s->bin_mask));
}

static void flush_all_bins(cmbx *a)
{
    for (size_t i = 0; i < a->n_streams; i++)
        flush_bins(a, a->streams[i]);
}

/* --- arenas ---------------------------------------------------------------------- */

/* Address space for size bytes at a page-aligned *base: a page larger than
 * the upstream's granularity needs one page more to align in. */
static cmb_status reserve_aligned(cmbx *a, uint64_t size, void **va, uint64_t *res_size, uintptr_t *base)
{
    *res_size = size + (a->page > a->up->granularity ? a->page : 0);
    cmb_status st = cmb_up_va_reserve(a->up, *res_size, va);
    if (st == CMB_OK)
        *base = round_up((uintptr_t)*va, a->page);
    return st;
}

static cmb_status add_arena(cmbx *a, int hp, uint64_t at_least)
{
    heap *h = &a->heaps[hp];
    uint64_t size = h->arena_size;
    if (at_least + a->page > size)
        size = round_up(at_least, a->page) + a->page;
    cmb_status s = CMB_ERR_HOST_NOMEM;
    arena *ar = calloc(1, sizeof *ar);
    blk *b = cmb_objpool_get(&a->pool);
    if (!ar || !b)
        goto out_free;
    ar->pages = size >> a->shift;
    ar->size = size;
    ar->heap = hp;
    if (!(ar->mapped = calloc(ar->pages, 1)))
        goto out_free;
    if (h->n_arenas == h->cap_arenas) {
        size_t cap = h->cap_arenas ? h->cap_arenas * 2 : 2;
        arena **grown = realloc(h->arenas, cap * sizeof *grown);
        if (!grown)
            goto out_free;
        h->arenas = grown;
        h->cap_arenas = cap;
    }
    if ((s = reserve_aligned(a, size, &ar->res_va, &ar->res_size, &ar->base)) != CMB_OK)
        goto out_free;
    h->arenas[h->n_arenas++] = ar;
    a->ctr.arenas++;
    memset(b, 0, sizeof *b);
    b->ptr = ar->base;
    b->size = size;
    b->ar = ar;
    b->heap = (uint8_t)hp;
    ar->first = b;
    hole_insert(a, b);
    return CMB_OK;

out_free:
    if (b)
        cmb_objpool_put(&a->pool, b);
    if (ar)
        free(ar->mapped);
    free(ar);
    return s;
}

/* --- handing out a block ------------------------------------------------------------ */

static void count_alloc(cmbx *a, blk *b, size_t size)
{
    cmb_stat_increase(&a->st.requested, (int64_t)size);
    cmb_stat_increase(&a->st.allocated, (int64_t)b->size);
    cmb_stat_increase(&a->st.blocks, 1);
    a->allocs++;
}

/* Takes s bytes from free block f (front, or tail when from_tail) for
 * stream ss; the rest stays free with f's constraints. */
static cmb_status take(cmbx *a, blk *f, uint64_t s, int from_tail, size_t size, sstream *ss, void **ptr)
{
    cmb_assert_internal(f->state == B_FREE && f->size >= s && usable(f, ss));
    blk *rest = NULL;
    uintptr_t at = from_tail ? blk_end(f) - s : f->ptr;
    if (f->size > s && !(rest = cmb_objpool_get(&a->pool)))
        return CMB_ERR_HOST_NOMEM;
    if (cmb_hashmap_put(&a->live, (uint64_t)at, (uint64_t)(uintptr_t)f)) {
        if (rest)
            cmb_objpool_put(&a->pool, rest);
        return CMB_ERR_HOST_NOMEM;
    }
    free_erase(a, f);
    if (rest) {
        *rest = *f;
        rest->size = f->size - s;
        if (from_tail) {
            splice(rest, f->prev, f);
            f->ptr = at;
        } else {
            rest->ptr = f->ptr + s;
            splice(rest, f, f->next);
        }
        f->size = s;
        free_insert(a, rest);
    }
    f->state = B_LIVE;
    f->owner = ss;
    f->also = NULL;
    count_alloc(a, f, size);
    note_need(a);
    *ptr = (void *)f->ptr;
    return CMB_OK;
}

/* Which end of free block f should s bytes take? The one that turns fewer
 * cached pages into needed ones (it leans on a page a live neighbour
 * already holds); the front on a tie. */
static int tail_is_cheaper(const cmbx *a, const blk *f, uint64_t s)
{
    if (f->size == s)
        return 0;
    return cached_in(a, f, blk_end(f) - s, blk_end(f)) < cached_in(a, f, f->ptr, f->ptr + s);
}

/* Best fit among the free blocks stream ss may use. */
static blk *best_fit(cmbx *a, int hp, uint64_t s, const sstream *ss)
{
    cmb_rbnode *n = cmb_rb_lower_bound(&a->heaps[hp].free, &s, size_keycmp);
    for (int probes = 0; n && probes < CMB_FIT_PROBES; n = cmb_rb_next(n), probes++)
        if (usable(BLK(n), ss))
            return BLK(n);
    return NULL;
}

/* --- growth: mapping pages into a hole ---------------------------------------------- */

typedef struct place {
    blk *hole;
    blk *left, *right;     /* the free blocks the span uses, or NULL */
    int from_right;        /* the block ends where the span ends */
    uint64_t first, n;     /* pages of the hole's arena to map */
    uint64_t newly_needed; /* pages that turn needed */
    uint64_t span;         /* bytes of the span: tie-break, tightest first */
} place;

/* 1 when placement p would map pages the budget moved away within the last
 * `fresh` allocations: the work queued on their old mapping may still run
 * (park_after), and mapping there again would wait for it. Counted in
 * allocations, not by the device's progress, so that the choice is the same
 * however far the device lags. */
static int maps_fresh(const cmbx *a, const arena *ar, uint64_t first, uint64_t n)
{
    unsigned k = a->n_moved < CMB_MOVED_RING ? a->n_moved : CMB_MOVED_RING;
    for (unsigned i = 0; i < k; i++) {
        const struct moved *m = &a->moved[i];
        if (m->ar == ar && a->allocs - m->at < a->fresh && first < m->hi && m->lo < first + n)
            return 1;
    }
    return 0;
}

static int better(const place *p, const place *best, int have)
{
    if (!have)
        return 1;
    if (p->n != best->n)
        return p->n < best->n;
    return p->span < best->span;
}

/* The cheapest way to place s bytes around hole h for stream ss. */
static int place_at_hole(cmbx *a, blk *h, uint64_t s, sstream *ss, place *best, int have, int avoid)
{
    blk *l = h->prev, *r = h->next;
    /* settled and usable: their constraints are within {ss}, so they merge
     * with the fresh pages and with each other */
    if (l && l->state == B_FREE)
        settle(l);
    if (r && r->state == B_FREE)
        settle(r);
    if (!(l && l->state == B_FREE && usable(l, ss)))
        l = NULL;
    if (!(r && r->state == B_FREE && usable(r, ss)))
        r = NULL;
    uint64_t ls = l ? l->size : 0, rs = r ? r->size : 0, hp = h->size >> a->shift;
    uint64_t h0 = (h->ptr - h->ar->base) >> a->shift;
    place p = {.hole = h};

    if (s <= ls + h->size) {
        /* left-aligned: from the start of l (or of the hole) into the hole */
        uintptr_t at = l ? l->ptr : h->ptr;
        p.left = l;
        p.n = s > ls ? round_up(s - ls, a->page) >> a->shift : 0;
        p.first = h0;
        p.span = ls + h->size;
        p.newly_needed = p.n + cached_in(a, l, at, at + s);
        if (!(avoid && maps_fresh(a, h->ar, p.first, p.n)) && better(&p, best, have)) {
            *best = p;
            have = 1;
        }
    } else if (r && s <= ls + h->size + rs) {
        /* the whole hole, with both neighbours */
        uintptr_t at = l ? l->ptr : h->ptr;
        p.left = l;
        p.right = r;
        p.n = hp;
        p.first = h0;
        p.span = ls + h->size + rs;
        p.newly_needed = p.n + cached_in(a, l, at, at + s) + cached_in(a, r, at, at + s);
        if (!(avoid && maps_fresh(a, h->ar, p.first, p.n)) && better(&p, best, have)) {
            *best = p;
            have = 1;
        }
    }
    if (r && s > rs && s <= rs + h->size) {
        /* right-aligned: ending where r ends */
        uintptr_t end = blk_end(r);
        place q = {.hole = h, .right = r, .from_right = 1};
        q.n = round_up(s - rs, a->page) >> a->shift;
        q.first = h0 + hp - q.n;
        q.span = rs + h->size;
        q.newly_needed = q.n + cached_in(a, r, end - s, end);
        if (!(avoid && maps_fresh(a, h->ar, q.first, q.n)) && better(&q, best, have)) {
            *best = q;
            have = 1;
        }
    }
    return have;
}

/* The cheapest placement that maps no freshly moved page, else the
 * cheapest. */
static int choose_place(cmbx *a, int hp, uint64_t s, sstream *ss, place *best)
{
    for (int avoid = a->fresh > 0; avoid >= 0; avoid--) {
        int have = 0;
        for (cmb_rbnode *n = cmb_rb_first(&a->heaps[hp].holes); n; n = cmb_rb_next(n))
            have = place_at_hole(a, BLK(n), s, ss, best, have, avoid);
        if (have)
            return 1;
    }
    return 0;
}

/* --- reclaim: unmapping cached pages ------------------------------------------------- */

/* The whole handles inside cached pages [r0, r1) of ar (arena-relative):
 * [*u0, *u1), empty when a handle crosses every candidate. */
static void whole_handles(const arena *ar, uint64_t r0, uint64_t r1, uint64_t *u0, uint64_t *u1)
{
    uint64_t lo = r0, hi = r1;
    while (lo < r1 && ar->mapped[lo] != (PG_MAPPED | PG_START))
        lo++;
    while (hi > lo && !pg_start(ar, hi))
        hi--;
    *u0 = lo;
    *u1 = hi > lo ? hi : lo;
}

/* The budget moved pages [lo, hi) of ar away, for a growth elsewhere. */
static void note_moved(cmbx *a, const arena *ar, uint64_t lo, uint64_t hi)
{
    a->moved[a->n_moved++ % CMB_MOVED_RING] = (struct moved){ar, lo, hi, a->allocs};
}

/* Unmaps whole handles of ordered free block b's cached pages, at least
 * `want` pages where it has them (from the end that touches a hole, else
 * from its top); *got is how many. b is split into a free front, the new
 * hole (merged with neighbouring holes) and a free back. */
static cmb_status unmap_from(cmbx *a, blk *b, uint64_t want, int park, sstream *after, uint64_t *got)
{
    arena *ar = b->ar;
    uint64_t i0 = (b->ptr - ar->base + a->page - 1) >> a->shift, i1 = (blk_end(b) - ar->base) >> a->shift;
    uint64_t u0, u1;
    *got = 0;
    if (i1 <= i0)
        return CMB_OK;
    whole_handles(ar, i0, i1, &u0, &u1);
    if (u1 == u0)
        return CMB_OK;
    int low = b->prev && b->prev->state == B_HOLE && ar->base + (i0 << a->shift) == b->ptr && u0 == i0;
    if (low) {
        uint64_t e = u0 + 1;
        while (e < u1 && (e - u0 < want || !pg_start(ar, e)))
            e++;
        u1 = e;
    } else {
        uint64_t f = u1 - 1;
        while (f > u0 && (u1 - f < want || ar->mapped[f] != (PG_MAPPED | PG_START)))
            f--;
        u0 = f;
    }
    uint64_t n = u1 - u0;
    blk *front = cmb_objpool_get(&a->pool), *back = cmb_objpool_get(&a->pool);
    if (!front || !back) {
        if (front)
            cmb_objpool_put(&a->pool, front);
        return CMB_ERR_HOST_NOMEM;
    }
    uintptr_t lo = ar->base + (u0 << a->shift), end = blk_end(b);
    cmb_status st = park ? park_handles(a, ar, u0, n, after) : unmap_handles(a, ar, u0, n);
    *got = st == CMB_OK ? n : 0;
    if (park && *got && a->fresh)
        note_moved(a, ar, u0, u0 + n);
    uintptr_t hi = lo + (*got << a->shift);
    free_erase(a, b);
    if (*got && lo > b->ptr) {
        *front = *b;
        front->size = lo - b->ptr;
        splice(front, b->prev, b);
        free_insert(a, front);
        front = NULL;
    }
    if (*got && hi < end) {
        *back = *b;
        back->ptr = hi;
        back->size = end - hi;
        splice(back, b, b->next);
        free_insert(a, back);
        back = NULL;
    }
    if (front)
        cmb_objpool_put(&a->pool, front);
    if (back)
        cmb_objpool_put(&a->pool, back);
    if (!*got) {
        free_insert(a, b);
        return st;
    }
    b->ptr = lo;
    b->size = hi - lo;
    hole_merge_insert(a, b);
    return st;
}

/* Unmaps up to `want` cached pages of free blocks, smallest blocks first,
 * leaving alone the neighbours of hole `keep` (a placement about to use
 * them). The candidates are chosen without regard to order, then ordered by
 * synchronizing where needed: the choice is the same however far the device
 * lags. Returns the pages unmapped. */
static uint64_t reclaim(cmbx *a, uint64_t want, const blk *keep, int park, sstream *ss)
{
    uint64_t done = 0;
    blk **cand = NULL;
    size_t n_cand = 0, cap = 0;
    for (int hp = 0; hp < N_HEAPS && done < want; hp++) {
        /* collect first: unmapping reshapes the tree */
        uint64_t sum = 0, key = a->page;
        n_cand = 0;
        for (cmb_rbnode *n = cmb_rb_lower_bound(&a->heaps[hp].free, &key, size_keycmp); n && sum < want - done;
             n = cmb_rb_next(n)) {
            blk *b = BLK(n);
            /* by inner pages, not by whole handles: counting only whole
             * handles reached further and unmapped more of the large runs:
             * results/sim/cmb-steady/chunk-sweep-by-whole-handles against
             * chunk-sweep */
            uint64_t in = inner_pages(a, b->ptr, blk_end(b));
            if (!in || (keep && (b == keep->prev || b == keep->next)))
                continue;
            if (n_cand == cap) {
                size_t c = cap ? cap * 2 : 64;
                blk **grown = realloc(cand, c * sizeof *grown);
                if (!grown)
                    break;
                cand = grown;
                cap = c;
            }
            cand[n_cand++] = b;
            sum += in;
        }
        for (size_t i = 0; i < n_cand && done < want; i++) {
            uint64_t got;
            sstream *after = park ? behind(cand[i], ss) : NULL;
            if (!after && !order_block(a, cand[i]))
                continue;
            cmb_status st = unmap_from(a, cand[i], want - done, park, after, &got);
            done += got;
            if (st != CMB_OK)
                break;
        }
    }
    free(cand);
    return done;
}

/* Merges neighbouring free blocks whose streams have ordered them since
 * they were freed (blocks of different streams stay apart until then). */
static void consolidate(cmbx *a)
{
    for (int hp = 0; hp < N_HEAPS; hp++) {
        heap *h = &a->heaps[hp];
        for (size_t i = 0; i < h->n_arenas; i++) {
            for (blk *b = h->arenas[i]->first; b; b = b->next) {
                while (b->state == B_FREE && b->next && b->next->state == B_FREE && mergeable(b, b->next)) {
                    blk *n = b->next;
                    free_erase(a, b);
                    free_erase(a, n);
                    take_constraints(b, n);
                    absorb(a, b, n);
                    free_insert(a, b);
                }
            }
        }
    }
}

/* Synchronizes, then unmaps every cached page: the release before a retry. */
static cmb_status release_all(cmbx *a)
{
    flush_all_bins(a);
    cmb_status st = sync_streams(a);
    if (a->n_streams > 1)
        consolidate(a);
    reclaim(a, UINT64_MAX, NULL, 0, NULL);
    return st;
}

/* --- growth --------------------------------------------------------------------------- */

/* Maps the pages of placement p, joins them with the free blocks it uses and
 * hands out the block. */
static cmb_status grow_at(cmbx *a, const place *p, uint64_t s, size_t size, sstream *ss, void **ptr)
{
    blk *h = p->hole, *piece = NULL;
    uint64_t hp = h->size >> a->shift;
    cmb_status st;
    CMB_DEBUG_ONLY(uint64_t expect = needed_pages(a) + p->newly_needed;)

    if (p->n < hp && !(piece = cmb_objpool_get(&a->pool)))
        return CMB_ERR_HOST_NOMEM;
    uintptr_t blo = p->from_right ? blk_end(p->right) - s : (p->left ? p->left->ptr : h->ptr);
    if ((st = map_pages(a, h->ar, p->first, p->n, blo, blo + s)) != CMB_OK) {
        if (piece)
            cmb_objpool_put(&a->pool, piece);
        return st;
    }
    a->ctr.grows++;
    uintptr_t lo = h->ar->base + (p->first << a->shift), len = p->n << a->shift;
    hole_erase(a, h);
    if (piece) {
        /* the hole keeps the pages not mapped */
        *piece = *h;
        piece->ptr = lo;
        piece->size = len;
        if (p->from_right) {
            h->size -= len;
            splice(piece, h, h->next);
        } else {
            h->ptr += len;
            h->size -= len;
            splice(piece, h->prev, h);
        }
        hole_insert(a, h);
    } else {
        piece = h;
    }
    piece->owner = piece->also = NULL; /* fresh memory: no stream has used it */
    piece->seq = 0;
    blk *f = piece;
    if (p->left) {
        free_erase(a, p->left);
        take_constraints(p->left, f);
        absorb(a, p->left, f);
        f = p->left;
    }
    if (p->right && f->next == p->right) {
        free_erase(a, p->right);
        take_constraints(f, p->right);
        absorb(a, f, p->right);
    }
    free_insert(a, f);
    st = take(a, f, s, p->from_right, size, ss, ptr);
    CMB_DEBUG_ONLY(if (st == CMB_OK) cmb_assert_internal(needed_pages(a) == expect);)
    return st;
}

/* The budget's hysteresis. Once the need has not risen for as many
 * allocations as it took to reach its peak, the traffic is taken to repeat
 * (a training or serving loop): every growth then widens the budget by the
 * pages it maps, up to (1 + keep) x the peak requested bytes, so the pages a
 * repeated pass moves back and forth stay mapped and the next pass finds
 * them. Until then (the first pass, a sweep still finding its peak) the
 * budget is (1 + slack) x the peak need alone. The widening never narrows;
 * out of memory still releases every cached page. */
static uint64_t widen(cmbx *a, uint64_t budget, uint64_t n, uint64_t s)
{
    uint64_t req = (uint64_t)a->st.requested.current + s, peak = (uint64_t)a->st.requested.peak;
    req = req > peak ? req : peak;
    uint64_t cap = (uint64_t)((double)(req >> a->shift) * (1 + a->keep));
    uint64_t room = cap > budget ? cap - budget : 0;
    uint64_t extra = a->extra_pages;
    if (a->hwm_at && a->allocs - a->hwm_at >= a->hwm_at)
        extra += n;
    if (extra > room)
        extra = room;
    if (extra > a->extra_pages) {
        a->ctr.widened += extra - a->extra_pages;
        a->extra_pages = extra;
    }
    return budget + extra;
}

/* Step (4): grow where the fewest pages are needed, within the budget. */
static cmb_status grow(cmbx *a, int hp, uint64_t s, size_t size, sstream *ss, void **ptr)
{
    place p;
    if (!choose_place(a, hp, s, ss, &p)) {
        cmb_status st = add_arena(a, hp, s);
        if (st != CMB_OK)
            return st;
        if (!choose_place(a, hp, s, ss, &p))
            return CMB_ERR_OOM;
    }
    if (!p.n) /* a free block that fits after all (best fit gave up probing) */
        return take(a, p.left, s, 0, size, ss, ptr);

    /* a large growth asks the device first: when even every cached page
     * released could not make room (a block of s bytes needs at least
     * ceil(s / page) - 2 pages no live block holds), fail now and keep the
     * cache; when only a release could, fail so the caller releases */
    size_t free_b = 0, total_b;
    int asked = p.n >= CMB_MEMINFO_PAGES && cmb_up_mem_info(a->up, &free_b, &total_b) == CMB_OK;
    uint64_t free_pages = (uint64_t)free_b >> a->shift, least = round_up(s, a->page) >> a->shift;
    least = least > 2 ? least - 2 : 0;
    if (asked && least > free_pages + a->cached_pages) {
        a->hopeless = 1;
        return CMB_ERR_OOM;
    }

    uint64_t after = needed_pages(a) + p.newly_needed;
    uint64_t hwm = after > a->hwm_pages ? after : a->hwm_pages;
    uint64_t budget = widen(a, hwm + (uint64_t)((double)hwm * a->slack), p.n, s);
    if (a->mapped_pages + p.n > budget) {
        uint64_t want = a->mapped_pages + p.n - budget;
        harvest(a);
        uint64_t got = reclaim(a, want, p.hole, 1, ss);
        a->ctr.budget_unmaps += got;
        free_pages += got;
        if (got < want)
            a->ctr.over_budget++;
    }
    if (asked && p.n > free_pages) {
        drop_parked(a);
        return CMB_ERR_OOM;
    }
    cmb_status st = grow_at(a, &p, s, size, ss, ptr);
    drop_parked(a); /* where grow_at failed before mapping */
    return st;
}

/* --- allocate / deallocate ------------------------------------------------------------- */

/* --- a layout planned from a recording (option layout) ---------------------------------
 * Every allocation of a recorded trace has a place in one range, laid out
 * ahead (allocators/cmb_layout.c) and mapped once, so a run that repeats the
 * recording makes no upstream call for it. A request takes the place of the
 * recording's next allocation of its rounded size within
 * CMB_LAY_LOOKAHEAD, the recording's allocations before it passed over; the
 * end of the recording starts it again (a replayed pass). The place is taken
 * only when no live block lies in it and every freed one there is ordered
 * for this stream, as a free block of the heaps would be; any other request
 * takes cmb's own path. Freed blocks stay in lay_occ, with the stream order
 * of their free, until a new block covers them. */

static int occ_cmp(const cmb_rbnode *x, const cmb_rbnode *y)
{
    const blk *p = BLK(x), *q = BLK(y);
    return p->ptr < q->ptr ? -1 : p->ptr > q->ptr;
}

static int occ_keycmp(const void *key, const cmb_rbnode *n)
{
    uintptr_t k = *(const uintptr_t *)key;
    return k < BLK(n)->ptr ? -1 : k > BLK(n)->ptr;
}

/* May stream ss take [lo, hi)? Every block there must be freed and usable
 * by ss (frees on other streams harvested once). 1, and the freed blocks
 * there dropped, when it may. */
static int lay_clear(cmbx *a, uintptr_t lo, uintptr_t hi, sstream *ss)
{
    uintptr_t last = hi - 1;
    int harvested = 0;
    cmb_rbnode *n = cmb_rb_floor(&a->lay_occ, &last, occ_keycmp);
    for (cmb_rbnode *m = n; m && blk_end(BLK(m)) > lo; m = cmb_rb_prev(m)) {
        blk *b = BLK(m);
        if (b->state == B_LIVE)
            return 0;
        if (!usable(b, ss) && (harvested++ || !harvest(a) || !usable(b, ss)))
            return 0;
    }
    while (n && blk_end(BLK(n)) > lo) {
        cmb_rbnode *p = cmb_rb_prev(n);
        cmb_rb_erase(&a->lay_occ, n);
        cmb_objpool_put(&a->pool, BLK(n));
        n = p;
    }
    return 1;
}

/* The recording's next allocation of rounded size s within the lookahead,
 * or SIZE_MAX. */
static size_t lay_match(cmbx *a, uint64_t s)
{
    const cmb_layout *l = a->lay;
    size_t k = a->lay_next == l->n ? 0 : a->lay_next;
    size_t end = l->n - k > CMB_LAY_LOOKAHEAD ? k + CMB_LAY_LOOKAHEAD : l->n;
    for (size_t j = k; j < end; j++) {
        if (l->size[j] == s) {
            a->ctr.lay_skipped += j - k;
            a->lay_next = j + 1;
            return j;
        }
    }
    return SIZE_MAX;
}

static int lay_map(cmbx *a);

/* 1 with *ptr at the request's planned place, 0 to take cmb's own path. */
static int lay_alloc(cmbx *a, uint64_t s, size_t size, sstream *ss, void **ptr)
{
    size_t j = lay_match(a, s);
    if (j == SIZE_MAX) {
        a->ctr.lay_misses++;
        return 0;
    }
    if (!a->lay_mapped && !lay_map(a))
        return 0;
    uintptr_t lo = a->lay_base + a->lay->off[j];
    if (!lay_clear(a, lo, lo + s, ss)) {
        a->ctr.lay_refused++;
        return 0;
    }
    blk *b = cmb_objpool_get(&a->pool);
    if (!b)
        return 0;
    memset(b, 0, sizeof *b);
    b->ptr = lo;
    b->size = s;
    b->owner = ss;
    b->state = B_LIVE;
    b->heap = H_LAYOUT;
    if (cmb_hashmap_put(&a->live, (uint64_t)lo, (uint64_t)(uintptr_t)b)) {
        cmb_objpool_put(&a->pool, b);
        return 0;
    }
    cmb_rb_insert(&a->lay_occ, &b->node, occ_cmp);
    count_alloc(a, b, size);
    a->ctr.lay_hits++;
    *ptr = (void *)lo;
    return 1;
}

/* Block b of the range freed on fs: it stays where it is, with the stream
 * order of its free, until a new block covers it. */
static void lay_free(cmbx *a, blk *b, sstream *fs)
{
    if (fs == b->owner) {
        b->also = NULL;
    } else {
        b->owner->last_free = b->seq;
        b->also = b->owner;
        b->owner = fs;
    }
    b->state = B_FREE;
    cmb_hashmap_remove(&a->live, (uint64_t)b->ptr, NULL);
}

/* Lays out the recording at path and reserves its range; the first block
 * placed in it maps the whole range, in one upstream call (lay_map). */
static cmb_status lay_open(cmbx *a, const char *path, char *err, size_t errlen)
{
    char why[448];
    cmb_status st;
    if (!(a->lay = cmb_layout_get(path, CMB_ROUND, why, sizeof why))) {
        snprintf(err, errlen, "cmb: layout: %s", why);
        return CMB_ERR_INVALID;
    }
    a->lay_bytes = round_up(a->lay->top, a->page);
    if ((st = reserve_aligned(a, a->lay_bytes, &a->lay_va, &a->lay_va_size, &a->lay_base)) != CMB_OK) {
        snprintf(err, errlen, "cmb: layout: cannot reserve %llu B of address space",
                 (unsigned long long)a->lay_va_size);
        goto out_free;
    }
    cmb_rb_init(&a->lay_occ);
    return CMB_OK;

out_free:
    cmb_layout_put(a->lay);
    a->lay = NULL;
    return st;
}

/* Maps the whole range at the first planned place taken. Where the device
 * cannot hold it even with the heaps' cache released, the layout is
 * dropped (lay_dropped) and every request takes cmb's own path: a device
 * too small for the plan still runs what fits without it. 1 when mapped. */
static cmb_status lay_close(cmbx *a);

static int lay_map(cmbx *a)
{
    cmb_status st = cmb_up_map(a->up, (void *)a->lay_base, a->lay_bytes);
    if (st == CMB_ERR_OOM && release_all(a) == CMB_OK)
        st = cmb_up_map(a->up, (void *)a->lay_base, a->lay_bytes);
    if (st != CMB_OK) {
        lay_close(a); /* nothing mapped, no block placed: the reservation and the layout go */
        a->ctr.lay_dropped++;
        return 0;
    }
    a->lay_mapped = 1;
    a->ctr.map_calls++;
    a->st.upstream_allocs++;
    return 1;
}

/* Unmaps and releases the range; the blocks in it go with the pool. */
static cmb_status lay_close(cmbx *a)
{
    if (!a->lay)
        return CMB_OK;
    cmb_status first = a->lay_mapped ? cmb_up_unmap(a->up, (void *)a->lay_base, a->lay_bytes) : CMB_OK;
    if (a->lay_mapped && first == CMB_OK) {
        a->ctr.unmap_calls++;
        a->st.upstream_frees++;
    }
    cmb_status st = cmb_up_va_release(a->up, a->lay_va, a->lay_va_size);
    cmb_layout_put(a->lay);
    a->lay = NULL;
    return first != CMB_OK ? first : st;
}

static void validate(cmbx *a);

static cmb_status alloc_slow(cmbx *a, uint64_t s, size_t size, sstream *ss, void **ptr)
{
    int hp = s < a->small_max ? H_SMALL : H_LARGE;
    blk *f;
    cmb_status st;
    if (ss->bin_mask)
        flush_bins(a, ss);
    if ((f = best_fit(a, hp, s, ss))) {
        a->ctr.tree_hits++;
        return take(a, f, s, tail_is_cheaper(a, f, s), size, ss, ptr);
    }
    flush_all_bins(a);
    if (harvest(a) && a->n_streams > 1)
        consolidate(a);
    if ((f = best_fit(a, hp, s, ss))) {
        a->ctr.tree_hits++;
        return take(a, f, s, tail_is_cheaper(a, f, s), size, ss, ptr);
    }
    a->hopeless = 0;
    st = grow(a, hp, s, size, ss, ptr);
    if (st != CMB_ERR_OOM)
        return st;
    if (a->hopeless)
        goto out_oom;
    /* out of memory: give every cached page back and try once more */
    release_all(a);
    a->st.oom_retries++;
    if ((f = best_fit(a, hp, s, ss)))
        return take(a, f, s, tail_is_cheaper(a, f, s), size, ss, ptr);
    st = grow(a, hp, s, size, ss, ptr);
    if (st != CMB_ERR_OOM)
        return st;
out_oom:
    snprintf(a->err, sizeof a->err, "cmb: out of memory allocating %zu B: %llu pages held, %llu needed by live blocks",
             size, (unsigned long long)a->mapped_pages, (unsigned long long)needed_pages(a));
    return st;
}

static cmb_status allocate_locked(void *state, size_t size, cmb_stream stream, void **ptr)
{
    cmbx *a = state;
    if (!size || cmb_size_refuse(size, "cmb", a->err, sizeof a->err))
        return size ? CMB_ERR_OOM : CMB_ERR_INVALID;
    uint64_t s = round_up(size, CMB_ROUND);
    sstream *ss = stream_of(a, stream);
    if (!ss)
        return CMB_ERR_HOST_NOMEM;
    CMB_DEBUG_ONLY(if (++a->ops % CMB_VALIDATE_EVERY == 0) validate(a);)
    if (a->lay && lay_alloc(a, s, size, ss, ptr))
        return CMB_OK;
    bin *bn = &ss->bins[bin_index(s)];
    if (bn->head && bn->size == s) {
        blk *b = bn->head;
        bn->head = b->link;
        if (!--bn->n)
            ss->bin_mask &= ~(1ull << bin_index(s));
        b->state = B_LIVE;
        count_alloc(a, b, size);
        a->ctr.bin_hits++;
        *ptr = (void *)b->ptr;
        return CMB_OK;
    }
    return alloc_slow(a, s, size, ss, ptr);
}

static cmb_status deallocate_locked(void *state, void *ptr, size_t size, cmb_stream stream)
{
    cmbx *a = state;
    uint64_t v;
    if (!cmb_hashmap_get(&a->live, (uint64_t)(uintptr_t)ptr, &v) || ((blk *)(uintptr_t)v)->state != B_LIVE) {
        snprintf(a->err, sizeof a->err, "cmb: free of %p, which is not a live allocation", ptr);
        return CMB_ERR_INVALID;
    }
    blk *b = (blk *)(uintptr_t)v;
    if (round_up(size, CMB_ROUND) != b->size) {
        snprintf(a->err, sizeof a->err, "cmb: free of %p with size %zu; it was allocated with %llu (rounded)",
                 ptr, size, (unsigned long long)b->size);
        return CMB_ERR_INVALID;
    }
    CMB_DEBUG_ONLY(if (++a->ops % CMB_VALIDATE_EVERY == 0) validate(a);)
    sstream *fs = stream_of(a, stream);
    if (!fs) {
        /* no record for the freeing stream (host out of memory): order the
         * free by waiting for it, then treat it as freed on its own stream */
        cmb_up_stream_sync(a->up, stream);
        a->ctr.syncs++;
        fs = b->owner;
    }
    cmb_stat_decrease(&a->st.requested, (int64_t)size);
    cmb_stat_decrease(&a->st.allocated, (int64_t)b->size);
    cmb_stat_decrease(&a->st.blocks, 1);
    b->seq = ++a->seq;
    fs->last_free = b->seq;
    if (b->heap == H_LAYOUT) {
        lay_free(a, b, fs);
        return CMB_OK;
    }
    if (fs == b->owner) {
        if (a->use_bins) {
            unsigned i = bin_index(b->size);
            bin *bn = &fs->bins[i];
            if (bn->head && bn->size != b->size)
                flush_bin(a, fs, i);
            if (bn->n < CMB_BIN_DEPTH) {
                b->state = B_BINNED;
                b->link = bn->head;
                bn->head = b;
                bn->size = b->size;
                bn->n++;
                fs->bin_mask |= 1ull << i;
                return CMB_OK;
            }
        }
        b->also = NULL;
    } else {
        b->owner->last_free = b->seq;
        b->also = b->owner;
        b->owner = fs;
    }
    cmb_hashmap_remove(&a->live, (uint64_t)(uintptr_t)ptr, NULL);
    free_merge_insert(a, b);
    return CMB_OK;
}

/* --- trim / stats / lifetime ------------------------------------------------------------ */

static cmb_status trim_locked(void *state)
{
    cmbx *a = state;
    cmb_status st = release_all(a);
    CMB_DEBUG_ONLY(validate(a);)
    return st;
}

static uint64_t largest_free(const cmbx *a)
{
    uint64_t best = 0;
    for (int hp = 0; hp < N_HEAPS; hp++) {
        cmb_rbnode *n = cmb_rb_last(&a->heaps[hp].free);
        if (n && BLK(n)->size > best)
            best = BLK(n)->size;
    }
    return best;
}

static cmb_status stats_locked(void *state, cmb_alloc_stats *out)
{
    cmbx *a = state;
    *out = a->st;
    out->reserved.current = a->up->stats.held_current;
    out->reserved.peak = a->up->stats.held_peak;
    out->reserved.total = a->up->stats.held_total;
    out->largest_free = largest_free(a);
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                 CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM | CMB_STAT_OOM_RETRIES;
    return CMB_OK;
}

/* --- the entry points: one lock per instance ---------------------------------------------
 * Autograd's backward threads allocate and free concurrently; every public
 * method takes the instance's mutex, so the placement, the fast bins, the
 * stream records and the upstream (only ever called under it) see one
 * caller at a time. A fast-bin hit holds it for a few dozen instructions. */

static cmb_status cmb_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    cmbx *a = state;
    pthread_mutex_lock(&a->lock);
    cmb_status st = allocate_locked(state, size, stream, ptr);
    pthread_mutex_unlock(&a->lock);
    return st;
}

static cmb_status cmb_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    cmbx *a = state;
    pthread_mutex_lock(&a->lock);
    cmb_status st = deallocate_locked(state, ptr, size, stream);
    pthread_mutex_unlock(&a->lock);
    return st;
}

static cmb_status cmb_trim(void *state)
{
    cmbx *a = state;
    pthread_mutex_lock(&a->lock);
    cmb_status st = trim_locked(state);
    pthread_mutex_unlock(&a->lock);
    return st;
}

static cmb_status cmb_stats(void *state, cmb_alloc_stats *out)
{
    cmbx *a = state;
    pthread_mutex_lock(&a->lock);
    cmb_status st = stats_locked(state, out);
    pthread_mutex_unlock(&a->lock);
    return st;
}

/* For tests: the counters beyond cmb_alloc_stats. Returns the struct's
 * size, so a test that declares its own copy can check it still matches. */
size_t _cmb_cmb_counters(void *state, cmb_cmb_counters *out)
{
    cmbx *a = state;
    pthread_mutex_lock(&a->lock);
    *out = a->ctr;
    out->hwm_pages = a->hwm_pages;
    out->mapped_pages = a->mapped_pages;
    out->cached_pages = a->cached_pages;
    pthread_mutex_unlock(&a->lock);
    return sizeof *out;
}

static cmb_status cmb_destroy(void *state)
{
    cmbx *a = state;
    cmb_status first = CMB_OK;
    /* the caller no longer uses the memory (the harness synchronizes the
     * device first): every page goes, live or cached */
    first = lay_close(a);
    for (int hp = 0; hp < N_HEAPS; hp++) {
        heap *h = &a->heaps[hp];
        for (size_t i = 0; i < h->n_arenas; i++) {
            arena *ar = h->arenas[i];
            for (uint64_t p = 0; p < ar->pages; p++) {
                uint64_t e = p + 1;
                if (!ar->mapped[p])
                    continue;
                while (!pg_start(ar, e))
                    e++;
                cmb_status st = unmap_handles(a, ar, p, e - p);
                if (st != CMB_OK && first == CMB_OK)
                    first = st;
                p = e - 1;
            }
            cmb_status st = cmb_up_va_release(a->up, ar->res_va, ar->res_size);
            if (st != CMB_OK && first == CMB_OK)
                first = st;
            free(ar->mapped);
            free(ar);
        }
        free(h->arenas);
    }
    for (size_t i = 0; i < a->n_streams; i++) {
        if (a->streams[i]->has_event)
            cmb_up_event_destroy(a->up, a->streams[i]->ev);
        free(a->streams[i]);
    }
    free(a->streams);
    cmb_hashmap_free(&a->live);
    cmb_objpool_destroy(&a->pool);
    pthread_mutex_destroy(&a->lock);
    free(a);
    return first;
}

static const char *cmb_last_error(void *state)
{
    cmbx *a = state;
    return a->err[0] ? a->err : NULL;
}

/* --- debug: the whole structure, recounted ----------------------------------------------- */

#if CMB_DEBUG_ENABLED
/* Walks every arena's tiles and recounts what the counters claim. */
static void validate_arena(cmbx *a, const arena *ar, uint64_t *count)
{
    uintptr_t at = ar->base;
    cmb_assert_internal(ar->first && !ar->first->prev);
    for (const blk *b = ar->first; b; b = b->next) {
        cmb_assert_internal(b->ptr == at && b->size && b->ar == ar && b->heap == ar->heap);
        cmb_assert_internal(!b->next || b->next->prev == b);
        uint64_t p0 = (b->ptr - ar->base) >> a->shift, p1 = (blk_end(b) - ar->base + a->page - 1) >> a->shift;
        for (uint64_t p = p0; p < p1; p++)
            cmb_assert_internal((ar->mapped[p] & PG_MAPPED) == (b->state != B_HOLE));
        switch (b->state) {
        case B_HOLE:
            cmb_assert_internal(b->ptr % a->page == 0 && b->size % a->page == 0);
            cmb_assert_internal(!b->next || b->next->state != B_HOLE);
            count[0]++;
            break;
        case B_FREE:
            count[1]++;
            count[2] += inner_pages(a, b->ptr, blk_end(b));
            break;
        case B_LIVE:
            count[3]++;
            count[4] += b->size;
            break;
        case B_BINNED:
            count[5]++;
            break;
        default:
            cmb_assert_internal(0);
        }
        at += b->size;
    }
    cmb_assert_internal(at == ar->base + ar->size);
    for (uint64_t p = 0; p < ar->pages; p++) {
        /* every handle begins with a start: no continuation after a hole */
        cmb_assert_internal(ar->mapped[p] != PG_MAPPED || (p && ar->mapped[p - 1]));
        count[6] += ar->mapped[p] & PG_MAPPED;
    }
}

/* The layout's range: its blocks in order, none overlapping, inside it;
 * the live ones counted with the heaps'. */
static void validate_layout(cmbx *a, uint64_t *count)
{
    uintptr_t at = a->lay_base;
    for (cmb_rbnode *n = cmb_rb_first(&a->lay_occ); n; n = cmb_rb_next(n)) {
        blk *b = BLK(n);
        uint64_t v = 0;
        cmb_assert_internal(b->heap == H_LAYOUT && b->ptr >= at && blk_end(b) <= a->lay_base + a->lay_bytes);
        cmb_assert_internal(b->state == B_LIVE || b->state == B_FREE);
        if (b->state == B_LIVE) {
            cmb_assert_internal(cmb_hashmap_get(&a->live, b->ptr, &v) && v == (uint64_t)(uintptr_t)b);
            count[3]++;
            count[4] += b->size;
        }
        at = blk_end(b);
    }
}

static void validate(cmbx *a)
{
    /* holes, free, cached, live, allocated, binned, mapped */
    uint64_t count[7] = {0};
    for (int hp = 0; hp < N_HEAPS; hp++)
        for (size_t i = 0; i < a->heaps[hp].n_arenas; i++)
            validate_arena(a, a->heaps[hp].arenas[i], count);
    if (a->lay)
        validate_layout(a, count);
    uint64_t binned = 0;
    for (size_t i = 0; i < a->n_streams; i++) {
        sstream *s = a->streams[i];
        cmb_assert_internal(s->ordered <= a->seq && s->last_free <= a->seq);
        for (unsigned j = 0; j < CMB_NBINS; j++) {
            uint32_t n = 0;
            for (blk *b = s->bins[j].head; b; b = b->link, n++)
                cmb_assert_internal(b->state == B_BINNED && b->size == s->bins[j].size && b->owner == s);
            cmb_assert_internal(n == s->bins[j].n && !n == !(s->bin_mask & (1ull << j)));
            binned += n;
        }
    }
    cmb_assert_internal(count[0] == a->heaps[0].holes.count + a->heaps[1].holes.count);
    cmb_assert_internal(count[1] == a->heaps[0].free.count + a->heaps[1].free.count);
    cmb_assert_internal(count[2] == a->cached_pages && count[6] == a->mapped_pages);
    cmb_assert_internal((int64_t)count[3] == a->st.blocks.current && (int64_t)count[4] == a->st.allocated.current);
    cmb_assert_internal(count[5] == binned && count[3] + count[5] == a->live.count);
    cmb_assert_internal((a->mapped_pages << a->shift) + (a->lay_mapped ? a->lay_bytes : 0) ==
                        (uint64_t)a->up->stats.held_current);
    cmb_assert_internal(needed_pages(a) <= a->hwm_pages);
}
#else
static inline void validate(cmbx *a)
{
    (void)a;
}
#endif

/* --- options and the table ------------------------------------------------------------------ */

/* The defaults above (CMB_SLACK_DEFAULT, CMB_SMALL_MAX_DEFAULT, as text);
 * bounds as create() checks them (page also against
 * the upstream's granularity, known only there). */
static const cmb_option_decl cmb_options_decl[] = {
    CMB_OPTION("slack", CMB_OPT_REAL, "0.005", "0", "1", "share of the peak need",
               "the budget of mapped pages is (1 + slack) x the peak pages live blocks touch"),
    CMB_OPTION("keep", CMB_OPT_REAL, CMB_KEEP_DEFAULT, "0", "1", "share of the peak requested",
               "once the need stops rising, growths widen the budget up to (1 + keep) x the peak requested bytes"),
    CMB_OPTION("small_max", CMB_OPT_SIZE, "1MiB", "0", "1TiB", "B",
               "requests below this size go to the small heap, away from the large blocks (0: one heap)"),
    CMB_OPTION("fast_bins", CMB_OPT_BOOL, "true", NULL, NULL, NULL,
               "per-stream exact-size bins of freed blocks of any size: a repeated request is a list pop"),
    CMB_OPTION_EX("page", CMB_OPT_SIZE, "(the upstream's granularity)", "0", "16GiB", "B",
                  "the unit mapped per upstream call: a power of two from the granularity to 16 GiB", NULL,
                  CMB_OPT_POW2, NULL),
    CMB_OPTION("chunk", CMB_OPT_INT, CMB_CHUNK_DEFAULT, "0", "1048576", "pages",
               "the most pages one map call (one physical handle) covers; 0: a whole growth in one"),
    CMB_OPTION("fresh", CMB_OPT_INT, CMB_FRESH_DEFAULT, "0", "1048576", "allocations",
               "a growth avoids pages the budget moved away within this many allocations, where another place "
               "fits (their old work may still run: mapping there again would wait for it); 0: off"),
    CMB_OPTION_EX("layout", CMB_OPT_STRING, "(none)", NULL, NULL, NULL,
                  "a trace recorded from this program: its allocations laid out ahead in one range mapped once, "
                  "where the requests that repeat it go (the path may hold neither ':' nor '@')",
                  NULL, CMB_OPT_FILE, NULL),
    CMB_OPTION_END};

static cmb_status cmb_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    cmb_options o;
    cmb_status st = cmb_options_read(&o, "cmb", cmb_options_decl, cfg);
    if (st != CMB_OK)
        return st;
    double slack = cmb_opt_real(&o, "slack");
    double keep = cmb_opt_real(&o, "keep");
    uint64_t small_max = cmb_opt_size(&o, "small_max");
    int bins = cmb_opt_bool(&o, "fast_bins");
    uint64_t page = cmb_opt_size(&o, "page");
    uint64_t chunk = (uint64_t)cmb_opt_int(&o, "chunk");
    uint64_t fresh = (uint64_t)cmb_opt_int(&o, "fresh");
    if (!(slack >= 0 && slack <= 1)) {
        snprintf(cfg->error, cfg->error_len, "cmb: slack must be in [0, 1] (a share of the peak need)");
        return CMB_ERR_INVALID;
    }
    if (!(keep >= 0 && keep <= 1)) {
        snprintf(cfg->error, cfg->error_len, "cmb: keep must be in [0, 1] (a share of the peak requested)");
        return CMB_ERR_INVALID;
    }
    if (small_max > (1ull << 40)) {
        snprintf(cfg->error, cfg->error_len, "cmb: small_max must be at most 1 TiB");
        return CMB_ERR_INVALID;
    }
    if (!up)
        return CMB_ERR_INVALID;
    uint64_t g = up->granularity;
    if (!up->ops->va_reserve || !g || (g & (g - 1)) || g < CMB_ROUND) {
        snprintf(cfg->error, cfg->error_len, "cmb: needs an upstream with virtual memory (vmm or sim)");
        return CMB_ERR_UNSUPPORTED;
    }
    if (!page)
        page = g;
    if ((page & (page - 1)) || page < g || page > (1ull << 34)) {
        snprintf(cfg->error, cfg->error_len,
                 "cmb: page must be a power of two from the upstream's granularity (%llu B) to 16 GiB",
                 (unsigned long long)g);
        return CMB_ERR_INVALID;
    }
    size_t free_b = 0, total_b = 0;
    if (cmb_up_mem_info(up, &free_b, &total_b) != CMB_OK || !total_b) {
        snprintf(cfg->error, cfg->error_len, "cmb: cannot read the device's memory size");
        return CMB_ERR_UNSUPPORTED;
    }

    cmbx *a = calloc(1, sizeof *a);
    if (!a)
        return CMB_ERR_HOST_NOMEM;
    if (cmb_hashmap_init(&a->live, 1024)) {
        free(a);
        return CMB_ERR_HOST_NOMEM;
    }
    if (pthread_mutex_init(&a->lock, NULL)) {
        cmb_hashmap_free(&a->live);
        free(a);
        return CMB_ERR_HOST_NOMEM;
    }
    cmb_objpool_init(&a->pool, sizeof(blk));
    a->up = up;
    a->page = page;
    a->shift = (unsigned)__builtin_ctzll(page);
    a->small_max = small_max;
    a->slack = slack;
    a->keep = keep;
    a->chunk_pages = chunk ? chunk : UINT64_MAX;
    a->fresh = fresh;
    a->use_bins = bins;
    const char *layout = cmb_opt_str(&o, "layout");
    if (layout && *layout && (st = lay_open(a, layout, cfg->error, cfg->error_len)) != CMB_OK) {
        cmb_hashmap_free(&a->live);
        cmb_objpool_destroy(&a->pool);
        pthread_mutex_destroy(&a->lock);
        free(a);
        return st;
    }
    for (int hp = 0; hp < N_HEAPS; hp++) {
        cmb_rb_init(&a->heaps[hp].free);
        cmb_rb_init(&a->heaps[hp].holes);
        /* the device's size of address space, twice that for large blocks:
         * cheap to reserve, and holes left by unmapping rarely exhaust it */
        a->heaps[hp].arena_size = round_up((uint64_t)total_b, page) * (hp == H_LARGE ? 2 : 1);
    }
    *state = a;
    return CMB_OK;
}

const cmb_allocator_methods cmb_cmb_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "cmb",
    .summary = "the suite's own: byte-packed VA, pages mapped on demand in handles of up to 4, whole handles "
               "unmapped to a budget (stitching), fast bins, stream-ordered reuse",
    .flags = CMB_ALLOC_USES_UPSTREAM | CMB_ALLOC_NEEDS_VMM,
    .create = cmb_create,
    .allocate = cmb_allocate,
    .deallocate = cmb_deallocate,
    .trim = cmb_trim,
    .stats = cmb_stats,
    .destroy = cmb_destroy,
    .last_error = cmb_last_error,
    .options = cmb_options_decl,
};
