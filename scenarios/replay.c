/* replay.c - replay a recorded allocation trace under any allocator.
 *
 * Question: my real workload ran out of memory (or held too much): would
 * another allocator, or another setting, have fit it, how much would it
 * hold, and what is the smallest GPU it fits on?
 *
 * Reads the suite's trace format or an RMM logging_resource_adaptor CSV
 * (PyTorch snapshots are converted first with
 * traces/torch_snapshot_to_trace.py), then replays every allocation and
 * free in order, on the streams the trace recorded (mapped in order of
 * first use). In sim mode the replay is exact and deterministic; on a GPU
 * the allocations are real and per-operation latency is measured. An
 * allocation the allocator cannot serve is counted (replay_ooms) and its
 * later free skipped: the replay goes on, as a program catching the error
 * would; a replay with failed allocations did not fit (status oom, "did
 * not fit: N allocations failed"). With find_min_capacity (sim), the trace
 * is replayed again on fresh instances to find the smallest device it fits
 * in without an OOM, by doubling from the case's capacity until it fits,
 * then bisection to 2 MiB (RMM's replay guide does this search by hand).
 * Sim is deterministic: the search runs in the first repetition and the
 * others report its result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../traces/trace.h"
#include "scenario.h"
#include "scn_util.h"

#define MAX_STREAMS CMB_TRACE_MAX_STREAMS

/* --- the trace in memory ------------------------------------------------------------ */

/* Loaded whole by traces/trace_load.c, as tune loads it. */
typedef cmb_trace_packed packed_event;
typedef cmb_trace_loaded loaded_trace;

/* One trace stays loaded across the repetitions of a case. */
static loaded_trace cache;
static char cache_path[512];

static cmb_status load_trace(cmb_case *c, const char *path)
{
    char err[640];
    if (cache.ev && !strcmp(cache_path, path))
        return CMB_OK;
    cmb_trace_unload(&cache);
    if (cmb_trace_load(&cache, path, err, sizeof err))
        return cmb_case_fail(c, CMB_ERR_PARSE, "%s", err);
    snprintf(cache_path, sizeof cache_path, "%s", path);
    return CMB_OK;
}

/* --- one replay ---------------------------------------------------------------------------- */

/* CMB_EXPLAIN_OOM=1: what the first failure needs to be explained. */
typedef struct oom_explain {
    uint64_t *born;       /* per slot: the event that allocated its live block */
    uint64_t failed, failed_bytes, largest_failed, last_failed;
} oom_explain;

typedef struct replay_run {
    const loaded_trace *t;
    void **ptr;          /* per slot; NULL when not live */
    uint64_t ooms;
    int honour_syncs;
    uint64_t passes;
    uint64_t pass;       /* the pass under way, for progress */
    const char *what;    /* what progress counts ("events") */
    oom_explain *ex; /* CMB_EXPLAIN_OOM=1: the first failure explained; NULL otherwise */
} replay_run;

static void explain_failure(cmb_case *c, replay_run *run, uint64_t at, const packed_event *e, cmb_stream s);
static void explain_reset(oom_explain *ex);

static cmb_status sync_stream(cmb_case *c, int index)
{
    if (cmb_case_mode(c) != CMB_MODE_GPU)
        return CMB_OK;
    cudaError_t e = index < 0 ? cudaDeviceSynchronize() : cudaStreamSynchronize((cudaStream_t)cmb_case_stream(c, index));
    return e == cudaSuccess ? CMB_OK : cmb_case_fail(c, CMB_ERR_CUDA, "synchronize: %s", cudaGetErrorString(e));
}

/* Frees what a pass left live, so the next pass starts as the trace did. */
static cmb_status end_pass(cmb_case *c, replay_run *run, cmb_stream s)
{
    for (uint32_t k = 0; k < run->t->slots; k++) {
        if (!run->ptr[k])
            continue;
        cmb_status st = cmb_free(c, run->ptr[k], s);
        if (st != CMB_OK)
            return cmb_case_fail(c, st, "free at the end of a pass failed");
        run->ptr[k] = NULL;
    }
    return CMB_OK;
}

static cmb_status replay_pass(cmb_case *c, replay_run *run, cmb_stream *streams);

static cmb_status replay_events(cmb_case *c, void *arg)
{
    replay_run *run = arg;
    const loaded_trace *t = run->t;
    cmb_stream streams[MAX_STREAMS];
    for (int i = 0; i < MAX_STREAMS; i++)
        streams[i] = i < t->streams ? cmb_case_stream(c, i) : NULL;
    memset(run->ptr, 0, (size_t)t->slots * sizeof *run->ptr);
    run->ooms = 0;
    if (run->ex)
        explain_reset(run->ex);
    for (uint64_t pass = 0; pass < run->passes; pass++) {
        run->pass = pass;
        if (pass && pass + 1 == run->passes)
            cmb_case_mark_last_pass(c); /* the warm pass, priced alone */
        cmb_status st = replay_pass(c, run, streams);
        if (st == CMB_OK && pass + 1 < run->passes)
            st = end_pass(c, run, streams[0]);
        if (st != CMB_OK)
            return st;
    }
    return CMB_OK;
}

static cmb_status replay_pass(cmb_case *c, replay_run *run, cmb_stream *streams)
{
    const loaded_trace *t = run->t;
    uint64_t base = run->pass * t->n, total = run->passes * t->n;
    for (size_t i = 0; i < t->n; i++) {
        const packed_event *e = &t->ev[i];
        cmb_status st;
        cmb_case_progress(c, base + i, total, run->what);
        switch (e->op) {
        case CMB_TRACE_ALLOC:
            st = cmb_alloc(c, e->size, streams[e->stream], &run->ptr[e->slot]);
            if (st == CMB_ERR_OOM) {
                run->ptr[e->slot] = NULL;
                run->ooms++;
                if (run->ex)
                    explain_failure(c, run, base + i, e, streams[e->stream]);
            } else if (st != CMB_OK) {
                return cmb_case_fail(c, st, "event %zu: allocation of %llu bytes failed", i,
                                     (unsigned long long)e->size);
            } else if (run->ex) {
                run->ex->born[e->slot] = base + i;
            }
            break;
        case CMB_TRACE_FREE:
            if (run->ptr[e->slot]) {
                st = cmb_free(c, run->ptr[e->slot], streams[e->stream]);
                if (st != CMB_OK)
                    return cmb_case_fail(c, st, "event %zu: free failed", i);
                run->ptr[e->slot] = NULL;
            }
            break;
        default:
            if (run->honour_syncs && sync_stream(c, e->stream) != CMB_OK)
                return CMB_ERR_CUDA;
        }
    }
    return CMB_OK;
}

/* --- explaining the first failure (CMB_EXPLAIN_OOM=1) ------------------------------------------ */

/* At the first allocation that fails: the request, what the allocator
 * reserved and allocated, its free bytes by the reason the request could
 * not use them (the policy's free_account), the device's free bytes, and
 * the live blocks that pin the most memory, with their age in events. The
 * later failures are summed. All of it goes out as counters (oom_*), which
 * tools/explain_oom.py prints and plots/report.py shows beside the other
 * allocators of the same run. Off by default: it is read from the
 * environment so a replay's parameters, and so its case names, stay as
 * they were. */

#define EXPLAIN_PINS 3

/* The live blocks that pin the most: the largest, then the oldest. */
static void explain_pins(cmb_case *c, const replay_run *run, uint64_t at)
{
    uint32_t top[EXPLAIN_PINS];
    uint64_t top_size[EXPLAIN_PINS] = {0};
    int n = 0;
    for (uint32_t k = 0; k < run->t->slots; k++) {
        if (!run->ptr[k])
            continue;
        uint64_t size = cmb_block_size(c, run->ptr[k]);
        int j = n < EXPLAIN_PINS ? n++ : EXPLAIN_PINS;
        while (j > 0 && (top_size[j - 1] < size || (top_size[j - 1] == size &&
                                                    run->ex->born[top[j - 1]] > run->ex->born[k]))) {
            if (j < EXPLAIN_PINS) {
                top[j] = top[j - 1];
                top_size[j] = top_size[j - 1];
            }
            j--;
        }
        if (j < EXPLAIN_PINS) {
            top[j] = k;
            top_size[j] = size;
        }
    }
    for (int j = 0; j < n; j++) {
        char name[48];
        snprintf(name, sizeof name, "oom_pin%d_bytes", j + 1);
        cmb_case_counter(c, name, (double)top_size[j]);
        snprintf(name, sizeof name, "oom_pin%d_event", j + 1);
        cmb_case_counter(c, name, (double)run->ex->born[top[j]]);
        snprintf(name, sizeof name, "oom_pin%d_age_events", j + 1);
        cmb_case_counter(c, name, (double)(at - run->ex->born[top[j]]));
    }
}

static void explain_first(cmb_case *c, replay_run *run, uint64_t at, const packed_event *e, cmb_stream s)
{
    cmb_case_counter(c, "oom_event", (double)at);
    _cmb_explain_request(c, e->size, e->stream, s);
    explain_pins(c, run, at);
}

static void explain_reset(oom_explain *ex)
{
    ex->failed = ex->failed_bytes = ex->largest_failed = ex->last_failed = 0;
}

static void explain_failure(cmb_case *c, replay_run *run, uint64_t at, const packed_event *e, cmb_stream s)
{
    oom_explain *ex = run->ex;
    if (!ex->failed++)
        explain_first(c, run, at, e, s);
    ex->failed_bytes += e->size;
    if (e->size > ex->largest_failed)
        ex->largest_failed = e->size;
    ex->last_failed = at;
}

/* The failures after the first, summed: how many, how much, the largest. */
static void explain_summary(cmb_case *c, const oom_explain *ex)
{
    if (!ex->failed)
        return;
    cmb_case_counter(c, "oom_failed_allocs", (double)ex->failed);
    cmb_case_counter(c, "oom_failed_bytes", (double)ex->failed_bytes);
    cmb_case_counter(c, "oom_largest_failed_bytes", (double)ex->largest_failed);
    cmb_case_counter(c, "oom_last_event", (double)ex->last_failed);
}

/* --- the smallest capacity that fits --------------------------------------------------------- */

typedef struct fit_probe {
    replay_run *run;
    uint64_t ooms;
    int trials;
    char what[64]; /* progress: which trial of the search */
} fit_probe;

static cmb_status fit_fn(cmb_case *c, void *arg)
{
    fit_probe *p = arg;
    snprintf(p->what, sizeof p->what, "events, min-capacity trial %d", ++p->trials);
    p->run->what = p->what;
    p->run->ex = NULL; /* the search's trials explain nothing */
    cmb_status st = replay_events(c, p->run);
    p->ooms = p->run->ooms;
    return st;
}

#define MIN_CAPACITY_STEP (2ull << 20)
#define MIN_CAPACITY_MAX (1ull << 40) /* the capacity parameter's own bound */

/* The smallest capacity that fits lies in (lo, hi]: from `hi` (the case's
 * capacity), doubled until the trace fits. 0 when it fits nowhere below
 * MIN_CAPACITY_MAX. */
static cmb_status fitting_bound(cmb_case *c, fit_probe *p, uint64_t *lo, uint64_t *hi)
{
    for (;;) {
        cmb_status st = cmb_case_with_fresh_allocator(c, *hi, fit_fn, p, NULL);
        if (st != CMB_OK)
            return st;
        if (!p->ooms)
            return CMB_OK;
        if (*hi >= MIN_CAPACITY_MAX) {
            *hi = 0;
            return CMB_OK;
        }
        *lo = *hi;
        *hi = *hi * 2 < MIN_CAPACITY_MAX ? *hi * 2 : MIN_CAPACITY_MAX;
    }
}

/* Fit need not be monotone in the capacity: rmm-pool's initial pool is half
 * the free memory (rmm/mr/device/pool_memory_resource.hpp, v24.02), so a
 * trace can fit at one capacity, fail a little above it and fit again
 * further up. The answer is the smallest capacity from which every larger
 * one fits; a fitting capacity below it is an island. The bisection finds a
 * transition; the scan above it, on the same grid for MIN_CAPACITY_SPAN
 * and at MIN_CAPACITY_SAMPLES points spread from there up to
 * MIN_CAPACITY_SCAN of the candidate, moves the answer past any failure it
 * meets; the scan below it (as far down, on the grid) finds islands,
 * reported beside the answer. The span bounds the trials (a 40 GiB trace
 * would otherwise take thousands): a failure further above, between the
 * samples, is not seen (docs/costs.md). */
#define MIN_CAPACITY_SCAN 1.25
#define MIN_CAPACITY_SPAN ((uint64_t)128 << 20)
#define MIN_CAPACITY_SAMPLES 32

static uint64_t scan_end(uint64_t best, uint64_t hi)
{
    uint64_t end = (uint64_t)((double)best * MIN_CAPACITY_SCAN);
    if (end > best + MIN_CAPACITY_SPAN)
        end = best + MIN_CAPACITY_SPAN;
    return end < hi ? end : hi;
}

/* The sparse part above the dense scan: 0 when every sample fits, else the
 * first failing capacity in *failed. */
static cmb_status sample_above(cmb_case *c, struct fit_probe *p, uint64_t from, uint64_t hi, uint64_t *failed);

static cmb_status fits_at(cmb_case *c, fit_probe *p, uint64_t cap, int *fits)
{
    cmb_status st = cmb_case_with_fresh_allocator(c, cap, fit_fn, p, NULL);
    *fits = st == CMB_OK && !p->ooms;
    return st;
}

/* From a fitting `*best`, scan upward; a failure at f moves the answer to
 * the next fitting capacity above f and marks everything below an island. */
static cmb_status scan_above(cmb_case *c, fit_probe *p, uint64_t hi, uint64_t *best, uint64_t *island)
{
    const uint64_t step = MIN_CAPACITY_STEP;
    uint64_t end = scan_end(*best, hi);
    for (uint64_t cap = *best + step; cap < end; cap += step) {
        int fits;
        cmb_status st = fits_at(c, p, cap, &fits);
        if (st != CMB_OK)
            return st;
        if (fits)
            continue;
        if (!*island)
            *island = *best; /* the lowest fitting capacity seen */
        *best = cap + step; /* a candidate; the scan goes on above it */
        end = scan_end(*best, hi);
    }
    uint64_t failed = 0;
    cmb_status st = end < hi ? sample_above(c, p, end, hi, &failed) : CMB_OK;
    if (st != CMB_OK)
        return st;
    if (failed) { /* a failure above the dense part: scan again from above it */
        if (!*island)
            *island = *best;
        *best = failed + step;
        if (*best < hi)
            return scan_above(c, p, hi, best, island);
    }
    if (*best > hi)
        *best = hi;
    return CMB_OK;
}

static cmb_status sample_above(cmb_case *c, fit_probe *p, uint64_t from, uint64_t hi, uint64_t *failed)
{
    const uint64_t step = MIN_CAPACITY_STEP;
    uint64_t to = (uint64_t)((double)from * MIN_CAPACITY_SCAN);
    to = to < hi ? to : hi;
    *failed = 0;
    for (int i = 1; i <= MIN_CAPACITY_SAMPLES && to > from; i++) {
        uint64_t cap = (from + (to - from) / MIN_CAPACITY_SAMPLES * (uint64_t)i) / step * step;
        int fits;
        cmb_status st = fits_at(c, p, cap, &fits);
        if (st != CMB_OK)
            return st;
        if (!fits) {
            *failed = cap;
            return CMB_OK;
        }
    }
    return CMB_OK;
}

/* Below the answer, on the same grid down to 1/MIN_CAPACITY_SCAN of it:
 * the lowest capacity that fits there, an island (0: none found). */
static cmb_status scan_below(cmb_case *c, fit_probe *p, uint64_t best, uint64_t *island)
{
    const uint64_t step = MIN_CAPACITY_STEP;
    uint64_t floor = (uint64_t)((double)best / MIN_CAPACITY_SCAN);
    if (best > MIN_CAPACITY_SPAN && floor < best - MIN_CAPACITY_SPAN)
        floor = best - MIN_CAPACITY_SPAN;
    for (uint64_t cap = best - step; cap >= floor && cap >= step; cap -= step) {
        int fits;
        cmb_status st = fits_at(c, p, cap, &fits);
        if (st != CMB_OK)
            return st;
        if (fits && (!*island || cap < *island))
            *island = cap;
    }
    return CMB_OK;
}

static cmb_status find_min_capacity(cmb_case *c, replay_run *run, uint64_t lo, uint64_t hi, uint64_t *best,
                                    uint64_t *island)
{
    const uint64_t step = MIN_CAPACITY_STEP;
    replay_run once = *run;
    once.passes = 1; /* one pass decides whether the trace fits */
    fit_probe p = {&once, 0, 0, ""};
    lo = lo / step * step;
    hi = hi ? (hi + step - 1) / step * step : step;
    *best = 0;
    *island = 0;
    /* invariant: lo does not fit (or is the lower bound), hi fits */
    cmb_status st = fitting_bound(c, &p, &lo, &hi);
    if (st != CMB_OK || !hi)
        return st; /* !hi: does not fit even MIN_CAPACITY_MAX */
    uint64_t top = hi;
    while (hi - lo > step) {
        uint64_t mid = (lo + (hi - lo) / 2) / step * step;
        if (mid <= lo)
            mid = lo + step;
        int fits;
        st = fits_at(c, &p, mid, &fits);
        if (st != CMB_OK)
            return st;
        if (fits)
            hi = mid;
        else
            lo = mid;
    }
    *best = hi;
    st = scan_above(c, &p, top, best, island);
    if (st == CMB_OK)
        st = scan_below(c, &p, *best, island);
    return st;
}

/* --- the scenario ------------------------------------------------------------------------------- */

static void trace_counters(cmb_case *c, const loaded_trace *t, uint64_t passes, uint64_t ooms, double seconds)
{
    cmb_case_counter(c, "trace_events", (double)t->n);
    cmb_case_counter(c, "replayed_events", (double)(t->n * passes));
    cmb_case_counter(c, "trace_allocs", (double)t->counts.allocs);
    cmb_case_counter(c, "trace_frees", (double)t->counts.frees);
    cmb_case_counter(c, "trace_streams", (double)t->streams);
    cmb_case_counter(c, "replay_ooms", (double)ooms);
    if (t->counts.skipped_failures)
        cmb_case_counter(c, "trace_skipped_failures", (double)t->counts.skipped_failures);
    if (t->counts.unknown_frees)
        cmb_case_counter(c, "trace_unknown_frees", (double)t->counts.unknown_frees);
    if (seconds > 0)
        cmb_case_counter(c, "events_per_s", (double)(t->n * passes) / seconds);
}

/* The search, once per case: sim replays are deterministic, so every
 * repetition of the case (one process) reports the first one's result. */
static cmb_status min_capacity(cmb_case *c, replay_run *run)
{
    static int searched;
    static uint64_t found, island;
    if (cmb_case_mode(c) != CMB_MODE_SIM) {
        cmb_case_note(c, "find_min_capacity runs in sim mode only");
        return CMB_OK;
    }
    if (!searched) {
        /* the blocks of the main replay stay live for the harness's probe:
         * the search runs on fresh instances with their own devices */
        cmb_status st = find_min_capacity(c, run, 0, cmb_case_capacity(c), &found, &island);
        if (st != CMB_OK)
            return st;
        searched = 1;
    }
    if (found)
        cmb_case_counter(c, "min_capacity_bytes", (double)found);
    if (found && island) {
        cmb_case_counter(c, "min_capacity_island_bytes", (double)island);
        cmb_case_note(c, "fits from %.2f GiB up; smaller islands fit too (from %.2f GiB)",
                      (double)found / (1u << 30), (double)island / (1u << 30));
    } else if (!found) {
        cmb_case_note(c, "the trace does not fit a device of 1 TiB");
    }
    return CMB_OK;
}

static cmb_status replay_run_case(cmb_case *c)
{
    const char *path = cmb_param_str(c, "trace");
    cmb_status st = load_trace(c, path);
    if (st != CMB_OK)
        return st;
    if (cache.folded_streams)
        cmb_case_note(c, "more than %d streams: extra streams share handles", MAX_STREAMS);
    replay_run run = {&cache, calloc(cache.slots ? cache.slots : 1, sizeof(void *)), 0,
                      cmb_param_bool(c, "sync"), cmb_param_u64(c, "passes"), 0, "events", NULL};
    if (!run.ptr)
        return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
    cmb_case_set_op_timing(c, cmb_param_bool(c, "op_latency"));
    oom_explain ex = {NULL, 0, 0, 0, 0};
    if (_cmb_explain_wanted()) {
        ex.born = calloc(cache.slots ? cache.slots : 1, sizeof *ex.born);
        if (!ex.born) {
            free(run.ptr);
            return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
        }
        run.ex = &ex;
    }

    double t0 = cmb_case_clock(c);
    st = replay_events(c, &run);
    if (st == CMB_OK)
        st = cmb_case_sync(c);
    double seconds = cmb_case_clock(c) - t0;
    cmb_case_set_time(c, seconds);
    if (st == CMB_OK)
        trace_counters(c, &cache, run.passes, run.ooms, seconds);
    if (st == CMB_OK && run.ooms)
        cmb_case_set_oom(c, run.ooms); /* did not fit: an answer, not a failure */
    if (st == CMB_OK && run.ex)
        explain_summary(c, run.ex);

    if (st == CMB_OK && cmb_param_bool(c, "find_min_capacity"))
        st = min_capacity(c, &run);
    free(run.ptr);
    free(ex.born);
    return st;
}

/* The parent reads every trace once before anything runs, so a missing or
 * malformed trace, or one without an allocation, stops the run with
 * FILE:LINE: reason instead of failing each case. */
static int replay_check(const cmb_case *c, char *reason, size_t len)
{
    static char checked[16][512];
    static int n_checked;
    const char *path = cmb_param_str(c, "trace");
    for (int i = 0; i < n_checked; i++)
        if (!strcmp(checked[i], path))
            return 0;
    cmb_trace_reader r;
    cmb_trace_event ev;
    int rc;
    if (cmb_trace_open(&r, path, reason, len))
        return -1;
    while ((rc = cmb_trace_next(&r, &ev, reason, len)) == 1)
        ;
    uint64_t allocs = r.counts.allocs;
    cmb_trace_close(&r);
    if (rc < 0)
        return -1;
    if (!allocs) { /* a run with nothing measured, as cumembench tune refuses it */
        snprintf(reason, len, "%s: no allocations to replay", path);
        return -1;
    }
    if (n_checked < 16)
        snprintf(checked[n_checked++], sizeof checked[0], "%s", path);
    return 0;
}

static const cmb_param_spec replay_params[] = {
    {"trace", CMB_P_TEXT, "traces/samples/torch_mlp_sweep_default.trace,traces/samples/churn_small.trace",
     "traces/samples/torch_mlp_sweep_default.trace,traces/samples/churn_small.trace", 0, 0, NULL,
     "trace file: the suite's format or an RMM log CSV (paths relative to the working directory)"},
    {"capacity", CMB_P_SIZE, "0", "0", 0, 1099511627776.0, NULL,
     "device size for the replay (sim) or cap (GPU, policies); 0 = the run's --capacity / the GPU"},
    {"sync", CMB_P_BOOL, "true", "true", 0, 0, NULL, "honour the trace's stream synchronisations"},
    {"find_min_capacity", CMB_P_BOOL, "true", "true", 0, 0, NULL,
     "sim: also find the smallest device the trace fits in (2 MiB steps)"},
    {"passes", CMB_P_INT, "1", "1", 1, 1e9, NULL,
     "replay the trace this many times, freeing what each pass left live (training steps repeat)"},
    {"op_latency", CMB_P_BOOL, "true", "true", 0, 0, NULL,
     "read the clock around every operation; false for throughput runs (no latency counters)"},
};

/* Fits or not (the harness's status: "did not fit: N allocations failed"),
 * then the smallest device it fits and what it held for what it asked. */
static const cmb_headline replay_headline = {
    "fits", NULL, NULL, NULL,
    {"min capacity {min_capacity_bytes}", "peak reserved {peak_reserved_bytes} for {peak_requested_bytes} requested",
     "time {time}", NULL},
};

const cmb_scenario cmb_scenario_replay = {
    .name = "replay",
    .question = "Would my recorded workload fit, and how much would it hold, under another allocator or "
                "setting, and what is the smallest GPU it fits on?",
    .params = replay_params,
    .n_params = sizeof replay_params / sizeof replay_params[0],
    .flags = CMB_SCN_TIMELINE | CMB_SCN_NO_PROBE, /* fit and hold, not the capacity after */
    .check = replay_check,
    .run = replay_run_case,
    .headline = &replay_headline,
};
