/* instance.c - an allocator instance and what the harness attaches to it
 * (see instance.h). */
#include "instance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../common/cmb_assert.h"
#include "../common/cmb_clock.h"

/* --- the GPU's memory ------------------------------------------------------------------ */

static uint64_t gpu_free_bytes(void)
{
    size_t f = 0, t = 0;
    return cudaMemGetInfo(&f, &t) == cudaSuccess ? f : 0;
}

/* Device bytes in use by this instance: free memory lost since it opened. */
static uint64_t gpu_sample_used(void *ctx)
{
    const cmb_instance *in = ctx;
    uint64_t f = gpu_free_bytes();
    return in->free_at_start > f ? in->free_at_start - f : 0;
}

/* --- the trace of the traffic ----------------------------------------------------------- */

int64_t cmb_instance_stream_index(const cmb_instance *in, cmb_stream s)
{
    for (int i = 0; in->cfg->streams && i < CMB_MAX_STREAMS; i++)
        if (in->cfg->streams[i] == s)
            return i;
    return 0;
}

static void record_op(void *ctx, cmb_op_kind kind, void *ptr, size_t size, cmb_stream s, const cmb_metered *mt)
{
    cmb_instance *in = ctx;
    (void)mt;
    int64_t t = (int64_t)(cmb_now_ns() - in->t0_ns);
    if (kind == CMB_OP_ALLOC)
        cmb_trace_write_alloc(in->recorder, ptr, size, cmb_instance_stream_index(in, s), t);
    else if (kind == CMB_OP_FREE)
        cmb_trace_write_free(in->recorder, ptr, cmb_instance_stream_index(in, s), t);
}

static cmb_status start_recording(cmb_instance *in, char *err, size_t errlen)
{
    const cmb_case_spec *cs = in->cfg->spec;
    char comment[CMB_BENCH_NAME_MAX + 64];
    in->recorder = calloc(1, sizeof *in->recorder);
    if (!in->recorder) {
        snprintf(err, errlen, "host out of memory");
        return CMB_ERR_HOST_NOMEM;
    }
    snprintf(comment, sizeof comment, "recorded by cumembench from %s, seed %llu", cs->name,
             (unsigned long long)cs->seed);
    if (cmb_trace_writer_open(in->recorder, cs->record_trace, comment, err, errlen)) {
        free(in->recorder);
        in->recorder = NULL;
        return CMB_ERR_IO;
    }
    cmb_metered_add_observer(&in->mt, record_op, in);
    return CMB_OK;
}

/* --- the memory timeline ------------------------------------------------------------------ */

static void start_timeline(cmb_instance *in, cmb_case *c)
{
    unsigned points = in->cfg->spec->timeline_points;
    in->timeline = malloc(sizeof *in->timeline);
    if (!in->timeline)
        goto out_fail;
    if (cmb_timeline_init(in->timeline, points ? points : CMB_TIMELINE_DEFAULT_POINTS))
        goto out_free;
    if (cmb_metered_add_observer(&in->mt, cmb_timeline_observe, in->timeline))
        goto out_free_points;
    return;

out_free_points:
    cmb_timeline_free(in->timeline);
out_free:
    free(in->timeline);
    in->timeline = NULL;
out_fail:
    cmb_case_note(c, "memory timeline not recorded (no host memory or observer slot)");
}

void cmb_instance_stop_observing(cmb_instance *in, cmb_case *c)
{
    char err[320];
    const cmb_case_spec *cs = in->cfg ? in->cfg->spec : NULL;
    if (in->timeline) {
        cmb_timeline_finish(in->timeline, &in->mt);
        if (cmb_timeline_write(in->timeline, cs->timeline_dir, cs->name, 0, err, sizeof err))
            cmb_case_note(c, "memory timeline not written: %s", err);
        cmb_timeline_free(in->timeline);
        free(in->timeline);
        in->timeline = NULL;
    }
    if (in->recorder) {
        if (cmb_trace_writer_close(in->recorder, err, sizeof err))
            cmb_case_fail(c, CMB_ERR_IO, "%s", err);
        free(in->recorder);
        in->recorder = NULL;
    }
}

/* --- open ------------------------------------------------------------------------------------ */

/* The upstream and the allocator, through the policy object (allocators/policy.h). */
static cmb_status open_policy(cmb_instance *in, char *err, size_t errlen)
{
    const cmb_instance_config *cfg = in->cfg;
    cmb_policy pol;
    cmb_policy_place place = {
        .upstream = cfg->up_kind,
        .device = cfg->spec->device,
        .sim = cfg->spec->mode == CMB_MODE_SIM,
        .capacity = cfg->up_kind == CMB_UPSTREAM_SIM ? in->capacity : cfg->cap_bytes,
        .fault = cfg->spec->fault,
    };
    cmb_assert_internal(cmb_alloc_spec_owns_options(&cfg->spec->alloc));
    cmb_status st = cmb_policy_open(&cfg->spec->alloc, in->m, &place, &pol, err, errlen);
    if (st != CMB_OK)
        return st;
    in->up = pol.up;
    in->state = pol.state;
    in->have_state = 1;
    return CMB_OK;
}

/* Device bytes the scenario may use: on a GPU, what is free now, at most
 * the cap (a smaller GPU); elsewhere as configured. */
static void set_capacity(cmb_instance *in)
{
    const cmb_instance_config *cfg = in->cfg;
    in->capacity = cfg->capacity;
    if (cfg->spec->mode != CMB_MODE_GPU)
        return;
    in->free_at_start = gpu_free_bytes();
    if (!in->capacity) {
        in->capacity = in->free_at_start;
        if (cfg->cap_bytes && cfg->cap_bytes < in->capacity)
            in->capacity = cfg->cap_bytes;
    }
}

static cmb_status attach(cmb_instance *in, cmb_case *c, char *err, size_t errlen)
{
    const cmb_instance_config *cfg = in->cfg;
    if (cmb_metered_init(&in->mt, in->m, in->state, in->up, cfg->latency_samples, cfg->spec->seed) != CMB_OK) {
        snprintf(err, errlen, "host out of memory for the meters");
        return CMB_ERR_HOST_NOMEM;
    }
    in->have_mt = 1;
    if (cfg->spec->mode == CMB_MODE_GPU) {
        in->mt.sample_device = gpu_sample_used;
        in->mt.sample_ctx = in;
    }
    if (cmb_verify_wanted(&cfg->spec->fault))
        in->verify = cmb_verify_attach(&in->mt, in->up, c);
    in->t0_ns = cmb_now_ns();
    if (cfg->record_trace && cfg->spec->record_trace[0]) {
        cmb_status st = start_recording(in, err, errlen);
        if (st != CMB_OK)
            return st;
    }
    if (cfg->timeline && cfg->spec->timeline_dir[0])
        start_timeline(in, c);
    return CMB_OK;
}

cmb_status cmb_instance_open(cmb_instance *in, const cmb_instance_config *cfg, cmb_case *c, char *err,
                             size_t errlen)
{
    cmb_status st = CMB_OK;
    memset(in, 0, sizeof *in);
    in->cfg = cfg;
    in->m = cfg->m;
    set_capacity(in);
    if ((st = open_policy(in, err, errlen)) != CMB_OK)
        goto out_fail;
    if ((st = attach(in, c, err, errlen)) != CMB_OK)
        goto out_fail;
    return CMB_OK;

out_fail:
    cmb_instance_close(in, c, 0, NULL, NULL, NULL);
    return st;
}

/* --- close ----------------------------------------------------------------------------------- */

/* Destroys the allocator and closes its upstream (allocators/policy.h). */
static void close_policy(cmb_instance *in, cmb_instance_end *end)
{
    const cmb_fault_spec *f = &in->cfg->spec->fault;
    cmb_policy pol = {.m = in->m, .up = in->up, .state = in->have_state ? in->state : NULL};
    cmb_policy_end pe;
    cmb_policy_close(&pol, &pe);
    in->have_state = 0;
    in->up = NULL;
    end->destroyed = pe.destroyed;
    end->had_upstream = pe.had_upstream;
    end->misuse = pe.misuse;
    snprintf(end->last_misuse, sizeof end->last_misuse, "%s", pe.last_misuse);
    if (f->fail_nth || f->fail_every || f->fail_prob > 0)
        end->injected_faults = pe.injected_faults;
    end->leaked = pe.leaked;
}

void cmb_instance_close(cmb_instance *in, cmb_case *c, int keep_live, cmb_stream s, cmb_verify_counts *verified,
                        cmb_instance_end *end)
{
    cmb_instance_end ignored;
    end = end ? end : &ignored;
    memset(end, 0, sizeof *end);
    end->leaked = -1;
    cmb_instance_stop_observing(in, c);
    if (in->have_mt && !keep_live)
        end->unfreed = cmb_metered_free_all(&in->mt, s);
    if (in->cfg->spec->mode == CMB_MODE_GPU)
        cudaDeviceSynchronize();
    close_policy(in, end);
    if (in->have_mt)
        cmb_metered_free(&in->mt);
    in->have_mt = 0;
    cmb_verify_counts discarded = {0};
    cmb_verify_detach(in->verify, verified ? verified : &discarded);
    in->verify = NULL;
}
