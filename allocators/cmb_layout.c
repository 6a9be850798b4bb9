/* cmb_layout.c - a layout planned ahead from a recorded trace.
 *
 * Each allocation of the recording is a block: its rounded size and its
 * lifetime, from its allocation event to its free (or the trace's end).
 * Blocks are placed one at a time, in each of three orders (largest first;
 * largest size x lifetime first; longest-lived first), each at the lowest
 * offset where it shares no byte with a block already placed whose lifetime
 * overlaps its own; the order with the lowest top wins. The three orders
 * and the rule are results/sim/cmb-steady/alias-and-plan-bounds/plan_bound.py's,
 * which found this layout within 1.0000-1.0333 x the peak requested on the
 * eight recorded traces there.
 *
 * Cost: the placed blocks whose lifetime overlaps a new one are found
 * through buckets of the event clock (a block is listed in every bucket its
 * lifetime touches; one touching more than CMB_LAYOUT_LONG buckets is kept
 * once, in a list sorted by offset that the walk for the lowest gap merges
 * with the bucketed neighbours and leaves at the first gap), so a layout
 * costs about the blocks live beside each block, times a sort. Host memory
 * only; nothing here touches a device.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/cmb_vec.h"
#include "cmb_layout.h"

/* --- blocks ------------------------------------------------------------------------------ */

typedef struct lblock {
    uint64_t size;       /* rounded */
    uint64_t start, end; /* event clock: [start, end) */
} lblock;

typedef struct bucket {
    uint32_t *id;
    size_t n, cap;
} bucket;

typedef struct span {
    uint64_t lo, hi;
} span;

/* a block touching more buckets than this is listed once, among the long ones,
 * so a long query does not scan it in every bucket */
#define CMB_LAYOUT_LONG 8

typedef struct keyed {
    double k1, k2;
    uint32_t id;
} keyed;

static uint64_t round_to(uint64_t x, uint64_t r)
{
    return (x + r - 1) & ~(r - 1);
}

/* The blocks of t in allocation order; 0 or -1 (host memory). */
static int blocks_of(const cmb_trace_loaded *t, uint64_t round, lblock **out, size_t *n_out, uint64_t *peak)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += t->ev[i].op == CMB_TRACE_ALLOC;
    lblock *b = calloc(n ? n : 1, sizeof *b);
    uint32_t *slot_block = malloc((t->slots ? t->slots : 1) * sizeof *slot_block);
    if (!b || !slot_block) {
        free(b);
        free(slot_block);
        return -1;
    }
    uint64_t live = 0, k = 0;
    *peak = 0;
    for (uint32_t s = 0; s < t->slots; s++)
        slot_block[s] = UINT32_MAX; /* a free of a block the trace did not allocate is skipped */
    for (size_t i = 0; i < t->n; i++) {
        const cmb_trace_packed *e = &t->ev[i];
        if (e->op == CMB_TRACE_ALLOC) {
            b[k] = (lblock){round_to(e->size, round), i, t->n};
            slot_block[e->slot] = (uint32_t)k;
            live += b[k].size;
            if (live > *peak)
                *peak = live;
            k++;
        } else if (e->op == CMB_TRACE_FREE && slot_block[e->slot] != UINT32_MAX) {
            lblock *x = &b[slot_block[e->slot]];
            slot_block[e->slot] = UINT32_MAX;
            x->end = i;
            live -= x->size;
        }
    }
    free(slot_block);
    *out = b;
    *n_out = n;
    return 0;
}

/* --- one greedy layout ------------------------------------------------------------------------ */

static int by_keys(const void *x, const void *y)
{
    const keyed *p = x, *q = y;
    if (p->k1 != q->k1)
        return p->k1 < q->k1 ? -1 : 1;
    if (p->k2 != q->k2)
        return p->k2 < q->k2 ? -1 : 1;
    return p->id < q->id ? -1 : p->id > q->id;
}

static int by_lo(const void *x, const void *y)
{
    const span *p = x, *q = y;
    return p->lo < q->lo ? -1 : p->lo > q->lo;
}

static int bucket_push(bucket *q, uint32_t id)
{
    if (cmb_vec_room((void **)&q->id, &q->cap, q->n, sizeof *q->id, 8))
        return -1;
    q->id[q->n++] = id;
    return 0;
}

typedef struct layout_run {
    const lblock *b;
    size_t n;
    uint64_t width;      /* events per bucket */
    bucket *q;
    size_t nq;
    bucket longs;        /* placed blocks spanning more than CMB_LAYOUT_LONG buckets */
    span *near;          /* scratch: the placed blocks overlapping one in time */
    size_t cap_near;
} layout_run;

/* The placed blocks live beside block i, gathered once each (a block is
 * counted in the first bucket both lifetimes touch). -1 on host memory. */
static int near_push(layout_run *r, size_t k, uint64_t lo, uint64_t hi)
{
    if (cmb_vec_room((void **)&r->near, &r->cap_near, k, sizeof *r->near, 256))
        return -1;
    r->near[k] = (span){lo, hi};
    return 0;
}

static long overlapping(layout_run *r, const uint64_t *off, uint32_t i)
{
    const lblock *x = &r->b[i];
    uint64_t last = x->end > x->start ? x->end - 1 : x->start;
    size_t q0 = x->start / r->width, q1 = last / r->width, k = 0;
    for (size_t q = q0; q <= q1; q++) {
        for (uint32_t j = 0; j < r->q[q].n; j++) {
            uint32_t id = r->q[q].id[j];
            const lblock *y = &r->b[id];
            size_t first = y->start / r->width;
            if (y->start >= x->end || y->end <= x->start || (first > q0 ? first : q0) != q)
                continue;
            if (near_push(r, k++, off[id], off[id] + y->size))
                return -1;
        }
    }
    return (long)k;
}

/* The lowest offset where block x fits between the short blocks beside it
 * (near, sorted) and the long ones whose lifetime overlaps its own (longs,
 * kept sorted by offset): one merged walk that stops at the first gap. */
static uint64_t lowest_gap(const layout_run *r, const uint64_t *off, const lblock *x, long m)
{
    uint64_t at = 0;
    long i = 0;
    uint32_t j = 0;
    for (;;) {
        while (j < r->longs.n) {
            const lblock *y = &r->b[r->longs.id[j]];
            if (y->start < x->end && y->end > x->start)
                break;
            j++;
        }
        uint64_t lo, hi;
        if (i < m && (j == r->longs.n || r->near[i].lo <= off[r->longs.id[j]])) {
            lo = r->near[i].lo;
            hi = r->near[i].hi;
            i++;
        } else if (j < r->longs.n) {
            lo = off[r->longs.id[j]];
            hi = lo + r->b[r->longs.id[j]].size;
            j++;
        } else {
            return at;
        }
        if (lo >= at + x->size)
            return at;
        if (hi > at)
            at = hi;
    }
}

/* Inserts long block i into longs, kept sorted by offset. */
static int long_insert(layout_run *r, const uint64_t *off, uint32_t i)
{
    if (bucket_push(&r->longs, i))
        return -1;
    uint32_t lo = 0, hi = r->longs.n - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (off[r->longs.id[mid]] <= off[i])
            lo = mid + 1;
        else
            hi = mid;
    }
    memmove(&r->longs.id[lo + 1], &r->longs.id[lo], (r->longs.n - 1 - lo) * sizeof *r->longs.id);
    r->longs.id[lo] = i;
    return 0;
}

/* Places every block in the order given; returns the top, or UINT64_MAX on host memory. */
static uint64_t lay_out(layout_run *r, const keyed *order, uint64_t *off)
{
    uint64_t top = 0;
    for (size_t q = 0; q < r->nq; q++)
        r->q[q].n = 0;
    r->longs.n = 0;
    for (size_t k = 0; k < r->n; k++) {
        uint32_t i = order[k].id;
        const lblock *x = &r->b[i];
        long m = overlapping(r, off, i);
        if (m < 0)
            return UINT64_MAX;
        if (m > 1)
            qsort(r->near, (size_t)m, sizeof *r->near, by_lo);
        uint64_t at = lowest_gap(r, off, x, m);
        off[i] = at;
        if (at + x->size > top)
            top = at + x->size;
        uint64_t last = x->end > x->start ? x->end - 1 : x->start;
        size_t q0 = x->start / r->width, q1 = last / r->width;
        if (q1 - q0 >= CMB_LAYOUT_LONG) {
            if (long_insert(r, off, i))
                return UINT64_MAX;
            continue;
        }
        for (size_t q = q0; q <= q1; q++)
            if (bucket_push(&r->q[q], i))
                return UINT64_MAX;
    }
    return top;
}

/* --- the three orders, the best kept ---------------------------------------------------------- */

static const char *const order_names[3] = {"size", "area", "lifetime"};

static void order_keys(const lblock *b, size_t n, int which, keyed *out)
{
    for (size_t i = 0; i < n; i++) {
        double size = (double)b[i].size, life = (double)(b[i].end - b[i].start);
        if (which == 0)
            out[i] = (keyed){-size, (double)b[i].start, (uint32_t)i};
        else if (which == 1)
            out[i] = (keyed){-size * life, (double)b[i].start, (uint32_t)i};
        else
            out[i] = (keyed){-life, -size, (uint32_t)i};
    }
    qsort(out, n, sizeof *out, by_keys);
}

int cmb_layout_plan(cmb_layout *l, const cmb_trace_loaded *t, uint64_t round, char *err, size_t errlen)
{
    memset(l, 0, sizeof *l);
    lblock *b = NULL;
    keyed *order = NULL;
    uint64_t *off = NULL, *best = NULL;
    layout_run r = {0};
    size_t n = 0;
    int rc = -1;
    if (t->n > UINT32_MAX || blocks_of(t, round, &b, &n, &l->peak))
        goto out;
    r.b = b;
    r.n = n;
    r.nq = t->n / 16 + 1 < 4096 ? t->n / 16 + 1 : 4096;
    r.width = (t->n + 1 + r.nq - 1) / r.nq;
    order = malloc((n ? n : 1) * sizeof *order);
    off = malloc((n ? n : 1) * sizeof *off);
    best = malloc((n ? n : 1) * sizeof *best);
    l->size = malloc((n ? n : 1) * sizeof *l->size);
    r.q = calloc(r.nq, sizeof *r.q);
    if (!order || !off || !best || !l->size || !r.q)
        goto out;
    l->top = UINT64_MAX;
    for (int w = 0; w < 3; w++) {
        order_keys(b, n, w, order);
        uint64_t top = lay_out(&r, order, off);
        if (top == UINT64_MAX)
            goto out;
        if (top < l->top) {
            l->top = top;
            l->order = order_names[w];
            memcpy(best, off, n * sizeof *off);
        }
    }
    for (size_t i = 0; i < n; i++)
        l->size[i] = b[i].size;
    l->off = best;
    l->n = n;
    best = NULL;
    rc = 0;

out:
    if (r.q)
        for (size_t q = 0; q < r.nq; q++)
            free(r.q[q].id);
    free(r.q);
    free(r.longs.id);
    free(r.near);
    free(order);
    free(off);
    free(best);
    free(b);
    if (rc) {
        cmb_layout_free(l);
        snprintf(err, errlen, "out of host memory laying out %zu allocations", n);
    }
    return rc;
}

int cmb_layout_from_trace(cmb_layout *l, const char *path, uint64_t round, char *err, size_t errlen)
{
    cmb_trace_loaded t;
    char why[384];
    memset(l, 0, sizeof *l);
    if (cmb_trace_load(&t, path, why, sizeof why)) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    int rc = -1;
    if (!t.counts.allocs)
        snprintf(err, errlen, "%s: the trace holds no allocation to lay out", path);
    else if (!cmb_layout_plan(l, &t, round, why, sizeof why))
        rc = 0;
    else
        snprintf(err, errlen, "%s: %s", path, why);
    cmb_trace_unload(&t);
    return rc;
}

void cmb_layout_free(cmb_layout *l)
{
    free(l->size);
    free(l->off);
    memset(l, 0, sizeof *l);
}

/* --- shared by the instances of a process ------------------------------------------------------ */

/* layouts kept while no instance uses them */
#define CMB_LAYOUT_KEEP 4

typedef struct cached {
    struct cached *next;
    char *path;
    uint64_t round;
    struct stat st;      /* the file as it was laid out: same device, inode, size, time */
    unsigned refs;
    cmb_layout l;
} cached;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cached *cache;

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Drops unused layouts past the CMB_LAYOUT_KEEP most recent. */
static void trim_cache(void)
{
    unsigned idle = 0;
    for (cached **pp = &cache; *pp;) {
        cached *c = *pp;
        if (!c->refs && ++idle > CMB_LAYOUT_KEEP) {
            *pp = c->next;
            cmb_layout_free(&c->l);
            free(c->path);
            free(c);
            continue;
        }
        pp = &c->next;
    }
}

const cmb_layout *cmb_layout_get(const char *path, uint64_t round, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    pthread_mutex_lock(&cache_lock);
    for (cached **pp = &cache; *pp; pp = &(*pp)->next) {
        cached *c = *pp;
        if (c->round == round && !strcmp(c->path, path) && same_file(&c->st, &st)) {
            c->refs++;
            *pp = c->next; /* most recent first */
            c->next = cache;
            cache = c;
            pthread_mutex_unlock(&cache_lock);
            return &c->l;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    /* laid out outside the lock: another thread may lay out the same file */
    cached *c = calloc(1, sizeof *c);
    if (!c || !(c->path = strdup(path))) {
        free(c);
        snprintf(err, errlen, "%s: out of host memory", path);
        return NULL;
    }
    if (cmb_layout_from_trace(&c->l, path, round, err, errlen)) {
        free(c->path);
        free(c);
        return NULL;
    }
    c->round = round;
    c->st = st;
    c->refs = 1;
    pthread_mutex_lock(&cache_lock);
    c->next = cache;
    cache = c;
    trim_cache();
    pthread_mutex_unlock(&cache_lock);
    return &c->l;
}

void cmb_layout_put(const cmb_layout *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&cache_lock);
    for (cached *c = cache; c; c = c->next)
        if (&c->l == l) {
            c->refs--;
            break;
        }
    trim_cache();
    pthread_mutex_unlock(&cache_lock);
}
