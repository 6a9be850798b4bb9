/* case.c - running one case in its child process, and the calls scenarios
 * make (scenario.h).
 *
 * A repetition: open the upstream, create the allocator, wrap it in the
 * meters, run the scenario, then (outside the measured region) read the
 * allocator's statistics, probe the largest allocation that still fits,
 * free what is left, destroy the allocator and count what it did not give
 * back. Each repetition starts from a new allocator instance.
 */
#include "case.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "../allocators/external.h"
#include "../common/cmb_units.h"
#include "../allocators/upstream.h"
#include "../common/cmb_clock.h"
#include "costs.h"
#include "holder.h"
#include "instance.h"
#include "metered.h"
#include "../common/cmb_metrics.h"
#include "schema.h"
#include "verify.h"
#include "wire.h"

#define CMB_MAX_CASE_COUNTERS 80
#define LATENCY_SAMPLES (1u << 22)
#define TRIAL_LATENCY_SAMPLES (1u << 16)

typedef struct case_counter {
    char name[64];
    double value;
} case_counter;

struct cmb_case {
    const cmb_case_spec *spec;
    const cmb_allocator_methods *m;
    cmb_bench_state *bench;
    cmb_upstream_kind up_kind;

    /* this repetition: its instance, and the one the scenario's calls go
     * to (a fresh trial instance inside cmb_case_with_fresh_allocator) */
    cmb_instance main;
    cmb_instance_config main_cfg;
    int main_open;
    cmb_instance *in;
    cmb_costs_mark last_pass;   /* where a replay's last pass began (costs.h) */
    cmb_verify_counts verified; /* every instance's checks (verify.h) */
    double time_s;
    int time_set;
    case_counter counters[CMB_MAX_CASE_COUNTERS];
    size_t n_counters;
    char notes[256];
    cmb_status fail_status;
    char fail_msg[480];
    uint64_t oom_allocs;    /* cmb_case_set_oom: the workload did not fit */
    int keep_live;
    int timeline_done;      /* a timeline is recorded once per case */
    int repetition;

    /* whole case */
    cmb_stream streams[CMB_MAX_STREAMS];
    int poisoned;
    char poison_msg[480];

    /* memory held outside the allocator (cmb_case_hold_device_memory) */
    cmb_holder holder;
    int holding;            /* 1: a holder process; 2: a sim cap          */
    cmb_upstream *capped;   /* the upstream a sim cap applies to          */
    uint64_t saved_cap;

    /* progress records to the parent (cmb_case_progress) */
    int result_fd;            /* -1: none (a check in the parent)          */
    double progress_next;     /* wall time the next record may go          */
    double progress_every;    /* seconds between records                   */
    double series_t0;         /* when the current done/total series began  */
    uint64_t series_last;     /* the last `done`, to see a series restart  */
    unsigned progress_calls;
};

/* --- names ---------------------------------------------------------------------- */

void cmb_case_spec_copy(cmb_case_spec *dst, const cmb_case_spec *src)
{
    memcpy(dst, src, sizeof *dst);
    cmb_alloc_spec_copy(&dst->alloc, &src->alloc);
}

int cmb_case_spec_make_name(cmb_case_spec *cs, char *err, size_t errlen)
{
    char alloc[sizeof cs->alloc.text + 16], params[CMB_MAX_PARAMS * (CMB_PARAM_VALUE_MAX + 64)];
    cmb_alloc_spec_label(&cs->alloc, alloc, sizeof alloc);
    cmb_param_set_format(&cs->params, ':', '/', params, sizeof params);
    int n = snprintf(cs->name, sizeof cs->name, "%s/%s%s%s", cs->scenario->name, alloc, params[0] ? "/" : "",
                     params);
    if (n >= 0 && (size_t)n < sizeof cs->name)
        return 0;
    snprintf(err, errlen, "case name of %d bytes, at most %zu: %.60s...: shorten the allocator options or the "
                          "parameter values (e.g. a trace's path)", n, sizeof cs->name - 1, cs->name);
    cs->name[0] = '\0';
    return -1;
}

cmb_upstream_kind cmb_case_upstream_kind(const cmb_case_spec *cs, const cmb_allocator_methods *m)
{
    return cmb_policy_upstream_kind(&cs->alloc, m, cs->mode != CMB_MODE_SIM);
}

/* --- scenario-facing calls ------------------------------------------------------- */

cmb_mode cmb_case_mode(const cmb_case *c) { return c->spec->mode; }
uint64_t cmb_case_seed(const cmb_case *c) { return c->spec->seed; }
int cmb_case_device(const cmb_case *c) { return c->spec->device; }
uint64_t cmb_case_capacity(const cmb_case *c) { return c->in ? c->in->capacity : 0; }

double cmb_case_clock(const cmb_case *c)
{
    return cmb_now_s() - (c->in && c->in->have_mt ? (double)c->in->mt.overhead_ns * 1e-9 : 0.0);
}
const char *cmb_case_allocator_name(const cmb_case *c) { return c->spec->alloc.name; }
const char *cmb_case_allocator_spec(const cmb_case *c) { return c->spec->alloc.text; }

static const char *param_or_die(const cmb_case *c, const char *name)
{
    const char *v = cmb_param_set_get(&c->spec->params, name);
    if (!v) {
        /* A scenario asking for a parameter it does not declare is a bug in
         * the suite, not bad input. */
        fprintf(stderr, "cumembench: internal error: scenario %s has no parameter '%s'\n",
                c->spec->scenario->name, name);
        abort();
    }
    return v;
}

uint64_t cmb_param_u64(const cmb_case *c, const char *name)
{
    const char *v = param_or_die(c, name);
    uint64_t out = 0;
    if (cmb_parse_size(v, &out)) /* sizes and integers share the parser */
        cmb_parse_u64(v, &out);
    return out;
}

double cmb_param_real(const cmb_case *c, const char *name)
{
    return strtod(param_or_die(c, name), NULL);
}

int cmb_param_bool(const cmb_case *c, const char *name)
{
    return !strcmp(param_or_die(c, name), "true");
}

const char *cmb_param_str(const cmb_case *c, const char *name)
{
    return param_or_die(c, name);
}

cmb_status cmb_alloc(cmb_case *c, size_t size, cmb_stream s, void **ptr)
{
    return cmb_metered_alloc(&c->in->mt, size, s, ptr);
}

cmb_status cmb_free(cmb_case *c, void *ptr, cmb_stream s)
{
    return cmb_metered_dealloc(&c->in->mt, ptr, s);
}

cmb_status cmb_alloc_raw(cmb_case *c, size_t size, cmb_stream s, void **ptr)
{
    return c->m->allocate(c->in->state, size, s, ptr);
}

cmb_status cmb_free_raw(cmb_case *c, void *ptr, size_t size, cmb_stream s)
{
    return c->m->deallocate(c->in->state, ptr, size, s);
}

void cmb_case_mark_last_pass(cmb_case *c)
{
    if (c->in == &c->main && c->in->have_mt)
        cmb_costs_mark_take(&c->last_pass, &c->in->mt);
}

void cmb_case_set_op_timing(cmb_case *c, int on)
{
    c->in->mt.time_ops = on;
}

size_t cmb_block_size(const cmb_case *c, void *ptr)
{
    uint64_t size = 0;
    cmb_hashmap_get(&c->in->mt.live, (uint64_t)(uintptr_t)ptr, &size);
    return (size_t)size;
}

cmb_status cmb_case_trim(cmb_case *c)
{
    return c->m->trim ? c->m->trim(c->in->state) : CMB_OK;
}

uint64_t cmb_case_live_bytes(const cmb_case *c)
{
    return (uint64_t)c->in->mt.requested.current;
}

uint64_t cmb_case_peak_bytes(const cmb_case *c)
{
    return (uint64_t)c->in->mt.requested.peak;
}

cmb_status cmb_case_alloc_stats(cmb_case *c, cmb_alloc_stats *out)
{
    return cmb_metered_stats(&c->in->mt, out);
}

cmb_stream cmb_case_stream(cmb_case *c, int index)
{
    if (index < 0 || index >= CMB_MAX_STREAMS)
        index = 0;
    if (c->streams[index])
        return c->streams[index];
    if (c->spec->mode == CMB_MODE_SIM) {
        c->streams[index] = (cmb_stream)(uintptr_t)(index + 1);
    } else {
        cudaStream_t s;
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
            return NULL; /* the legacy default stream still works */
        c->streams[index] = (cmb_stream)s;
    }
    return c->streams[index];
}

cmb_status cmb_case_sync(cmb_case *c)
{
    if (c->in && c->in->recorder)
        cmb_trace_write_sync(c->in->recorder, -1, (int64_t)(cmb_now_ns() - c->in->t0_ns));
    if (c->spec->mode == CMB_MODE_SIM)
        return CMB_OK;
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        return cmb_case_fail(c, CMB_ERR_CUDA, "cudaDeviceSynchronize: %s", cudaGetErrorString(e));
    return CMB_OK;
}

void cmb_case_set_time(cmb_case *c, double seconds)
{
    c->time_s = seconds;
    c->time_set = 1;
}

static void put_counter(cmb_case *c, const char *name, double value)
{
    if (isnan(value))
        return; /* undefined metrics are left out, never written as 0 */
    for (size_t i = 0; i < c->n_counters; i++) {
        if (!strcmp(c->counters[i].name, name)) {
            c->counters[i].value = value;
            return;
        }
    }
    if (c->n_counters == CMB_MAX_CASE_COUNTERS)
        return;
    snprintf(c->counters[c->n_counters].name, sizeof c->counters[0].name, "%s", name);
    c->counters[c->n_counters++].value = value;
}

void cmb_case_counter(cmb_case *c, const char *name, double value)
{
    put_counter(c, name, value);
}

void cmb_case_note(cmb_case *c, const char *fmt, ...)
{
    size_t used = strlen(c->notes);
    if (used && used + 2 < sizeof c->notes) {
        strcat(c->notes, "; ");
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->notes + used, sizeof c->notes - used, fmt, ap);
    va_end(ap);
}

cmb_status cmb_case_fail(cmb_case *c, cmb_status status, const char *fmt, ...)
{
    if (c->fail_status == CMB_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->fail_msg, sizeof c->fail_msg, fmt, ap);
        va_end(ap);
        c->fail_status = status == CMB_OK ? CMB_ERR_STATE : status;
    }
    return c->fail_status;
}

void cmb_case_set_oom(cmb_case *c, uint64_t n_failed)
{
    c->oom_allocs = n_failed;
}

void cmb_case_keep_live_blocks(cmb_case *c)
{
    c->keep_live = 1;
}

int cmb_case_keep_running(cmb_case *c)
{
    return cmb_bench_keep_running(c->bench);
}

void cmb_case_pause_timing(cmb_case *c)
{
    cmb_bench_pause(c->bench);
}

void cmb_case_resume_timing(cmb_case *c)
{
    cmb_bench_resume(c->bench);
}

/* --- GPU helpers --------------------------------------------------------------------- */

static uint64_t gpu_free_bytes(void)
{
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess)
        return 0;
    return f;
}

/* --- a fresh allocator inside a repetition ------------------------------------------- */

/* A scenario parameter named "capacity" (non-zero) overrides --capacity
 * for its case: a replay can model the GPU its trace was recorded on. */
static uint64_t effective_cap(const cmb_case *c)
{
    const char *v = cmb_param_set_get(&c->spec->params, "capacity");
    uint64_t cap = 0;
    if (v && !cmb_parse_size(v, &cap) && cap)
        return cap;
    return c->spec->capacity;
}

/* The instance of a trial: as the case's, with `capacity` bytes of device
 * (0: the case's), no timeline and no trace (they are the case's traffic). */
static void trial_config(const cmb_case *c, uint64_t capacity, cmb_instance_config *cfg)
{
    *cfg = c->main_cfg;
    cfg->capacity = capacity ? capacity : c->in->capacity;
    cfg->cap_bytes = capacity ? capacity : effective_cap(c);
    cfg->latency_samples = TRIAL_LATENCY_SAMPLES;
    cfg->timeline = 0;
    cfg->record_trace = 0;
}

static void trial_stats(cmb_instance *in, cmb_alloc_stats *stats)
{
    cmb_metered_stats(&in->mt, stats);
    stats->requested = in->mt.requested;
    stats->valid |= CMB_STAT_REQUESTED;
}

cmb_status cmb_case_with_fresh_allocator(cmb_case *c, uint64_t capacity, cmb_fresh_fn fn, void *arg,
                                         cmb_alloc_stats *stats)
{
    cmb_instance_config cfg;
    cmb_instance trial;
    cmb_instance_end end;
    char err[512];
    cmb_instance *outer = c->in;
    trial_config(c, capacity, &cfg);
    cmb_status st = cmb_instance_open(&trial, &cfg, c, err, sizeof err);
    if (st != CMB_OK) {
        cmb_case_fail(c, st, "%s", err);
        return st;
    }
    c->in = &trial;
    st = fn(c, arg);
    if (stats)
        trial_stats(&trial, stats);
    if (c->holding == 2 && c->capped == trial.up)
        cmb_case_release_device_memory(c); /* a cap on the trial's own device */
    cmb_instance_close(&trial, c, 0, cmb_case_stream(c, 0), &c->verified, &end);
    c->in = outer;
    if (end.misuse)
        cmb_case_note(c, "upstream misuse in a trial instance: %s", end.last_misuse);
    return st;
}

cmb_status cmb_case_try_fresh_allocator(cmb_case *c, uint64_t capacity, cmb_fresh_fn fn, void *arg,
                                        cmb_alloc_stats *stats)
{
    int failed_before = c->fail_status != CMB_OK;
    cmb_status st = cmb_case_with_fresh_allocator(c, capacity, fn, arg, stats);
    /* fn reports its own out-of-memory answers; an OOM failure recorded here
     * came from opening the upstream or creating the instance */
    if (st == CMB_ERR_OOM && !failed_before && c->fail_status == CMB_ERR_OOM) {
        c->fail_status = CMB_OK;
        c->fail_msg[0] = '\0';
    }
    return st;
}

/* --- device memory held outside the allocator ------------------------------------------- */

static int sim_upstream(const cmb_case *c)
{
    return c->in->up && c->up_kind == CMB_UPSTREAM_SIM;
}

uint64_t cmb_case_device_free(cmb_case *c)
{
    size_t f = 0, t = 0;
    if (sim_upstream(c))
        return cmb_up_mem_info(c->in->up, &f, &t) == CMB_OK ? f : 0;
    if (c->spec->mode == CMB_MODE_GPU)
        return gpu_free_bytes();
    uint64_t live = cmb_case_live_bytes(c);
    return c->in->capacity > live ? c->in->capacity - live : 0;
}

cmb_status cmb_case_hold_device_memory(cmb_case *c, uint64_t bytes)
{
    char err[256];
    if (c->holding)
        return cmb_case_fail(c, CMB_ERR_STATE, "device memory is already held");
    if (sim_upstream(c)) {
        size_t f = 0, t = 0;
        if (cmb_up_mem_info(c->in->up, &f, &t) != CMB_OK)
            return cmb_case_fail(c, CMB_ERR_STATE, "sim upstream: no memory information");
        if (bytes > f)
            return CMB_ERR_OOM;
        c->capped = c->in->up;
        c->saved_cap = cmb_upstream_set_cap(c->capped, t - bytes);
        c->holding = 2;
        return CMB_OK;
    }
    if (c->spec->mode != CMB_MODE_GPU)
        return cmb_case_fail(c, CMB_ERR_UNSUPPORTED, "holding device memory needs a GPU or a sim upstream");
    int rc = cmb_holder_start(&c->holder, c->spec->device, bytes, 120, err, sizeof err);
    if (rc == -2)
        return CMB_ERR_OOM; /* an answer: the device does not have that much */
    if (rc)
        return cmb_case_fail(c, CMB_ERR_CUDA, "%s", err);
    c->holding = 1;
    return CMB_OK;
}

void cmb_case_release_device_memory(cmb_case *c)
{
    if (c->holding == 2) {
        cmb_upstream_set_cap(c->capped, c->saved_cap);
    } else if (c->holding == 1) {
        uint64_t before = gpu_free_bytes(), held = c->holder.bytes;
        cmb_holder_stop(&c->holder);
        /* The driver frees the holder's memory as it exits; wait until the
         * free count shows it (at most 2 s) so the next step sees it. */
        double t0 = cmb_now_s();
        while (gpu_free_bytes() + (64u << 20) < before + held && cmb_now_s() - t0 < 2)
            usleep(1000);
    }
    c->holding = 0;
    c->capped = NULL;
}

/* --- one repetition ------------------------------------------------------------------------ */

static void reset_repetition(cmb_case *c)
{
    memset(&c->verified, 0, sizeof c->verified);
    c->time_s = 0;
    c->time_set = 0;
    c->n_counters = 0;
    c->notes[0] = '\0';
    c->fail_status = CMB_OK;
    c->fail_msg[0] = '\0';
    c->oom_allocs = 0;
    c->keep_live = 0;
}

static cmb_status setup_repetition(cmb_case *c)
{
    char err[512];
    cmb_verify_begin(&c->spec->fault);
    reset_repetition(c);
    c->main_cfg = (cmb_instance_config){
        .spec = c->spec,
        .m = c->m,
        .up_kind = c->up_kind,
        /* GPU: what is free when the repetition starts, at most the cap */
        .capacity = c->spec->mode == CMB_MODE_GPU ? 0 : effective_cap(c),
        .cap_bytes = effective_cap(c),
        .latency_samples = LATENCY_SAMPLES,
        .timeline = !c->timeline_done,
        .record_trace = c->repetition == 0,
        .streams = c->streams,
    };
    cmb_status st = cmb_instance_open(&c->main, &c->main_cfg, c, err, sizeof err);
    if (st != CMB_OK)
        return cmb_case_fail(c, st, "%s", err);
    c->main_open = 1;
    c->in = &c->main;
    c->last_pass.set = 0; /* a mark is this repetition's */
    return CMB_OK;
}

/* Allocator statistics at the end of the scenario, before the probe. */
static void collect_allocator_metrics(cmb_case *c)
{
    cmb_alloc_stats st;
    cmb_metered *mt = &c->in->mt;
    cmb_metered_stats(mt, &st);

    if (c->oom_allocs)
        put_counter(c, CMB_OOM_COUNTER, (double)c->oom_allocs);
    put_counter(c, "peak_requested_bytes", (double)mt->requested.peak);
    put_counter(c, "live_at_end_bytes", (double)mt->requested.current);
    if (st.valid & CMB_STAT_ALLOCATED)
        put_counter(c, "peak_allocated_bytes", (double)st.allocated.peak);
    if (st.valid & CMB_STAT_RESERVED) {
        put_counter(c, "peak_reserved_bytes", (double)st.reserved.peak);
        put_counter(c, "reserved_at_end_bytes", (double)st.reserved.current);
        put_counter(c, "frag_ratio", cmb_frag_ratio((uint64_t)mt->requested.peak, (uint64_t)st.reserved.peak));
    }
    if ((st.valid & CMB_STAT_RESERVED) && (st.valid & CMB_STAT_ALLOCATED) && (st.valid & CMB_STAT_LARGEST_FREE))
        put_counter(c, "ext_frag_end",
                    cmb_external_frag((uint64_t)st.reserved.current, (uint64_t)st.allocated.current, st.largest_free));
    if (mt->have_peak_snapshot) {
        const cmb_alloc_stats *p = &mt->at_peak;
        if ((p->valid & CMB_STAT_RESERVED) && (p->valid & CMB_STAT_ALLOCATED))
            put_counter(c, "ext_frag_peak",
                        cmb_external_frag((uint64_t)p->reserved.current, (uint64_t)p->allocated.current,
                                          p->largest_free));
    }
    if (st.valid & CMB_STAT_UPSTREAM) {
        put_counter(c, "upstream_allocs", (double)st.upstream_allocs);
        put_counter(c, "upstream_frees", (double)st.upstream_frees);
    } else if (c->in->up) {
        put_counter(c, "upstream_allocs", (double)c->in->up->stats.alloc_calls);
        put_counter(c, "upstream_frees", (double)c->in->up->stats.free_calls);
    }
    if (c->in->up)
        put_counter(c, "driver_calls", (double)c->in->up->driver.total);
    if (st.valid & CMB_STAT_OOM_RETRIES)
        put_counter(c, "oom_retries", (double)st.oom_retries);
    /* The allocator's own count of requested bytes must agree with ours. A
     * micro-benchmark's loop calls the allocator directly (no meters): its
     * block raises the allocator's peak but not ours, so only the current
     * bytes can agree there. */
    if (st.valid & CMB_STAT_REQUESTED) {
        int micro = (c->spec->scenario->flags & CMB_SCN_MICRO) != 0;
        put_counter(c, "stats_disagree", st.requested.current != mt->requested.current ||
                                             (!micro && st.requested.peak != mt->requested.peak));
    }

    if (c->spec->mode == CMB_MODE_GPU)
        put_counter(c, "device_peak_bytes", (double)mt->device_peak);
    else if (c->in->up)
        put_counter(c, "device_peak_bytes", (double)cmb_upstream_device_peak(c->in->up));
}

static void collect_op_metrics(cmb_case *c, double seconds)
{
    cmb_metered *mt = &c->in->mt;
    put_counter(c, "allocs", (double)mt->allocs);
    put_counter(c, "frees", (double)mt->frees);
    put_counter(c, "failed_allocs", (double)mt->failed_allocs);
    put_counter(c, "alloc_p50_ns", cmb_latency_quantile(&mt->alloc_ns, 0.50));
    put_counter(c, "alloc_p99_ns", cmb_latency_quantile(&mt->alloc_ns, 0.99));
    put_counter(c, "free_p50_ns", cmb_latency_quantile(&mt->free_ns, 0.50));
    put_counter(c, "free_p99_ns", cmb_latency_quantile(&mt->free_ns, 0.99));
    if (seconds > 0 && mt->allocs + mt->frees)
        put_counter(c, "ops_per_s", (double)(mt->allocs + mt->frees) / seconds);
    cmb_costs_put(c, mt, c->spec->alloc.name); /* predicted allocator time: docs/costs.md */
    cmb_costs_put_since(c, mt, &c->last_pass, c->spec->alloc.name);
}

static void probe_capacity(cmb_case *c)
{
    uint64_t capacity = c->in->capacity, live = (uint64_t)c->in->mt.requested.current, largest = 0;
    if (capacity <= live)
        return;
    /* sim: to the byte (512 B); GPU: 1/256 of the capacity in whole 2 MiB
     * pages (8 steps of the bisection, each an allocation near the device's
     * size, instead of 16 at 2 MiB) */
    uint64_t resolution = 512;
    if (c->spec->mode == CMB_MODE_GPU) {
        resolution = (capacity / 256) & ~(uint64_t)((2u << 20) - 1);
        if (resolution < (2u << 20))
            resolution = 2u << 20;
    }
    cmb_status st = cmb_metered_probe_largest(&c->in->mt, capacity - live, resolution, cmb_case_stream(c, 0),
                                              &largest);
    if (st != CMB_OK) {
        cmb_case_note(c, "capacity probe failed: %s", cmb_status_str(st));
        return;
    }
    put_counter(c, "capacity_bytes", (double)capacity);
    put_counter(c, "largest_alloc_bytes", (double)largest);
    put_counter(c, "capacity_ratio", cmb_capacity_ratio(largest, capacity, live));
}

/* The upstream's findings and what the allocator did not give back. */
static void report_end(cmb_case *c, const cmb_instance_end *end)
{
    int64_t leaked = end->leaked;
    if (end->unfreed)
        cmb_case_note(c, "%llu blocks could not be freed at the end", (unsigned long long)end->unfreed);
    if (end->destroyed != CMB_OK)
        cmb_case_note(c, "destroy: %s", cmb_status_str(end->destroyed));
    if (end->had_upstream) {
        put_counter(c, "upstream_misuse", (double)end->misuse);
        if (c->spec->fault.fail_nth || c->spec->fault.fail_every || c->spec->fault.fail_prob > 0)
            put_counter(c, "upstream_injected_faults", (double)end->injected_faults);
        if (end->misuse)
            cmb_case_note(c, "upstream misuse: %s", end->last_misuse);
    }
    if (c->spec->mode == CMB_MODE_GPU) {
        cudaDeviceSynchronize();
        uint64_t now_free = gpu_free_bytes();
        uint64_t device_leak = c->main.free_at_start > now_free ? c->main.free_at_start - now_free : 0;
        put_counter(c, "device_leak_bytes", (double)device_leak);
        if (leaked < 0)
            leaked = (int64_t)device_leak;
    }
    if (leaked >= 0)
        put_counter(c, "leaked_bytes", (double)leaked);
    if (leaked > 0)
        cmb_case_note(c, "%lld bytes leaked", (long long)leaked);
}

/* Frees what is left, destroys the allocator and measures the leak. */
static void teardown_repetition(cmb_case *c)
{
    cmb_instance_end end;
    cmb_case_release_device_memory(c);
    c->repetition++;
    if (c->main_open) {
        /* the harness's frees below are not the program's traffic */
        cmb_instance_close(&c->main, c, c->keep_live, cmb_case_stream(c, 0), &c->verified, &end);
        c->main_open = 0;
        report_end(c, &end);
    }
    c->in = NULL;
    cmb_verify_report(&c->verified, c);
}

static void report_repetition(cmb_case *c)
{
    char label[256];
    char alloc[160];
    cmb_alloc_spec_label(&c->spec->alloc, alloc, sizeof alloc);
    snprintf(label, sizeof label, "mode=%s upstream=%s seed=%llu%s%s",
             c->spec->mode == CMB_MODE_GPU ? "gpu" : "sim",
             (c->m->flags & CMB_ALLOC_USES_UPSTREAM) ? cmb_upstream_kind_name(c->up_kind) : "none",
             (unsigned long long)c->spec->seed, c->notes[0] ? " note: " : "", c->notes);
    cmb_bench_set_label(c->bench, label);
    for (size_t i = 0; i < c->n_counters; i++)
        cmb_bench_set_counter(c->bench, c->counters[i].name, c->counters[i].value, CMB_COUNTER_DEFAULT);
}

/* A sticky CUDA error poisons the context: later repetitions would report
 * numbers from a broken device, so they are not run. */
static void check_poison(cmb_case *c)
{
    if (c->spec->mode != CMB_MODE_GPU)
        return;
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        c->poisoned = 1;
        snprintf(c->poison_msg, sizeof c->poison_msg, "CUDA context unusable after: %s", cudaGetErrorString(e));
    }
}

static void fail_repetition(cmb_case *c)
{
    char msg[560];
    /* the notes (a leak, upstream misuse) would be lost with the counters */
    snprintf(msg, sizeof msg, "%s: %s%s%s", cmb_status_str(c->fail_status), c->fail_msg,
             c->notes[0] ? "; note: " : "", c->notes);
    cmb_bench_skip_with_error(c->bench, msg);
}

static void run_one_repetition(cmb_case *c)
{
    cmb_bench_pause(c->bench);
    if (setup_repetition(c) != CMB_OK) {
        teardown_repetition(c);
        cmb_bench_resume(c->bench);
        fail_repetition(c);
        return;
    }
    cmb_bench_resume(c->bench);
    double t0 = cmb_now_s();
    cmb_status st = c->spec->scenario->run(c);
    double wall = cmb_now_s() - t0;
    cmb_bench_pause(c->bench);
    cmb_instance_stop_observing(&c->main, c);
    c->timeline_done = 1;
    if (st != CMB_OK && c->fail_status == CMB_OK)
        cmb_case_fail(c, st, "scenario returned %s", cmb_status_str(st));
    if (!c->time_set)
        c->time_s = wall;
    if (c->fail_status == CMB_OK) {
        check_poison(c);
        if (!(c->spec->scenario->flags & CMB_SCN_OWN_PROCESSES)) {
            collect_op_metrics(c, c->time_s);
            collect_allocator_metrics(c);
        }
        /* The traffic is the same in every repetition (one seed), so the
         * probe, a dozen allocations near the device's size, runs once. */
        if (!(c->spec->scenario->flags & CMB_SCN_NO_PROBE) && c->repetition == 0)
            probe_capacity(c);
    }
    teardown_repetition(c);
    check_poison(c);
    cmb_bench_resume(c->bench);
    if (c->fail_status != CMB_OK) {
        fail_repetition(c);
        if (c->spec->mode == CMB_MODE_GPU && c->fail_status == CMB_ERR_CUDA)
            c->poisoned = 1, snprintf(c->poison_msg, sizeof c->poison_msg, "%s", c->fail_msg);
        return;
    }
    cmb_bench_set_iteration_time(c->bench, c->time_s > 0 ? c->time_s : 1e-9);
    report_repetition(c);
}

/* A micro-benchmark drives the library's loop inside run(); the library
 * times it and refuses pause/resume outside the loop, so there are none. */
static void run_micro_repetition(cmb_case *c)
{
    if (setup_repetition(c) != CMB_OK) {
        teardown_repetition(c);
        fail_repetition(c);
        return;
    }
    cmb_status st = c->spec->scenario->run(c);
    if (st != CMB_OK && c->fail_status == CMB_OK)
        cmb_case_fail(c, st, "scenario returned %s", cmb_status_str(st));
    if (c->fail_status == CMB_OK) {
        check_poison(c);
        collect_allocator_metrics(c);
    }
    teardown_repetition(c);
    if (c->fail_status != CMB_OK) {
        fail_repetition(c);
        return;
    }
    report_repetition(c);
}

static void case_bench_fn(cmb_bench_state *bs, void *arg)
{
    cmb_case *c = arg;
    c->bench = bs;
    if (c->poisoned) {
        char msg[560];
        snprintf(msg, sizeof msg, "not run: %s", c->poison_msg);
        cmb_bench_skip_with_error(bs, msg);
        return;
    }
    if (c->spec->scenario->flags & CMB_SCN_MICRO) {
        run_micro_repetition(c);
        return;
    }
    while (cmb_bench_keep_running(bs))
        run_one_repetition(c);
}

/* --- progress ------------------------------------------------------------------------------------ */

/* Seconds from an environment variable (tests make progress prompt), or def. */
static double env_seconds(const char *name, double def)
{
    const char *v = getenv(name);
    char *end;
    double x = v && *v ? strtod(v, &end) : def;
    return v && *v && !*end && x >= 0 ? x : def;
}

static void progress_start(cmb_case *c, int result_fd)
{
    c->result_fd = result_fd;
    c->progress_every = env_seconds("CMB_PROGRESS_EVERY_S", 1.0);
    c->progress_next = cmb_now_s() + env_seconds("CMB_PROGRESS_AFTER_S", 2.0); /* short cases send none */
}

void cmb_case_progress(cmb_case *c, uint64_t done, uint64_t total, const char *what)
{
    if (c->result_fd < 0)
        return;
    if (done < c->series_last || !c->series_t0)
        c->series_t0 = cmb_now_s(); /* a new loop: its rate starts here */
    c->series_last = done;
    if ((c->progress_calls++ & 255) != 0)
        return; /* the clock is read on one call in 256 */
    double now = cmb_now_s();
    if (now < c->progress_next)
        return;
    c->progress_next = now + c->progress_every;
    cmb_wire_write_progress(c->result_fd, done, total, now - c->series_t0, what ? what : "");
}

/* --- the child's entry -------------------------------------------------------------------------- */

typedef struct sink_ctx {
    int fd;
    int write_failed;
} sink_ctx;

static void sink(const cmb_bench_run *run, void *ctx)
{
    sink_ctx *s = ctx;
    if (cmb_wire_write_run(s->fd, run))
        s->write_failed = 1;
}

static int init_gpu(const cmb_case_spec *cs)
{
    cudaError_t e = cudaSetDevice(cs->device);
    if (e == cudaSuccess)
        e = cudaFree(0); /* create the context before anything is timed */
    if (e != cudaSuccess) {
        fprintf(stderr, "cumembench: cannot use GPU %d: %s\n", cs->device, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

static void destroy_streams(cmb_case *c)
{
    if (c->spec->mode != CMB_MODE_GPU)
        return;
    for (int i = 0; i < CMB_MAX_STREAMS; i++)
        if (c->streams[i])
            cudaStreamDestroy((cudaStream_t)c->streams[i]);
}

int cmb_case_run_child(const cmb_case_spec *cs, int result_fd)
{
    cmb_case c;
    char err[320];
    memset(&c, 0, sizeof c);
    c.spec = cs;
    if (!(c.m = cmb_policy_methods(&cs->alloc, err, sizeof err))) {
        fprintf(stderr, "cumembench: %s\n", err);
        return 2;
    }
    c.up_kind = cmb_case_upstream_kind(cs, c.m);
    progress_start(&c, result_fd);
    if (cs->mode == CMB_MODE_GPU && init_gpu(cs))
        return 3;

    int micro = (cs->scenario->flags & CMB_SCN_MICRO) != 0;
    cmb_bench_options opt = {
        .iterations = micro ? 0 : 1,
        .repetitions = cs->repetitions > 0 ? cs->repetitions : 1,
        .manual_time = !micro,
        .unit = micro ? CMB_UNIT_NS : CMB_UNIT_MS,
        .min_time_s = micro ? 0.1 : 0, /* ~1M pairs at 100 ns, ~20k at 5 us */
    };
    sink_ctx sc = {result_fd, 0};
    cmb_bench_register(cs->name, case_bench_fn, &c, &opt);
    cmb_bench_run_registered("cumembench", sink, &sc);
    destroy_streams(&c);
    return sc.write_failed ? 4 : 0;
}

/* --- the parent's check ------------------------------------------------------------------------------ */

int cmb_case_check(const cmb_case_spec *cs, uint64_t capacity, char *reason, size_t len)
{
    cmb_case c;
    memset(&c, 0, sizeof c);
    c.spec = cs;
    c.result_fd = -1;
    c.main.capacity = capacity;
    c.in = &c.main;
    if (!cs->scenario->check)
        return 0;
    return cs->scenario->check(&c, reason, len);
}
