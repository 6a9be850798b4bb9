/* pl_internal.h - state shared by the files of libcmb_pluggable (private).
 *
 * Lock order: the global lock (configuration, instance creation, trace
 * start/stop) before a device's lock; the allocation paths take only the
 * device's lock.
 */
#ifndef CMB_PL_INTERNAL_H
#define CMB_PL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../allocators/cmb_allocator.h"
#include "../allocators/policy.h"
#include "../common/cmb_hashmap.h"
#include "../traces/trace.h"
#include "cmb_pluggable.h"

#define PL_ERR_LEN 512

enum { PL_NONE = 0, PL_READY = 1, PL_FAILED = -1 };

/* A live block: what a free needs that CuPy does not pass (size, stream),
 * and whether the current trace saw its allocation. PyTorch passes size
 * and stream to free, so its blocks enter the table only while a trace
 * records (pl_keep). */
typedef struct pl_slot {
    uint64_t size;
    uint32_t stream_id;
    uint32_t trace_gen; /* 0: allocated while no trace was recording */
} pl_slot;

/* --- record_stream, deferred frees, graph pools (pl_hooks.c) --- */

/* The foreign streams a live block was used on (Tensor.record_stream). */
typedef struct pl_use {
    uint32_t n, cap;
    void **streams;
} pl_use;

struct pl_pool;
typedef struct pl_tcache pl_tcache;

/* A block freed while work of its foreign streams may still read it: it
 * goes back to the policy (or its pool) once every event completed. */
typedef struct pl_deferred {
    void *ptr;
    uint64_t size;
    void *stream; /* the allocation's stream, passed to deallocate */
    struct pl_pool *pool;
    pl_use *uses;       /* the streams whose work it waits for */
    void **events;      /* NULL while a capture defers the recording itself */
} pl_deferred;

/* A CUDA graph's private pool (PyTorch's MempoolId_t): an instance of the
 * device's policy over a child of its upstream (one memory, one cap),
 * serving only the pool's allocations, closed when the pool is released
 * and empty. Where no second instance opens, segments from the device's
 * upstream, reused only by the pool's requests of the same rounded size. */
typedef struct pl_pool_block {
    void *ptr;
    uint64_t size; /* rounded */
    int live;
} pl_pool_block;

typedef struct pl_pool {
    uint64_t id0, id1;
    int active;   /* begins not yet ended: allocations that pass the filter come here */
    int released; /* PyTorch released it: segments go back once no block is live */
    int (*filter)(void *ctx, void *stream);
    void *filter_ctx;
    void (*filter_free)(void *ctx);
    cmb_policy pol; /* pol.state NULL: not opened (yet), or segments */
    int segments;   /* no instance would open: the segment pool below */
    pl_pool_block *blocks;
    uint32_t n_blocks, cap_blocks, n_live;
    cmb_hashmap index; /* ptr -> index in blocks; with an instance, ptr -> size of a live block */
    uint64_t reserved, allocated;
    struct pl_pool *next;
} pl_pool;

typedef struct pl_device {
    _Atomic int state;
    pthread_mutex_t lock;
    int ordinal;
    int real; /* on a GPU: device guard and cudaMemGetInfo sampling */
    int guard; /* real with more than one device visible: the guard around each call */
    char spec[512];
    const cmb_allocator_methods *m;
    void *policy;
    cmb_upstream *up; /* NULL for allocators that take none */

    /* live blocks: pointer -> slot index */
    cmb_hashmap live;
    pl_slot *slots;
    uint32_t n_slots, cap_slots;
    uint32_t *free_slots;
    uint32_t n_free_slots;

    /* streams in order of first use; id 0 is the legacy default (NULL) */
    cmb_hashmap stream_ids; /* handle -> id, non-NULL handles only */
    void **streams;
    uint32_t n_streams, cap_streams;
    int null_stream_used;

    /* counters kept by the library itself */
    cmb_stat_count requested, blocks;
    int64_t allocs, frees, ooms, bad_frees;
    _Atomic int64_t device_used_peak;
    int64_t free_at_create, total;
    /* peaks since the last reset (see pl_stats.c) */
    int peaks_reset;
    int64_t allocated_base, reserved_base;   /* the policy's all-time peaks at the reset */
    int64_t allocated_since, reserved_since; /* highest seen after an allocation since */

    /* record_stream and graph pools (pl_hooks.c), under the device's lock;
     * the fast path reads only the atomics and the counts. */
    cmb_hashmap uses;          /* ptr -> pl_use* (heap), blocks used on other streams */
    pl_deferred *deferred;
    uint32_t n_deferred, cap_deferred;
    _Atomic int pools_active;  /* captures or MemPool contexts routing allocations */
    pl_pool *pools;
    cmb_hashmap pool_of;       /* ptr -> pl_pool*, blocks of private pools (live or not) */
    uint64_t pools_reserved, pools_allocated;
    uint64_t pools_direct;     /* of pools_reserved, cudaMalloc'd beside the upstream (vmm) */
    uint64_t pools_own;        /* held by the pools' instances (children of up, not in its held bytes) */
    uint64_t pool_trims;       /* policy trims a pool's allocation asked for */
    double fraction;           /* set_per_process_memory_fraction, 0: none */
    uint64_t capacity;          /* CMB_CAPACITY when the instance was made (0: none) */
    int64_t total_unfractioned; /* the device's bytes before the fraction (after CMB_CAPACITY) */
    _Atomic int pools_n;       /* private pools that exist (the thread caches stand aside) */
    _Atomic int uses_n;        /* blocks with a record_stream use */
    _Atomic int tracing;       /* a trace records this device */
    /* CMB_PROFILE: host time in the policy's calls (under the lock) and in
     * the device sampling after a growth (outside it), printed at exit */
    int profile;
    uint64_t prof_alloc_n, prof_alloc_ns, prof_free_n, prof_free_ns;
    _Atomic uint64_t prof_sample_n, prof_sample_ns;
    pl_tcache *tcaches;        /* the threads' caches (pl_tcache.c) */
    _Atomic int64_t capture_faults; /* sim: calls a capture underway forbids (tests) */
    /* the last stream seen and its id: most programs use one or two */
    void *last_stream;
    uint32_t last_sid;

    /* trace recording (pl_trace.c), under the device's lock */
    cmb_trace_writer *trace;
    uint32_t trace_gen;
    int bad_free_reports;
} pl_device;

/* --- pluggable.c -------------------------------------------------------------- */

extern pl_device _cmb_pl_devices[CMB_PLUGGABLE_MAX_DEVICES];
extern pthread_mutex_t _cmb_pl_global_lock;

/* The hidden entry points the exported pairs call. `keep`: the caller
 * will not pass size and stream to free (CuPy, the generic pair), so the
 * block enters the table; PyTorch's pair passes them. */
void *_cmb_pl_malloc(size_t size, int device, void *stream, int keep);
/* `stream` NULL with size 0: as allocated (looked up in the table). */
void _cmb_pl_free(void *ptr, size_t size, int device, void *stream, int known);
/* The device's instance, created on first use; NULL after printing why. */
pl_device *_cmb_pl_get_device(int device);
/* Gives a block back to the policy (device lock held): the end of every
 * free, deferred or not. */
int _cmb_pl_release_locked(pl_device *d, void *ptr, uint64_t size, void *stream); /* 0, or -1: refused (counted) */
/* The one-line account of an allocation that failed (device lock held). */
void _cmb_pl_report_oom(pl_device *d, size_t size, int status, const char *extra);
/* Non-zero when CMB_TORCH_OOM=raise. */
int _cmb_pl_torch_raises(void);

/* The spec every device's policy was created from (a graph pool opens
 * another instance of it). */
const cmb_alloc_spec *_cmb_pl_spec(void);
/* Records a failure as the last error; prints it on stderr when `print`. */
void _cmb_pl_error(int print, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The device if its instance exists, else NULL (never creates it). */
pl_device *_cmb_pl_ready(int device);

/* --- pl_hooks.c ----------------------------------------------------------------- */

/* In the allocation path (lock held): deferred frees whose events completed
 * go back to the policy. `wait`: synchronize with every pending event first
 * (before the retry of an allocation that failed). */
void _cmb_pl_collect_deferred(pl_device *d, int wait);
/* In the free path (lock held): 1 when the block was used on another stream
 * and its free is deferred, 0 when it may go back now. */
int _cmb_pl_defer_free(pl_device *d, void *ptr, uint64_t size, void *stream);
/* A private pool's allocation when one is routing (lock held): 1 with *out
 * set (NULL: out of memory), 0 when no pool takes it. */
int _cmb_pl_pool_alloc(pl_device *d, size_t size, void *stream, void **out);
/* 1 when ptr is a pool's block and went back to it (lock held). */
int _cmb_pl_pool_free(pl_device *d, void *ptr, void *stream);
/* A pending fraction set before the device's instance existed: the cap it
 * gives on an upstream of `total` bytes (0: none). */
uint64_t _cmb_pl_fraction_cap(int device, uint64_t total);

/* Events for record_stream: real CUDA events on a GPU; over the sim
 * upstream, events that stay pending while their stream is held
 * (cmb_pluggable_sim_hold_stream), the sim's model of unfinished work. */
int _cmb_pl_event_record(pl_device *d, void *stream, void **ev);
int _cmb_pl_event_done(pl_device *d, void *ev);   /* 1 done, 0 pending */
void _cmb_pl_event_wait(pl_device *d, void *ev);
void _cmb_pl_event_destroy(pl_device *d, void *ev);

/* While a capture is underway (pools_active), the upstream calls of the
 * calling thread run in relaxed capture mode: _cmb_pl_relax returns the
 * mode to restore (PL_NO_MODE when nothing changed). Over the sim upstream
 * the mode is the thread's own flag, and a call the capture would forbid
 * (an upstream call outside relaxed mode, an event, a free of memory) is
 * counted in capture_faults, which the tests read. */
#define PL_NO_MODE (-1)
int _cmb_pl_relax(pl_device *d);
void _cmb_pl_unrelax(pl_device *d, int mode);
/* Counts a call a capture forbids, when one is underway (sim only).
 * `relaxed_ok`: relaxed mode allows it (an upstream allocation). */
void _cmb_pl_capture_check(pl_device *d, int relaxed_ok);

/* --- pl_tcache.c ----------------------------------------------------------------- */

extern _Atomic uint64_t _cmb_pl_tc_limit;
/* A block of exactly `size` on `stream` from the calling thread's cache, or
 * NULL (no lock of the device taken). */
void *_cmb_pl_tc_get(pl_device *d, size_t size, void *stream);
/* 1 when the calling thread's cache kept the freed block. */
int _cmb_pl_tc_put(pl_device *d, void *ptr, size_t size, void *stream);
/* Every thread's cached blocks back to the policy (device lock held). */
void _cmb_pl_tc_flush_locked(pl_device *d);
typedef struct pl_tc_sums {
    int64_t allocs, frees, requested, blocks, held;
} pl_tc_sums;
void _cmb_pl_tc_sum_locked(pl_device *d, pl_tc_sums *out);

/* --- pl_stats.c ------------------------------------------------------------------ */

/* After a successful allocation, under the device's lock: 1 when the
 * reservation grew (the caller samples the device after the lock). */
int _cmb_pl_after_alloc(pl_device *d, int64_t held_before);
/* cudaMemGetInfo into device_used_peak, outside every lock. */
void _cmb_pl_sample_device(pl_device *d);
void _cmb_pl_fill_stats(pl_device *d, cmb_pluggable_memstats *out);
void _cmb_pl_reset_peaks_locked(pl_device *d);

/* --- pl_trace.c ------------------------------------------------------------------- */

/* The generation of the recording in progress, 0 when none. Read under a
 * device's lock; changed under the global lock and every device's lock. */
extern uint32_t _cmb_pl_trace_gen;
int _cmb_pl_trace_open(pl_device *d, char *err, size_t errlen);
void _cmb_pl_trace_alloc(pl_device *d, const void *ptr, uint64_t size, uint32_t stream_id);
void _cmb_pl_trace_free(pl_device *d, const void *ptr, uint32_t stream_id);
int _cmb_pl_trace_close(pl_device *d, char *err, size_t errlen);
/* At exit: writes every trace in place without waiting for a busy device. */
void _cmb_pl_trace_finish_at_exit(void);

/* --- pl_cuda.c (the only file that calls the CUDA runtime itself) ------------------ */

/* Makes `device` current; *saved is the device to go back to, -1 when it
 * already was. 0, or -1 with a reason. */
int _cmb_pl_enter(int device, int *saved, char *err, size_t errlen);
void _cmb_pl_leave(int saved);
/* The number of devices visible to the process (0 when the runtime cannot say). */
int _cmb_pl_device_count(void);
/* Clears the calling thread's last CUDA error after one of the library's
 * own calls failed, so the host's next cudaGetLastError (PyTorch's launch
 * check) does not report it as its own. Sticky errors stay, as they must. */
void _cmb_pl_clear_error(void);
/* CUDA events on the current device (timing disabled): 0 or -1. */
int _cmb_pl_cuda_event_record(void *stream, void **ev);
int _cmb_pl_cuda_event_done(void *ev);
void _cmb_pl_cuda_event_wait(void *ev);
void _cmb_pl_cuda_event_destroy(void *ev);
/* The device a stream belongs to (the current device for the legacy
 * stream or when the runtime cannot say). */
int _cmb_pl_stream_device(void *stream);
/* The calling thread's capture mode set to relaxed: the mode to give back
 * to _cmb_pl_capture_restore (-1: unchanged). */
int _cmb_pl_capture_relax(void);
void _cmb_pl_capture_restore(int mode);
/* cudaMalloc / cudaFree on the current device (graph pools over vmm): 0 or -1. */
int _cmb_pl_cuda_malloc(size_t size, void **ptr);
void _cmb_pl_cuda_free(void *ptr);
/* cudaMemGetInfo on the current device: 0 or -1. */
int _cmb_pl_mem_info(int64_t *free_bytes, int64_t *total_bytes);
/* The name of the current device ("" when unknown), for trace comments. */
void _cmb_pl_device_name(int device, char *out, size_t outlen);

#endif /* CMB_PL_INTERNAL_H */
