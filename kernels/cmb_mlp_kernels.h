/* cmb_mlp_kernels.h - the small kernels of an MLP training step
 * (batch-sweep): the GEMMs go to cuBLAS, these do the rest. Tensors are
 * float32, column-major: a layer's activations are features x batch with
 * leading dimension = features. Launchers return a cudaError_t as int. */
#ifndef CMB_MLP_KERNELS_H
#define CMB_MLP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* p[i] = scale * cmb_unit_f32(cmb_hash3(seed, id, i)): weights and data. */
int cmb_mlp_uniform(float *p, size_t n, float scale, uint64_t seed, uint32_t id, void *stream);

/* z[i + j*rows] += b[i] (Linear's bias). */
int cmb_mlp_add_bias(float *z, const float *b, size_t rows, size_t cols, void *stream);

/* h = max(z, 0). */
int cmb_mlp_relu(float *h, const float *z, size_t n, void *stream);

/* MSE loss, mean over all n entries: dy = 2 (yhat - y) / n, and
 * *loss (a device scalar, zeroed here) = sum (yhat - y)^2 / n. */
int cmb_mlp_mse(float *dy, float *loss, const float *yhat, const float *y, size_t n, void *stream);

/* ReLU backward from the saved output: dz = h > 0 ? dh : 0. */
int cmb_mlp_relu_backward(float *dz, const float *dh, const float *h, size_t n, void *stream);

/* db[i] = sum_j dz[i + j*rows] (Linear's bias gradient). */
int cmb_mlp_bias_grad(float *db, const float *dz, size_t rows, size_t cols, void *stream);

/* Adam (torch.optim.Adam, no weight decay, no amsgrad), step t >= 1. */
int cmb_mlp_adam(float *w, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                 float eps, int t, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CMB_MLP_KERNELS_H */
