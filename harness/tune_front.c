/* tune_front.c - the Pareto front of the searched candidates (smallest GPU,
 * predicted allocator time per pass: lower is better in both) and the one
 * recommendation for a budget and an objective. */
#include "tune.h"

#include <math.h>
#include <stdlib.h>

#define TUNE_TIME_BUDGET 0.05 /* balanced: at most 5% above the recorded setting's time (harness/rank.c's 5%) */
#define TUNE_TIME_NOISE 0.03  /* times this close are one time: a replay's measured bookkeeping varies by more */

static const cmb_tune_set *sort_set;

/* By smallest GPU, then time, then the order candidates were made (simpler first). */
static int by_fit(const void *a, const void *b)
{
    const cmb_tune_cand *x = &sort_set->c[*(const int *)a], *y = &sort_set->c[*(const int *)b];
    if (x->min_capacity != y->min_capacity)
        return x->min_capacity < y->min_capacity ? -1 : 1;
    double tx = isnan(x->time_s) ? 0 : x->time_s, ty = isnan(y->time_s) ? 0 : y->time_s;
    if (tx != ty)
        return tx < ty ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* Of candidates [g0, g1) of idx (one smallest GPU, sorted by time), the one
 * made first among those within TUNE_TIME_NOISE of the fastest: an own
 * policy's time is its measured bookkeeping, and two settings apart by less
 * than its noise would otherwise swap from one run to the next. */
static int group_pick(const cmb_tune_set *s, const int *idx, int g0, int g1)
{
    double fastest = s->c[idx[g0]].time_s;
    int pick = idx[g0];
    for (int j = g0 + 1; j < g1 && !isnan(fastest); j++)
        if (s->c[idx[j]].time_s <= fastest * (1 + TUNE_TIME_NOISE) && idx[j] < pick)
            pick = idx[j];
    return pick;
}

int cmb_tune_front(const cmb_tune_set *s, int *front, int max)
{
    int *idx = malloc((size_t)(s->n ? s->n : 1) * sizeof *idx), n = 0, k = 0;
    if (!idx)
        return 0;
    for (int i = 0; i < s->n; i++)
        if (s->c[i].searched && !s->c[i].failed && !s->c[i].dominated)
            idx[n++] = i;
    sort_set = s;
    qsort(idx, (size_t)n, sizeof *idx, by_fit);
    double best = INFINITY;
    for (int g0 = 0, g1; g0 < n && k < max; g0 = g1) {
        for (g1 = g0 + 1; g1 < n && s->c[idx[g1]].min_capacity == s->c[idx[g0]].min_capacity; g1++)
            ;
        int pick = group_pick(s, idx, g0, g1);
        double t = s->c[pick].time_s;
        if (k && !(isnan(t) ? 0 : t < best))
            continue; /* a smaller GPU is no slower */
        front[k++] = pick;
        best = isnan(t) ? -INFINITY : t;
    }
    free(idx);
    return k;
}

static int fits_budget(const cmb_tune_cand *c, uint64_t budget)
{
    return !budget || c->min_capacity <= budget;
}

/* memory: the smallest GPU within the budget; time: the fastest within it;
 * balanced: the smallest GPU at no time cost against the recorded setting
 * (at most 5% above its predicted time, as harness/rank.c's budget), else,
 * when nothing that fast fits, the fastest that fits. Where nothing saves
 * memory, the recorded setting itself. */
int cmb_tune_recommend(const cmb_tune_set *s, const int *front, int n_front, uint64_t budget,
                       cmb_tune_objective obj, int recorded)
{
    double recorded_time = s->c[recorded].time_s;
    int smallest = -1, fastest = -1;
    for (int j = 0; j < n_front; j++) { /* the front: GPU ascending, time descending */
        const cmb_tune_cand *c = &s->c[front[j]];
        if (!fits_budget(c, budget))
            continue;
        if (smallest < 0)
            smallest = front[j];
        fastest = front[j];
    }
    if (smallest < 0 || obj == CMB_TUNE_MEMORY)
        return smallest;
    if (obj == CMB_TUNE_TIME || isnan(s->c[fastest].time_s))
        return obj == CMB_TUNE_TIME ? fastest : smallest;
    double limit = recorded_time * (1 + TUNE_TIME_BUDGET);
    for (int j = 0; !isnan(limit) && j < n_front; j++) {
        const cmb_tune_cand *c = &s->c[front[j]];
        if (fits_budget(c, budget) && c->time_s <= limit) /* no smaller GPU: keep the recorded setting */
            return fits_budget(&s->c[recorded], budget) && s->c[recorded].min_capacity <= c->min_capacity
                       ? recorded : front[j];
    }
    return fastest;
}

int cmb_tune_recommend_at_budget(const cmb_tune_set *s, uint64_t budget, cmb_tune_objective obj, int recorded,
                                 int *front, int *n_front)
{
    static cmb_tune_set at; /* the candidates with their times there: large, so not on the stack */
    at = *s;
    for (int i = 0; i < at.n; i++) {
        cmb_tune_cand *c = &at.c[i];
        if (!c->searched || c->failed || c->dominated || c->min_capacity > budget)
            continue;
        if (!c->at_budget || isnan(c->budget_time_s))
            c->failed = 1; /* not priced there, or did not run there: not chosen */
        else
            c->time_s = c->budget_time_s;
    }
    *n_front = cmb_tune_front(&at, front, CMB_TUNE_MAX_CANDIDATES);
    return cmb_tune_recommend(&at, front, *n_front, budget, obj, recorded);
}
