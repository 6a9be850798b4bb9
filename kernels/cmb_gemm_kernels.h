/* cmb_gemm_kernels.h - kernels of the gemm-chunked scenario: random matrix
 * panels (cmb_hash.h values, so the host can recompute any entry) and the
 * gather of sampled result entries. Launchers return a cudaError_t as int. */
#ifndef CMB_GEMM_KERNELS_H
#define CMB_GEMM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cmb_dtype { CMB_F32 = 0, CMB_F64 = 1 } cmb_dtype;

/* Fills a column-major rows x cols panel (leading dimension rows) with the
 * entries (row0 + i, col0 + j) of the n x n matrix `matrix` under `seed`:
 * value = cmb_unit(cmb_hash3(seed, matrix, gi * n + gj)). */
int cmb_kernel_fill_panel(void *p, cmb_dtype t, uint64_t rows, uint64_t cols, uint64_t row0, uint64_t col0,
                          uint64_t n, uint64_t seed, uint32_t matrix, void *stream);

/* out[k] = C[i + j * rows] for the `count` positions cmb_sample_pos(seed,
 * tile, k, rows, cols) gives, as doubles. */
int cmb_kernel_gather_samples(const void *c, cmb_dtype t, uint64_t rows, uint64_t cols, uint64_t seed,
                              uint32_t tile, uint32_t count, double *out, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CMB_GEMM_KERNELS_H */
