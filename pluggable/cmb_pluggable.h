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
 *   CMB_PROFILE     "1": at exit, the host time of the policy's calls and of
 *                   its upstream's driver calls, one line per device
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

/* PyTorch's pair (cudaStream_t is a pointer). Defined in torch_entry.cc.
 * PyTorch passes free the size and stream it recorded at malloc, so these
 * keep no table of their own (but while a trace records). */
CMB_PL_API void *cmb_torch_malloc(size_t size, int device, void *stream);
CMB_PL_API void cmb_torch_free(void *ptr, size_t size, int device, void *stream);

/* PyTorch's other hooks (CUDAPluggableAllocator's set_*_fn, PyTorch 2.11):
 *   set_init_fn             void (int device_count)            cmb_torch_init_fn
 *   set_reset_fn            void ()                            cmb_torch_reset_fn
 *   set_memory_fraction_fn  void (double fraction, int device) cmb_torch_memory_fraction_fn
 *   set_record_stream_fn    void (void *ptr, cudaStream_t)     cmb_torch_record_stream_fn
 *   set_begin_allocate_to_pool, set_end_allocate_to_pool_fn, set_release_pool:
 *     C++ signatures (MempoolId_t, std::function): cmb_torch_begin_allocate_to_pool_fn,
 *     cmb_torch_end_allocate_to_pool_fn, cmb_torch_release_pool_fn in torch_entry.cc,
 *     which throw std::runtime_error where the C calls below fail. */
CMB_PL_API void cmb_torch_init_fn(int device_count);
CMB_PL_API void cmb_torch_reset_fn(void);
CMB_PL_API void cmb_torch_memory_fraction_fn(double fraction, int device);
CMB_PL_API void cmb_torch_record_stream_fn(void *ptr, void *stream);

/* --- streams, graphs, fraction (pl_hooks.c) -------------------------------------------- */

/* Block `ptr` of `device` is used on `stream` too (Tensor.record_stream):
 * when it is freed, it goes back to the policy only after the work
 * enqueued on `stream` by then is done (an event per stream, checked at
 * later allocations, waited for before an allocation fails). 0 or -1. */
CMB_PL_API int cmb_pluggable_record_stream(void *ptr, int device, void *stream);

/* A private pool (PyTorch's MempoolId_t, two 64-bit ids): from begin to the
 * matching end, every allocation on `device` whose stream `filter`
 * accepts (filter NULL: every one) comes from the pool; its blocks are
 * reused only by the pool and its memory returns to the GPU once the pool
 * is released and its last block freed. ctx_free(ctx), when given, is
 * called when the filter is dropped. -1 (with the reason) under a policy
 * that takes no upstream (cuda-async, cub, managed). */
CMB_PL_API int cmb_pluggable_pool_begin(int device, uint64_t id0, uint64_t id1,
                                        int (*filter)(void *ctx, void *stream), void *ctx,
                                        void (*ctx_free)(void *ctx));
CMB_PL_API int cmb_pluggable_pool_end(int device, uint64_t id0, uint64_t id1);
CMB_PL_API int cmb_pluggable_pool_release(int device, uint64_t id0, uint64_t id1);

/* What the policy of `device` may hold: fraction x the device's bytes
 * (after CMB_CAPACITY), as torch.cuda.set_per_process_memory_fraction caps
 * PyTorch's own reserved bytes. Before the device's first allocation it
 * applies when the instance is created. 1 lifts it. 0 or -1. */
CMB_PL_API int cmb_pluggable_set_memory_fraction(double fraction, int device);

/* Each thread keeps up to `bytes` (and 16 blocks) per device of the blocks
 * PyTorch's pair frees, for its own next requests of the same size on the
 * same stream, without the device's lock (docs/pluggable.md, "Thread
 * caches"); 0 (the default, or CMB_THREAD_CACHE) turns it off. 0. */
CMB_PL_API int cmb_pluggable_set_thread_cache(uint64_t bytes);

/* Tests over the sim upstream, whose work completes when issued: while
 * `held`, the events the library records on `stream` stay pending, as on a
 * GPU still running that stream's kernels; releasing completes them. */
CMB_PL_API int cmb_pluggable_sim_hold_stream(void *stream, int held);

/* Tests over the sim upstream: how many calls the library made on `device`
 * that a CUDA stream capture underway forbids (an upstream allocation
 * outside relaxed capture mode, an event recorded, queried or waited for,
 * memory given back to the upstream). -1 when the device has no instance. */
CMB_PL_API int64_t cmb_pluggable_sim_capture_faults(int device);

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

/* PyTorch's graph-pool hooks, with the C++ types torch/csrc/cuda/Module.cpp
 * casts their addresses to (MempoolId_t is this pair; cudaStream_t is
 * CUstream_st *). Defined in torch_entry.cc; C callers use the
 * cmb_pluggable_pool_* calls above. */
#include <functional>
#include <utility>
struct CUstream_st;
extern "C" {
CMB_PL_API void cmb_torch_begin_allocate_to_pool_fn(int device, std::pair<unsigned long long, unsigned long long> id,
                                                    std::function<bool(CUstream_st *)> filter);
CMB_PL_API void cmb_torch_end_allocate_to_pool_fn(int device, std::pair<unsigned long long, unsigned long long> id);
CMB_PL_API void cmb_torch_release_pool_fn(int device, std::pair<unsigned long long, unsigned long long> id);
}
#endif

#endif /* CMB_PLUGGABLE_H */
