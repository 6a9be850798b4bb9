/* fill.cu - fill, check and spin kernels. */
#include <cuda_runtime.h>

#include "cmb_kernels.h"

namespace {

__global__ void fill_u32(uint32_t *p, size_t words, uint32_t pattern)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride)
        p[i] = pattern ^ (uint32_t)i;
}

__global__ void check_u32(const uint32_t *p, size_t words, uint32_t pattern, unsigned long long *bad)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned long long local = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += stride)
        local += p[i] != (pattern ^ (uint32_t)i);
    if (local)
        atomicAdd(bad, local);
}

__device__ uint64_t global_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void spin(uint64_t ns)
{
    uint64_t start = global_ns();
    while (global_ns() - start < ns) {
    }
}

unsigned grid_for(size_t words)
{
    size_t blocks = (words + 255) / 256;
    return (unsigned)(blocks > 4096 ? 4096 : (blocks ? blocks : 1));
}

} // namespace

extern "C" int cmb_kernel_fill_u32(void *ptr, size_t bytes, uint32_t pattern, void *stream)
{
    size_t words = bytes / 4;
    if (!words)
        return 0;
    fill_u32<<<grid_for(words), 256, 0, (cudaStream_t)stream>>>((uint32_t *)ptr, words, pattern);
    return (int)cudaGetLastError();
}

extern "C" int cmb_kernel_check_u32(const void *ptr, size_t bytes, uint32_t pattern,
                                    unsigned long long *device_mismatches, void *stream)
{
    size_t words = bytes / 4;
    if (!words)
        return 0;
    check_u32<<<grid_for(words), 256, 0, (cudaStream_t)stream>>>((const uint32_t *)ptr, words, pattern,
                                                                 device_mismatches);
    return (int)cudaGetLastError();
}

extern "C" int cmb_kernel_spin(uint64_t ns, void *stream)
{
    spin<<<1, 32, 0, (cudaStream_t)stream>>>(ns);
    return (int)cudaGetLastError();
}
