/* alloc_managed.c - "managed": cudaMallocManaged (unified memory).
 *
 * Pages migrate to the GPU on first touch, so an allocation costs little
 * until it is used. Oversubscribing managed memory can hang a GPU that is
 * shared with others, so this allocator never hands out more than the card
 * had free when the instance was created (less `headroom`, 256 MiB by
 * default): beyond that it reports out of memory, as cudaMalloc would.
 * Bounds: O(1) bookkeeping; reserved == requested.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../common/cmb_size.h"
#include "cmb_allocator.h"
#include "cuda_util.h"
#include "options.h"

typedef struct managed_alloc {
    uint64_t budget;
    cmb_stat_count requested;
    cmb_stat_count blocks;
    char last_error[256];
} managed_alloc;

static const cmb_option_decl managed_options[] = {
    CMB_OPTION("headroom", CMB_OPT_SIZE, "256MiB", "0", NULL, "B",
     "free device memory left alone: the budget is free memory minus this (this suite's choice)"),
    CMB_OPTION_END};

static cmb_status managed_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    cmb_options o;
    size_t free_b = 0, total_b = 0;
    (void)up;
    cmb_status st = cmb_options_read(&o, "managed", managed_options, cfg);
    if (st != CMB_OK)
        return st;
    uint64_t headroom = cmb_opt_size(&o, "headroom");
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        _cmb_cuda_note(cfg->error, cfg->error_len, "managed: cudaMemGetInfo", e);
        return _cmb_cuda_status(e);
    }
    managed_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return CMB_ERR_HOST_NOMEM;
    a->budget = free_b > headroom ? free_b - headroom : 0;
    *state = a;
    return CMB_OK;
}

static cmb_status managed_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    managed_alloc *a = state;
    if (cmb_size_refuse(size, "managed", a->last_error, sizeof a->last_error))
        return CMB_ERR_OOM;
    (void)stream;
    if ((uint64_t)a->requested.current + size > a->budget) {
        snprintf(a->last_error, sizeof a->last_error,
                 "managed: %zu bytes would exceed the free device memory budget", size);
        return CMB_ERR_OOM;
    }
    cudaError_t e = cudaMallocManaged(ptr, size, cudaMemAttachGlobal);
    if (e != cudaSuccess) {
        _cmb_cuda_note(a->last_error, sizeof a->last_error, "cudaMallocManaged", e);
        return _cmb_cuda_status(e);
    }
    cmb_stat_increase(&a->requested, (int64_t)size);
    cmb_stat_increase(&a->blocks, 1);
    return CMB_OK;
}

static cmb_status managed_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    managed_alloc *a = state;
    (void)stream;
    cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess) {
        _cmb_cuda_note(a->last_error, sizeof a->last_error, "cudaFree", e);
        return _cmb_cuda_status(e);
    }
    cmb_stat_decrease(&a->requested, (int64_t)size);
    cmb_stat_decrease(&a->blocks, 1);
    return CMB_OK;
}

static cmb_status managed_stats(void *state, cmb_alloc_stats *out)
{
    managed_alloc *a = state;
    *out = (cmb_alloc_stats){0};
    out->requested = a->requested;
    out->allocated = a->requested;
    out->reserved = a->requested;
    out->blocks = a->blocks;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS;
    return CMB_OK;
}

static cmb_status managed_destroy(void *state)
{
    free(state);
    return CMB_OK;
}

static const char *managed_last_error(void *state)
{
    managed_alloc *a = state;
    return a->last_error[0] ? a->last_error : NULL;
}

const cmb_allocator_methods cmb_managed_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "managed",
    .summary = "cudaMallocManaged, never beyond the device memory free at start",
    .flags = CMB_ALLOC_NEEDS_GPU,
    .create = managed_create,
    .allocate = managed_allocate,
    .deallocate = managed_deallocate,
    .trim = NULL,
    .stats = managed_stats,
    .destroy = managed_destroy,
    .last_error = managed_last_error,
    .options = managed_options,
};
