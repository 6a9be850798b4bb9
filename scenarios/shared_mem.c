/* shared_mem.c - kernels with growing dynamic shared memory, interleaved
 * with global allocations.
 *
 * Question: my kernels use a lot of shared memory; does that take device
 * memory away from my allocations or change how the allocator behaves, and
 * what does it cost in occupancy and kernel time?
 *
 * Shared memory is on-chip, per SM; device allocations come from DRAM. The
 * scenario shows the separation with numbers. For `levels` sizes of dynamic
 * shared memory from 0 to the device's opt-in maximum (raising
 * cudaFuncAttributeMaxDynamicSharedMemorySize), each level:
 *   1. allocates `bufs` global buffers of `buf_size` through the allocator
 *      (each allocation timed on the host clock);
 *   2. touches every buffer once without shared memory (memory that turns
 *      resident on first touch, managed memory, is then resident), then
 *      runs a staging kernel (tiles of smem/4 floats through shared memory)
 *      `iters` times over every buffer, one full wave of resident blocks;
 *   3. reads free device memory before and after the kernels, and the
 *      allocator's reserved bytes;
 *   4. frees the buffers.
 * Counters per level (p0 .. p100: percent of the maximum): occ_pN, the
 * theoretical occupancy (resident threads / max threads per SM from
 * cudaOccupancyMaxActiveBlocksPerMultiprocessor) and kernel_us_pN, the
 * median time of one pass over one buffer (CUDA events). Across levels:
 * device_free_delta_bytes (largest change of free memory across a level's
 * kernels), free_spread_bytes (largest difference between levels of free
 * memory after the same allocations), reserved_spread_bytes (the same for
 * the allocator's reserved bytes), alloc_us_p0 / alloc_us_p100 (median
 * allocation latency at the smallest and largest level). All three spreads
 * at 0 mean shared-memory use did not change device allocation. A warm-up
 * launch comes first, so lazy module loading is not counted as a level's.
 * GPU only: the allocation traffic alone is a plain alloc/free loop with
 * nothing to learn in simulation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "../kernels/cmb_shmem_kernels.h"
#include "scenario.h"
#include "scn_util.h"

#define SMEM_ROUND 256 /* shared-memory sizes are multiples of this */

typedef struct device_shape {
    size_t smem_max;
    int sms, threads_per_sm;
} device_shape;

typedef struct level_result {
    size_t smem;
    double occupancy, kernel_us, alloc_us;
    uint64_t free_after_alloc, free_delta;
    int64_t reserved;
} level_result;

static cmb_status query_device(cmb_case *c, device_shape *d)
{
    int dev = cmb_case_device(c);
    cmb_status st = _cmb_cuda(c, cmb_smem_max_optin(dev, &d->smem_max), "shared memory opt-in maximum");
    if (st == CMB_OK)
        st = _cmb_cuda(c, cudaDeviceGetAttribute(&d->sms, cudaDevAttrMultiProcessorCount, dev), "SM count");
    if (st == CMB_OK)
        st = _cmb_cuda(c, cudaDeviceGetAttribute(&d->threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev),
                       "threads per SM");
    return st;
}

static cmb_status alloc_buffers(cmb_case *c, _cmb_blocks *b, level_result *r)
{
    uint64_t n = cmb_param_u64(c, "bufs"), size = cmb_param_u64(c, "buf_size");
    double *lat = malloc(n * sizeof *lat);
    cmb_stream s = cmb_case_stream(c, 0);
    cmb_status st = CMB_OK;
    if (!lat)
        return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
    for (uint64_t i = 0; i < n && st == CMB_OK; i++) {
        void *p;
        double t0 = cmb_case_clock(c);
        st = cmb_alloc(c, size, s, &p);
        lat[i] = (cmb_case_clock(c) - t0) * 1e6;
        if (st != CMB_OK)
            st = cmb_case_fail(c, st, "buffer allocation of %llu bytes failed", (unsigned long long)size);
        else if (_cmb_blocks_push(b, p, size))
            st = cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
    }
    r->alloc_us = _cmb_median(lat, b->n);
    free(lat);
    return st;
}

/* Median microseconds of one pass over one buffer at r->smem. */
static cmb_status run_kernels(cmb_case *c, const _cmb_blocks *b, int grid, level_result *r)
{
    int iters = (int)cmb_param_u64(c, "iters"), threads = (int)cmb_param_u64(c, "threads");
    cudaStream_t s = (cudaStream_t)cmb_case_stream(c, 0);
    cudaEvent_t ev[2];
    double *t = malloc((size_t)iters * sizeof *t);
    cmb_status st = t ? CMB_OK : cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
    if (st == CMB_OK)
        st = _cmb_cuda(c, cudaEventCreate(&ev[0]), "cudaEventCreate");
    if (st == CMB_OK && (st = _cmb_cuda(c, cudaEventCreate(&ev[1]), "cudaEventCreate")) != CMB_OK)
        cudaEventDestroy(ev[0]);
    if (st != CMB_OK) {
        free(t);
        return st;
    }
    for (int i = 0; i < iters && st == CMB_OK; i++) {
        float ms = 0;
        st = _cmb_cuda(c, cudaEventRecord(ev[0], s), "cudaEventRecord");
        for (size_t k = 0; k < b->n && st == CMB_OK; k++)
            st = _cmb_cuda(c, cmb_smem_stage(b->p[k], b->size[k] / sizeof(float), r->smem, threads, grid, s),
                           "shared-memory kernel");
        if (st == CMB_OK)
            st = _cmb_cuda(c, cudaEventRecord(ev[1], s), "cudaEventRecord");
        if (st == CMB_OK)
            st = _cmb_cuda(c, cudaEventSynchronize(ev[1]), "shared-memory kernel");
        if (st == CMB_OK)
            st = _cmb_cuda(c, cudaEventElapsedTime(&ms, ev[0], ev[1]), "cudaEventElapsedTime");
        t[i] = ms * 1e3 / (double)(b->n ? b->n : 1);
    }
    r->kernel_us = _cmb_median(t, (size_t)iters);
    cudaEventDestroy(ev[0]);
    cudaEventDestroy(ev[1]);
    free(t);
    return st;
}

/* One pass without shared memory before free memory is read: memory that
 * becomes resident on first touch (managed) is then resident already, and
 * the level's delta shows only what its kernels change. */
static cmb_status first_touch(cmb_case *c, const _cmb_blocks *b, int threads, int grid)
{
    cmb_stream s = cmb_case_stream(c, 0);
    cmb_status st = CMB_OK;
    for (size_t k = 0; k < b->n && st == CMB_OK; k++)
        st = _cmb_cuda(c, cmb_smem_stage(b->p[k], b->size[k] / sizeof(float), 0, threads, grid, s),
                       "first-touch pass");
    return st == CMB_OK ? cmb_case_sync(c) : st;
}

static cmb_status run_level(cmb_case *c, const device_shape *d, level_result *r)
{
    int threads = (int)cmb_param_u64(c, "threads"), blocks = 0;
    _cmb_blocks b = {0};
    cmb_alloc_stats as;

    cmb_status st = _cmb_cuda(c, cmb_smem_configure(r->smem), "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
    if (st == CMB_OK)
        st = _cmb_cuda(c, cmb_smem_occupancy(threads, r->smem, &blocks), "occupancy query");
    if (st == CMB_OK && blocks < 1)
        st = cmb_case_fail(c, CMB_ERR_STATE, "%zu bytes of shared memory leave no resident block", r->smem);
    if (st != CMB_OK)
        return st;
    r->occupancy = (double)blocks * threads / d->threads_per_sm;
    st = alloc_buffers(c, &b, r);
    if (st == CMB_OK)
        st = first_touch(c, &b, threads, blocks * d->sms);
    if (st == CMB_OK) {
        r->free_after_alloc = cmb_case_device_free(c);
        st = run_kernels(c, &b, blocks * d->sms, r);
    }
    if (st == CMB_OK) {
        uint64_t after = cmb_case_device_free(c);
        r->free_delta = after > r->free_after_alloc ? after - r->free_after_alloc : r->free_after_alloc - after;
        cmb_case_alloc_stats(c, &as);
        r->reserved = (as.valid & CMB_STAT_RESERVED) ? as.reserved.current : -1;
    }
    cmb_status fst = _cmb_blocks_free_all(c, &b, cmb_case_stream(c, 0));
    _cmb_blocks_release(&b);
    return st != CMB_OK ? st : fst;
}

static void report(cmb_case *c, const device_shape *d, const level_result *r, int levels)
{
    char name[48];
    uint64_t delta = 0, fmin = UINT64_MAX, fmax = 0;
    int64_t rmin = INT64_MAX, rmax = INT64_MIN;
    for (int l = 0; l < levels; l++) {
        int pct = (int)lround(100.0 * l / (levels - 1));
        snprintf(name, sizeof name, "occ_p%d", pct);
        cmb_case_counter(c, name, r[l].occupancy);
        snprintf(name, sizeof name, "kernel_us_p%d", pct);
        cmb_case_counter(c, name, r[l].kernel_us);
        delta = r[l].free_delta > delta ? r[l].free_delta : delta;
        fmin = r[l].free_after_alloc < fmin ? r[l].free_after_alloc : fmin;
        fmax = r[l].free_after_alloc > fmax ? r[l].free_after_alloc : fmax;
        rmin = r[l].reserved < rmin ? r[l].reserved : rmin;
        rmax = r[l].reserved > rmax ? r[l].reserved : rmax;
    }
    cmb_case_counter(c, "smem_max_bytes", (double)d->smem_max);
    cmb_case_counter(c, "device_free_delta_bytes", (double)delta);
    cmb_case_counter(c, "free_spread_bytes", (double)(fmax - fmin));
    if (rmin >= 0)
        cmb_case_counter(c, "reserved_spread_bytes", (double)(rmax - rmin));
    cmb_case_counter(c, "alloc_us_p0", r[0].alloc_us);
    cmb_case_counter(c, "alloc_us_p100", r[levels - 1].alloc_us);
}

static cmb_status shmem_run(cmb_case *c)
{
    int levels = (int)cmb_param_u64(c, "levels");
    level_result r[16] = {{0}};
    device_shape d;
    cmb_status st = query_device(c, &d);
    if (st != CMB_OK)
        return st;
    /* warm-up: loads the kernel's module before anything is measured */
    st = _cmb_cuda(c, cmb_smem_stage(NULL, 0, 0, 32, 1, cmb_case_stream(c, 0)), "warm-up launch");
    if (st == CMB_OK)
        st = cmb_case_sync(c);
    double t0 = cmb_case_clock(c);
    for (int l = 0; l < levels && st == CMB_OK; l++) {
        r[l].smem = d.smem_max * (size_t)l / (size_t)(levels - 1) / SMEM_ROUND * SMEM_ROUND;
        if (l == levels - 1)
            r[l].smem = d.smem_max;
        st = run_level(c, &d, &r[l]);
    }
    cmb_case_set_time(c, cmb_case_clock(c) - t0);
    if (st == CMB_OK)
        report(c, &d, r, levels);
    return st;
}

static int shmem_check(const cmb_case *c, char *reason, size_t len)
{
    uint64_t threads = cmb_param_u64(c, "threads");
    if (threads % 32) {
        snprintf(reason, len, "shared-mem: threads=%llu must be a multiple of 32", (unsigned long long)threads);
        return -1;
    }
    if (cmb_param_u64(c, "bufs") * cmb_param_u64(c, "buf_size") > cmb_case_capacity(c) / 2) {
        snprintf(reason, len, "shared-mem: bufs x buf_size exceeds half the device");
        return 1;
    }
    return 0;
}

static const cmb_param_spec shmem_params[] = {
    {"levels", CMB_P_INT, "3", "9", 2, 9, NULL, "shared-memory sizes, evenly from 0 to the device maximum"},
    {"bufs", CMB_P_INT, "4", "16", 1, 4096, NULL, "global buffers allocated per level"},
    {"buf_size", CMB_P_SIZE, "64MiB", "256MiB", 4096, 68719476736.0, NULL, "bytes of each global buffer"},
    {"iters", CMB_P_INT, "5", "20", 1, 100000, NULL, "timed passes over the buffers per level"},
    {"threads", CMB_P_INT, "256", "256", 32, 1024, NULL, "threads per block (a multiple of 32)"},
};

static const cmb_headline shmem_headline = {
    NULL, NULL, NULL, NULL,
    {"occupancy {occ_p0} at no shared memory, {occ_p100} at the maximum",
     "free memory change {device_free_delta_bytes}", "time {time}", NULL},
};

const cmb_scenario cmb_scenario_shared_mem = {
    .name = "shared-mem",
    .question = "Does heavy shared-memory use take device memory from my allocations or change the allocator's "
                "behaviour, and what does it cost in occupancy and kernel time?",
    .params = shmem_params,
    .n_params = sizeof shmem_params / sizeof shmem_params[0],
    .flags = CMB_SCN_NEEDS_GPU | CMB_SCN_NO_PROBE,
    .check = shmem_check,
    .run = shmem_run,
    .headline = &shmem_headline,
};
