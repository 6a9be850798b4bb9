/* latency.c - latency samples, reservoir and nearest-rank quantiles. */
#include "latency.h"

#include <math.h>
#include <stdlib.h>

int cmb_latency_init(cmb_latency *l, size_t cap, uint64_t seed)
{
    l->samples = cap ? malloc(cap * sizeof *l->samples) : NULL;
    if (cap && !l->samples)
        return -1;
    l->cap = cap;
    cmb_rng_seed(&l->rng, seed);
    cmb_latency_reset(l);
    return 0;
}

void cmb_latency_free(cmb_latency *l)
{
    free(l->samples);
    l->samples = NULL;
    l->cap = l->n = 0;
}

void cmb_latency_reset(cmb_latency *l)
{
    l->n = 0;
    l->seen = 0;
    l->sum_ns = 0;
    l->max_ns = 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

double cmb_latency_quantile(cmb_latency *l, double q)
{
    if (!l->n)
        return NAN;
    qsort(l->samples, l->n, sizeof *l->samples, cmp_u32);
    if (q <= 0)
        return l->samples[0];
    size_t rank = (size_t)ceil(q * (double)l->n); /* 1-based */
    if (rank < 1)
        rank = 1;
    if (rank > l->n)
        rank = l->n;
    return l->samples[rank - 1];
}

double cmb_latency_mean(const cmb_latency *l)
{
    return l->seen ? (double)l->sum_ns / (double)l->seen : NAN;
}
