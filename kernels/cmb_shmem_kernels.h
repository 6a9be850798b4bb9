/* cmb_shmem_kernels.h - a kernel with a chosen amount of dynamic shared
 * memory (shared-mem scenario), and the occupancy queries around it.
 * Calls return a cudaError_t as int. */
#ifndef CMB_SHMEM_KERNELS_H
#define CMB_SHMEM_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest dynamic shared memory a block may opt in to on `device`
 * (cudaDevAttrMaxSharedMemoryPerBlockOptin; 227 KiB on H100). */
int cmb_smem_max_optin(int device, size_t *bytes);

/* Raises cudaFuncAttributeMaxDynamicSharedMemorySize of the staging kernel
 * to `smem` bytes (needed above 48 KiB). */
int cmb_smem_configure(size_t smem);

/* Resident blocks per SM of the staging kernel at `threads` x `smem`
 * (cudaOccupancyMaxActiveBlocksPerMultiprocessor). */
int cmb_smem_occupancy(int threads, size_t smem, int *blocks_per_sm);

/* One pass over buf[0..n): every block stages tiles of smem/4 floats
 * through shared memory (reversed within the tile, scaled), or, with smem
 * = 0, scales in place from registers. */
int cmb_smem_stage(float *buf, size_t n, size_t smem, int threads, int blocks, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CMB_SHMEM_KERNELS_H */
