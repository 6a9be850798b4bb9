/* alloc_cub.cu - "cub" and "cub-1g": CUB's CachingDeviceAllocator, the real
 * one from the toolkit's CCCL, behind the suite's C method table.
 *
 * CUB rounds a request up to a power of bin_growth between
 * bin_growth^min_bin and bin_growth^max_bin, caches freed blocks per bin
 * and reuses a cached block of the same bin on the same stream (or on any
 * stream once its ready event has completed); requests above the largest
 * bin are cudaMalloc'd exactly and freed at once. When a cudaMalloc fails it
 * frees every cached block of the device and tries once more.
 * Defaults (cub/util_allocator.cuh, the default constructor): bin_growth 8,
 * min_bin 3, max_bin 7 (bins 512 B .. 2 MiB), max_cached_bytes
 * 3 * 2 MiB - 1. "cub-1g" keeps bin_growth 8 and min_bin 3 with max_bin 10
 * (8^10 = 1 GiB) and no cache limit (the explicit constructor's default).
 * Bounds: O(log n) multiset operations under one mutex.
 */
#include <cub/util_allocator.cuh>

#include <cstdio>
#include <cstdlib>
#include <new>

#include "../common/cmb_size.h"
#include "cmb_allocator.h"
#include "options.h"

namespace {

struct cub_alloc {
    cub::CachingDeviceAllocator *cub;
    int device;
    cmb_stat_count requested;
    cmb_stat_count allocated;
    cmb_stat_count blocks;
    cmb_stat_count reserved;
    uint64_t upstream_allocs;
    uint64_t upstream_frees;
    char last_error[256];
};

/* Bytes CUB will hand out for a request: its bin size, or the exact size
 * above the largest bin (mirrors NearestPowerOf in util_allocator.cuh). */
size_t cub_block_bytes(const cub::CachingDeviceAllocator *c, size_t bytes)
{
    if (bytes > c->max_bin_bytes)
        return bytes;
    size_t rounded = 1;
    while (rounded < bytes)
        rounded *= c->bin_growth;
    return rounded < c->min_bin_bytes ? c->min_bin_bytes : rounded;
}

void refresh_reserved(cub_alloc *a)
{
    std::lock_guard<std::mutex> lock(a->cub->mutex);
    auto it = a->cub->cached_bytes.find(a->device);
    int64_t now = 0;
    if (it != a->cub->cached_bytes.end())
        now = (int64_t)(it->second.free + it->second.live);
    int64_t delta = now - a->reserved.current;
    if (delta > 0) {
        cmb_stat_increase(&a->reserved, delta);
        a->upstream_allocs++;
    } else if (delta < 0) {
        cmb_stat_decrease(&a->reserved, -delta);
        a->upstream_frees++;
    }
}

cmb_status note(cub_alloc *a, const char *what, cudaError_t e)
{
    std::snprintf(a->last_error, sizeof a->last_error, "%s: %s", what, cudaGetErrorString(e));
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        return CMB_ERR_OOM;
    }
    return CMB_ERR_CUDA;
}

/* Defaults of CUB's default constructor (cub/util_allocator.cuh, CCCL 2.x):
 * bin_growth 8, min_bin 3, max_bin 7, max_cached_bytes (8^7 * 3) - 1. */
const cmb_option_decl cub_options[] = {
    CMB_OPTION("bin_growth", CMB_OPT_INT, "8", "2", NULL, NULL, "geometric growth factor of the bin sizes"),
    CMB_OPTION("min_bin", CMB_OPT_INT, "3", "0", "30", NULL, "smallest bin: bin_growth^min_bin bytes"),
    CMB_OPTION("max_bin", CMB_OPT_INT, "7", "0", "30", NULL, "largest bin: bin_growth^max_bin bytes; larger requests are not cached"),
    CMB_OPTION_EX("max_cached_bytes", CMB_OPT_SIZE, "(3 x the largest bin - 1)", "0", "max", "B",
     "free bytes the cache may hold; 0 is CUB's default rule, max no limit", NULL, CMB_OPT_MAX_OK, NULL),
    CMB_OPTION_END};

cmb_status cub_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    (void)up;
    cmb_options o;
    cmb_status st = cmb_options_read(&o, "cub", cub_options, cfg);
    if (st != CMB_OK)
        return st;
    uint64_t growth = (uint64_t)cmb_opt_int(&o, "bin_growth");
    uint64_t min_bin = (uint64_t)cmb_opt_int(&o, "min_bin");
    uint64_t max_bin = (uint64_t)cmb_opt_int(&o, "max_bin");
    uint64_t max_cached = cmb_opt_size(&o, "max_cached_bytes");
    if (growth < 2 || min_bin > max_bin || max_bin > 30) {
        std::snprintf(cfg->error, cfg->error_len,
                      "cub: need bin_growth >= 2 and min_bin <= max_bin <= 30");
        return CMB_ERR_INVALID;
    }
    if (max_cached == 0) {
        size_t max_bin_bytes = cub::CachingDeviceAllocator::IntPow((unsigned)growth, (unsigned)max_bin);
        max_cached = max_bin_bytes * 3 - 1; /* the default constructor's rule */
    }
    if (max_cached == UINT64_MAX)
        max_cached = cub::CachingDeviceAllocator::INVALID_SIZE;
    cub_alloc *a = new (std::nothrow) cub_alloc();
    if (!a)
        return CMB_ERR_HOST_NOMEM;
    a->device = cfg->device;
    a->cub = new (std::nothrow) cub::CachingDeviceAllocator((unsigned)growth, (unsigned)min_bin,
                                                           (unsigned)max_bin, (size_t)max_cached);
    if (!a->cub) {
        delete a;
        return CMB_ERR_HOST_NOMEM;
    }
    *state = a;
    return CMB_OK;
}

cmb_status cub_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    cub_alloc *a = static_cast<cub_alloc *>(state);
    if (cmb_size_refuse(size, "cub", a->last_error, sizeof a->last_error))
        return CMB_ERR_OOM;
    cudaError_t e = a->cub->DeviceAllocate(a->device, ptr, size, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return note(a, "CachingDeviceAllocator::DeviceAllocate", e);
    cmb_stat_increase(&a->requested, (int64_t)size);
    cmb_stat_increase(&a->allocated, (int64_t)cub_block_bytes(a->cub, size));
    cmb_stat_increase(&a->blocks, 1);
    refresh_reserved(a);
    return CMB_OK;
}

cmb_status cub_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    cub_alloc *a = static_cast<cub_alloc *>(state);
    (void)stream;
    cudaError_t e = a->cub->DeviceFree(a->device, ptr);
    if (e != cudaSuccess)
        return note(a, "CachingDeviceAllocator::DeviceFree", e);
    cmb_stat_decrease(&a->requested, (int64_t)size);
    cmb_stat_decrease(&a->allocated, (int64_t)cub_block_bytes(a->cub, size));
    cmb_stat_decrease(&a->blocks, 1);
    refresh_reserved(a);
    return CMB_OK;
}

cmb_status cub_trim(void *state)
{
    cub_alloc *a = static_cast<cub_alloc *>(state);
    cudaError_t e = a->cub->FreeAllCached();
    refresh_reserved(a);
    return e == cudaSuccess ? CMB_OK : note(a, "FreeAllCached", e);
}

uint64_t largest_cached(cub_alloc *a)
{
    std::lock_guard<std::mutex> lock(a->cub->mutex);
    uint64_t best = 0;
    /* cached_blocks is ordered by (device, bytes): the device's last is the largest. */
    for (auto it = a->cub->cached_blocks.rbegin(); it != a->cub->cached_blocks.rend(); ++it) {
        if (it->device == a->device) {
            best = it->bytes;
            break;
        }
    }
    return best;
}

cmb_status cub_stats(void *state, cmb_alloc_stats *out)
{
    cub_alloc *a = static_cast<cub_alloc *>(state);
    *out = cmb_alloc_stats();
    out->requested = a->requested;
    out->allocated = a->allocated;
    out->reserved = a->reserved;
    out->blocks = a->blocks;
    out->largest_free = largest_cached(a);
    out->upstream_allocs = a->upstream_allocs;
    out->upstream_frees = a->upstream_frees;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                 CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM;
    return CMB_OK;
}

cmb_status cub_destroy(void *state)
{
    cub_alloc *a = static_cast<cub_alloc *>(state);
    cudaDeviceSynchronize();
    delete a->cub; /* frees every cached block */
    delete a;
    return CMB_OK;
}

const char *cub_last_error(void *state)
{
    cub_alloc *a = static_cast<cub_alloc *>(state);
    return a->last_error[0] ? a->last_error : nullptr;
}

} // namespace

extern "C" const cmb_allocator_methods cmb_cub_methods = {
    CMB_ALLOCATOR_ABI_VERSION,
    "cub",
    "CUB CachingDeviceAllocator, default bins 512 B .. 2 MiB (growth 8), cache <= 6 MiB",
    CMB_ALLOC_NEEDS_GPU,
    cub_create,
    cub_allocate,
    cub_deallocate,
    cub_trim,
    cub_stats,
    cub_destroy,
    cub_last_error,
    cub_options,
};
