/* rank.c - the recommendation: smallest GPU within a time budget. */
#include "rank.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cmb_rank_is_per_request(const char *label)
{
    return !strncmp(label, "cuda", 4) && (!label[4] || label[4] == '@' || label[4] == ':');
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* far[i]: entry i's time is above CMB_RANK_FAR x the median of the times. */
static void mark_far(const cmb_rank_entry *e, size_t n, cmb_rank_result *out)
{
    double *t = malloc((n ? n : 1) * sizeof *t);
    size_t k = 0;
    for (size_t i = 0; t && i < n; i++)
        if (!isnan(e[i].time_s))
            t[k++] = e[i].time_s;
    if (t && k) {
        qsort(t, k, sizeof *t, cmp_double);
        double med = k % 2 ? t[k / 2] : (t[k / 2 - 1] + t[k / 2]) / 2;
        for (size_t i = 0; i < n && i < 64; i++)
            out->far[i] = !isnan(e[i].time_s) && e[i].time_s > CMB_RANK_FAR * med && med > 0;
    }
    free(t);
}

static int eligible(const cmb_rank_entry *e, size_t i, const cmb_rank_result *r)
{
    return e[i].fits && !cmb_rank_is_per_request(e[i].label) && !(i < 64 && r->far[i]);
}

/* Lower is better: the smallest GPU when every candidate has one, else the memory measure. */
static double measure(const cmb_rank_entry *e, int by_capacity)
{
    return by_capacity ? e->min_capacity : e->memory;
}

void cmb_rank_recommend(const cmb_rank_entry *e, size_t n, double budget, cmb_rank_result *out)
{
    memset(out, 0, sizeof *out);
    out->recommended = out->fastest = -1;
    mark_far(e, n, out);
    out->by_capacity = 1;
    for (size_t i = 0; i < n; i++) {
        if (!eligible(e, i, out))
            continue;
        out->by_capacity &= !isnan(e[i].min_capacity);
        if (!isnan(e[i].time_s) && (out->fastest < 0 || e[i].time_s < e[out->fastest].time_s))
            out->fastest = (int)i;
    }
    out->timed = out->fastest >= 0;
    double limit = out->timed ? e[out->fastest].time_s * (1 + budget) : INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (!eligible(e, i, out) || (out->timed && (isnan(e[i].time_s) || e[i].time_s > limit)))
            continue;
        double m = measure(&e[i], out->by_capacity);
        if (isnan(m))
            continue;
        if (out->recommended < 0 || m < measure(&e[out->recommended], out->by_capacity))
            out->recommended = (int)i;
    }
}
