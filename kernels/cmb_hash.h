/* cmb_hash.h - counter-based random numbers that the host and the device
 * compute bit for bit alike.
 *
 * Element `index` of stream `stream` under `seed` is a pure function of the
 * three (splitmix64's finalizer applied twice), so a kernel can fill a
 * matrix panel anywhere in a large matrix and the host can recompute any
 * single entry for a reference check without copying the matrix back. The
 * conversions to [-1, 1) are exact: 53 random bits for double, 24 for float.
 */
#ifndef CMB_HASH_H
#define CMB_HASH_H

#include <stdint.h>

#ifdef __CUDACC__
#define CMB_HD static __host__ __device__ __forceinline__
#else
#define CMB_HD static inline
#endif

CMB_HD uint64_t cmb_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

CMB_HD uint64_t cmb_hash3(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint64_t key = cmb_mix64(seed + 0x9E3779B97F4A7C15ull * (stream + 1));
    return cmb_mix64(key ^ (index * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull));
}

/* Uniform in [-1, 1), exactly representable. */
CMB_HD double cmb_unit_f64(uint64_t h)
{
    return (double)((int64_t)(h >> 11) - ((int64_t)1 << 52)) * 0x1p-52;
}

CMB_HD float cmb_unit_f32(uint64_t h)
{
    return (float)((int32_t)(uint32_t)(h >> 40) - (1 << 23)) * 0x1p-23f;
}

/* Sample k of tile `tile` in a rows x cols tile: the entry the GEMM check
 * reads, chosen on the device and recomputed on the host. */
CMB_HD void cmb_sample_pos(uint64_t seed, uint32_t tile, uint32_t k, uint64_t rows, uint64_t cols,
                           uint64_t *i, uint64_t *j)
{
    uint64_t h = cmb_hash3(seed, 0x5a5a0000ull + tile, k);
    *i = (h & 0xffffffffull) % rows;
    *j = (h >> 32) % cols;
}

#endif /* CMB_HASH_H */
