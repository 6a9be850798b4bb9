/* latency.h - per-operation latency samples and their quantiles.
 *
 * Every sample is kept up to `cap` samples (exact quantiles); beyond that a
 * uniform reservoir of `cap` samples is kept (Vitter's algorithm R, seeded),
 * so memory stays bounded on runs of hundreds of millions of operations.
 */
#ifndef CMB_LATENCY_H
#define CMB_LATENCY_H

#include <stddef.h>
#include <stdint.h>

#include "../common/cmb_rng.h"

typedef struct cmb_latency {
    uint32_t *samples; /* nanoseconds, saturated at UINT32_MAX (4.3 s) */
    size_t n;          /* samples stored                                 */
    size_t cap;
    uint64_t seen;     /* samples offered                                */
    uint64_t sum_ns;
    uint64_t max_ns;
    cmb_rng rng;
} cmb_latency;

int cmb_latency_init(cmb_latency *l, size_t cap, uint64_t seed);
void cmb_latency_free(cmb_latency *l);
void cmb_latency_reset(cmb_latency *l);

static inline void cmb_latency_add(cmb_latency *l, uint64_t ns)
{
    uint32_t v = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
    l->seen++;
    l->sum_ns += ns;
    if (ns > l->max_ns)
        l->max_ns = ns;
    if (l->n < l->cap) {
        l->samples[l->n++] = v;
    } else if (l->cap) {
        uint64_t j = cmb_rng_range(&l->rng, 0, l->seen - 1);
        if (j < l->cap)
            l->samples[j] = v;
    }
}

/* Quantile q in [0, 1] by the nearest-rank method: the smallest sample with
 * at least q of all samples at or below it. Sorts the samples. NaN when empty. */
double cmb_latency_quantile(cmb_latency *l, double q);
double cmb_latency_mean(const cmb_latency *l);

#endif /* CMB_LATENCY_H */
