/* cmb_kernels.h - the CUDA kernels scenarios launch, behind a C API.
 * Every launcher returns a cudaError_t value as int (0 = success) and checks
 * the launch itself; completion errors surface at the next synchronization. */
#ifndef CMB_KERNELS_H
#define CMB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes `pattern` into every 32-bit word of [ptr, ptr+bytes) (bytes is
 * rounded down to 4): proves the memory is real and writable. */
int cmb_kernel_fill_u32(void *ptr, size_t bytes, uint32_t pattern, void *stream);

/* Counts words of [ptr, ptr+bytes) that differ from pattern into *mismatches
 * (a device counter; host reads it after a sync). */
int cmb_kernel_check_u32(const void *ptr, size_t bytes, uint32_t pattern,
                         unsigned long long *device_mismatches, void *stream);

/* One block that spins for `ns` nanoseconds of GPU time (globaltimer),
 * to keep a stream busy. */
int cmb_kernel_spin(uint64_t ns, void *stream);

/* Tests only (scenarios/planted.c): writes through an unmapped address, so
 * the next synchronization fails with an illegal address (sticky). */
int cmb_kernel_planted_bad_write(void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CMB_KERNELS_H */
