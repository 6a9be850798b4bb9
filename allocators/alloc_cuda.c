/* alloc_cuda.c - "cuda": every request goes straight to the upstream.
 *
 * On a GPU the upstream is cudaMalloc / cudaFree, so this measures the
 * driver's own allocator: no caching, no rounding of its own (cudaMalloc
 * aligns to at least 256 B), every free synchronizes the device. In sim mode
 * it is the sim device's model of cudaMalloc. Bounds: O(1) bookkeeping per
 * call; reserved == allocated == the live requests, so its fragmentation
 * ratio is 0 by definition and its real cost shows in the device peak.
 */
#include <stdlib.h>

#include "../common/cmb_size.h"
#include "cmb_allocator.h"
#include "options.h"

typedef struct cuda_alloc {
    cmb_upstream *up;
    cmb_alloc_stats st;
} cuda_alloc;

/* cudaMalloc takes no options. */
static const cmb_option_decl cuda_options[] = {CMB_OPTION_END};

static cmb_status cuda_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    cmb_options o;
    cmb_status st = cmb_options_read(&o, "cuda", cuda_options, cfg);
    if (st != CMB_OK)
        return st;
    if (!up)
        return CMB_ERR_INVALID;
    cuda_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return CMB_ERR_HOST_NOMEM;
    a->up = up;
    *state = a;
    return CMB_OK;
}

static cmb_status cuda_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    cuda_alloc *a = state;
    if (cmb_size_refuse(size, "cuda", NULL, 0))
        return CMB_ERR_OOM;
    cmb_status st = cmb_up_alloc(a->up, size, stream, ptr);
    if (st != CMB_OK)
        return st;
    cmb_stat_increase(&a->st.requested, (int64_t)size);
    cmb_stat_increase(&a->st.blocks, 1);
    return CMB_OK;
}

static cmb_status cuda_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    cuda_alloc *a = state;
    cmb_status st = cmb_up_free(a->up, ptr, size, stream);
    if (st != CMB_OK)
        return st;
    cmb_stat_decrease(&a->st.requested, (int64_t)size);
    cmb_stat_decrease(&a->st.blocks, 1);
    return CMB_OK;
}

static cmb_status cuda_stats(void *state, cmb_alloc_stats *out)
{
    cuda_alloc *a = state;
    *out = a->st;
    out->allocated = a->st.requested;
    out->reserved.current = a->up->stats.held_current;
    out->reserved.peak = a->up->stats.held_peak;
    out->reserved.total = a->up->stats.held_total;
    out->largest_free = 0; /* nothing is kept free */
    out->upstream_allocs = a->up->stats.alloc_calls;
    out->upstream_frees = a->up->stats.free_calls;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                 CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM;
    return CMB_OK;
}

static cmb_status cuda_destroy(void *state)
{
    /* Blocks the program never freed stay allocated upstream: a real leak. */
    free(state);
    return CMB_OK;
}

const cmb_allocator_methods cmb_cuda_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "cuda",
    .summary = "cudaMalloc / cudaFree for every request, no caching",
    .flags = CMB_ALLOC_USES_UPSTREAM,
    .create = cuda_create,
    .allocate = cuda_allocate,
    .deallocate = cuda_deallocate,
    .trim = NULL,
    .stats = cuda_stats,
    .destroy = cuda_destroy,
    .options = cuda_options,
};
