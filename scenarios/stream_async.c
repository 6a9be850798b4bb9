/* stream_async.c - allocations and frees over several streams with kernels
 * in flight, and how soon freed memory is handed out again.
 *
 * Question: I free a buffer on one stream while kernels are still running;
 * when can the same stream, another stream that waits on an event, or an
 * unrelated stream get that memory back, and what does the reuse cost
 * (waiting, hidden dependencies, extra peak memory)?
 *
 * Phase 1 (timed): `rounds` rounds; in each, every one of `streams` streams
 * allocates `blocks` blocks (sizes uniform in [size/2, size]), runs a
 * spinning kernel of `spin_us` and a fill of every block on that stream,
 * then frees the blocks on the stream: the next round's allocations find
 * them freed but possibly still in use on the GPU. traffic_reuse_share is
 * the share of allocations (rounds >= 1) that got an address the same
 * stream freed in the round before.
 * Phase 2 (reuse trials, `trials` per pattern, each on a fresh allocator
 * instance of max(2 GiB, (32 + 8) x size + 256 MiB), so the freed block is
 * the only free memory the allocator has and any reuse is a reuse of it): a block of `size` is allocated on
 * stream S, a spin of `spin_us` and a fill of the block are queued on S,
 * and the block is freed on S. Then stream T allocates `size`:
 *   same  - T = S;
 *   event - T != S, and T waits on an event recorded on S after the free;
 *   none  - T != S, no dependency at all.
 * T allocates again every window/32 until it gets the freed address back or
 * the window (4 x spin_us + 1 ms) ends; failed attempts stay allocated so
 * they cannot hand the same block round. Per pattern P:
 *   reuse_first_P  - share of trials whose first allocation got the block;
 *   reuse_hit_P    - share that got it within the window;
 *   reuse_wait_us_P - median time from the free call to the allocation that
 *                    got it (GPU), trials that got it;
 *   stall_us_P     - median time a fill queued on T right after T's last
 *                    allocation took to complete (GPU): a reuse that made T
 *                    wait for S's kernel shows here as about spin_us.
 * Reuse means the allocator handed out the same address. The standard
 * metrics (latency, peaks) describe phase 1. The stream-ordered
 * pool's reuse policies (cudaMemPoolReuseFollowEventDependencies,
 * ...AllowOpportunistic, ...AllowInternalDependencies) are options of
 * cuda-async and cuda-async-retain; docs/scenarios.md has the command lines
 * that compare them. Sim mode runs the same allocation traffic on stand-in
 * streams: no kernels, events complete at once, one allocation attempt per
 * trial, so reuse shows the policy's stream rules alone.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "../common/cmb_rng.h"
#include "../common/cmb_clock.h"
#include "../kernels/cmb_kernels.h"
#include "scenario.h"
#include "scn_util.h"

#define MAX_STREAMS 8
#define WINDOW_SLOTS 32
#define TRIAL_MIN_CAPACITY (2ull << 30) /* room for pools that preallocate bins */

enum { SAME, EVENT, NONE, N_PATTERNS };
static const char *const pattern_name[N_PATTERNS] = {"same", "event", "none"};

typedef struct pattern_tally {
    uint64_t trials, first, hits;
    double *wait_us, *stall_us;
    size_t n_wait, n_stall;
} pattern_tally;

/* --- GPU work on a block --------------------------------------------------------------- */

static cmb_status busy_block(cmb_case *c, void *p, size_t size, cmb_stream s, int spin)
{
    if (!_cmb_gpu(c))
        return CMB_OK;
    cmb_status st = CMB_OK;
    if (spin)
        st = _cmb_cuda(c, cmb_kernel_spin(cmb_param_u64(c, "spin_us") * 1000, s), "spin kernel");
    if (st == CMB_OK)
        st = _cmb_cuda(c, cmb_kernel_fill_u32(p, size, 0x51u, s), "fill kernel");
    return st;
}

/* --- phase 1: steady traffic ------------------------------------------------------------- */

static int seen_before(void *const *prev, size_t n, void *p)
{
    for (size_t i = 0; i < n; i++)
        if (prev[i] == p)
            return 1;
    return 0;
}

typedef struct traffic {
    _cmb_blocks live;
    void **prev[MAX_STREAMS];
    size_t n_prev[MAX_STREAMS];
    uint64_t allocs_after_first, reused;
} traffic;

static cmb_status traffic_round(cmb_case *c, cmb_rng *rng, traffic *tr, int round, int si)
{
    uint64_t blocks = cmb_param_u64(c, "blocks"), size = cmb_param_u64(c, "size");
    cmb_stream s = cmb_case_stream(c, si);
    cmb_status st = CMB_OK;
    tr->live.n = 0;
    for (uint64_t k = 0; k < blocks && st == CMB_OK; k++) {
        uint64_t sz = cmb_rng_range(rng, size / 2 ? size / 2 : 1, size);
        void *p;
        st = cmb_alloc(c, sz, s, &p);
        if (st != CMB_OK)
            return cmb_case_fail(c, st, "allocation of %llu bytes on stream %d failed", (unsigned long long)sz, si);
        if (_cmb_blocks_push(&tr->live, p, sz))
            return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
        if (round > 0) {
            tr->allocs_after_first++;
            tr->reused += seen_before(tr->prev[si], tr->n_prev[si], p);
        }
        st = busy_block(c, p, sz, s, k == 0);
    }
    for (size_t k = 0; k < tr->live.n; k++)
        tr->prev[si][k] = tr->live.p[k];
    tr->n_prev[si] = tr->live.n;
    cmb_status fst = _cmb_blocks_free_all(c, &tr->live, s);
    return st != CMB_OK ? st : fst;
}

static cmb_status traffic_phase(cmb_case *c, cmb_rng *rng)
{
    int streams = (int)cmb_param_u64(c, "streams"), rounds = (int)cmb_param_u64(c, "rounds");
    uint64_t blocks = cmb_param_u64(c, "blocks");
    traffic tr = {0};
    cmb_status st = CMB_OK;
    for (int s = 0; s < streams && st == CMB_OK; s++)
        if (!(tr.prev[s] = malloc(blocks * sizeof(void *))))
            st = cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
    for (int r = 0; r < rounds && st == CMB_OK; r++)
        for (int s = 0; s < streams && st == CMB_OK; s++)
            st = traffic_round(c, rng, &tr, r, s);
    if (st == CMB_OK)
        st = cmb_case_sync(c);
    if (tr.allocs_after_first)
        cmb_case_counter(c, "traffic_reuse_share", (double)tr.reused / (double)tr.allocs_after_first);
    for (int s = 0; s < streams; s++)
        free(tr.prev[s]);
    _cmb_blocks_release(&tr.live);
    return st;
}

/* --- phase 2: reuse trials ------------------------------------------------------------------ */

static void wait_until(double t)
{
    while (cmb_now_s() < t)
        ;
}

/* Time from now until a fill queued on `t` after its last allocation ends. */
static cmb_status measure_stall(cmb_case *c, void *q, size_t size, cmb_stream t, cudaEvent_t ev, double *us)
{
    double t0 = cmb_now_s();
    cmb_status st = _cmb_cuda(c, cmb_kernel_fill_u32(q, size, 0x77u, t), "fill kernel");
    if (st == CMB_OK)
        st = _cmb_cuda(c, cudaEventRecord(ev, (cudaStream_t)t), "cudaEventRecord");
    if (st == CMB_OK)
        st = _cmb_cuda(c, cudaEventSynchronize(ev), "cudaEventSynchronize");
    *us = (cmb_now_s() - t0) * 1e6;
    return st;
}

/* Allocates on `t` until the freed block `p` comes back or the window ends. */
static cmb_status poll_reuse(cmb_case *c, void *p, size_t size, cmb_stream t, double t_free, _cmb_blocks *probes,
                             void **last, int *attempts, int *hit)
{
    double window = (4.0 * (double)cmb_param_u64(c, "spin_us") + 1000.0) * 1e-6;
    *hit = 0;
    *last = NULL;
    for (*attempts = 0;; (*attempts)++) {
        void *q;
        cmb_status st = cmb_alloc(c, size, t, &q);
        if (st == CMB_ERR_OOM)
            return CMB_OK; /* the device is full of probes: not reused */
        if (st != CMB_OK)
            return cmb_case_fail(c, st, "reuse allocation failed");
        *last = q;
        if (q == p) {
            *hit = 1;
            (*attempts)++;
            return CMB_OK;
        }
        if (_cmb_blocks_push(probes, q, size))
            return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
        if (!_cmb_gpu(c) || cmb_now_s() - t_free > window) {
            (*attempts)++;
            return CMB_OK;
        }
        wait_until(t_free + window * (*attempts + 1) / WINDOW_SLOTS);
    }
}

typedef struct trial_arg {
    int pattern, trial;
    cudaEvent_t ev;
    pattern_tally *pt;
} trial_arg;

static cmb_status one_trial(cmb_case *c, int pattern, int trial, cudaEvent_t ev, pattern_tally *pt)
{
    int streams = (int)cmb_param_u64(c, "streams");
    size_t size = (size_t)cmb_param_u64(c, "size");
    int si = trial % streams, ti = pattern == SAME ? si : (si + 1) % streams;
    cmb_stream s = cmb_case_stream(c, si), t = cmb_case_stream(c, ti);
    _cmb_blocks probes = {0};
    void *p, *last = NULL;
    int attempts = 0, hit = 0;

    cmb_status st = cmb_alloc(c, size, s, &p);
    if (st != CMB_OK)
        return cmb_case_fail(c, st, "trial allocation of %zu bytes failed", size);
    st = busy_block(c, p, size, s, 1);
    double t_free = cmb_now_s();
    cmb_status fst = cmb_free(c, p, s);
    if (st == CMB_OK && fst != CMB_OK)
        st = cmb_case_fail(c, fst, "trial free failed");
    if (st == CMB_OK && pattern == EVENT && _cmb_gpu(c)) {
        st = _cmb_cuda(c, cudaEventRecord(ev, (cudaStream_t)s), "cudaEventRecord");
        if (st == CMB_OK)
            st = _cmb_cuda(c, cudaStreamWaitEvent((cudaStream_t)t, ev, 0), "cudaStreamWaitEvent");
    }
    if (st == CMB_OK)
        st = poll_reuse(c, p, size, t, t_free, &probes, &last, &attempts, &hit);
    double wait_us = (cmb_now_s() - t_free) * 1e6;
    pt->trials++;
    pt->first += hit && attempts == 1;
    pt->hits += hit;
    if (hit && _cmb_gpu(c))
        pt->wait_us[pt->n_wait++] = wait_us;
    if (st == CMB_OK && last && _cmb_gpu(c))
        st = measure_stall(c, last, size, t, ev, &pt->stall_us[pt->n_stall++]);
    if (hit) {
        fst = cmb_free(c, last, t);
        if (st == CMB_OK && fst != CMB_OK)
            st = cmb_case_fail(c, fst, "free of the reused block failed");
    }
    fst = _cmb_blocks_free_all(c, &probes, t);
    _cmb_blocks_release(&probes);
    if (st == CMB_OK)
        st = fst;
    return st == CMB_OK ? cmb_case_sync(c) : st;
}

/* Device size of a trial's instance: room for the block, the probes and
 * pool rounding, so pools that reserve a share of the device up front
 * reserve little (policies see it as their capacity; opaque GPU allocators
 * allocate on demand). */
static uint64_t trial_capacity(const cmb_case *c)
{
    uint64_t need = (WINDOW_SLOTS + 8) * cmb_param_u64(c, "size") + (256ull << 20);
    return need > TRIAL_MIN_CAPACITY ? need : TRIAL_MIN_CAPACITY;
}

/* Each trial runs on a fresh allocator instance: the freed block is then
 * the only free memory it has, so any reuse is a reuse of that block. */
static cmb_status trial_fn(cmb_case *c, void *arg)
{
    trial_arg *a = arg;
    return one_trial(c, a->pattern, a->trial, a->ev, a->pt);
}

static void report_pattern(cmb_case *c, int pattern, pattern_tally *pt)
{
    char name[48];
    if (!pt->trials)
        return;
    snprintf(name, sizeof name, "reuse_first_%s", pattern_name[pattern]);
    cmb_case_counter(c, name, (double)pt->first / (double)pt->trials);
    snprintf(name, sizeof name, "reuse_hit_%s", pattern_name[pattern]);
    cmb_case_counter(c, name, (double)pt->hits / (double)pt->trials);
    if (!_cmb_gpu(c))
        return;
    snprintf(name, sizeof name, "reuse_wait_us_%s", pattern_name[pattern]);
    cmb_case_counter(c, name, _cmb_median(pt->wait_us, pt->n_wait));
    snprintf(name, sizeof name, "stall_us_%s", pattern_name[pattern]);
    cmb_case_counter(c, name, _cmb_median(pt->stall_us, pt->n_stall));
}

static cmb_status reuse_phase(cmb_case *c)
{
    int streams = (int)cmb_param_u64(c, "streams"), trials = (int)cmb_param_u64(c, "trials");
    int patterns = streams > 1 ? N_PATTERNS : 1;
    cudaEvent_t ev = NULL;
    cmb_status st = CMB_OK;
    if (_cmb_gpu(c))
        st = _cmb_cuda(c, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    for (int p = 0; p < patterns && st == CMB_OK; p++) {
        pattern_tally pt = {0};
        pt.wait_us = malloc((size_t)trials * sizeof(double));
        pt.stall_us = malloc((size_t)trials * sizeof(double));
        if (!pt.wait_us || !pt.stall_us)
            st = cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
        for (int k = 0; k < trials && st == CMB_OK; k++) {
            trial_arg a = {p, k, ev, &pt};
            st = cmb_case_with_fresh_allocator(c, trial_capacity(c), trial_fn, &a, NULL);
        }
        if (st == CMB_OK)
            report_pattern(c, p, &pt);
        free(pt.wait_us);
        free(pt.stall_us);
    }
    if (ev)
        cudaEventDestroy(ev);
    return st;
}

static cmb_status stream_async_run(cmb_case *c)
{
    cmb_rng rng;
    cmb_rng_seed(&rng, cmb_case_seed(c));
    if (!_cmb_gpu(c))
        cmb_case_note(c, "kernels, events and waiting skipped in sim mode (one reuse attempt per trial)");
    /* The wall clock, bookkeeping included: the GPU's kernels pace this
     * phase, and the host's bookkeeping overlaps them, so leaving it out
     * (cmb_case_clock) would report less than the kernels take. */
    double t0 = cmb_now_s();
    cmb_status st = traffic_phase(c, &rng);
    cmb_case_set_time(c, cmb_now_s() - t0);
    if (st == CMB_OK)
        st = reuse_phase(c);
    return st;
}

static int stream_async_check(const cmb_case *c, char *reason, size_t len)
{
    uint64_t size = cmb_param_u64(c, "size"), need;
    need = size * (cmb_param_u64(c, "streams") * cmb_param_u64(c, "blocks") + WINDOW_SLOTS + 4);
    if (need > cmb_case_capacity(c) / 2) {
        snprintf(reason, len, "stream-async: blocks of %llu bytes need %llu MiB, over half the device",
                 (unsigned long long)size, (unsigned long long)(need >> 20));
        return 1;
    }
    return 0;
}

static const cmb_param_spec stream_async_params[] = {
    {"streams", CMB_P_INT, "4", "1,4,8", 1, MAX_STREAMS, NULL, "streams the traffic is spread over"},
    {"rounds", CMB_P_INT, "50", "200", 1, 1e6, NULL, "phase 1 rounds (allocate, kernels, free per stream)"},
    {"blocks", CMB_P_INT, "4", "8", 1, 1024, NULL, "blocks per stream and round"},
    {"size", CMB_P_SIZE, "1MiB", "1MiB", 1024, 17179869184.0, NULL,
     "block size (phase 1 draws sizes in [size/2, size])"},
    {"spin_us", CMB_P_INT, "200", "500", 0, 1e6, NULL, "duration of the spinning kernel, microseconds"},
    {"trials", CMB_P_INT, "6", "24", 1, 100000, NULL, "reuse trials per pattern (same, event, none)"},
};

/* full: the stream count swept at 1 MiB under long kernels, then large
 * blocks under short kernels at 4 streams */
static const char *const stream_async_full_grids[] = {
    "",
    "streams=4;size=16MiB;spin_us=50",
    NULL,
};

/* Which streams got the freed block back (shares of trials), then phase 1. */
static const cmb_headline stream_async_headline = {
    NULL, NULL, NULL, NULL,
    {"reuse hit: same stream {reuse_hit_same}", "after an event {reuse_hit_event}", "unrelated {reuse_hit_none}",
     "peak reserved {peak_reserved_bytes}", "time {time}", NULL},
};

const cmb_scenario cmb_scenario_stream_async = {
    .name = "stream-async",
    .question = "When I free memory on one stream while kernels still run, how soon can the same stream, an "
                "event-synchronized stream or an unrelated stream reuse it, and what does that cost?",
    .params = stream_async_params,
    .n_params = sizeof stream_async_params / sizeof stream_async_params[0],
    .flags = CMB_SCN_NO_PROBE,
    .full_grids = stream_async_full_grids,
    .check = stream_async_check,
    .run = stream_async_run,
    .headline = &stream_async_headline,
};
