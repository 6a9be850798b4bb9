/* contention.c - another process holds part of the device while the case
 * runs.
 *
 * Question: another job or framework on the same GPU takes memory while my
 * program runs; does my allocator fail cleanly, give back its cache and
 * retry, or strand memory it holds, and does it recover once the other
 * process is gone?
 *
 * 1. warm:    allocate blocks (uniform in [1 MiB, warm_max]) until `warm` x
 *             capacity bytes are live, then free all but a `keep` share of
 *             them (chosen at random): caching allocators now hold a cache.
 * 2. hold:    another process takes share x capacity bytes (at most the
 *             free memory less 256 MiB, and on a GPU less 1 GiB more for
 *             that process's own CUDA context; when the device still says
 *             no, 3/4 of the amount, up to 4 tries). GPU: this binary
 *             started as `cumembench --hold-memory BYTES`, which cudaMallocs
 *             them.
 *             Sim: the upstream's capacity shrinks by that much, which is
 *             exact for the policies (the only allocators sim runs): they
 *             see failures and fewer free bytes, their statistics
 *             untouched; opaque GPU allocators cannot be modelled and are
 *             skipped in sim as everywhere.
 * 3. demand (timed): allocate blocks of `demand_size` until the allocator
 *             says no. available_bytes = capacity - held - live: what a
 *             perfect allocator could still hand out;
 *             contended_capacity_ratio = obtained_bytes / available_bytes
 *             (1: it released whatever it cached; low: it stranded memory).
 *             failed_clean = 1 when the refusal was a clean out-of-memory,
 *             0 for any other error. oom_retries (standard counter) and
 *             upstream_frees_under_pressure show free-cache-and-retry.
 * 4. recover: the other process ends and blocks of demand_size are
 *             allocated again until the allocator says no (at most held +
 *             one block): recovered_bytes, and recovery_ratio =
 *             recovered_bytes / held_bytes (1: it can use all the memory
 *             the other process gave back; 0: e.g. a pool that cannot grow
 *             past what it reserved before).
 * Managed memory is never requested beyond what the card has free: when
 * the allocator's blocks turn out to be managed (cudaPointerGetAttributes),
 * a phase stops (guard_stopped = 1) before the live bytes plus the next
 * block would exceed the device's free memory less 256 MiB (managed memory
 * is resident only once touched, so every live byte is counted as if it
 * were), instead of letting the driver oversubscribe.
 */
#include <math.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "../common/cmb_rng.h"
#include "scenario.h"
#include "scn_util.h"

#define HOLD_MARGIN (256ull << 20)    /* left free beside the other process */
#define HOLDER_CONTEXT (1ull << 30)   /* GPU: the other process's own CUDA context
                                         (about 0.5 GiB on an H200) and slack */
#define HOLD_TRIES 4                  /* on out of memory, 3/4 of the amount again */

typedef struct contention {
    _cmb_blocks live;
    int managed;
    uint64_t held, available, obtained;
    int64_t warm_reserved, reserved_at_failure;
    uint64_t frees_before;
    uint64_t recovered;
    int failed, failed_clean, guard_stopped;
} contention;

static void reserved_now(cmb_case *c, int64_t *reserved, uint64_t *upstream_frees)
{
    cmb_alloc_stats s;
    cmb_case_alloc_stats(c, &s);
    *reserved = (s.valid & CMB_STAT_RESERVED) ? s.reserved.current : -1;
    if (upstream_frees)
        *upstream_frees = (s.valid & CMB_STAT_UPSTREAM) ? s.upstream_frees : 0;
}

static int is_managed(cmb_case *c, void *p)
{
    struct cudaPointerAttributes a;
    if (!_cmb_gpu(c) || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeManaged;
}

static cmb_status warm_phase(cmb_case *c, cmb_rng *rng, contention *ct)
{
    uint64_t target = (uint64_t)(cmb_param_real(c, "warm") * (double)cmb_case_capacity(c));
    uint64_t top = cmb_param_u64(c, "warm_max"), done = 0;
    double keep = cmb_param_real(c, "keep");
    cmb_stream s = cmb_case_stream(c, 0);
    _cmb_blocks all = {0};
    cmb_status st = CMB_OK;
    while (done < target && st == CMB_OK) {
        uint64_t size = cmb_rng_range(rng, 1u << 20, top);
        void *p;
        st = cmb_alloc(c, size, s, &p);
        if (st == CMB_ERR_OOM) {
            if (_cmb_explain_wanted()) /* what stopped the warm-up short of its target */
                _cmb_explain_request(c, size, 0, s);
            st = CMB_OK;
            break;
        }
        if (st != CMB_OK)
            st = cmb_case_fail(c, st, "warm-up allocation of %llu bytes failed", (unsigned long long)size);
        else if (_cmb_blocks_push(&all, p, size))
            st = cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
        else if (all.n == 1)
            ct->managed = is_managed(c, p);
        done += size;
    }
    for (size_t i = 0; i < all.n && st == CMB_OK; i++) {
        if (cmb_rng_uniform(rng) < keep) {
            if (_cmb_blocks_push(&ct->live, all.p[i], all.size[i]))
                st = cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
        } else if ((st = cmb_free(c, all.p[i], s)) != CMB_OK) {
            st = cmb_case_fail(c, st, "warm-up free failed");
        }
    }
    _cmb_blocks_release(&all);
    if (st == CMB_OK)
        st = cmb_case_sync(c);
    reserved_now(c, &ct->warm_reserved, NULL);
    return st;
}

static cmb_status hold_phase(cmb_case *c, contention *ct)
{
    uint64_t want = (uint64_t)(cmb_param_real(c, "share") * (double)cmb_case_capacity(c));
    uint64_t free_now = cmb_case_device_free(c);
    uint64_t margin = HOLD_MARGIN + (_cmb_gpu(c) ? HOLDER_CONTEXT : 0);
    uint64_t room = free_now > margin ? free_now - margin : 0;
    ct->held = want < room ? want : room;
    for (int i = 0; i < HOLD_TRIES && ct->held >= (1u << 20); i++) {
        cmb_status st = cmb_case_hold_device_memory(c, ct->held);
        if (st != CMB_ERR_OOM)
            return st;
        ct->held = ct->held / 4 * 3;
    }
    ct->held = 0;
    cmb_case_note(c, "no free memory left for the other process to hold");
    return CMB_OK;
}

/* Managed memory is resident only once touched, so free device memory does
 * not shrink as it is allocated: count every live byte as if resident. */
static int managed_guard(cmb_case *c, const contention *ct, uint64_t size)
{
    if (!ct->managed)
        return 0;
    uint64_t free_now = cmb_case_device_free(c), live = cmb_case_live_bytes(c);
    return free_now < HOLD_MARGIN + live + size;
}

/* Blocks of demand_size until the allocator says no or `limit` is reached;
 * returns the bytes obtained in *got. */
static cmb_status take_blocks(cmb_case *c, contention *ct, uint64_t limit, uint64_t *got, cmb_status *refusal)
{
    uint64_t size = cmb_param_u64(c, "demand_size");
    cmb_stream s = cmb_case_stream(c, 0);
    *got = 0;
    *refusal = CMB_OK;
    while (*got < limit) {
        void *p;
        if (managed_guard(c, ct, size)) {
            ct->guard_stopped = 1;
            break;
        }
        cmb_status st = cmb_alloc(c, size, s, &p);
        if (st != CMB_OK) {
            *refusal = st;
            break;
        }
        if (_cmb_blocks_push(&ct->live, p, size))
            return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
        *got += size;
    }
    return CMB_OK;
}

static cmb_status demand_phase(cmb_case *c, contention *ct)
{
    uint64_t size = cmb_param_u64(c, "demand_size"), cap = cmb_case_capacity(c), frees_after;
    uint64_t taken = ct->held + cmb_case_live_bytes(c);
    cmb_status refusal;
    ct->available = cap > taken ? cap - taken : 0;
    reserved_now(c, &ct->reserved_at_failure, &ct->frees_before);
    cmb_status st = take_blocks(c, ct, ct->available + size, &ct->obtained, &refusal);
    if (st != CMB_OK)
        return st;
    if (refusal != CMB_OK) {
        ct->failed = 1;
        ct->failed_clean = refusal == CMB_ERR_OOM;
        if (!ct->failed_clean)
            cmb_case_note(c, "demand allocation failed with %s, not out of memory", cmb_status_str(refusal));
    }
    reserved_now(c, &ct->reserved_at_failure, &frees_after);
    cmb_case_counter(c, "upstream_frees_under_pressure", (double)(frees_after - ct->frees_before));
    return cmb_case_sync(c);
}

static cmb_status recover_phase(cmb_case *c, contention *ct)
{
    cmb_status refusal;
    cmb_case_release_device_memory(c);
    cmb_status st = take_blocks(c, ct, ct->held + cmb_param_u64(c, "demand_size"), &ct->recovered, &refusal);
    return st == CMB_OK ? cmb_case_sync(c) : st;
}

static void report(cmb_case *c, const contention *ct)
{
    cmb_case_counter(c, "held_bytes", (double)ct->held);
    if (ct->warm_reserved >= 0)
        cmb_case_counter(c, "warm_reserved_bytes", (double)ct->warm_reserved);
    cmb_case_counter(c, "available_bytes", (double)ct->available);
    cmb_case_counter(c, "obtained_bytes", (double)ct->obtained);
    cmb_case_counter(c, "contended_capacity_ratio",
                     ct->available ? (double)ct->obtained / (double)ct->available : NAN);
    if (ct->failed)
        cmb_case_counter(c, "failed_clean", ct->failed_clean);
    if (ct->reserved_at_failure >= 0)
        cmb_case_counter(c, "reserved_at_failure_bytes", (double)ct->reserved_at_failure);
    cmb_case_counter(c, "guard_stopped", ct->guard_stopped);
    cmb_case_counter(c, "recovered_bytes", (double)ct->recovered);
    if (ct->held)
        cmb_case_counter(c, "recovery_ratio", (double)ct->recovered / (double)ct->held);
}

static cmb_status contention_run(cmb_case *c)
{
    contention ct = {0};
    cmb_rng rng;
    cmb_rng_seed(&rng, cmb_case_seed(c));
    if (!_cmb_gpu(c))
        cmb_case_note(c, "sim: the other process is a cap on the upstream");
    cmb_status st = warm_phase(c, &rng, &ct);
    if (st == CMB_OK)
        st = hold_phase(c, &ct);
    if (st == CMB_OK) {
        double t0 = cmb_case_clock(c);
        st = demand_phase(c, &ct);
        cmb_case_set_time(c, cmb_case_clock(c) - t0);
    }
    if (st == CMB_OK)
        st = recover_phase(c, &ct);
    cmb_case_release_device_memory(c);
    if (st == CMB_OK)
        report(c, &ct);
    cmb_status fst = _cmb_blocks_free_all(c, &ct.live, cmb_case_stream(c, 0));
    _cmb_blocks_release(&ct.live);
    return st != CMB_OK ? st : fst;
}

static int contention_check(const cmb_case *c, char *reason, size_t len)
{
    if (cmb_param_real(c, "warm") + cmb_param_real(c, "share") > 0.98) {
        snprintf(reason, len, "contention: warm + share must leave room on the device (at most 0.98)");
        return -1;
    }
    if (cmb_param_u64(c, "warm_max") < (1u << 20)) {
        snprintf(reason, len, "contention: warm_max must be at least 1MiB");
        return -1;
    }
    return 0;
}

static const cmb_param_spec contention_params[] = {
    {"share", CMB_P_REAL, "0.5", "0.25,0.5,0.75", 0.01, 0.95, NULL,
     "share of the device the other process holds"},
    {"warm", CMB_P_REAL, "0.4", "0.2", 0, 0.9, NULL, "share of the device allocated (then mostly freed) first"},
    {"keep", CMB_P_REAL, "0.1", "0.1", 0, 1, NULL, "share of the warm-up blocks kept live"},
    {"warm_max", CMB_P_SIZE, "64MiB", "64MiB", 1048576, 1099511627776.0, NULL,
     "warm-up blocks are uniform in [1MiB, warm_max]"},
    {"demand_size", CMB_P_SIZE, "512MiB", "512MiB", 1048576, 1099511627776.0, NULL,
     "blocks requested under contention"},
};

/* The refusal is the point: how much the allocator still got, and whether
 * it refused cleanly. */
static const cmb_headline contention_headline = {
    "measured", "+contended_capacity_ratio", "-", NULL,
    {"obtained {obtained_bytes} of {available_bytes} available", "ratio {contended_capacity_ratio}",
     "failed cleanly {failed_clean}", "recovered {recovered_bytes}", NULL},
};

const cmb_scenario cmb_scenario_contention = {
    .name = "contention",
    .question = "When another process takes GPU memory while my program runs, does my allocator fail cleanly, free "
                "its cache and retry, or strand memory, and does it recover?",
    .params = contention_params,
    .n_params = sizeof contention_params / sizeof contention_params[0],
    .flags = CMB_SCN_NO_PROBE,
    .check = contention_check,
    .run = contention_run,
    .headline = &contention_headline,
};
