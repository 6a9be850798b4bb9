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
#include "../common/cmb_hashmap.h"
#include "../traces/trace.h"
#include "cmb_pluggable.h"

#define PL_ERR_LEN 512

enum { PL_NONE = 0, PL_READY = 1, PL_FAILED = -1 };

/* A live block: what a free needs that CuPy does not pass (size, stream),
 * and whether the current trace saw its allocation. */
typedef struct pl_slot {
    uint64_t size;
    uint32_t stream_id;
    uint32_t trace_gen; /* 0: allocated while no trace was recording */
} pl_slot;

typedef struct pl_device {
    _Atomic int state;
    pthread_mutex_t lock;
    int ordinal;
    int real; /* on a GPU: device guard and cudaMemGetInfo sampling */
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
    int64_t device_used_peak, free_at_create, total;
    /* peaks since the last reset (see pl_stats.c) */
    int peaks_reset;
    int64_t allocated_base, reserved_base;   /* the policy's all-time peaks at the reset */
    int64_t allocated_since, reserved_since; /* highest seen after an allocation since */

    /* trace recording (pl_trace.c), under the device's lock */
    cmb_trace_writer *trace;
    uint32_t trace_gen;
    int bad_free_reports;
} pl_device;

/* --- pluggable.c -------------------------------------------------------------- */

extern pl_device _cmb_pl_devices[CMB_PLUGGABLE_MAX_DEVICES];
extern pthread_mutex_t _cmb_pl_global_lock;

/* The hidden entry points the exported pairs call. */
void *_cmb_pl_malloc(size_t size, int device, void *stream);
void _cmb_pl_free(void *ptr, size_t size, int device);
/* Non-zero when CMB_TORCH_OOM=raise. */
int _cmb_pl_torch_raises(void);

/* Records a failure as the last error; prints it on stderr when `print`. */
void _cmb_pl_error(int print, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The device if its instance exists, else NULL (never creates it). */
pl_device *_cmb_pl_ready(int device);

/* --- pl_stats.c ------------------------------------------------------------------ */

/* After a successful allocation, under the device's lock. */
void _cmb_pl_after_alloc(pl_device *d, int64_t held_before);
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
/* Clears the calling thread's last CUDA error after one of the library's
 * own calls failed, so the host's next cudaGetLastError (PyTorch's launch
 * check) does not report it as its own. Sticky errors stay, as they must. */
void _cmb_pl_clear_error(void);
/* cudaMemGetInfo on the current device: 0 or -1. */
int _cmb_pl_mem_info(int64_t *free_bytes, int64_t *total_bytes);
/* The name of the current device ("" when unknown), for trace comments. */
void _cmb_pl_device_name(int device, char *out, size_t outlen);

#endif /* CMB_PL_INTERNAL_H */
