/* cmb_pluggable.h - the suite's allocation policies inside a real program.
 *
 * libcmb_pluggable.so serves a host program's device allocations with any
 * allocator of the registry (the same spec as `cumembench --allocator`,
 * e.g. "bfc@cuda", "torch-caching:max_split_size_mb=128@cuda",
 * "rmm-pool@vmm") over the real cuda or vmm upstream, and keeps the
 * statistics a pluggable allocator otherwise loses. It exports
 *
 *   - PyTorch's CUDAPluggableAllocator pair (torch/csrc/cuda/
 *     CUDAPluggableAllocator.cpp, PyTorch 2.x: std::function<void*(size_t,
 *     int, cudaStream_t)> and std::function<void(void*, size_t, int,
 *     cudaStream_t)>): cmb_torch_malloc, cmb_torch_free;
 *   - CuPy's CFunctionAllocator pair (cupy/cuda/memory.pyx: malloc
 *     void*(void *param, size_t size, int device), free void(void *param,
 *     void *ptr, int device)): cmb_cupy_malloc, cmb_cupy_free;
 *   - a generic pair, statistics, peak reset, empty-cache and trace
 *     recording in the suite's format (traces/FORMAT.md).
 *
 * One policy instance per device, created on the device's first
 * allocation; every call on a device holds that device's mutex, so the
 * host may call from any thread. Environment, read once at the first call
 * (cmb_pluggable_configure replaces CMB_ALLOCATOR; a malformed value of the
 * others refuses every use):
 *   CMB_ALLOCATOR   the policy spec (required without configure)
 *   CMB_CAPACITY    cap on what each device's policy may hold (e.g. 8GiB;
 *                   units as --capacity: 64MB is refused as ambiguous;
 *                   at most 1TiB)
 *   CMB_TRACE       record the traffic to this file ({device} is replaced
 *                   by the ordinal; devices other than 0 get .devN without it)
 *   CMB_TORCH_OOM   "null" (default): cmb_torch_malloc returns NULL when out
 *                   of memory; "raise": it throws a C++ std::runtime_error,
 *                   which PyTorch turns into a Python RuntimeError
 * Failures never abort the host: each gets one line on stderr and a NULL
 * return from the allocation entry points; cmb_pluggable_last_error() has
 * the text. Nothing here links libcuda (driver entry points come through
 * cudaGetDriverEntryPoint) and the CUDA runtime is the process's shared
 * libcudart (docs/pluggable.md says why).
 */
#ifndef CMB_PLUGGABLE_H
#define CMB_PLUGGABLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CMB_PLUGGABLE_BUILD)
#define CMB_PL_API __attribute__((visibility("default")))
#else
#define CMB_PL_API
#endif

/* Bumped on any incompatible change of the API or of the struct below. */
#define CMB_PLUGGABLE_ABI_VERSION 1

/* Most devices one process may use through the library. */
#define CMB_PLUGGABLE_MAX_DEVICES 64

/* --- statistics ------------------------------------------------------------ */

/* One device's counters. Peaks are since the instance was created or since
 * the last cmb_pluggable_reset_peaks(). Bytes are int64 so a Python reader
 * needs no unsigned handling. */
typedef struct cmb_pluggable_memstats {
    uint32_t struct_size;          /* sizeof(cmb_pluggable_memstats)           */
    uint32_t valid;                /* the policy's CMB_STAT_* bits (cmb_allocator.h) */
    int32_t device;
    int32_t active;                /* 1 once the device's instance exists      */
    int64_t requested_current;     /* sum of live request sizes (the library's own count) */
    int64_t requested_peak;
    int64_t allocated_current;     /* live blocks after the policy's rounding  */
    int64_t allocated_peak;
    int64_t reserved_current;      /* what the policy holds from its upstream  */
    int64_t reserved_peak;
    int64_t blocks_current;        /* live blocks                              */
    int64_t blocks_peak;
    int64_t segments_current;      /* upstream requests outstanding: allocations + mappings not returned */
    int64_t largest_free;          /* largest free block inside the reservation */
    int64_t upstream_allocs;       /* upstream calls that took memory (cudaMalloc, cuMemMap) */
    int64_t upstream_frees;        /* upstream calls that returned memory      */
    int64_t oom_retries;           /* retries after releasing cached memory    */
    int64_t allocs;                /* successful allocations                   */
    int64_t frees;                 /* successful frees                         */
    int64_t ooms;                  /* allocations refused (out of memory or a CUDA error) */
    int64_t bad_frees;             /* frees of pointers the library never gave out (ignored) */
    int64_t streams;               /* distinct streams seen                    */
    int64_t device_used_peak;      /* device bytes in use (cudaMemGetInfo), sampled whenever
                                      reserved grew; 0 over the sim upstream or without one */
    int64_t device_free_at_create; /* the upstream's free bytes when the instance was made */
    int64_t device_total;          /* the upstream's total bytes (after CMB_CAPACITY) */
} cmb_pluggable_memstats;

/* --- set-up ------------------------------------------------------------------ */

CMB_PL_API int cmb_pluggable_abi_version(void);
CMB_PL_API size_t cmb_pluggable_memstats_size(void);

/* Chooses the policy for devices whose instance does not exist yet (call it
 * before the first allocation). The spec is parsed and its options checked
 * now. 0, or -1 with the reason in cmb_pluggable_last_error(); prints
 * nothing. The sim upstream (@sim: addresses with no memory behind them) is
 * refused unless CMB_PLUGGABLE_ALLOW_SIM=1 is set: it exists for tests. */
CMB_PL_API int cmb_pluggable_configure(const char *spec);

/* Cap (bytes, 0 = none, at most 1TiB) on what each policy created later
 * may hold: a smaller GPU, as --capacity does for the suite. 0 or -1.
 * A request above 256TiB is refused under every policy (NULL, with the
 * reason in cmb_pluggable_last_error). */
CMB_PL_API int cmb_pluggable_set_capacity(uint64_t bytes);

/* What cmb_torch_malloc does when it cannot allocate: 0 returns NULL (the
 * default), 1 throws std::runtime_error (see torch_entry.cc). Overrides
 * CMB_TORCH_OOM. 0 or -1. */
CMB_PL_API int cmb_pluggable_set_torch_oom(int raise);

/* The spec in use ("" before any), and the text of the last failure. */
CMB_PL_API const char *cmb_pluggable_spec(void);
CMB_PL_API const char *cmb_pluggable_last_error(void);

/* --- allocation ---------------------------------------------------------------- */

/* NULL for size 0 (as PyTorch's and CuPy's own allocators) and on failure. */
CMB_PL_API void *cmb_pluggable_malloc(size_t size, int device, void *stream);
/* `size` 0 means "as allocated"; a pointer the library never gave out is
 * counted in bad_frees and ignored. */
CMB_PL_API void cmb_pluggable_free(void *ptr, size_t size, int device, void *stream);

/* CuPy's CFunctionAllocator pair. CuPy passes no stream, so `param` is the
 * stream to allocate on (a cupy Stream's .ptr; NULL: the legacy default
 * stream); a free goes back to the stream its block was allocated on. */
CMB_PL_API void *cmb_cupy_malloc(void *param, size_t size, int device);
CMB_PL_API void cmb_cupy_free(void *param, void *ptr, int device);

/* PyTorch's pair (cudaStream_t is a pointer). Defined in torch_entry.cc. */
CMB_PL_API void *cmb_torch_malloc(size_t size, int device, void *stream);
CMB_PL_API void cmb_torch_free(void *ptr, size_t size, int device, void *stream);

/* --- statistics and control ------------------------------------------------------ */

/* Fills *out (out->struct_size must hold sizeof(cmb_pluggable_memstats)).
 * A device without an instance yet reads as all zeros with active = 0.
 * 0, or -1 for a bad device ordinal or struct size. */
CMB_PL_API int cmb_pluggable_stats(int device, cmb_pluggable_memstats *out);
/* Peaks := current values, on one device or on every device (-1). */
CMB_PL_API int cmb_pluggable_reset_peaks(int device);
/* Returns cached memory to the upstream (the policy's empty_cache); -1 = all. */
CMB_PL_API int cmb_pluggable_empty_cache(int device);

/* Records every later allocation and free (per device, see CMB_TRACE) in
 * the suite's trace format; blocks allocated before the start are not
 * recorded, nor their frees. Streams are numbered in order of first use,
 * 0 being the legacy default stream. stop writes the files into place
 * (they appear under their names only when complete). 0 or -1. */
CMB_PL_API int cmb_pluggable_trace_start(const char *path);
CMB_PL_API int cmb_pluggable_trace_stop(void);

#ifdef __cplusplus
}
#endif

#endif /* CMB_PLUGGABLE_H */
