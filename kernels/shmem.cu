/* shmem.cu - the dynamic shared-memory staging kernel. */
#include <cuda_runtime.h>

#include "cmb_shmem_kernels.h"

namespace {

__global__ void stage(float *buf, size_t n, size_t tile)
{
    extern __shared__ float s[];
    if (tile == 0) {
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
            buf[i] *= 1.000001f;
        return;
    }
    for (size_t base = (size_t)blockIdx.x * tile; base < n; base += (size_t)gridDim.x * tile) {
        size_t len = n - base < tile ? n - base : tile;
        for (size_t i = threadIdx.x; i < len; i += blockDim.x)
            s[i] = buf[base + i];
        __syncthreads();
        for (size_t i = threadIdx.x; i < len; i += blockDim.x)
            buf[base + i] = s[len - 1 - i] * 1.000001f;
        __syncthreads();
    }
}

} // namespace

extern "C" int cmb_smem_max_optin(int device, size_t *bytes)
{
    int v = 0;
    cudaError_t e = cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    *bytes = e == cudaSuccess ? (size_t)v : 0;
    return (int)e;
}

extern "C" int cmb_smem_configure(size_t smem)
{
    return (int)cudaFuncSetAttribute(stage, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

extern "C" int cmb_smem_occupancy(int threads, size_t smem, int *blocks_per_sm)
{
    return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, stage, threads, smem);
}

extern "C" int cmb_smem_stage(float *buf, size_t n, size_t smem, int threads, int blocks, void *stream)
{
    stage<<<blocks, threads, smem, (cudaStream_t)stream>>>(buf, n, smem / sizeof(float));
    return (int)cudaGetLastError();
}
