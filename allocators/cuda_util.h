/* cuda_util.h - CUDA runtime error translation and driver entry points for
 * the allocators that talk to a real GPU.
 *
 * The binary never links libcuda: driver-API functions are looked up at run
 * time through cudaGetDriverEntryPointByVersion, so the suite still starts
 * (and runs sim mode) on a machine with no driver installed.
 */
#ifndef CMB_CUDA_UTIL_H
#define CMB_CUDA_UTIL_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include "cmb_upstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cudaErrorMemoryAllocation -> CMB_ERR_OOM (and the error is cleared, it is
 * not sticky); anything else -> CMB_ERR_CUDA. */
cmb_status _cmb_cuda_status(cudaError_t e);

/* Remember a CUDA failure's text for last_error() style reporting. */
void _cmb_cuda_note(char *buf, size_t len, const char *what, cudaError_t e);

/* The driver entry points the vmm upstream needs. */
typedef struct _cmb_driver_api {
    PFN_cuMemAddressReserve_v10020 cuMemAddressReserve;
    PFN_cuMemAddressFree_v10020 cuMemAddressFree;
    PFN_cuMemCreate_v10020 cuMemCreate;
    PFN_cuMemRelease_v10020 cuMemRelease;
    PFN_cuMemMap_v10020 cuMemMap;
    PFN_cuMemUnmap_v10020 cuMemUnmap;
    PFN_cuMemSetAccess_v10020 cuMemSetAccess;
    PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity;
    PFN_cuGetErrorString_v6000 cuGetErrorString;
} _cmb_driver_api;

/* Loads the table once; returns NULL and fills err when unavailable. */
const _cmb_driver_api *_cmb_driver(char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* CMB_CUDA_UTIL_H */
