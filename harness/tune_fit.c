/* tune_fit.c - a candidate's smallest GPU: the smallest capacity from which
 * every larger one fits (docs/costs.md), found as replay's
 * find_min_capacity finds it (scenarios/replay.c: bisection on the 2 MiB
 * grid, then a dense scan of 128 MiB above and 32 samples to 1.25x), with
 * the bounds tune knows beforehand:
 *   below, the trace's peak requested bytes: no allocator fits less;
 *   above, the candidate's device peak at unlimited capacity: a policy that
 *     never meets a failure there behaves the same on any device that large
 *     (checked by one trial, doubled when a policy sizes itself by the device);
 *   and the front: candidates are searched fastest first, so once a candidate
 *     no slower fits `bound`, one trial at bound - 2 MiB decides whether this
 *     one can beat it at all. If it fails there, no capacity from which every
 *     larger fits lies below `bound`: it is dominated, and not searched further. */
#include "tune.h"

#include <string.h>

#define FIT_SCAN 1.25
#define FIT_SPAN ((uint64_t)128 << 20)
#define FIT_SAMPLES 32
#define FIT_MAX ((uint64_t)1 << 40)

static int fits(cmb_tune_ctx *x, cmb_tune_cand *c, uint64_t cap)
{
    cmb_tune_replay r;
    char err[200];
    for (int i = 0; i < x->memo_n; i++)
        if (x->memo_cap[i] == cap)
            return x->memo_fit[i];
    c->trials++;
    int ok = !cmb_tune_replay_at(x, c, cap, 1, 0, &r, err, sizeof err) && !r.ooms;
    if (x->memo_n < CMB_TUNE_MEMO) {
        x->memo_cap[x->memo_n] = cap;
        x->memo_fit[x->memo_n++] = (uint8_t)ok;
    }
    return ok;
}

static uint64_t up_to_step(uint64_t v)
{
    return (v + CMB_TUNE_STEP - 1) / CMB_TUNE_STEP * CMB_TUNE_STEP;
}

static uint64_t scan_end(uint64_t best, uint64_t hi)
{
    uint64_t end = (uint64_t)((double)best * FIT_SCAN);
    if (end > best + FIT_SPAN)
        end = best + FIT_SPAN;
    return end < hi ? end : hi;
}

/* 0 when every sample in (from, min(1.25 from, hi)] fits, else the first failing one. */
static uint64_t sample_above(cmb_tune_ctx *x, cmb_tune_cand *c, uint64_t from, uint64_t hi)
{
    uint64_t to = (uint64_t)((double)from * FIT_SCAN);
    to = to < hi ? to : hi;
    for (int i = 1; i <= FIT_SAMPLES && to > from; i++) {
        uint64_t cap = (from + (to - from) / FIT_SAMPLES * (uint64_t)i) / CMB_TUNE_STEP * CMB_TUNE_STEP;
        if (!fits(x, c, cap))
            return cap;
    }
    return 0;
}

/* From a fitting `best`, upward: a failure at f moves the answer above f. */
static uint64_t scan_above(cmb_tune_ctx *x, cmb_tune_cand *c, uint64_t best, uint64_t hi)
{
    for (;;) {
        uint64_t end = scan_end(best, hi);
        for (uint64_t cap = best + CMB_TUNE_STEP; cap < end; cap += CMB_TUNE_STEP)
            if (!fits(x, c, cap)) {
                c->island = c->island ? c->island : best;
                best = cap + CMB_TUNE_STEP;
                end = scan_end(best, hi);
            }
        uint64_t failed = end < hi ? sample_above(x, c, end, hi) : 0;
        if (!failed)
            return best < hi ? best : hi;
        c->island = c->island ? c->island : best;
        best = failed + CMB_TUNE_STEP;
        if (best >= hi)
            return hi;
    }
}

/* Fitting at `from` does not make a candidate a rival: a failure above it,
 * within the scan's window, puts its answer above `from` too. Checked first,
 * so a dominated candidate that fits on an island costs a few trials, not a
 * whole search: 1 when such a failure exists. */
static int fails_above(cmb_tune_ctx *x, cmb_tune_cand *c, uint64_t from, uint64_t hi)
{
    uint64_t end = scan_end(from, hi);
    if (end < hi && sample_above(x, c, end, hi)) /* the sparse part first: fewer trials */
        return 1;
    for (uint64_t cap = from + CMB_TUNE_STEP; cap < end; cap += CMB_TUNE_STEP)
        if (!fits(x, c, cap))
            return 1;
    return 0;
}

/* A fitting capacity to start from: the device peak at unlimited capacity,
 * doubled while it does not fit; 0 when nothing below 1 TiB fits. */
static uint64_t fitting_top(cmb_tune_ctx *x, cmb_tune_cand *c, uint64_t *lo)
{
    uint64_t hi = up_to_step(c->device_peak > c->peak_reserved ? c->device_peak : c->peak_reserved);
    while (hi <= FIT_MAX) {
        if (fits(x, c, hi))
            return hi;
        *lo = hi;
        hi *= 2;
    }
    return 0;
}

void cmb_tune_fit(cmb_tune_ctx *x, cmb_tune_cand *c, uint64_t bound)
{
    const uint64_t step = CMB_TUNE_STEP;
    x->memo_n = 0; /* a new candidate */
    uint64_t req = x->t->trace.peak_requested;
    uint64_t lo = req > 0 ? (req - 1) / step * step : 0; /* below peak requested nothing fits */
    uint64_t hi;
    /* the scan above goes past a bound (which says nothing of what lies above it) up to
     * where the policy behaves as on an unlimited device */
    uint64_t top = up_to_step(c->device_peak > c->peak_reserved ? c->device_peak : c->peak_reserved);
    if (bound && bound - step > lo) {
        hi = bound - step;
        top = top > hi ? top : hi;
        if (!fits(x, c, hi) || fails_above(x, c, hi, top)) { /* a no-slower candidate fits bound */
            c->dominated = 1;
            c->min_capacity = bound;
            return;
        }
    } else if (!(hi = fitting_top(x, c, &lo))) {
        c->failed = 1;
        snprintf(c->why, sizeof c->why, "does not fit a device of 1 TiB");
        return;
    }
    top = top > hi ? top : hi;
    while (hi - lo > step) {
        uint64_t mid = (lo + (hi - lo) / 2) / step * step;
        mid = mid <= lo ? lo + step : mid;
        if (fits(x, c, mid))
            hi = mid;
        else
            lo = mid;
    }
    c->min_capacity = scan_above(x, c, hi, top);
    c->searched = 1;
    if (bound && c->min_capacity >= bound) {
        c->dominated = 1;
        c->searched = 0;
    }
}

/* Below the answer, on the grid, as far down as 1/1.25 of it or 128 MiB:
 * the lowest capacity that also fits (an island; 0: none). */
void cmb_tune_islands(cmb_tune_ctx *x, cmb_tune_cand *c)
{
    x->memo_n = 0;
    uint64_t best = c->min_capacity;
    uint64_t floor = (uint64_t)((double)best / FIT_SCAN);
    if (best > FIT_SPAN && floor < best - FIT_SPAN)
        floor = best - FIT_SPAN;
    uint64_t req = x->t->trace.peak_requested;
    for (uint64_t cap = best - CMB_TUNE_STEP; cap >= floor && cap >= CMB_TUNE_STEP && cap >= req; cap -= CMB_TUNE_STEP)
        if (fits(x, c, cap) && (!c->island || cap < c->island))
            c->island = cap;
}
