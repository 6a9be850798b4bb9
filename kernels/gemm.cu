/* gemm.cu - random matrix panels and sampled-entry gathers (gemm-chunked). */
#include <cuda_runtime.h>

#include "cmb_gemm_kernels.h"
#include "cmb_hash.h"

namespace {

template <typename T> __device__ T unit(uint64_t h);
template <> __device__ float unit<float>(uint64_t h) { return cmb_unit_f32(h); }
template <> __device__ double unit<double>(uint64_t h) { return cmb_unit_f64(h); }

template <typename T>
__global__ void fill_panel(T *p, uint64_t rows, uint64_t cols, uint64_t row0, uint64_t col0, uint64_t n,
                           uint64_t seed, uint32_t matrix)
{
    uint64_t total = rows * cols, stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t idx = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        uint64_t i = idx % rows, j = idx / rows;
        p[idx] = unit<T>(cmb_hash3(seed, matrix, (row0 + i) * n + (col0 + j)));
    }
}

template <typename T>
__global__ void gather(const T *c, uint64_t rows, uint64_t cols, uint64_t seed, uint32_t tile, uint32_t count,
                       double *out)
{
    uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= count)
        return;
    uint64_t i, j;
    cmb_sample_pos(seed, tile, k, rows, cols, &i, &j);
    out[k] = (double)c[i + j * rows];
}

unsigned grid_for(uint64_t n)
{
    uint64_t blocks = (n + 255) / 256;
    return (unsigned)(blocks > 8192 ? 8192 : (blocks ? blocks : 1));
}

} // namespace

extern "C" int cmb_kernel_fill_panel(void *p, cmb_dtype t, uint64_t rows, uint64_t cols, uint64_t row0,
                                     uint64_t col0, uint64_t n, uint64_t seed, uint32_t matrix, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = grid_for(rows * cols);
    if (t == CMB_F64)
        fill_panel<double><<<g, 256, 0, s>>>((double *)p, rows, cols, row0, col0, n, seed, matrix);
    else
        fill_panel<float><<<g, 256, 0, s>>>((float *)p, rows, cols, row0, col0, n, seed, matrix);
    return (int)cudaGetLastError();
}

extern "C" int cmb_kernel_gather_samples(const void *c, cmb_dtype t, uint64_t rows, uint64_t cols, uint64_t seed,
                                         uint32_t tile, uint32_t count, double *out, void *stream)
{
    if (!count)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = (count + 127) / 128;
    if (t == CMB_F64)
        gather<double><<<g, 128, 0, s>>>((const double *)c, rows, cols, seed, tile, count, out);
    else
        gather<float><<<g, 128, 0, s>>>((const float *)c, rows, cols, seed, tile, count, out);
    return (int)cudaGetLastError();
}
