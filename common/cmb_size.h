/* cmb_size.h - byte-size arithmetic that cannot wrap, and the suite's upper
 * limits on sizes.
 *
 * Every policy and upstream rounds requests up (`(x + a - 1) / a * a`);
 * near SIZE_MAX that sum wraps to a small number and a huge request would
 * be served as a tiny one. The helpers here say so instead, and every
 * policy refuses a request above CMB_SIZE_MAX_REQUEST before any rounding:
 * no GPU has that much memory, and every sum of a few such sizes still
 * fits in 64 bits. Header-only, so a plug-in can use it too.
 */
#ifndef CMB_SIZE_H
#define CMB_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The largest request any policy or upstream serves: 256 TiB (2^48, the
 * virtual address space a current GPU's MMU covers). Larger requests get
 * CMB_ERR_OOM with this reason. */
#define CMB_SIZE_MAX_REQUEST ((uint64_t)1 << 48)
#define CMB_SIZE_MAX_REQUEST_TEXT "256TiB"
#define CMB_SIZE_TOO_LARGE_REASON "request larger than 256TiB, the most any allocator serves"

/* The largest simulated device or capacity cap (--capacity, CMB_CAPACITY,
 * the `capacity` parameter): 1 TiB, seven times an H200. A policy's host
 * bookkeeping grows with the device: buddy's bitmaps take a bit per 512 B
 * of its pool (half the device), a few hundred MiB at 1 TiB, where
 * 16777215TiB took gigabytes. */
#define CMB_SIZE_MAX_CAPACITY ((uint64_t)1 << 40)
#define CMB_SIZE_MAX_CAPACITY_TEXT "1TiB"

/* A request size a policy may serve: more than 0 and at most
 * CMB_SIZE_MAX_REQUEST. */
static inline bool cmb_size_request_ok(uint64_t size)
{
    return size <= CMB_SIZE_MAX_REQUEST;
}

/* In a policy's allocate, before any rounding: true when `size` is above
 * CMB_SIZE_MAX_REQUEST, with the one-line reason in why (may be NULL);
 * the policy then returns CMB_ERR_OOM. */
static inline bool cmb_size_refuse(uint64_t size, const char *who, char *why, size_t whylen)
{
    if (cmb_size_request_ok(size))
        return false;
    if (why && whylen)
        snprintf(why, whylen, "%s: %llu bytes: " CMB_SIZE_TOO_LARGE_REASON, who, (unsigned long long)size);
    return true;
}

/* *out = x rounded up to a multiple of a (a > 0); false when that does not
 * fit in 64 bits (then *out is left alone). */
static inline bool cmb_size_round_up(uint64_t x, uint64_t a, uint64_t *out)
{
    uint64_t r = x % a;
    if (!r) {
        *out = x;
        return true;
    }
    if (x > UINT64_MAX - (a - r))
        return false;
    *out = x + (a - r);
    return true;
}

/* The same, for sizes a caller has already bounded (<= CMB_SIZE_MAX_REQUEST
 * or a capacity): rounds up, saturating at UINT64_MAX instead of wrapping,
 * so a later comparison with any capacity refuses it. */
static inline uint64_t cmb_size_round_up_sat(uint64_t x, uint64_t a)
{
    uint64_t out;
    return cmb_size_round_up(x, a, &out) ? out : UINT64_MAX;
}

/* *out = a + b; false when it does not fit. */
static inline bool cmb_size_add(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a > UINT64_MAX - b)
        return false;
    *out = a + b;
    return true;
}

#endif /* CMB_SIZE_H */
