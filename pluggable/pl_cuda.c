/* pl_cuda.c - the CUDA runtime calls the library makes itself: the device
 * guard around each call and cudaMemGetInfo sampling. The policies' own
 * CUDA work happens in the upstreams (allocators/upstream_cuda.c,
 * upstream_vmm.c).
 *
 * The runtime is the process's shared libcudart, so cudaGetDevice and
 * cudaSetDevice read and change the same per-thread current device the
 * host framework uses; the guard puts it back after every call.
 */
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "pl_internal.h"

int _cmb_pl_enter(int device, int *saved, char *err, size_t errlen)
{
    int cur = -1;
    cudaError_t e = cudaGetDevice(&cur);
    *saved = -1;
    if (e == cudaSuccess && cur == device)
        return 0;
    if (e == cudaSuccess)
        e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cannot use GPU %d: %s (%s)", device, cudaGetErrorString(e), cudaGetErrorName(e));
        cudaGetLastError(); /* not the host program's error to see */
        return -1;
    }
    *saved = cur;
    return 0;
}

void _cmb_pl_clear_error(void)
{
    cudaGetLastError();
}

void _cmb_pl_leave(int saved)
{
    if (saved >= 0)
        cudaSetDevice(saved);
}

int _cmb_pl_mem_info(int64_t *free_bytes, int64_t *total_bytes)
{
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    *free_bytes = (int64_t)f;
    *total_bytes = (int64_t)t;
    return 0;
}

void _cmb_pl_device_name(int device, char *out, size_t outlen)
{
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
        cudaGetLastError();
        snprintf(out, outlen, "GPU %d", device);
        return;
    }
    snprintf(out, outlen, "%s", p.name);
}
