/* alloc_cuda_async.c - "cuda-async" and "cuda-async-retain": CUDA's
 * stream-ordered allocator, cudaMallocAsync / cudaFreeAsync.
 *
 * The driver keeps a pool per device; freed memory returns to the pool when
 * the free is reached in stream order and is handed back to the OS at the
 * next synchronization beyond the pool's release threshold.
 *   pool=default, release_threshold=0   - the device's default pool with
 *        CUDA's default threshold of 0: memory goes back at every sync.
 *   pool=own, release_threshold=max     - a pool of its own that never
 *        releases (UINT64_MAX), as RMM's cuda_async_memory_resource sets up.
 * Reuse policies (cudaMemPoolReuse*), each true by default in CUDA:
 *   reuse_follow_event_deps, reuse_opportunistic, reuse_internal_deps.
 * Peaks come from the pool itself: cudaMemPoolAttrReservedMemHigh and
 * cudaMemPoolAttrUsedMemHigh, reset when the instance is created, except
 * while another instance uses the same default pool: resetting would erase
 * that instance's peak (scenarios create fresh instances beside the case's
 * own), so a second instance's peaks are the shared pool's.
 * Bounds: no host-side search; the driver's cost is what is measured.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_size.h"
#include "cmb_allocator.h"
#include "cuda_util.h"
#include "options.h"

/* Live instances on the device's default pool (one device per process). */
static int default_pool_users;

typedef struct async_alloc {
    cudaMemPool_t pool;
    int own_pool;
    int device;
    cmb_stat_count requested;
    cmb_stat_count blocks;
    char last_error[256];
} async_alloc;

static cmb_status set_pool_attr(async_alloc *a, enum cudaMemPoolAttr attr, void *value,
                                const char *what)
{
    cudaError_t e = cudaMemPoolSetAttribute(a->pool, attr, value);
    if (e != cudaSuccess) {
        _cmb_cuda_note(a->last_error, sizeof a->last_error, what, e);
        return _cmb_cuda_status(e);
    }
    return CMB_OK;
}

static cmb_status open_pool(async_alloc *a, int own)
{
    cudaError_t e;
    if (own) {
        struct cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.handleTypes = cudaMemHandleTypeNone;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = a->device;
        e = cudaMemPoolCreate(&a->pool, &props);
    } else {
        e = cudaDeviceGetDefaultMemPool(&a->pool, a->device);
    }
    if (e != cudaSuccess) {
        _cmb_cuda_note(a->last_error, sizeof a->last_error, "opening the memory pool", e);
        return _cmb_cuda_status(e);
    }
    a->own_pool = own;
    return CMB_OK;
}

static cmb_status configure_pool(async_alloc *a, uint64_t threshold, int follow, int opportunistic,
                                 int internal, int reset_marks)
{
    uint64_t zero = 0;
    cmb_status st = set_pool_attr(a, cudaMemPoolAttrReleaseThreshold, &threshold, "release threshold");
    if (st == CMB_OK)
        st = set_pool_attr(a, cudaMemPoolReuseFollowEventDependencies, &follow, "reuse policy");
    if (st == CMB_OK)
        st = set_pool_attr(a, cudaMemPoolReuseAllowOpportunistic, &opportunistic, "reuse policy");
    if (st == CMB_OK)
        st = set_pool_attr(a, cudaMemPoolReuseAllowInternalDependencies, &internal, "reuse policy");
    if (!reset_marks)
        return st;
    /* Setting a high-water mark to 0 resets it to the current value. */
    if (st == CMB_OK)
        st = set_pool_attr(a, cudaMemPoolAttrReservedMemHigh, &zero, "reset reserved high");
    if (st == CMB_OK)
        st = set_pool_attr(a, cudaMemPoolAttrUsedMemHigh, &zero, "reset used high");
    return st;
}

/* Defaults: CUDA's own for the device's default pool (release threshold 0,
 * every reuse policy on: cudaMemPoolAttr* in the CUDA Runtime API). */
static const cmb_option_decl async_options[] = {
    CMB_OPTION_EX("pool", CMB_OPT_ENUM, "default", NULL, NULL, NULL,
     "default: the device's default pool; own: a pool of its own (cudaMemPoolCreate)", "default|own", 0, NULL),
    CMB_OPTION_EX("release_threshold", CMB_OPT_SIZE, "0", "0", "max", "B",
     "cudaMemPoolAttrReleaseThreshold: bytes the pool keeps at a synchronization; max keeps everything", NULL,
     CMB_OPT_MAX_OK, NULL),
    CMB_OPTION("reuse_follow_event_deps", CMB_OPT_BOOL, "true", NULL, NULL, NULL, "cudaMemPoolReuseFollowEventDependencies"),
    CMB_OPTION("reuse_opportunistic", CMB_OPT_BOOL, "true", NULL, NULL, NULL, "cudaMemPoolReuseAllowOpportunistic"),
    CMB_OPTION("reuse_internal_deps", CMB_OPT_BOOL, "true", NULL, NULL, NULL, "cudaMemPoolReuseAllowInternalDependencies"),
    CMB_OPTION_END};

static cmb_status async_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    cmb_options o;
    (void)up;
    cmb_status st = cmb_options_read(&o, "cuda-async", async_options, cfg);
    if (st != CMB_OK)
        return st;
    const char *pool = cmb_opt_str(&o, "pool");
    uint64_t threshold = cmb_opt_size(&o, "release_threshold");
    int follow = cmb_opt_bool(&o, "reuse_follow_event_deps");
    int opportunistic = cmb_opt_bool(&o, "reuse_opportunistic");
    int internal = cmb_opt_bool(&o, "reuse_internal_deps");
    async_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return CMB_ERR_HOST_NOMEM;
    a->device = cfg->device;
    st = open_pool(a, !strcmp(pool, "own"));
    if (st == CMB_OK)
        st = configure_pool(a, threshold, follow, opportunistic, internal, a->own_pool || !default_pool_users);
    if (st != CMB_OK) {
        snprintf(cfg->error, cfg->error_len, "%s", a->last_error);
        if (a->own_pool)
            cudaMemPoolDestroy(a->pool);
        free(a);
        return st;
    }
    if (!a->own_pool)
        default_pool_users++;
    *state = a;
    return CMB_OK;
}

static cmb_status async_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    async_alloc *a = state;
    if (cmb_size_refuse(size, "cuda-async", a->last_error, sizeof a->last_error))
        return CMB_ERR_OOM;
    cudaError_t e = cudaMallocFromPoolAsync(ptr, size, a->pool, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        _cmb_cuda_note(a->last_error, sizeof a->last_error, "cudaMallocFromPoolAsync", e);
        return _cmb_cuda_status(e);
    }
    cmb_stat_increase(&a->requested, (int64_t)size);
    cmb_stat_increase(&a->blocks, 1);
    return CMB_OK;
}

static cmb_status async_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    async_alloc *a = state;
    cudaError_t e = cudaFreeAsync(ptr, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        _cmb_cuda_note(a->last_error, sizeof a->last_error, "cudaFreeAsync", e);
        return _cmb_cuda_status(e);
    }
    cmb_stat_decrease(&a->requested, (int64_t)size);
    cmb_stat_decrease(&a->blocks, 1);
    return CMB_OK;
}

static cmb_status async_trim(void *state)
{
    async_alloc *a = state;
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess)
        e = cudaMemPoolTrimTo(a->pool, 0);
    return _cmb_cuda_status(e);
}

static int64_t pool_attr(async_alloc *a, enum cudaMemPoolAttr attr)
{
    uint64_t v = 0;
    if (cudaMemPoolGetAttribute(a->pool, attr, &v) != cudaSuccess)
        return -1;
    return (int64_t)v;
}

static cmb_status async_stats(void *state, cmb_alloc_stats *out)
{
    async_alloc *a = state;
    memset(out, 0, sizeof *out);
    out->requested = a->requested;
    out->blocks = a->blocks;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_BLOCKS;
    int64_t rc = pool_attr(a, cudaMemPoolAttrReservedMemCurrent);
    int64_t rh = pool_attr(a, cudaMemPoolAttrReservedMemHigh);
    int64_t uc = pool_attr(a, cudaMemPoolAttrUsedMemCurrent);
    int64_t uh = pool_attr(a, cudaMemPoolAttrUsedMemHigh);
    if (rc >= 0 && rh >= 0) {
        out->reserved.current = rc;
        out->reserved.peak = rh;
        out->valid |= CMB_STAT_RESERVED;
    }
    if (uc >= 0 && uh >= 0) {
        out->allocated.current = uc;
        out->allocated.peak = uh;
        out->valid |= CMB_STAT_ALLOCATED;
    }
    return CMB_OK;
}

static cmb_status async_destroy(void *state)
{
    async_alloc *a = state;
    cudaError_t e = cudaDeviceSynchronize();
    if (a->own_pool) {
        cudaMemPoolDestroy(a->pool); /* released once outstanding blocks are freed */
    } else {
        cudaMemPoolTrimTo(a->pool, 0);
        default_pool_users--;
    }
    free(a);
    return _cmb_cuda_status(e);
}

static const char *async_last_error(void *state)
{
    async_alloc *a = state;
    return a->last_error[0] ? a->last_error : NULL;
}

const cmb_allocator_methods cmb_cuda_async_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "cuda-async",
    .summary = "cudaMallocAsync on the device's default pool, release threshold 0 (CUDA's default)",
    .flags = CMB_ALLOC_NEEDS_GPU | CMB_ALLOC_STREAM_ORDERED,
    .create = async_create,
    .allocate = async_allocate,
    .deallocate = async_deallocate,
    .trim = async_trim,
    .stats = async_stats,
    .destroy = async_destroy,
    .last_error = async_last_error,
    .options = async_options,
};
