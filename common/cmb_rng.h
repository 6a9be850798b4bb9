/* cmb_rng.h - xoshiro256** seeded by splitmix64: fast, reproducible across
 * platforms, so a seed recorded in the output regenerates the same traffic. */
#ifndef CMB_RNG_H
#define CMB_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct cmb_rng {
    uint64_t s[4];
} cmb_rng;

static inline uint64_t cmb_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline void cmb_rng_seed(cmb_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = cmb_splitmix64(&seed);
}

static inline uint64_t cmb_rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t cmb_rng_next(cmb_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = cmb_rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = cmb_rotl64(s[3], 45);
    return result;
}

/* Uniform double in [0, 1). */
static inline double cmb_rng_uniform(cmb_rng *r)
{
    return (double)(cmb_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [lo, hi] (inclusive); Lemire's bounded method without
 * the rejection step bias correction beyond 2^-64, which is negligible. */
static inline uint64_t cmb_rng_range(cmb_rng *r, uint64_t lo, uint64_t hi)
{
    uint64_t span = hi - lo + 1;
    if (span == 0)
        return cmb_rng_next(r);
    return lo + (uint64_t)(((unsigned __int128)cmb_rng_next(r) * span) >> 64);
}

/* Log-uniform integer in [lo, hi], lo >= 1. */
static inline uint64_t cmb_rng_log_uniform(cmb_rng *r, uint64_t lo, uint64_t hi)
{
    double a = log((double)lo), b = log((double)hi + 1.0);
    uint64_t v = (uint64_t)exp(a + (b - a) * cmb_rng_uniform(r));
    return v < lo ? lo : (v > hi ? hi : v);
}

#endif /* CMB_RNG_H */
