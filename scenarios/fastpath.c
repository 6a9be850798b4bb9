/* fastpath.c - the cost of an allocation and its free when the allocator
 * can serve it from what it already holds.
 *
 * Question: what does one alloc+free pair cost in the steady state of a
 * training loop, where the same sizes come back every step?
 *
 * `live` blocks of mixed sizes are allocated first (so pools hold real free
 * lists, not one empty segment), then one block of `size` is allocated and
 * freed once to warm the cache, then Google Benchmark's loop times
 * alloc(size) + free, through the allocator's own calls without the meters.
 * The reported time is per pair. In sim mode it is the policy's host-side
 * bookkeeping; on a GPU the same plus whatever the allocator asks of CUDA
 * (for cudaMalloc a real allocation every time; for stream-ordered pools
 * the host cost of the two API calls).
 */
#include <stdlib.h>

#include "../common/cmb_rng.h"
#include "scenario.h"

static cmb_status fill_background(cmb_case *c, cmb_stream s)
{
    cmb_rng r;
    uint64_t n = cmb_param_u64(c, "live");
    cmb_rng_seed(&r, cmb_case_seed(c));
    for (uint64_t i = 0; i < n; i++) {
        void *p;
        cmb_status st = cmb_alloc(c, cmb_rng_log_uniform(&r, 256, 4u << 20), s, &p);
        if (st != CMB_OK)
            return cmb_case_fail(c, st, "background allocation %llu failed", (unsigned long long)i);
        /* free every third one so the pools hold holes of many sizes */
        if (i % 3 == 0 && (st = cmb_free(c, p, s)) != CMB_OK)
            return cmb_case_fail(c, st, "background free failed");
    }
    return CMB_OK;
}

static cmb_status fastpath_run(cmb_case *c)
{
    cmb_stream s = cmb_case_stream(c, 0);
    size_t size = (size_t)cmb_param_u64(c, "size");
    void *p;
    cmb_status st = fill_background(c, s);
    if (st != CMB_OK)
        return st;
    /* warm: the block the loop will reuse */
    if ((st = cmb_alloc_raw(c, size, s, &p)) != CMB_OK || (st = cmb_free_raw(c, p, size, s)) != CMB_OK)
        return cmb_case_fail(c, st, "warm-up of %zu bytes failed", size);
    while (cmb_case_keep_running(c)) {
        st = cmb_alloc_raw(c, size, s, &p);
        if (st != CMB_OK)
            return cmb_case_fail(c, st, "allocation of %zu bytes failed", size);
        st = cmb_free_raw(c, p, size, s);
        if (st != CMB_OK)
            return cmb_case_fail(c, st, "free failed");
    }
    return cmb_case_sync(c);
}

static const cmb_param_spec fastpath_params[] = {
    {"size", CMB_P_SIZE, "512B,2MiB", "512B,64KiB,2MiB,64MiB", 1, 1099511627776.0, NULL,
     "size of the block allocated and freed in the loop"},
    {"live", CMB_P_INT, "1000", "1000", 0, 1e7, NULL, "blocks of mixed sizes allocated before the loop"},
};

/* A time-only scenario: "-" keeps it out of the memory ranks. */
static const cmb_headline fastpath_headline = {
    NULL, "-", NULL, NULL,
    {"{time} per alloc+free pair", "peak reserved {peak_reserved_bytes}", NULL},
};

const cmb_scenario cmb_scenario_fastpath = {
    .name = "fastpath",
    .question = "What does one allocation and its free cost when the allocator serves it from memory it "
                "already holds (the steady state of a training loop)?",
    .params = fastpath_params,
    .n_params = sizeof fastpath_params / sizeof fastpath_params[0],
    .flags = CMB_SCN_MICRO | CMB_SCN_NO_PROBE,
    .run = fastpath_run,
    .headline = &fastpath_headline,
};
