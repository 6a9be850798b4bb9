/* pl_hooks.c - what PyTorch's CUDAPluggableAllocator forwards besides
 * malloc and free: record_stream, the memory fraction, and the private
 * pools of CUDA graphs and MemPool contexts (torch/csrc/cuda/
 * CUDAPluggableAllocator.h, PyTorch 2.11: set_record_stream_fn,
 * set_memory_fraction_fn, set_begin_allocate_to_pool,
 * set_end_allocate_to_pool_fn, set_release_pool). The C++ signatures are
 * adapted in torch_entry.cc; everything here is C and policy-independent.
 *
 * record_stream. A block used on a stream other than its own must not be
 * reused until that stream's work, as enqueued when the block is freed, is
 * done. As PyTorch's caching allocator does (c10/cuda/
 * CUDACachingAllocator.cpp, insert_events / process_events), the free
 * records one event on each such stream and the block goes back to the
 * policy only once every event completed: checked at the next
 * allocations, waited for before an allocation is given up as out of
 * memory. While a graph captures, no event may be queried or recorded
 * outside it, so frees then wait for the capture's end to record theirs.
 *
 * Graph pools. Between begin and end, an allocation whose stream the
 * filter accepts (the streams being captured, or the thread of a MemPool
 * context) comes from the pool of that MempoolId: an instance of the
 * device's policy, opened at the pool's first allocation over a child of
 * the device's upstream (one memory, one cap), so that freed memory is
 * reused and split across the captures sharing the pool, as PyTorch's
 * private pools do; closed once PyTorch releases the pool and its last
 * block is freed. Where no second instance opens, segments from the
 * upstream, reused only by requests of the same rounded size. The device's
 * policy never sees a pool's blocks: its bookkeeping may query events or
 * free memory, which a capture forbids (cudaErrorStreamCapture*); the
 * pool's instance has its stream operations held back while a capture may
 * run. Every policy over an upstream can be captured; one without an
 * upstream (the driver's own allocators) is refused by name.
 *
 * Memory fraction. fraction x the device's bytes (after CMB_CAPACITY) caps
 * what the upstream may hold, as PyTorch caps its reserved bytes: the
 * policy sees an out-of-memory from its upstream and does what it does
 * then (free cached blocks, retry).
 */
#include <stdlib.h>
#include <string.h>

#include "../allocators/upstream.h"
#include "pl_internal.h"

/* --- events over the sim upstream --------------------------------------------------- */

/* The sim's work completes when issued; a held stream is one whose work is
 * still running: its events stay pending until it is released, or until
 * someone waits on them (a synchronization finishes the work). */
#define PL_SIM_HELD 16

typedef struct pl_sim_event {
    void *stream;
    uint64_t epoch;
    int done;
} pl_sim_event;

static struct {
    pthread_mutex_t lock;
    void *stream[PL_SIM_HELD];
    int held[PL_SIM_HELD];
    uint64_t epoch[PL_SIM_HELD];
} sim = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int sim_slot(void *stream, int create)
{
    int free_slot = -1;
    for (int i = 0; i < PL_SIM_HELD; i++) {
        if (sim.stream[i] == stream && (sim.held[i] || sim.epoch[i]))
            return i;
        if (free_slot < 0 && !sim.held[i] && !sim.epoch[i])
            free_slot = i;
    }
    if (create && free_slot >= 0)
        sim.stream[free_slot] = stream;
    return create ? free_slot : -1;
}

int cmb_pluggable_sim_hold_stream(void *stream, int held)
{
    pthread_mutex_lock(&sim.lock);
    int i = sim_slot(stream, 1);
    if (i >= 0) {
        if (!held && sim.held[i])
            sim.epoch[i]++; /* the work recorded so far is done */
        sim.held[i] = held != 0;
    }
    pthread_mutex_unlock(&sim.lock);
    if (i < 0)
        _cmb_pl_error(0, "cmb_pluggable_sim_hold_stream: at most %d streams held at once", PL_SIM_HELD);
    return i < 0 ? -1 : 0;
}

static int sim_record(void *stream, void **ev)
{
    pl_sim_event *e = calloc(1, sizeof *e);
    if (!e)
        return -1;
    e->stream = stream;
    pthread_mutex_lock(&sim.lock);
    int i = sim_slot(stream, 0);
    e->epoch = i >= 0 ? sim.epoch[i] : 0;
    e->done = i < 0 || !sim.held[i];
    pthread_mutex_unlock(&sim.lock);
    *ev = e;
    return 0;
}

static int sim_done(pl_sim_event *e)
{
    if (e->done)
        return 1;
    pthread_mutex_lock(&sim.lock);
    int i = sim_slot(e->stream, 0);
    e->done = i < 0 || sim.epoch[i] != e->epoch;
    pthread_mutex_unlock(&sim.lock);
    return e->done;
}

int _cmb_pl_event_record(pl_device *d, void *stream, void **ev)
{
    if (d->real)
        return _cmb_pl_cuda_event_record(stream, ev);
    _cmb_pl_capture_check(d, 0);
    return sim_record(stream, ev);
}

int _cmb_pl_event_done(pl_device *d, void *ev)
{
    if (d->real)
        return _cmb_pl_cuda_event_done(ev);
    _cmb_pl_capture_check(d, 0);
    return sim_done(ev);
}

void _cmb_pl_event_wait(pl_device *d, void *ev)
{
    if (d->real) {
        _cmb_pl_cuda_event_wait(ev);
        return;
    }
    _cmb_pl_capture_check(d, 0);
    ((pl_sim_event *)ev)->done = 1;
}

/* --- capture mode ------------------------------------------------------------------------- */

static _Thread_local int tl_sim_relaxed; /* the sim's per-thread capture mode */

int _cmb_pl_relax(pl_device *d)
{
    if (d->real)
        return _cmb_pl_capture_relax();
    return tl_sim_relaxed++;
}

void _cmb_pl_unrelax(pl_device *d, int mode)
{
    if (mode == PL_NO_MODE)
        return;
    if (d->real)
        _cmb_pl_capture_restore(mode);
    else
        tl_sim_relaxed = mode;
}

void _cmb_pl_capture_check(pl_device *d, int relaxed_ok)
{
    if (!d->real && atomic_load_explicit(&d->pools_active, memory_order_relaxed) &&
        !(relaxed_ok && tl_sim_relaxed))
        atomic_fetch_add_explicit(&d->capture_faults, 1, memory_order_relaxed);
}

int64_t cmb_pluggable_sim_capture_faults(int device)
{
    pl_device *d = _cmb_pl_ready(device);
    return d ? atomic_load_explicit(&d->capture_faults, memory_order_relaxed) : -1;
}

void _cmb_pl_event_destroy(pl_device *d, void *ev)
{
    if (d->real)
        _cmb_pl_cuda_event_destroy(ev);
    else
        free(ev);
}

/* --- record_stream ------------------------------------------------------------------------ */

static int use_add(pl_use *u, void *stream)
{
    for (uint32_t i = 0; i < u->n; i++)
        if (u->streams[i] == stream)
            return 0;
    if (u->n == u->cap) {
        uint32_t cap = u->cap ? 2 * u->cap : 4;
        void **s = realloc(u->streams, cap * sizeof *s);
        if (!s)
            return -1;
        u->streams = s;
        u->cap = cap;
    }
    u->streams[u->n++] = stream;
    return 0;
}

static void use_free(pl_use *u)
{
    if (u) {
        free(u->streams);
        free(u);
    }
}

static int record_locked(pl_device *d, void *ptr, void *stream)
{
    uint64_t v;
    pl_use *u;
    if (cmb_hashmap_get(&d->uses, (uint64_t)(uintptr_t)ptr, &v)) {
        u = (pl_use *)(uintptr_t)v;
    } else {
        if (!(u = calloc(1, sizeof *u)))
            return -1;
        if (cmb_hashmap_put(&d->uses, (uint64_t)(uintptr_t)ptr, (uint64_t)(uintptr_t)u)) {
            free(u);
            return -1;
        }
        atomic_fetch_add_explicit(&d->uses_n, 1, memory_order_release);
    }
    return use_add(u, stream);
}

int cmb_pluggable_record_stream(void *ptr, int device, void *stream)
{
    if (!ptr)
        return 0;
    pl_device *d = _cmb_pl_ready(device);
    if (!d) {
        _cmb_pl_error(0, "record_stream of %p on device %d, which has no allocator instance", ptr, device);
        return -1;
    }
    pthread_mutex_lock(&d->lock);
    int rc = record_locked(d, ptr, stream);
    pthread_mutex_unlock(&d->lock);
    if (rc)
        _cmb_pl_error(1, "device %d: host out of memory recording a stream use of %p", device, ptr);
    return rc;
}

/* Records the events of a deferred free (no capture underway). 0 or -1. */
static int record_events(pl_device *d, pl_deferred *f)
{
    if (!f->uses) { /* a free held back by a capture, with no foreign stream */
        f->events = (void **)f;
        return 0;
    }
    void **ev = calloc(f->uses->n, sizeof *ev);
    if (!ev)
        return -1;
    for (uint32_t i = 0; i < f->uses->n; i++) {
        if (_cmb_pl_event_record(d, f->uses->streams[i], &ev[i])) {
            /* No event: wait for what was recorded so far and for nothing
             * else (the stream is gone or broken; its work cannot be awaited). */
            _cmb_pl_error(1, "device %d: cannot record an event for the free of %p (its stream's work is not waited for)",
                          d->ordinal, f->ptr);
            ev[i] = NULL;
        }
    }
    f->events = ev;
    return 0;
}

/* The block's foreign streams, its own removed; NULL when none. */
static pl_use *take_uses(pl_device *d, void *ptr, void *stream)
{
    uint64_t v;
    if (!d->uses.count || !cmb_hashmap_remove(&d->uses, (uint64_t)(uintptr_t)ptr, &v))
        return NULL;
    pl_use *u = (pl_use *)(uintptr_t)v;
    uint32_t k = 0;
    atomic_fetch_sub_explicit(&d->uses_n, 1, memory_order_release);
    for (uint32_t i = 0; i < u->n; i++) /* its own stream orders itself */
        if (u->streams[i] != stream)
            u->streams[k++] = u->streams[i];
    u->n = k;
    if (!k) {
        use_free(u);
        return NULL;
    }
    return u;
}

static void wait_now(pl_device *d, pl_use *u)
{
    for (uint32_t i = 0; u && i < u->n; i++) {
        void *ev;
        if (!_cmb_pl_event_record(d, u->streams[i], &ev)) {
            _cmb_pl_event_wait(d, ev);
            _cmb_pl_event_destroy(d, ev);
        }
    }
}

int _cmb_pl_defer_free(pl_device *d, void *ptr, uint64_t size, void *stream)
{
    int capturing = atomic_load_explicit(&d->pools_active, memory_order_relaxed) != 0;
    pl_use *u = take_uses(d, ptr, stream);
    /* While a graph captures, every free of a policy's block waits for the
     * capture's end: a policy's free may record or query events on streams
     * the capture forbids. A pool's own block goes back to its pool. */
    if (!u && (!capturing || (d->pool_of.count && cmb_hashmap_get(&d->pool_of, (uint64_t)(uintptr_t)ptr, NULL))))
        return 0;
    if (d->n_deferred == d->cap_deferred) {
        uint32_t cap = d->cap_deferred ? 2 * d->cap_deferred : 16;
        pl_deferred *g = realloc(d->deferred, cap * sizeof *g);
        if (!g)
            goto out_now;
        d->deferred = g;
        d->cap_deferred = cap;
    }
    pl_deferred *f = &d->deferred[d->n_deferred];
    *f = (pl_deferred){.ptr = ptr, .size = size, .stream = stream, .uses = u};
    if (!capturing && record_events(d, f))
        goto out_now;
    d->n_deferred++;
    return 1;
out_now:
    /* No room to defer: wait for the streams' work now (correct, slower). */
    if (capturing)
        _cmb_pl_error(1, "device %d: host out of memory deferring a free during a capture", d->ordinal);
    else
        wait_now(d, u);
    use_free(u);
    return 0;
}

/* 1 when every event of f completed (waiting for them when `wait`). */
static int deferred_done(pl_device *d, pl_deferred *f, int wait)
{
    if (!f->events && (atomic_load_explicit(&d->pools_active, memory_order_relaxed) || record_events(d, f)))
        return 0; /* a capture is underway: its end records them */
    for (uint32_t i = 0; f->uses && i < f->uses->n; i++) {
        if (!f->events[i])
            continue;
        if (wait)
            _cmb_pl_event_wait(d, f->events[i]);
        else if (!_cmb_pl_event_done(d, f->events[i]))
            return 0;
        _cmb_pl_event_destroy(d, f->events[i]);
        f->events[i] = NULL;
    }
    return 1;
}

void _cmb_pl_collect_deferred(pl_device *d, int wait)
{
    uint32_t k = 0;
    /* A capture forbids querying, waiting for or recording events, and the
     * policy's free may do either: the capture's end collects them. */
    if (atomic_load_explicit(&d->pools_active, memory_order_relaxed))
        return;
    for (uint32_t i = 0; i < d->n_deferred; i++) {
        pl_deferred *f = &d->deferred[i];
        if (!deferred_done(d, f, wait)) {
            d->deferred[k++] = *f;
            continue;
        }
        if (f->uses)
            free(f->events);
        use_free(f->uses);
        _cmb_pl_release_locked(d, f->ptr, f->size, f->stream);
    }
    d->n_deferred = k;
}

/* --- graph pools ---------------------------------------------------------------------------- */

#define PL_POOL_ROUND 512 /* PyTorch's kMinBlockSize (c10/cuda/CUDACachingAllocator.cpp) */

static pl_pool *pool_find(pl_device *d, uint64_t id0, uint64_t id1)
{
    for (pl_pool *p = d->pools; p; p = p->next)
        if (p->id0 == id0 && p->id1 == id1)
            return p;
    return NULL;
}

static void pool_drop_filter(pl_pool *p)
{
    if (p->filter_free && p->filter_ctx)
        p->filter_free(p->filter_ctx);
    p->filter = NULL;
    p->filter_ctx = NULL;
    p->filter_free = NULL;
}

/* A segment pool's segments come from the device's upstream, so caps and
 * the reserved count cover them, except over vmm on a GPU: mapping pages
 * during a capture is what PyTorch's own allocator avoids (its private
 * pools never use expandable segments), so there they are cudaMalloc'd,
 * as PyTorch's are, and counted beside the upstream (pools_direct). */
static int pool_direct(const pl_device *d)
{
    return d->real && d->up && !strcmp(d->up->name, "vmm");
}

static cmb_status segment_alloc(pl_device *d, size_t size, void *stream, void **ptr)
{
    _cmb_pl_capture_check(d, 1); /* the caller relaxed the capture mode */
    if (!pool_direct(d))
        return cmb_up_alloc(d->up, size, (cmb_stream)stream, ptr);
    if (_cmb_pl_cuda_malloc(size, ptr))
        return CMB_ERR_OOM;
    d->pools_direct += size;
    return CMB_OK;
}

static void segment_free(pl_device *d, void *ptr, size_t size)
{
    _cmb_pl_capture_check(d, 0);
    if (!pool_direct(d)) {
        cmb_up_free(d->up, ptr, size, NULL);
        return;
    }
    _cmb_pl_cuda_free(ptr);
    d->pools_direct -= size;
}

/* Whether a pool's allocation that found no memory may ask the policy to
 * release what it caches, while a capture may be underway: over vmm its
 * upstream gives pages back with cuMemUnmap and cuMemRelease, which are no
 * stream operations (a policy's trim synchronizes only the streams it
 * allocated on, never the captured ones, whose allocations are the pool's);
 * over cuda, cudaFree synchronizes the device and would end the capture.
 * The sim stands for vmm. */
static int pool_may_trim(const pl_device *d)
{
    return d->m->trim && d->up && (!d->real || !strcmp(d->up->name, "vmm"));
}

/* Returns a released, empty pool's segments to the upstream and unlinks it
 * (never while a capture runs: cudaFree would end it). */
static void pool_destroy_if_done(pl_device *d, pl_pool *p)
{
    if (!p->released || p->n_live || p->active || atomic_load_explicit(&d->pools_active, memory_order_relaxed))
        return;
    for (uint32_t i = 0; i < p->n_blocks; i++) {
        cmb_hashmap_remove(&d->pool_of, (uint64_t)(uintptr_t)p->blocks[i].ptr, NULL);
        segment_free(d, p->blocks[i].ptr, (size_t)p->blocks[i].size);
    }
    if (p->pol.state) {
        d->pools_own -= (uint64_t)p->pol.up->stats.held_current;
        cmb_policy_close(&p->pol, NULL); /* its memory back to the device's upstream */
    }
    d->pools_reserved -= p->reserved;
    atomic_fetch_sub_explicit(&d->pools_n, 1, memory_order_release);
    for (pl_pool **pp = &d->pools; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    pool_drop_filter(p);
    cmb_hashmap_free(&p->index);
    free(p->blocks);
    free(p);
}

static void pool_report_oom(pl_device *d, size_t size, cmb_status st)
{
    _cmb_pl_report_oom(d, size, st,
                       pool_may_trim(d) ? "the graph pool's segment, after the policy released its cached memory"
                       : d->m->trim ? "the graph pool's segment (the policy's cached memory cannot be released "
                                      "during a capture over the cuda upstream: cudaFree synchronizes the device)"
                                    : "the graph pool's segment");
}

/* --- a pool as an instance of the policy ------------------------------------------------- */

/* At the pool's first allocation: the device's policy once more, over a
 * child of its upstream, so the pool reuses and splits its freed memory
 * as the policy does (PyTorch's private pools are caching allocators of
 * their own) and its bytes count against the device's cap. -1: the
 * segment pool serves it instead (said once). */
static int capturing(void *ctx)
{
    return atomic_load_explicit(&((pl_device *)ctx)->pools_active, memory_order_relaxed) != 0;
}

/* Before the instance is created: while a capture may be underway, its
 * events and stream synchronizations are held back ("not yet"), which the
 * policy meets as work still pending. */
static void pool_upstream_opened(void *ctx, cmb_upstream *up)
{
    cmb_upstream_hold_stream_ops(up, capturing, ctx);
}

static int pool_open(pl_device *d, pl_pool *p)
{
    char why[400] = "";
    cmb_policy_place place = {
        .device = d->ordinal,
        .sim = !d->real,
        .parent = d->up,
        .upstream_opened = pool_upstream_opened,
        .ctx = d,
    };
    _cmb_pl_capture_check(d, 1); /* creating may take memory: the caller relaxed the mode */
    if (cmb_policy_open(_cmb_pl_spec(), d->m, &place, &p->pol, why, sizeof why) == CMB_OK) {
        d->pools_own += (uint64_t)p->pol.up->stats.held_current;
        return 0;
    }
    p->segments = 1;
    _cmb_pl_error(1, "device %d: a graph pool's own instance of %s: %s (the pool reuses only blocks of the same size)",
                  d->ordinal, d->spec, why);
    return -1;
}

static cmb_status pool_policy_alloc(pl_device *d, pl_pool *p, size_t size, void *stream, void **ptr)
{
    int64_t held = p->pol.up->stats.held_current;
    _cmb_pl_capture_check(d, 1);
    cmb_status st = d->m->allocate(p->pol.state, size, (cmb_stream)stream, ptr);
    if (st != CMB_OK && pool_may_trim(d)) {
        /* The memory the policy caches serves the pool: released, then retried. */
        d->m->trim(d->policy);
        d->pool_trims++;
        st = d->m->allocate(p->pol.state, size, (cmb_stream)stream, ptr);
    }
    d->pools_own += (uint64_t)(p->pol.up->stats.held_current - held);
    return st;
}

static int pool_take_policy(pl_device *d, pl_pool *p, size_t size, void *stream, void **out)
{
    void *ptr = NULL;
    cmb_status st = pool_policy_alloc(d, p, size, stream, &ptr);
    if (st != CMB_OK) {
        pool_report_oom(d, size, st);
        return -1;
    }
    if (cmb_hashmap_put(&p->index, (uint64_t)(uintptr_t)ptr, size) ||
        cmb_hashmap_put(&d->pool_of, (uint64_t)(uintptr_t)ptr, (uint64_t)(uintptr_t)p)) {
        cmb_hashmap_remove(&p->index, (uint64_t)(uintptr_t)ptr, NULL);
        d->m->deallocate(p->pol.state, ptr, size, (cmb_stream)stream);
        _cmb_pl_error(1, "device %d: host out of memory for a graph pool", d->ordinal);
        return -1;
    }
    uint64_t rounded = (size + PL_POOL_ROUND - 1) / PL_POOL_ROUND * PL_POOL_ROUND;
    p->n_live++;
    p->allocated += rounded;
    d->pools_allocated += rounded;
    *out = ptr;
    return 0;
}

/* A live block of the pool's instance back to it (device lock held). */
static int pool_give_policy(pl_device *d, pl_pool *p, void *ptr, void *stream)
{
    uint64_t size;
    if (!cmb_hashmap_remove(&p->index, (uint64_t)(uintptr_t)ptr, &size))
        return 0; /* freed twice: the policy's refusal counts it */
    cmb_hashmap_remove(&d->pool_of, (uint64_t)(uintptr_t)ptr, NULL);
    int64_t held = p->pol.up->stats.held_current;
    /* A capture may be underway: whatever the policy gives back to its
     * upstream then goes in relaxed mode, as its allocations do. */
    int mode = atomic_load_explicit(&d->pools_active, memory_order_relaxed) ? _cmb_pl_relax(d) : PL_NO_MODE;
    d->m->deallocate(p->pol.state, ptr, (size_t)size, (cmb_stream)stream);
    _cmb_pl_unrelax(d, mode);
    d->pools_own += (uint64_t)(p->pol.up->stats.held_current - held);
    uint64_t rounded = (size + PL_POOL_ROUND - 1) / PL_POOL_ROUND * PL_POOL_ROUND;
    p->n_live--;
    p->allocated -= rounded;
    d->pools_allocated -= rounded;
    pool_destroy_if_done(d, p);
    return 1;
}

/* --- a pool of segments (where no instance opens) ------------------------------------------- */

static int pool_take(pl_device *d, pl_pool *p, size_t size, void *stream, void **out)
{
    if (!p->segments && (p->pol.state || !pool_open(d, p)))
        return pool_take_policy(d, p, size, stream, out);
    uint64_t rounded = (size + PL_POOL_ROUND - 1) / PL_POOL_ROUND * PL_POOL_ROUND;
    void *ptr = NULL;
    for (uint32_t i = 0; i < p->n_blocks; i++) /* a freed block of the same size */
        if (!p->blocks[i].live && p->blocks[i].size == rounded) {
            p->blocks[i].live = 1;
            ptr = p->blocks[i].ptr;
            goto out_live;
        }
    if (p->n_blocks == p->cap_blocks) {
        uint32_t cap = p->cap_blocks ? 2 * p->cap_blocks : 64;
        pl_pool_block *b = realloc(p->blocks, cap * sizeof *b);
        if (!b)
            return -1;
        p->blocks = b;
        p->cap_blocks = cap;
    }
    cmb_status st = segment_alloc(d, (size_t)rounded, stream, &ptr);
    if (st != CMB_OK && pool_may_trim(d)) {
        /* The memory the policy caches serves the pool: released, then retried. */
        d->m->trim(d->policy);
        d->pool_trims++;
        st = segment_alloc(d, (size_t)rounded, stream, &ptr);
    }
    if (st != CMB_OK) {
        pool_report_oom(d, size, st);
        return -1;
    }
    if (cmb_hashmap_put(&p->index, (uint64_t)(uintptr_t)ptr, p->n_blocks) ||
        cmb_hashmap_put(&d->pool_of, (uint64_t)(uintptr_t)ptr, (uint64_t)(uintptr_t)p)) {
        cmb_hashmap_remove(&p->index, (uint64_t)(uintptr_t)ptr, NULL);
        segment_free(d, ptr, (size_t)rounded);
        _cmb_pl_error(1, "device %d: host out of memory for a graph pool", d->ordinal);
        return -1;
    }
    p->blocks[p->n_blocks++] = (pl_pool_block){.ptr = ptr, .size = rounded, .live = 1};
    p->reserved += rounded;
    d->pools_reserved += rounded;
out_live:
    p->n_live++;
    p->allocated += rounded;
    d->pools_allocated += rounded;
    *out = ptr;
    return 0;
}

int _cmb_pl_pool_alloc(pl_device *d, size_t size, void *stream, void **out)
{
    for (pl_pool *p = d->pools; p; p = p->next) {
        if (!p->active || (p->filter && !p->filter(p->filter_ctx, stream)))
            continue;
        *out = NULL;
        pool_take(d, p, size, stream, out);
        return 1;
    }
    return 0;
}

int _cmb_pl_pool_free(pl_device *d, void *ptr, void *stream)
{
    uint64_t v, i;
    (void)stream;
    if (!cmb_hashmap_get(&d->pool_of, (uint64_t)(uintptr_t)ptr, &v))
        return 0;
    pl_pool *p = (pl_pool *)(uintptr_t)v;
    if (p->pol.state)
        return pool_give_policy(d, p, ptr, stream);
    if (!cmb_hashmap_get(&p->index, (uint64_t)(uintptr_t)ptr, &i) || !p->blocks[i].live)
        return 0; /* freed twice: the policy's refusal counts it */
    p->blocks[i].live = 0;
    p->n_live--;
    p->allocated -= p->blocks[i].size;
    d->pools_allocated -= p->blocks[i].size;
    pool_destroy_if_done(d, p);
    return 1;
}

static int pool_begin_locked(pl_device *d, uint64_t id0, uint64_t id1, int (*filter)(void *, void *), void *ctx,
                             void (*ctx_free)(void *))
{
    pl_pool *p = pool_find(d, id0, id1);
    if (!p) {
        if (!(p = calloc(1, sizeof *p)) || cmb_hashmap_init(&p->index, 64)) {
            free(p);
            return -1;
        }
        p->id0 = id0;
        p->id1 = id1;
        p->next = d->pools;
        d->pools = p;
        atomic_fetch_add_explicit(&d->pools_n, 1, memory_order_release);
    }
    pool_drop_filter(p); /* the latest begin's filter routes */
    p->filter = filter;
    p->filter_ctx = ctx;
    p->filter_free = ctx_free;
    p->released = 0;
    if (p->active++ == 0)
        atomic_fetch_add_explicit(&d->pools_active, 1, memory_order_relaxed);
    return 0;
}

int cmb_pluggable_pool_begin(int device, uint64_t id0, uint64_t id1, int (*filter)(void *ctx, void *stream),
                             void *ctx, void (*ctx_free)(void *ctx))
{
    pl_device *d = _cmb_pl_get_device(device);
    int rc = -1;
    if (!d)
        goto out_ctx;
    if (!d->up) {
        _cmb_pl_error(1, "device %d: %s allocates through the CUDA driver itself and has no upstream to draw a graph's "
                      "private pool from: CUDA graph capture and MemPool contexts are refused under it", device, d->spec);
        goto out_ctx;
    }
    pthread_mutex_lock(&d->lock);
    rc = pool_begin_locked(d, id0, id1, filter, ctx, ctx_free);
    pthread_mutex_unlock(&d->lock);
    if (rc)
        _cmb_pl_error(1, "device %d: host out of memory for a graph pool", device);
    if (!rc)
        return 0;
out_ctx:
    if (ctx_free && ctx)
        ctx_free(ctx);
    return -1;
}

/* pool_end and pool_release may give memory back (cudaFree): on the pool's
 * device, whichever is the caller's (PyTorch's reset runs in a destructor). */
static int enter(pl_device *d, int *saved)
{
    char err[PL_ERR_LEN];
    *saved = -1;
    if (d->real && _cmb_pl_enter(d->ordinal, saved, err, sizeof err)) {
        _cmb_pl_error(1, "%s", err);
        return -1;
    }
    return 0;
}

int cmb_pluggable_pool_end(int device, uint64_t id0, uint64_t id1)
{
    pl_device *d = _cmb_pl_ready(device);
    pl_pool *p;
    int saved;
    if (!d || enter(d, &saved))
        return -1;
    pthread_mutex_lock(&d->lock);
    if ((p = pool_find(d, id0, id1)) && p->active && --p->active == 0) {
        pool_drop_filter(p);
        atomic_fetch_sub_explicit(&d->pools_active, 1, memory_order_relaxed);
    }
    if (!atomic_load_explicit(&d->pools_active, memory_order_relaxed)) {
        /* The capture is over: frees it held record their events, and
         * pools released meanwhile go back. */
        if (d->n_deferred)
            _cmb_pl_collect_deferred(d, 0);
        for (pl_pool *q = d->pools, *next; q; q = next) {
            next = q->next;
            pool_destroy_if_done(d, q);
        }
    }
    pthread_mutex_unlock(&d->lock);
    if (d->real)
        _cmb_pl_leave(saved);
    return p ? 0 : -1;
}

int cmb_pluggable_pool_release(int device, uint64_t id0, uint64_t id1)
{
    pl_device *d = _cmb_pl_ready(device);
    pl_pool *p;
    int saved;
    if (!d || enter(d, &saved))
        return -1;
    pthread_mutex_lock(&d->lock);
    if ((p = pool_find(d, id0, id1)) != NULL) {
        p->released = 1;
        pool_destroy_if_done(d, p);
    }
    pthread_mutex_unlock(&d->lock);
    if (d->real)
        _cmb_pl_leave(saved);
    return p ? 0 : -1;
}

/* --- memory fraction ------------------------------------------------------------------------- */

static double pending_fraction[CMB_PLUGGABLE_MAX_DEVICES]; /* under the global lock */

static uint64_t cap_of(double fraction, uint64_t total)
{
    uint64_t cap = (uint64_t)(fraction * (double)total);
    return cap ? cap : 1; /* 0 would mean "no cap" to the upstream */
}

uint64_t _cmb_pl_fraction_cap(int device, uint64_t total)
{
    double f = device >= 0 && device < CMB_PLUGGABLE_MAX_DEVICES ? pending_fraction[device] : 0;
    return f > 0 && f < 1 ? cap_of(f, total) : 0;
}

int cmb_pluggable_set_memory_fraction(double fraction, int device)
{
    if (!(fraction >= 0 && fraction <= 1) || device < 0 || device >= CMB_PLUGGABLE_MAX_DEVICES) {
        _cmb_pl_error(0, "set_memory_fraction(%g, %d): the fraction is in [0, 1], the device in [0, %d)", fraction,
                      device, CMB_PLUGGABLE_MAX_DEVICES);
        return -1;
    }
    pthread_mutex_lock(&_cmb_pl_global_lock);
    pending_fraction[device] = fraction > 0 ? fraction : 1e-300;
    pl_device *d = _cmb_pl_ready(device);
    pthread_mutex_unlock(&_cmb_pl_global_lock);
    if (!d)
        return 0; /* applied when the device's instance is created */
    if (!d->up) {
        _cmb_pl_error(1, "device %d: %s takes no upstream: a memory fraction cannot cap it", device, d->spec);
        return -1;
    }
    pthread_mutex_lock(&d->lock);
    uint64_t cap = fraction < 1 ? cap_of(fraction, (uint64_t)d->total_unfractioned) : 0;
    /* 1 lifts the fraction's cap, back to CMB_CAPACITY's (or none). */
    cmb_upstream_set_cap(d->up, cap ? cap : d->capacity);
    d->total = cap ? (int64_t)cap : d->total_unfractioned;
    pthread_mutex_unlock(&d->lock);
    return 0;
}
