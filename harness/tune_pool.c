/* tune_pool.c - the smallest-GPU searches of a stage, fastest candidate
 * first, on several threads (one per core, at most CMB_TUNE_MAX_THREADS;
 * CMB_TUNE_THREADS overrides). Each candidate is searched on a copy with
 * its own replay state, against the bound the finished candidates give at
 * the time it starts: a thread that starts before a faster rival finishes
 * sees a weaker bound, which costs trials, never correctness (a bound only
 * ever comes from a candidate no slower, with an exact answer); once all
 * are done, each is held to the bound of every candidate no slower, so
 * which candidates count as dominated (the next stage's knob values) does
 * not depend on which thread finished first. */
#include "tune.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define CMB_TUNE_MAX_THREADS 8

typedef struct tune_pool {
    const cmb_tune_ctx *x;
    cmb_tune_set *s;
    const int *order;
    int n, next, done;
    uint64_t trials;
    pthread_mutex_t mu;
    cmb_tune_progress_fn progress;
    void *progress_ctx;
} tune_pool;

/* The smallest GPU of any searched candidate no slower than `c`: the bound it must beat. */
static uint64_t bound_for(const cmb_tune_set *s, const cmb_tune_cand *c)
{
    uint64_t bound = 0;
    for (int i = 0; i < s->n; i++) {
        const cmb_tune_cand *o = &s->c[i];
        if (o == c || !o->searched || o->dominated || o->failed)
            continue;
        /* equal times: the earlier candidate (the simpler one) wins, whichever finished first */
        double to = isnan(o->time_s) ? 0 : o->time_s, tc = isnan(c->time_s) ? 0 : c->time_s;
        int no_slower = to < tc || (to == tc && o < c);
        if (no_slower && (!bound || o->min_capacity < bound))
            bound = o->min_capacity;
    }
    return bound;
}

static void *worker(void *arg)
{
    tune_pool *p = arg;
    cmb_tune_ctx x = *p->x;
    x.trials = 0;
    x.ptr = calloc(x.t->trace.slots ? x.t->trace.slots : 1, sizeof(void *));
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = x.ptr ? p->next++ : p->n;
        if (i >= p->n) {
            p->trials += x.trials;
            pthread_mutex_unlock(&p->mu);
            break;
        }
        cmb_tune_cand *c = &p->s->c[p->order[i]], mine = *c;
        uint64_t bound = bound_for(p->s, c);
        pthread_mutex_unlock(&p->mu);
        if (!mine.failed)
            cmb_tune_fit(&x, &mine, bound);
        pthread_mutex_lock(&p->mu);
        *c = mine;
        p->done++;
        if (p->progress)
            p->progress(p->progress_ctx, p->done, p->trials + x.trials);
        pthread_mutex_unlock(&p->mu);
    }
    free(x.ptr);
    return NULL;
}

static int thread_count(void)
{
    const char *env = getenv("CMB_TUNE_THREADS");
    long n = env && *env ? atol(env) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > CMB_TUNE_MAX_THREADS ? CMB_TUNE_MAX_THREADS : (int)n;
}

/* What a search one candidate at a time, fastest first, would have marked:
 * a candidate searched in full against a weaker bound, whose smallest GPU is
 * no smaller than a no-slower candidate's, is dominated. */
static void settle_bounds(cmb_tune_set *s, const int *order, int n)
{
    for (int i = 0; i < n; i++) {
        cmb_tune_cand *c = &s->c[order[i]];
        if (!c->searched || c->failed || c->dominated)
            continue;
        uint64_t bound = bound_for(s, c);
        if (bound && c->min_capacity >= bound) {
            c->dominated = 1;
            c->searched = 0;
        }
    }
}

uint64_t cmb_tune_fit_all(const cmb_tune_ctx *x, cmb_tune_set *s, const int *order, int n, cmb_tune_progress_fn fn,
                          void *ctx)
{
    tune_pool p = {.x = x, .s = s, .order = order, .n = n, .progress = fn, .progress_ctx = ctx};
    pthread_t th[CMB_TUNE_MAX_THREADS];
    int k = thread_count(), started = 0;
    pthread_mutex_init(&p.mu, NULL);
    for (int i = 1; i < k; i++)
        if (!pthread_create(&th[started], NULL, worker, &p))
            started++;
    worker(&p); /* this thread is one of them */
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&p.mu);
    settle_bounds(s, order, n);
    return p.trials;
}
