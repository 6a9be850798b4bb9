/* cmb_clock.h - the monotonic host clock every latency is read from. */
#ifndef CMB_CLOCK_H
#define CMB_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC (a vDSO call, about 20 ns on x86-64). */
static inline uint64_t cmb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double cmb_now_s(void)
{
    return (double)cmb_now_ns() * 1e-9;
}

#endif /* CMB_CLOCK_H */
