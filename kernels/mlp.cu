/* mlp.cu - elementwise and reduction kernels of the MLP training step. */
#include <cuda_runtime.h>

#include "cmb_hash.h"
#include "cmb_mlp_kernels.h"

namespace {

unsigned grid_for(size_t n)
{
    size_t blocks = (n + 255) / 256;
    return (unsigned)(blocks > 16384 ? 16384 : (blocks ? blocks : 1));
}

#define GRID_STRIDE(i, n) \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__global__ void uniform(float *p, size_t n, float scale, uint64_t seed, uint32_t id)
{
    GRID_STRIDE(i, n)
    p[i] = scale * cmb_unit_f32(cmb_hash3(seed, id, i));
}

__global__ void add_bias(float *z, const float *b, size_t rows, size_t n)
{
    GRID_STRIDE(i, n)
    z[i] += b[i % rows];
}

__global__ void relu(float *h, const float *z, size_t n)
{
    GRID_STRIDE(i, n)
    h[i] = z[i] > 0.f ? z[i] : 0.f;
}

__global__ void mse(float *dy, float *loss, const float *yhat, const float *y, size_t n)
{
    __shared__ float part[256];
    float local = 0.f, inv_n = 1.f / (float)n;
    GRID_STRIDE(i, n)
    {
        float d = yhat[i] - y[i];
        dy[i] = 2.f * d * inv_n;
        local += d * d;
    }
    part[threadIdx.x] = local;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s; s >>= 1) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(loss, part[0] * inv_n);
}

__global__ void relu_backward(float *dz, const float *dh, const float *h, size_t n)
{
    GRID_STRIDE(i, n)
    dz[i] = h[i] > 0.f ? dh[i] : 0.f;
}

/* Each block sums a slab of columns for every row; threads walk the rows
 * so that reads are coalesced. */
#define BIAS_COLS_PER_BLOCK 1024

__global__ void bias_grad(float *db, const float *dz, size_t rows, size_t cols)
{
    size_t j0 = (size_t)blockIdx.x * BIAS_COLS_PER_BLOCK;
    size_t j1 = j0 + BIAS_COLS_PER_BLOCK < cols ? j0 + BIAS_COLS_PER_BLOCK : cols;
    for (size_t i = threadIdx.x; i < rows; i += blockDim.x) {
        float s = 0.f;
        for (size_t j = j0; j < j1; j++)
            s += dz[i + j * rows];
        atomicAdd(&db[i], s);
    }
}

__global__ void adam(float *w, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                     float eps, float bc1, float bc2)
{
    GRID_STRIDE(i, n)
    {
        float gi = g[i];
        float mi = beta1 * m[i] + (1.f - beta1) * gi;
        float vi = beta2 * v[i] + (1.f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        w[i] -= lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
    }
}

} // namespace

extern "C" int cmb_mlp_uniform(float *p, size_t n, float scale, uint64_t seed, uint32_t id, void *stream)
{
    uniform<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(p, n, scale, seed, id);
    return (int)cudaGetLastError();
}

extern "C" int cmb_mlp_add_bias(float *z, const float *b, size_t rows, size_t cols, void *stream)
{
    add_bias<<<grid_for(rows * cols), 256, 0, (cudaStream_t)stream>>>(z, b, rows, rows * cols);
    return (int)cudaGetLastError();
}

extern "C" int cmb_mlp_relu(float *h, const float *z, size_t n, void *stream)
{
    relu<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(h, z, n);
    return (int)cudaGetLastError();
}

extern "C" int cmb_mlp_mse(float *dy, float *loss, const float *yhat, const float *y, size_t n, void *stream)
{
    cudaError_t e = cudaMemsetAsync(loss, 0, sizeof *loss, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return (int)e;
    mse<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(dy, loss, yhat, y, n);
    return (int)cudaGetLastError();
}

extern "C" int cmb_mlp_relu_backward(float *dz, const float *dh, const float *h, size_t n, void *stream)
{
    relu_backward<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(dz, dh, h, n);
    return (int)cudaGetLastError();
}

extern "C" int cmb_mlp_bias_grad(float *db, const float *dz, size_t rows, size_t cols, void *stream)
{
    cudaError_t e = cudaMemsetAsync(db, 0, rows * sizeof *db, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return (int)e;
    size_t blocks = (cols + BIAS_COLS_PER_BLOCK - 1) / BIAS_COLS_PER_BLOCK;
    unsigned threads = rows >= 256 ? 256 : (unsigned)((rows + 31) / 32 * 32);
    bias_grad<<<(unsigned)(blocks ? blocks : 1), threads, 0, (cudaStream_t)stream>>>(db, dz, rows, cols);
    return (int)cudaGetLastError();
}

extern "C" int cmb_mlp_adam(float *w, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                            float beta2, float eps, int t, void *stream)
{
    float bc1 = 1.f - powf(beta1, (float)t), bc2 = 1.f - powf(beta2, (float)t);
    adam<<<grid_for(n), 256, 0, (cudaStream_t)stream>>>(w, g, m, v, n, lr, beta1, beta2, eps, bc1, bc2);
    return (int)cudaGetLastError();
}
