/* churn.c - random allocation and free traffic, then a checkerboard.
 *
 * Question: how fast does each allocator serve a random mix of allocations
 * and frees, how much memory does it hold beyond what is live, and after
 * many mixed sizes have come and gone, can it still serve one large block?
 *
 * Phase 1 (timed) follows RMM's random_allocations benchmark
 * (benchmarks/random_allocations/random_allocations.cpp): 2n steps; each
 * step draws a size and, while anything is live, allocates with probability
 * 0.73 if fewer than n allocations were made and the live bytes plus the
 * size stay below live_cap (RMM: 16000 MiB); otherwise (or when the
 * allocation fails) it frees a random live block. Sizes:
 *   uniform    - uniform in [1, max_size] bytes (RMM's distribution);
 *   loguniform - log-uniform in [1, max_size]: many small, few large;
 *   bimodal    - 90% uniform in [1, max_size/64], 10% in [max_size/2, max_size].
 * Phase 2 (checkerboard, optional): fill `fill` of the remaining capacity
 * with blocks uniform in [fill_min, fill_max], then free every other one.
 * The harness then probes the largest allocation that still fits
 * (capacity_ratio) with the other half live. The harness's peaks cover
 * the whole repetition; churn_peak_* and churn_frag_ratio are the random
 * phase's alone.
 * On a GPU, touch=true writes every block with a kernel (proves it usable).
 * traffic_max skips the grid's combinations whose n x max_size exceeds it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../common/cmb_rng.h"
#include "../kernels/cmb_kernels.h"
#include "scenario.h"

typedef struct block {
    void *p;
    size_t size;
} block;

typedef struct block_list {
    block *b;
    size_t n, cap;
} block_list;

static int push(block_list *l, void *p, size_t size)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        block *grown = realloc(l->b, cap * sizeof *grown);
        if (!grown)
            return -1;
        l->b = grown;
        l->cap = cap;
    }
    l->b[l->n++] = (block){p, size};
    return 0;
}

/* Removes index i by swapping in the last block, as RMM's remove_at does. */
static block take(block_list *l, size_t i)
{
    block out = l->b[i];
    l->b[i] = l->b[--l->n];
    return out;
}

static uint64_t draw_size(cmb_rng *r, const char *dist, uint64_t max)
{
    if (dist[0] == 'l')
        return cmb_rng_log_uniform(r, 1, max);
    if (dist[0] == 'b') {
        uint64_t small_max = max / 64 ? max / 64 : 1;
        if (cmb_rng_uniform(r) < 0.9)
            return cmb_rng_range(r, 1, small_max);
        return cmb_rng_range(r, max / 2 ? max / 2 : 1, max);
    }
    return cmb_rng_range(r, 1, max);
}

static cmb_status touch(cmb_case *c, void *p, size_t size)
{
    if (cmb_case_mode(c) != CMB_MODE_GPU || !cmb_param_bool(c, "touch"))
        return CMB_OK;
    int e = cmb_kernel_fill_u32(p, size, 0x5a5a5a5au, cmb_case_stream(c, 0));
    return e ? cmb_case_fail(c, CMB_ERR_CUDA, "fill kernel launch failed (%d)", e) : CMB_OK;
}

static cmb_status free_block(cmb_case *c, block_list *live, size_t index)
{
    block b = take(live, index);
    cmb_status st = cmb_free(c, b.p, cmb_case_stream(c, 0));
    return st == CMB_OK ? CMB_OK : cmb_case_fail(c, st, "free of %zu bytes failed", b.size);
}

static cmb_status random_phase(cmb_case *c, cmb_rng *rng, block_list *live)
{
    uint64_t n = cmb_param_u64(c, "n");
    uint64_t max = cmb_param_u64(c, "max_size");
    uint64_t cap = cmb_param_u64(c, "live_cap");
    const char *dist = cmb_param_str(c, "dist");
    uint64_t made = 0, live_bytes = 0;
    cmb_stream s = cmb_case_stream(c, 0);

    for (uint64_t step = 0; step < 2 * n; step++) {
        cmb_case_progress(c, step, 2 * n, "steps");
        uint64_t size = draw_size(rng, dist, max);
        int do_alloc = 1;
        if (live->n) {
            uint64_t chance = cmb_rng_range(rng, 0, 99);
            do_alloc = chance < 73 && made < n && live_bytes + size < cap;
        }
        if (do_alloc) {
            void *p;
            cmb_status st = cmb_alloc(c, size, s, &p);
            if (st == CMB_OK) {
                if (push(live, p, size))
                    return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
                made++;
                live_bytes += size;
                if (touch(c, p, size) != CMB_OK)
                    return CMB_ERR_CUDA;
                continue;
            }
            if (st != CMB_ERR_OOM)
                return cmb_case_fail(c, st, "allocation of %llu bytes failed", (unsigned long long)size);
        }
        if (live->n) {
            size_t index = (size_t)cmb_rng_range(rng, 0, live->n - 1);
            live_bytes -= live->b[index].size;
            if (free_block(c, live, index) != CMB_OK)
                return CMB_ERR_STATE;
        }
    }
    cmb_case_counter(c, "churn_allocations", (double)made);
    return CMB_OK;
}

static cmb_status checkerboard_phase(cmb_case *c, cmb_rng *rng, block_list *live)
{
    uint64_t lo = cmb_param_u64(c, "fill_min"), hi = cmb_param_u64(c, "fill_max");
    uint64_t have = cmb_case_live_bytes(c), capacity = cmb_case_capacity(c);
    uint64_t target = capacity > have ? (uint64_t)((double)(capacity - have) * cmb_param_real(c, "fill")) : 0;
    size_t first = live->n;
    uint64_t filled = 0;
    cmb_stream s = cmb_case_stream(c, 0);

    while (filled < target) {
        uint64_t size = cmb_rng_range(rng, lo, hi);
        if (size > target - filled)
            break;
        void *p;
        cmb_status st = cmb_alloc(c, size, s, &p);
        if (st == CMB_ERR_OOM)
            break; /* the allocator's own limit: fine, it is what we measure */
        if (st != CMB_OK)
            return cmb_case_fail(c, st, "checkerboard allocation failed");
        if (push(live, p, size))
            return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
        filled += size;
    }
    /* free every other block of the fill, newest first so indices stay valid */
    size_t freed = 0;
    for (size_t i = live->n; i-- > first;) {
        if ((i - first) % 2)
            continue;
        if (free_block(c, live, i) != CMB_OK)
            return CMB_ERR_STATE;
        freed++;
    }
    cmb_case_counter(c, "checkerboard_filled_bytes", (double)filled);
    cmb_case_counter(c, "checkerboard_freed_blocks", (double)freed);
    return CMB_OK;
}

/* The random phase's own peaks, before the checkerboard fills the device. */
static void phase_counters(cmb_case *c)
{
    cmb_alloc_stats st;
    uint64_t peak = cmb_case_peak_bytes(c);
    cmb_case_counter(c, "churn_peak_requested_bytes", (double)peak);
    if (cmb_case_alloc_stats(c, &st) == CMB_OK && (st.valid & CMB_STAT_RESERVED) && st.reserved.peak > 0) {
        cmb_case_counter(c, "churn_peak_reserved_bytes", (double)st.reserved.peak);
        cmb_case_counter(c, "churn_frag_ratio", 1.0 - (double)peak / (double)st.reserved.peak);
    }
}

static cmb_status churn_run(cmb_case *c)
{
    cmb_rng rng;
    block_list live = {0};
    cmb_status st;
    cmb_rng_seed(&rng, cmb_case_seed(c));

    double t0 = cmb_case_clock(c);
    st = random_phase(c, &rng, &live);
    if (st == CMB_OK)
        st = cmb_case_sync(c);
    cmb_case_set_time(c, cmb_case_clock(c) - t0);
    if (st != CMB_OK)
        goto out;
    phase_counters(c);
    if (cmb_param_bool(c, "checkerboard")) {
        double t1 = cmb_case_clock(c);
        st = checkerboard_phase(c, &rng, &live);
        if (st == CMB_OK)
            st = cmb_case_sync(c);
        cmb_case_counter(c, "checkerboard_s", cmb_case_clock(c) - t1);
    }
out:
    free(live.b); /* live blocks stay allocated: the harness probes, then frees them */
    return st;
}

static int churn_check(const cmb_case *c, char *reason, size_t len)
{
    uint64_t max = cmb_param_u64(c, "max_size"), cap = cmb_param_u64(c, "live_cap");
    if (cmb_param_u64(c, "fill_min") > cmb_param_u64(c, "fill_max")) {
        snprintf(reason, len, "churn: fill_min must not exceed fill_max");
        return -1;
    }
    uint64_t traffic_max = cmb_param_u64(c, "traffic_max"), n = cmb_param_u64(c, "n");
    if (traffic_max && max > traffic_max / n) {
        snprintf(reason, len, "n x max_size (%llu x %llu MiB) is above traffic_max (%llu GiB): "
                 "--param traffic_max=0 runs it", (unsigned long long)n, (unsigned long long)(max >> 20),
                 (unsigned long long)(traffic_max >> 30));
        return 1;
    }
    if (max >= cap || max >= cmb_case_capacity(c)) {
        snprintf(reason, len, "max_size %llu MiB does not fit under live_cap and the device capacity",
                 (unsigned long long)(max >> 20));
        return 1;
    }
    return 0;
}

static const cmb_param_spec churn_params[] = {
    {"n", CMB_P_INT, "10000", "1000,10000,100000", 1, 1e8, NULL, "number of allocations (RMM: num_allocations)"},
    {"max_size", CMB_P_SIZE, "1MiB,64MiB", "1MiB,4MiB,64MiB,256MiB,1GiB,4GiB", 1, 1099511627776.0, NULL,
     "largest allocation, with a unit (bare numbers are bytes; RMM's benchmark takes MiB)"},
    {"dist", CMB_P_CHOICE, "uniform", "uniform", 0, 0, "uniform|loguniform|bimodal",
     "size distribution"},
    {"live_cap", CMB_P_SIZE, "16000MiB", "16000MiB", 1, 1099511627776.0, NULL,
     "live bytes never exceed this (RMM: max_usage = 16000 MiB)"},
    {"checkerboard", CMB_P_BOOL, "true", "true", 0, 0, NULL, "fill, free every other block, then probe"},
    {"fill", CMB_P_REAL, "0.75", "0.75", 0, 0.95, NULL, "share of the remaining capacity to fill"},
    {"fill_min", CMB_P_SIZE, "1MiB", "1MiB", 1, 1099511627776.0, NULL, "smallest checkerboard block"},
    {"fill_max", CMB_P_SIZE, "64MiB", "64MiB", 1, 1099511627776.0, NULL, "largest checkerboard block"},
    {"touch", CMB_P_BOOL, "false", "false", 0, 0, NULL, "GPU: write every block with a kernel"},
    {"traffic_max", CMB_P_SIZE, "0", "1TiB", 0, 1125899906842624.0, NULL,
     "skip a combination whose n x max_size exceeds this (0: no bound)"},
};

/* full: RMM's grid (benchmarks/random_allocations/random_allocations.cpp:
 * uniform sizes, n in {1000, 10000, 100000} x max_size in {1, 4, 64, 256,
 * 1024, 4096} MiB) where n x max_size stays under 1 TiB and the suite stays
 * near a quarter hour on one GPU: n=1000 up to 1 GiB, n=10000 at 1 and 4 MiB
 * (64 MiB below, with the checkerboard); n=100000 is left out (its two points
 * took 28 s per allocator for cudaMalloc and 33 s for cub on an H200:
 * --param n=100000 runs them). The checkerboard (which fills the device, so
 * costs the same at every grid point) runs at n=10000 x 64 MiB under the
 * three distributions; the other distributions also at n=1000 x 1 GiB.
 * traffic_max (1 TiB) bounds what a wider --param sweep would run. */
static const char *const churn_full_grids[] = {
    "n=1000;max_size=1MiB,4MiB,64MiB,256MiB,1GiB;checkerboard=false",
    "n=10000;max_size=1MiB,4MiB;checkerboard=false",
    "n=10000;max_size=64MiB;dist=uniform,loguniform,bimodal;checkerboard=true",
    "n=1000;max_size=1GiB;dist=loguniform,bimodal;checkerboard=false",
    NULL,
};

/* The churn's own footprint leads: the harness's peaks and frag_ratio include
 * the checkerboard, which fills the device on purpose; capacity_ratio is the
 * checkerboard's, named as such. */
static const cmb_headline churn_headline = {
    NULL, "churn_peak_reserved_bytes", "churn_peak_requested_bytes", "churn_frag_ratio",
    {"churn peak reserved {churn_peak_reserved_bytes} for {churn_peak_requested_bytes} requested",
     "churn frag {churn_frag_ratio}", "checkerboard capacity ratio {capacity_ratio}", "time {time}", NULL},
};

const cmb_scenario cmb_scenario_churn = {
    .name = "churn",
    .question = "How fast is allocation under random churn, how much does the allocator hold beyond what is "
                "live, and can it still serve one large block after many mixed sizes came and went?",
    .params = churn_params,
    .n_params = sizeof churn_params / sizeof churn_params[0],
    .flags = CMB_SCN_TIMELINE,
    .quick_grids = NULL,
    .full_grids = churn_full_grids,
    .check = churn_check,
    .run = churn_run,
    .headline = &churn_headline,
};
