/* pl_tcache.c - a per-thread cache of freed blocks in front of the device's
 * lock (CMB_THREAD_CACHE bytes per thread and device; off by default).
 *
 * With many threads allocating at once the device's mutex serializes them
 * (and the policy's own behind it). A block PyTorch frees (it passes size
 * and stream) is kept by the freeing thread, up to PL_TC_SLOTS blocks and
 * the byte bound, and handed out again to that thread's next request of
 * the exact size on the same stream, under the cache's own mutex, which
 * only its thread takes except when the cache is flushed. So reuse stays
 * ordered on the block's stream, as the policy's own reuse is. A block
 * freed by another thread than the one that allocated it simply joins the
 * freeing thread's cache: the memory is the device's, not a thread's.
 *
 * The cache is bypassed (its blocks wait) while a graph's or a MemPool's
 * private pool exists, while a trace records, while any block has
 * a record_stream use, for CuPy's pair (which keeps a block table) and for
 * sizes over the bound. It is flushed to the policy on empty_cache, before
 * an out-of-memory retry, when it overflows (oldest first) and when its
 * thread exits. Lock order: the device's lock, then a cache's.
 *
 * Statistics: requested bytes, blocks, allocations and frees count what the
 * program did (a hit is an allocation, a cached block is freed); the
 * policy's allocated and reserved bytes include the cached blocks, which
 * it still holds; the counts are summed over the caches when read, so a
 * peak reached only by cache hits between two reads is not seen.
 */
#include <stdlib.h>
#include <string.h>

#include "pl_internal.h"

#define PL_TC_SLOTS 16

typedef struct pl_tentry {
    void *ptr;
    uint64_t size;
    void *stream;
} pl_tentry;

struct pl_tcache {
    pthread_mutex_t lock;
    pl_device *d;
    uint32_t n; /* entries, oldest first */
    uint64_t bytes;
    pl_tentry e[PL_TC_SLOTS];
    int64_t allocs, frees, requested, blocks; /* the program's calls served here */
    struct pl_tcache *next;                   /* the device's list (device lock) */
};

_Atomic uint64_t _cmb_pl_tc_limit; /* bytes per thread and device, 0: off */

static pthread_key_t tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;
static _Thread_local pl_tcache *tl_tc[CMB_PLUGGABLE_MAX_DEVICES];

static int usable(pl_device *d)
{
    /* No pool may exist: a pool's block freed after its capture must go
     * back to its pool (a replay writes it), never to an eager request. */
    return !atomic_load_explicit(&d->pools_n, memory_order_acquire) &&
           !atomic_load_explicit(&d->uses_n, memory_order_acquire) &&
           !atomic_load_explicit(&d->tracing, memory_order_relaxed);
}

/* Gives entries back to the policy (device lock held, cache lock not). */
static void give_back_locked(pl_device *d, const pl_tentry *e, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        _cmb_pl_release_locked(d, e[i].ptr, e[i].size, e[i].stream);
}

static void give_back(pl_device *d, const pl_tentry *e, uint32_t n)
{
    char err[PL_ERR_LEN];
    int saved = -1;
    if (d->guard && _cmb_pl_enter(d->ordinal, &saved, err, sizeof err))
        _cmb_pl_error(1, "%s", err);
    pthread_mutex_lock(&d->lock);
    give_back_locked(d, e, n);
    pthread_mutex_unlock(&d->lock);
    _cmb_pl_leave(saved);
}

/* At thread exit: every cache of the thread goes back, its counts to the device. */
static void thread_exit(void *arg)
{
    (void)arg;
    for (int i = 0; i < CMB_PLUGGABLE_MAX_DEVICES; i++) {
        pl_tcache *c = tl_tc[i];
        if (!c)
            continue;
        pl_device *d = c->d;
        char err[PL_ERR_LEN];
        int saved = -1;
        if (d->guard && _cmb_pl_enter(d->ordinal, &saved, err, sizeof err))
            _cmb_pl_error(1, "%s", err);
        pthread_mutex_lock(&d->lock);
        for (pl_tcache **pp = &d->tcaches; *pp; pp = &(*pp)->next)
            if (*pp == c) {
                *pp = c->next;
                break;
            }
        pthread_mutex_lock(&c->lock);
        give_back_locked(d, c->e, c->n);
        d->allocs += c->allocs;
        d->frees += c->frees;
        d->requested.current += c->requested;
        d->blocks.current += c->blocks;
        pthread_mutex_unlock(&c->lock);
        pthread_mutex_unlock(&d->lock);
        _cmb_pl_leave(saved);
        pthread_mutex_destroy(&c->lock);
        free(c);
        tl_tc[i] = NULL;
    }
}

static void make_key(void)
{
    pthread_key_create(&tc_key, thread_exit);
}

static pl_tcache *mine(pl_device *d, int create)
{
    pl_tcache *c = tl_tc[d->ordinal];
    if (c || !create)
        return c;
    pthread_once(&tc_once, make_key);
    if (!(c = calloc(1, sizeof *c)) || pthread_mutex_init(&c->lock, NULL)) {
        free(c);
        return NULL;
    }
    c->d = d;
    pthread_setspecific(tc_key, c); /* any non-NULL value: the destructor runs */
    pthread_mutex_lock(&d->lock);
    c->next = d->tcaches;
    d->tcaches = c;
    pthread_mutex_unlock(&d->lock);
    tl_tc[d->ordinal] = c;
    return c;
}

void *_cmb_pl_tc_get(pl_device *d, size_t size, void *stream)
{
    pl_tcache *c = mine(d, 0);
    void *p = NULL;
    if (!c || !c->n || !usable(d))
        return NULL;
    pthread_mutex_lock(&c->lock);
    for (uint32_t i = c->n; i-- > 0;) /* the newest first: warm in the caches */
        if (c->e[i].size == size && c->e[i].stream == stream) {
            p = c->e[i].ptr;
            memmove(&c->e[i], &c->e[i + 1], (c->n - i - 1) * sizeof c->e[0]);
            c->n--;
            c->bytes -= size;
            c->allocs++;
            c->requested += (int64_t)size;
            c->blocks++;
            break;
        }
    pthread_mutex_unlock(&c->lock);
    return p;
}

int _cmb_pl_tc_put(pl_device *d, void *ptr, size_t size, void *stream)
{
    uint64_t limit = atomic_load_explicit(&_cmb_pl_tc_limit, memory_order_relaxed);
    pl_tentry out[PL_TC_SLOTS];
    uint32_t n_out = 0;
    if (!limit || size > limit || !usable(d))
        return 0;
    pl_tcache *c = mine(d, 1);
    if (!c)
        return 0;
    pthread_mutex_lock(&c->lock);
    while (c->n && (c->n == PL_TC_SLOTS || c->bytes + size > limit)) { /* the oldest go */
        out[n_out++] = c->e[0];
        c->bytes -= c->e[0].size;
        memmove(&c->e[0], &c->e[1], (c->n - 1) * sizeof c->e[0]);
        c->n--;
    }
    c->e[c->n++] = (pl_tentry){.ptr = ptr, .size = size, .stream = stream};
    c->bytes += size;
    c->frees++;
    c->requested -= (int64_t)size;
    c->blocks--;
    pthread_mutex_unlock(&c->lock);
    if (n_out)
        give_back(d, out, n_out);
    return 1;
}

void _cmb_pl_tc_flush_locked(pl_device *d)
{
    for (pl_tcache *c = d->tcaches; c; c = c->next) {
        pthread_mutex_lock(&c->lock);
        give_back_locked(d, c->e, c->n);
        c->n = 0;
        c->bytes = 0;
        pthread_mutex_unlock(&c->lock);
    }
}

void _cmb_pl_tc_sum_locked(pl_device *d, pl_tc_sums *out)
{
    memset(out, 0, sizeof *out);
    for (pl_tcache *c = d->tcaches; c; c = c->next) {
        pthread_mutex_lock(&c->lock);
        out->allocs += c->allocs;
        out->frees += c->frees;
        out->requested += c->requested;
        out->blocks += c->blocks;
        out->held += (int64_t)c->bytes;
        pthread_mutex_unlock(&c->lock);
    }
}

int cmb_pluggable_set_thread_cache(uint64_t bytes)
{
    atomic_store_explicit(&_cmb_pl_tc_limit, bytes, memory_order_relaxed);
    return 0;
}
