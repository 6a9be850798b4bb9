/* cmb_upstream.h - where allocation policies take their memory from.
 *
 * An upstream is one of
 *   cuda - cudaMalloc / cudaFree on the current device;
 *   vmm  - CUDA virtual memory management: cuMemAddressReserve, cuMemCreate,
 *          cuMemMap, cuMemSetAccess at the device's granularity;
 *   sim  - a deterministic simulated device of a given capacity: an address
 *          space model and exact byte accounting, no memory behind it.
 *
 * Every upstream goes through one accounting layer (upstream.c) that keeps
 * current/peak/total held bytes and applies fault injection: fail the Nth
 * request, fail every Kth, fail at random with a fixed seed, cap capacity.
 * A policy sees the same API whichever upstream is below it, and its
 * "reserved" bytes are exactly the upstream's held bytes.
 *
 * This header is part of the plug-in ABI (see cmb_allocator.h): the calls
 * below go through function pointers, so a plug-in needs no symbols from
 * the cumembench binary.
 */
#ifndef CMB_UPSTREAM_H
#define CMB_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- status codes ------------------------------------------------------ */

typedef enum cmb_status {
    CMB_OK = 0,
    CMB_ERR_OOM = 1,          /* the request cannot be served: out of memory   */
    CMB_ERR_INVALID = 2,      /* bad argument (size 0 where refused, bad ptr)  */
    CMB_ERR_UNSUPPORTED = 3,  /* the operation or upstream is not supported    */
    CMB_ERR_CUDA = 4,         /* a CUDA call failed (not an OOM)               */
    CMB_ERR_HOST_NOMEM = 5,   /* host malloc failed                            */
    CMB_ERR_NOT_FOUND = 6,    /* unknown name, pointer or file                 */
    CMB_ERR_IO = 7,           /* read or write failed                          */
    CMB_ERR_PARSE = 8,        /* malformed input                               */
    CMB_ERR_STATE = 9         /* operation not valid in the current state      */
} cmb_status;

const char *cmb_status_str(cmb_status s);

/* --- streams ------------------------------------------------------------ */

/* A stream handle: a cudaStream_t on a GPU, a small integer in sim mode.
 * Policies only compare it for equality and hand it back to the upstream. */
typedef struct cmb_stream_opaque *cmb_stream;

typedef struct cmb_upstream cmb_upstream;
typedef struct cmb_event_opaque *cmb_event;

typedef struct cmb_upstream_stats {
    int64_t held_current;     /* bytes allocated or mapped now               */
    int64_t held_peak;        /* high-water mark of held_current             */
    int64_t held_total;       /* cumulative bytes ever allocated or mapped   */
    uint64_t alloc_calls;     /* successful alloc + map calls                */
    uint64_t free_calls;      /* free + unmap calls                          */
    uint64_t failed_calls;    /* alloc / map requests that failed            */
    uint64_t injected_faults; /* of which were injected                      */
} cmb_upstream_stats;

/* The CUDA driver calls the upstream's operations stand for, by kind, as the
 * vmm and cuda backends make them (upstream_vmm.c): map is cuMemCreate +
 * cuMemMap + cuMemSetAccess of one handle; unmap is cuMemUnmap + cuMemRelease
 * of each handle (each earlier map call) the range covers; alloc and free
 * are one cudaMalloc / cudaFree (sim and cuda), or on vmm cuMemAddressReserve
 * + the three map calls and the two unmap calls + cuMemAddressFree. Kept by
 * the accounting layer for every backend, so sim replay predicts them. */
typedef struct cmb_upstream_driver_stats {
    uint64_t malloc_calls;  /* cudaMalloc                                     */
    uint64_t free_calls;    /* cudaFree                                       */
    uint64_t va_reserve;    /* cuMemAddressReserve                            */
    uint64_t va_free;       /* cuMemAddressFree                               */
    uint64_t mem_create;    /* cuMemCreate                                    */
    uint64_t mem_map;       /* cuMemMap                                       */
    uint64_t set_access;    /* cuMemSetAccess                                 */
    uint64_t mem_unmap;     /* cuMemUnmap                                     */
    uint64_t mem_release;   /* cuMemRelease                                   */
    /* park is cuMemUnmap of each handle (kept), unpark cuMemMap +
     * cuMemSetAccess of a kept one, drop_parked cuMemRelease of each: a
     * handle moved from one place to another costs 3 calls, not 5; under
     * defer_access a map or unpark makes no cuMemSetAccess, and ending the
     * deferral one per contiguous range mapped */
    uint64_t total;         /* the sum of the above                           */
} cmb_upstream_driver_stats;

/* --- the operations ------------------------------------------------------ */

/* Every upstream operation, once. One line per op:
 *
 *     X(name, (parameters after the upstream), (arguments), how)
 *
 * how: ACCOUNTED  upstream.c checks, counts and injects faults itself;
 *      FORWARDED  upstream.c hands the call to the backend unchanged (a
 *                 backend that leaves it NULL answers CMB_ERR_UNSUPPORTED).
 * From this list come the ops table below, the backends' table
 * (upstream.h), the cmb_up_* calls at the end of this header and
 * upstream.c's forwarding functions and table: a new op is one line here
 * (plus the backends that implement it). The order is the plug-in ABI's
 * field order: a new op goes at the END.
 *
 *  alloc, free      plain allocations (the cudaMalloc model);
 *  va_reserve, va_release, map, unmap
 *                   virtual memory: reserve address space, then back pages
 *                   of it; sizes and addresses are multiples of
 *                   u->granularity; CMB_ERR_UNSUPPORTED on the cuda upstream;
 *  event_record, event_query, event_destroy, stream_sync
 *                   stream order for policies that defer frees (PyTorch's
 *                   record_stream, RMM's per-stream lists): event_query is
 *                   CMB_OK once the event completed, CMB_ERR_STATE while it
 *                   is pending; sim events complete at once;
 *  mem_info         free and total bytes of the device as this upstream
 *                   sees it (after a capacity cap);
 *  event_rerecord   record an event made by event_record again, now on
 *                   `stream` (cudaEventRecord on the same handle): a policy
 *                   that keeps one event per stream, as RMM does, re-records
 *                   it instead of making a new one;
 *  park, unpark, drop_parked
 *                   moving physical memory (GMLake's stitching): park unmaps
 *                   the whole handles (earlier map calls) of a range and
 *                   keeps them, still held; unpark maps one kept handle of
 *                   exactly `size` bytes at va (CMB_ERR_NOT_FOUND when none
 *                   is kept); drop_parked releases every kept handle of at
 *                   most `size` bytes. No fault is injected: no memory is
 *                   taken. vmm and sim only (CMB_ERR_UNSUPPORTED elsewhere).
 *  defer_access     on (1): the map and unpark calls that follow leave the
 *                   access to be set; off (0): sets it once over each
 *                   contiguous range they mapped (one cuMemSetAccess each,
 *                   as PyTorch's ExpandableSegment::mapAndSetAccess does for
 *                   a grown range) and ends the deferral. Memory mapped so
 *                   is not usable until then. No effect where nothing maps.
 *  park_after       as park, for a range whose last use is work already
 *                   queued on `stream`: the handles are kept at once (unpark
 *                   may map them elsewhere for work queued after it on that
 *                   stream, drop_parked may release them), while the range
 *                   stays mapped until that work is done; the upstream
 *                   unmaps it then, seen on a later call, and waits for the
 *                   work before mapping anything in the range again or
 *                   releasing its reservation. No host synchronization where
 *                   the memory moves within one stream (a handle may be
 *                   mapped at two addresses at once). Counted and priced as
 *                   park; sim: park (its work is done at once).
 */
#define CMB_UPSTREAM_OPS(X)                                                                      \
    X(alloc, (size_t size, cmb_stream stream, void **ptr), (size, stream, ptr), ACCOUNTED)     \
    X(free, (void *ptr, size_t size, cmb_stream stream), (ptr, size, stream), ACCOUNTED)       \
    X(va_reserve, (size_t size, void **va), (size, va), ACCOUNTED)                             \
    X(va_release, (void *va, size_t size), (va, size), ACCOUNTED)                              \
    X(map, (void *va, size_t size), (va, size), ACCOUNTED)                                     \
    X(unmap, (void *va, size_t size), (va, size), ACCOUNTED)                                   \
    X(event_record, (cmb_stream stream, cmb_event * ev), (stream, ev), FORWARDED)              \
    X(event_query, (cmb_event ev), (ev), FORWARDED)                                            \
    X(event_destroy, (cmb_event ev), (ev), FORWARDED)                                          \
    X(stream_sync, (cmb_stream stream), (stream), FORWARDED)                                   \
    X(mem_info, (size_t * free_bytes, size_t * total_bytes), (free_bytes, total_bytes), ACCOUNTED) \
    X(event_rerecord, (cmb_stream stream, cmb_event ev), (stream, ev), FORWARDED)              \
    X(park, (void *va, size_t size), (va, size), ACCOUNTED)                                    \
    X(unpark, (void *va, size_t size), (va, size), ACCOUNTED)                                  \
    X(drop_parked, (size_t size), (size), ACCOUNTED)                                           \
    X(defer_access, (int on), (on), ACCOUNTED)                                                 \
    X(park_after, (void *va, size_t size, cmb_stream stream), (va, size, stream), ACCOUNTED)

/* (a, b) -> a, b: splices a parenthesised list into another. */
#define CMB_UNPAREN(...) __VA_ARGS__

#define _CMB_UP_OPS_FIELD(name, params, args, how) cmb_status (*name)(cmb_upstream * u, CMB_UNPAREN params);
typedef struct cmb_upstream_ops {
    CMB_UPSTREAM_OPS(_CMB_UP_OPS_FIELD)
} cmb_upstream_ops;
#undef _CMB_UP_OPS_FIELD

struct cmb_upstream {
    const cmb_upstream_ops *ops; /* the accounting layer's entry points     */
    const char *name;            /* "cuda", "vmm", "sim"                    */
    size_t granularity;          /* VMM page size (2 MiB on H100/H200)      */
    size_t alignment;            /* alignment of alloc() results            */
    cmb_upstream_stats stats;    /* kept by the accounting layer            */
    void *impl;                  /* private to upstream.c                   */
    /* appended (the plug-in ABI's fields above keep their offsets) */
    cmb_upstream_driver_stats driver; /* kept by the accounting layer      */
};

/* Thin calls through the table, cmb_up_<op>(u, ...): what policies and
 * plug-ins use. */
#define _CMB_UP_CALL(name, params, args, how)                                            \
    static inline cmb_status cmb_up_##name(cmb_upstream *u, CMB_UNPAREN params)          \
    {                                                                                    \
        return u->ops->name(u, CMB_UNPAREN args);                                        \
    }
CMB_UPSTREAM_OPS(_CMB_UP_CALL)
#undef _CMB_UP_CALL

#ifdef __cplusplus
}
#endif

#endif /* CMB_UPSTREAM_H */
