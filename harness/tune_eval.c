/* tune_eval.c - one candidate replayed in-process on a simulated device.
 *
 * The same policy code and sim upstream a replay case runs (allocators/
 * policy.h), without a child process per trial: tune replays a candidate
 * dozens of times while it searches its smallest GPU, and a process per
 * trial would cost more than the replay. A priced replay goes through the
 * suite's meters (harness/metered.c), whose upstream counts the cost file
 * prices as a replay case does (harness/costs.c); a fit trial calls the
 * policy directly. */
#include "tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../allocators/policy.h"
#include "../traces/trace.h"

/* --- one instance ------------------------------------------------------------------------------------ */

typedef struct tune_inst {
    cmb_alloc_spec spec;
    cmb_policy pol;
    cmb_metered mt;
    int metered;
} tune_inst;

static cmb_stream stream_of(int index)
{
    return (cmb_stream)(uintptr_t)(index < 0 ? 1 : index + 1); /* the case's sim streams */
}

static int inst_open(tune_inst *in, const char *spec, uint64_t capacity, int meter, char *err, size_t errlen)
{
    memset(in, 0, sizeof *in);
    if (cmb_alloc_spec_parse(spec, &in->spec, err, errlen))
        return -1;
    const cmb_allocator_methods *m = cmb_policy_methods(&in->spec, err, errlen);
    if (!m)
        return -1;
    cmb_policy_place place = {.upstream = CMB_UPSTREAM_SIM, .device = 0, .sim = 1, .capacity = capacity};
    if (cmb_policy_open(&in->spec, m, &place, &in->pol, err, errlen) != CMB_OK)
        return -1;
    if (meter && cmb_metered_init(&in->mt, m, in->pol.state, in->pol.up, 0, 1) != CMB_OK) {
        cmb_policy_close(&in->pol, NULL);
        snprintf(err, errlen, "host out of memory for the meters");
        return -1;
    }
    in->metered = meter;
    return 0;
}

static void inst_close(tune_inst *in)
{
    cmb_policy_close(&in->pol, NULL); /* closes the upstream before the meters' counting table goes */
    if (in->metered)
        cmb_metered_free(&in->mt);
}

static cmb_status inst_alloc(tune_inst *in, size_t size, cmb_stream s, void **p)
{
    return in->metered ? cmb_metered_alloc(&in->mt, size, s, p) : in->pol.m->allocate(in->pol.state, size, s, p);
}

static cmb_status inst_free(tune_inst *in, void *p, size_t size, cmb_stream s)
{
    return in->metered ? cmb_metered_dealloc(&in->mt, p, s) : in->pol.m->deallocate(in->pol.state, p, size, s);
}

/* --- the replay -------------------------------------------------------------------------------------- */

/* At the first failure: the policy's free bytes by why the request could not use them. */
static void account_failure(tune_inst *in, const cmb_trace_packed *e, cmb_tune_replay *out)
{
    const cmb_allocator_methods *m = in->pol.m;
    if (out->have_account || m->abi_version < 3 || !m->free_account)
        return;
    if (m->free_account(in->pol.state, e->size, stream_of(e->stream), &out->account) == CMB_OK) {
        out->have_account = 1;
        out->fail_size = e->size;
    }
}

static int free_live(cmb_tune_ctx *x, tune_inst *in, const uint64_t *size)
{
    for (uint32_t k = 0; k < x->t->trace.slots; k++) {
        if (x->ptr[k] && inst_free(in, x->ptr[k], size[k], stream_of(0)) != CMB_OK)
            return -1;
        x->ptr[k] = NULL;
    }
    return 0;
}

static int replay_pass(cmb_tune_ctx *x, tune_inst *in, uint64_t *size, cmb_tune_replay *out)
{
    const cmb_trace_loaded *t = &x->t->trace;
    for (size_t i = 0; i < t->n; i++) {
        const cmb_trace_packed *e = &t->ev[i];
        if (e->op == CMB_TRACE_ALLOC) {
            cmb_status st = inst_alloc(in, e->size, stream_of(e->stream), &x->ptr[e->slot]);
            if (st == CMB_ERR_OOM) {
                x->ptr[e->slot] = NULL;
                if (!out->ooms++)
                    account_failure(in, e, out);
            } else if (st != CMB_OK) {
                return -1;
            }
            size[e->slot] = e->size;
        } else if (e->op == CMB_TRACE_FREE && x->ptr[e->slot]) {
            if (inst_free(in, x->ptr[e->slot], e->size, stream_of(e->stream)) != CMB_OK)
                return -1;
            x->ptr[e->slot] = NULL;
        }
    }
    return 0;
}

static void price(cmb_tune_ctx *x, const cmb_tune_cand *cand, tune_inst *in, cmb_tune_replay *out)
{
    out->time_s = NAN;
    if (!x->costs)
        return;
    cmb_metered *mt = &in->mt;
    /* a pluggable candidate's own code runs in the program, not the library it emulates; said
     * in the input, not the environment, which the search's threads would race on */
    cmb_cost_input ci = {in->spec.name, mt->up_counts, mt->allocs, mt->frees,
                         mt->allocs ? (double)mt->requested.total / (double)mt->allocs : 0,
                         (double)(mt->alloc_ns.sum_ns + mt->free_ns.sum_ns) * 1e-9, cand->pluggable};
    cmb_cost_parts p;
    cmb_costs_predict(x->costs, &ci, &p);
    out->time_s = p.total_s;
}

static void measure(tune_inst *in, cmb_tune_replay *out)
{
    cmb_alloc_stats s;
    memset(&s, 0, sizeof s);
    if (in->pol.m->stats)
        in->pol.m->stats(in->pol.state, &s);
    out->peak_reserved = (s.valid & CMB_STAT_RESERVED) ? (uint64_t)s.reserved.peak : 0;
    out->peak_allocated = (s.valid & CMB_STAT_ALLOCATED) ? (uint64_t)s.allocated.peak : 0;
    if (in->pol.up) {
        out->device_peak = cmb_upstream_device_peak(in->pol.up);
        if (!out->peak_reserved)
            out->peak_reserved = (uint64_t)in->pol.up->stats.held_peak;
    }
    for (int k = 0; in->metered && in->mt.up_counts && k < CMB_UPK_COUNT; k++)
        for (int b = 0; b < CMB_UP_BUCKETS; b++)
            out->upstream_calls += in->mt.up_counts->calls[k][b];
}

int cmb_tune_replay_at(cmb_tune_ctx *x, const cmb_tune_cand *cand, uint64_t capacity, uint64_t passes, int priced,
                       cmb_tune_replay *out, char *err, size_t errlen)
{
    tune_inst in;
    int rc = -1;
    memset(out, 0, sizeof *out);
    uint64_t *size = calloc(x->t->trace.slots ? x->t->trace.slots : 1, sizeof *size);
    if (!size) {
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    if (inst_open(&in, cand->spec, capacity, priced, err, errlen))
        goto out_free;
    if (priced)
        in.mt.time_ops = 1;
    memset(x->ptr, 0, (size_t)x->t->trace.slots * sizeof *x->ptr);
    for (uint64_t p = 0; p < passes; p++)
        if (replay_pass(x, &in, size, out) || free_live(x, &in, size)) {
            snprintf(err, errlen, "%s: the replay failed (not an out-of-memory)", cand->spec);
            goto out_close;
        }
    measure(&in, out);
    if (priced)
        price(x, cand, &in, out);
    x->trials++;
    rc = 0;
out_close:
    inst_close(&in);
out_free:
    free(size);
    return rc;
}

/* Large enough for any trace the suite replays: the capacity parameter's bound. */
#define TUNE_UNLIMITED ((uint64_t)1 << 40)

/* A policy run through libcmb_pluggable is priced by its own bookkeeping,
 * measured here: the least of a few replays, so a preempted one does not
 * count (the memory is the same in each: sim replays are deterministic). */
#define TUNE_TIMED_REPLAYS 3

void cmb_tune_evaluate(cmb_tune_ctx *x, cmb_tune_cand *cand)
{
    cmb_tune_replay r, again;
    cand->evaluated = 1;
    if (cmb_tune_replay_at(x, cand, TUNE_UNLIMITED, x->passes, 1, &r, cand->why, sizeof cand->why)) {
        cand->failed = 1;
        return;
    }
    if (r.ooms) {
        cand->failed = 1;
        snprintf(cand->why, sizeof cand->why, "does not fit a device of 1 TiB");
        return;
    }
    for (int i = 1; cand->pluggable && i < TUNE_TIMED_REPLAYS; i++)
        if (!cmb_tune_replay_at(x, cand, TUNE_UNLIMITED, x->passes, 1, &again, cand->why, sizeof cand->why) &&
            again.time_s < r.time_s)
            r.time_s = again.time_s;
    cand->peak_reserved = r.peak_reserved;
    cand->peak_allocated = r.peak_allocated;
    cand->device_peak = r.device_peak;
    cand->upstream_calls = r.upstream_calls;
    cand->time_s = isnan(r.time_s) ? NAN : r.time_s / (double)x->passes;
}

/* --- on a GPU of the budget ---------------------------------------------------------------------- */

/* The least predicted time of a few replays on a GPU of `capacity` (as
 * cmb_tune_evaluate), per pass; NAN when it does not run there. */
static double time_at(cmb_tune_ctx *x, const cmb_tune_cand *cand, uint64_t capacity)
{
    cmb_tune_replay r;
    char err[160];
    double best = NAN;
    for (int i = 0; i < (cand->pluggable ? TUNE_TIMED_REPLAYS : 1); i++) {
        if (cmb_tune_replay_at(x, cand, capacity, x->passes, 1, &r, err, sizeof err) || r.ooms || isnan(r.time_s))
            return NAN;
        if (isnan(best) || r.time_s < best)
            best = r.time_s;
    }
    return best / (double)x->passes;
}

void cmb_tune_price_at_budget(cmb_tune_ctx *x, cmb_tune_set *s, uint64_t budget)
{
    int priced = 0;
    for (int i = 0; i < s->n; i++) {
        cmb_tune_cand *c = &s->c[i];
        c->at_budget = 0;
        c->budget_time_s = NAN;
        if (!c->searched || c->failed || c->dominated || c->min_capacity > budget ||
            priced == CMB_TUNE_BUDGET_PRICED)
            continue;
        c->at_budget = 1;
        c->budget_time_s = time_at(x, c, budget);
        priced++;
    }
}
