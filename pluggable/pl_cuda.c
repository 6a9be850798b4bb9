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

int _cmb_pl_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
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

/* --- events for record_stream (pl_hooks.c) ------------------------------------------ */

int _cmb_pl_cuda_event_record(void *stream, void **ev)
{
    cudaEvent_t e;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    if (cudaEventRecord(e, (cudaStream_t)stream) != cudaSuccess) {
        cudaGetLastError();
        cudaEventDestroy(e);
        return -1;
    }
    *ev = e;
    return 0;
}

int _cmb_pl_cuda_event_done(void *ev)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaErrorNotReady) {
        cudaGetLastError(); /* not the host's error: a pending event */
        return 0;
    }
    if (e != cudaSuccess)
        cudaGetLastError(); /* a broken event never completes: treat it as done */
    return 1;
}

void _cmb_pl_cuda_event_wait(void *ev)
{
    if (cudaEventSynchronize((cudaEvent_t)ev) != cudaSuccess)
        cudaGetLastError();
}

void _cmb_pl_cuda_event_destroy(void *ev)
{
    cudaEventDestroy((cudaEvent_t)ev);
}

/* --- stream capture ------------------------------------------------------------------ */

/* While a stream captures in global mode, cudaMalloc from any thread is a
 * prohibited call that invalidates the capture; relaxed mode allows it and
 * the capture ignores it. PyTorch's own allocator switches the calling
 * thread the same way around cudaMalloc while a capture is underway
 * (c10/cuda/CUDACachingAllocator.cpp, cudaMallocMaybeCapturing, PyTorch 2.11). */
int _cmb_pl_capture_relax(void)
{
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return (int)m;
}

void _cmb_pl_capture_restore(int mode)
{
    enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)mode;
    if (mode >= 0 && cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess)
        cudaGetLastError();
}

int _cmb_pl_cuda_malloc(size_t size, void **ptr)
{
    if (cudaMalloc(ptr, size) != cudaSuccess) {
        cudaGetLastError(); /* an out-of-memory is not the host's error */
        return -1;
    }
    return 0;
}

void _cmb_pl_cuda_free(void *ptr)
{
    if (cudaFree(ptr) != cudaSuccess)
        cudaGetLastError();
}

int _cmb_pl_stream_device(void *stream)
{
    int dev = -1;
    if (!stream || cudaStreamGetDevice((cudaStream_t)stream, &dev) != cudaSuccess) {
        cudaGetLastError();
        if (cudaGetDevice(&dev) != cudaSuccess) {
            cudaGetLastError();
            dev = 0;
        }
    }
    return dev;
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
