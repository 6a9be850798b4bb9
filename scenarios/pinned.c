/* pinned.c - pageable versus pinned host buffers for transfers.
 *
 * Question: my host-to-device copies are slow; does pinning the host buffer
 * (cudaHostAlloc, or cudaHostRegister on memory I already have) make them
 * faster, and how many copies does it take before pinning pays for itself?
 *
 * For one transfer size per case, three host buffers:
 *   pageable   - malloc, touched once so its pages exist;
 *   pinned     - cudaHostAlloc (page-locked from the start);
 *   registered - malloc + cudaHostRegister (page-locked afterwards).
 * The device buffer comes from the allocator under test. Each direction is
 * copied `iters` times after one warm-up copy; a copy is timed on the host
 * clock from cudaMemcpyAsync to the end of cudaStreamSynchronize, which is
 * what a program waits for. Counters: h2d_gbs_* and d2h_gbs_* (median,
 * 10^9 bytes per second), the cost of pinning (pin_us: cudaHostAlloc,
 * unpin_us: cudaFreeHost, register_us / unregister_us) and
 * breakeven_copies_* = pinning cost / time saved per H2D copy (how many
 * copies amortise it; NAN when pinning saves nothing).
 * GPU only: there is no allocator traffic to simulate.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../common/cmb_clock.h"
#include "scenario.h"
#include "scn_util.h"

enum { PAGEABLE, PINNED, REGISTERED, N_KINDS };
static const char *const kind_name[N_KINDS] = {"pageable", "pinned", "registered"};

typedef struct host_buffers {
    void *buf[N_KINDS];
    int registered;
    double pin_s, unpin_s, register_s, unregister_s;
} host_buffers;

static cmb_status open_buffers(cmb_case *c, host_buffers *h, size_t size)
{
    double t0;
    h->buf[PAGEABLE] = malloc(size);
    h->buf[REGISTERED] = malloc(size);
    if (!h->buf[PAGEABLE] || !h->buf[REGISTERED])
        return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory for %zu-byte buffers", size);
    memset(h->buf[PAGEABLE], 1, size);
    memset(h->buf[REGISTERED], 1, size);
    t0 = cmb_now_s();
    int e = cudaHostAlloc(&h->buf[PINNED], size, cudaHostAllocDefault);
    h->pin_s = cmb_now_s() - t0;
    if (e) {
        h->buf[PINNED] = NULL;
        return _cmb_cuda(c, e, "cudaHostAlloc");
    }
    memset(h->buf[PINNED], 1, size);
    t0 = cmb_now_s();
    e = cudaHostRegister(h->buf[REGISTERED], size, cudaHostRegisterDefault);
    h->register_s = cmb_now_s() - t0;
    if (e)
        return _cmb_cuda(c, e, "cudaHostRegister");
    h->registered = 1;
    return CMB_OK;
}

static void close_buffers(host_buffers *h)
{
    double t0;
    free(h->buf[PAGEABLE]);
    if (h->buf[PINNED]) {
        t0 = cmb_now_s();
        cudaFreeHost(h->buf[PINNED]);
        h->unpin_s = cmb_now_s() - t0;
    }
    if (h->registered) {
        t0 = cmb_now_s();
        cudaHostUnregister(h->buf[REGISTERED]);
        h->unregister_s = cmb_now_s() - t0;
    }
    free(h->buf[REGISTERED]);
}

/* Median seconds of one copy (after a warm-up copy). */
static cmb_status time_copies(cmb_case *c, void *dst, const void *src, size_t size, int kind, int iters,
                              double *median_s)
{
    cudaStream_t s = (cudaStream_t)cmb_case_stream(c, 0);
    double *t = malloc((size_t)iters * sizeof *t);
    cmb_status st = CMB_OK;
    if (!t)
        return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
    for (int i = -1; i < iters && st == CMB_OK; i++) {
        double t0 = cmb_now_s();
        st = _cmb_cuda(c, cudaMemcpyAsync(dst, src, size, (enum cudaMemcpyKind)kind, s), "cudaMemcpyAsync");
        if (st == CMB_OK)
            st = _cmb_cuda(c, cudaStreamSynchronize(s), "cudaStreamSynchronize");
        if (i >= 0)
            t[i] = cmb_now_s() - t0;
    }
    *median_s = _cmb_median(t, (size_t)iters);
    free(t);
    return st;
}

static void report(cmb_case *c, const host_buffers *h, const double h2d[N_KINDS], const double d2h[N_KINDS],
                   size_t size)
{
    char name[64];
    for (int k = 0; k < N_KINDS; k++) {
        snprintf(name, sizeof name, "h2d_gbs_%s", kind_name[k]);
        cmb_case_counter(c, name, (double)size / h2d[k] * 1e-9);
        snprintf(name, sizeof name, "d2h_gbs_%s", kind_name[k]);
        cmb_case_counter(c, name, (double)size / d2h[k] * 1e-9);
    }
    cmb_case_counter(c, "pin_us", h->pin_s * 1e6);
    cmb_case_counter(c, "unpin_us", h->unpin_s * 1e6);
    cmb_case_counter(c, "register_us", h->register_s * 1e6);
    cmb_case_counter(c, "unregister_us", h->unregister_s * 1e6);
    double saved_pin = h2d[PAGEABLE] - h2d[PINNED], saved_reg = h2d[PAGEABLE] - h2d[REGISTERED];
    cmb_case_counter(c, "breakeven_copies_pinned", saved_pin > 0 ? (h->pin_s + h->unpin_s) / saved_pin : NAN);
    cmb_case_counter(c, "breakeven_copies_registered",
                     saved_reg > 0 ? (h->register_s + h->unregister_s) / saved_reg : NAN);
}

static cmb_status pinned_run(cmb_case *c)
{
    size_t size = (size_t)cmb_param_u64(c, "size");
    int iters = (int)cmb_param_u64(c, "iters");
    host_buffers h = {0};
    double h2d[N_KINDS], d2h[N_KINDS];
    void *dev = NULL;
    cmb_stream s = cmb_case_stream(c, 0);

    cmb_status st = cmb_alloc(c, size, s, &dev);
    if (st != CMB_OK)
        return cmb_case_fail(c, st, "device buffer of %zu bytes", size);
    st = open_buffers(c, &h, size);
    double t0 = cmb_case_clock(c);
    for (int k = 0; k < N_KINDS && st == CMB_OK; k++) {
        st = time_copies(c, dev, h.buf[k], size, cudaMemcpyHostToDevice, iters, &h2d[k]);
        if (st == CMB_OK)
            st = time_copies(c, h.buf[k], dev, size, cudaMemcpyDeviceToHost, iters, &d2h[k]);
    }
    cmb_case_set_time(c, cmb_case_clock(c) - t0);
    close_buffers(&h);
    if (st == CMB_OK)
        report(c, &h, h2d, d2h, size);
    cmb_status fst = cmb_free(c, dev, s);
    if (st == CMB_OK && fst != CMB_OK)
        st = cmb_case_fail(c, fst, "device buffer free failed");
    return st;
}

static const cmb_param_spec pinned_params[] = {
    {"size", CMB_P_SIZE, "64MiB", "4KiB,1MiB,64MiB,256MiB", 4, 68719476736.0, NULL,
     "bytes per transfer"},
    {"iters", CMB_P_INT, "10", "10", 1, 1e6, NULL, "timed copies per direction and buffer kind"},
};

static const cmb_headline pinned_headline = {
    NULL, NULL, NULL, NULL,
    {"H2D GB/s pageable {h2d_gbs_pageable}, pinned {h2d_gbs_pinned}, registered {h2d_gbs_registered}",
     "pinning pays after {breakeven_copies_pinned} copies", NULL},
};

const cmb_scenario cmb_scenario_pinned = {
    .name = "pinned",
    .question = "Are my host-device copies faster from pinned memory (cudaHostAlloc, cudaHostRegister) than from "
                "pageable memory, and how many copies pay for the cost of pinning?",
    .params = pinned_params,
    .n_params = sizeof pinned_params / sizeof pinned_params[0],
    .flags = CMB_SCN_NEEDS_GPU | CMB_SCN_NO_PROBE,
    .run = pinned_run,
    .headline = &pinned_headline,
};
