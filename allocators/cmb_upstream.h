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

typedef struct cmb_upstream_ops {
    /* Plain allocations (the cudaMalloc model). */
    cmb_status (*alloc)(cmb_upstream *u, size_t size, cmb_stream stream, void **ptr);
    cmb_status (*free)(cmb_upstream *u, void *ptr, size_t size, cmb_stream stream);

    /* Virtual memory: reserve address space, then back pages of it.
     * Sizes and addresses are multiples of u->granularity. Absent
     * (CMB_ERR_UNSUPPORTED) on the cuda upstream. */
    cmb_status (*va_reserve)(cmb_upstream *u, size_t size, void **va);
    cmb_status (*va_release)(cmb_upstream *u, void *va, size_t size);
    cmb_status (*map)(cmb_upstream *u, void *va, size_t size);
    cmb_status (*unmap)(cmb_upstream *u, void *va, size_t size);

    /* Stream-ordering helpers for policies that defer frees (PyTorch's
     * record_stream): event_query returns CMB_OK once the event completed,
     * CMB_ERR_STATE while it is pending. Sim events complete at once. */
    cmb_status (*event_record)(cmb_upstream *u, cmb_stream stream, cmb_event *ev);
    cmb_status (*event_query)(cmb_upstream *u, cmb_event ev);
    cmb_status (*event_destroy)(cmb_upstream *u, cmb_event ev);
    cmb_status (*stream_sync)(cmb_upstream *u, cmb_stream stream);

    /* Free and total bytes of the device as this upstream sees it
     * (after a capacity cap). */
    cmb_status (*mem_info)(cmb_upstream *u, size_t *free_bytes, size_t *total_bytes);

    /* Record an event made by event_record again, now on `stream`
     * (cudaEventRecord on the same handle): a policy that keeps one event
     * per stream, as RMM does, re-records it instead of making a new one.
     * Last in the table so earlier fields keep their places. */
    cmb_status (*event_rerecord)(cmb_upstream *u, cmb_stream stream, cmb_event ev);
} cmb_upstream_ops;

struct cmb_upstream {
    const cmb_upstream_ops *ops; /* the accounting layer's entry points     */
    const char *name;            /* "cuda", "vmm", "sim"                    */
    size_t granularity;          /* VMM page size (2 MiB on H100/H200)      */
    size_t alignment;            /* alignment of alloc() results            */
    cmb_upstream_stats stats;    /* kept by the accounting layer            */
    void *impl;                  /* private to upstream.c                   */
};

/* Thin calls through the table: what policies and plug-ins use. */
static inline cmb_status cmb_up_alloc(cmb_upstream *u, size_t size, cmb_stream stream, void **ptr)
{
    return u->ops->alloc(u, size, stream, ptr);
}
static inline cmb_status cmb_up_free(cmb_upstream *u, void *ptr, size_t size, cmb_stream stream)
{
    return u->ops->free(u, ptr, size, stream);
}
static inline cmb_status cmb_up_va_reserve(cmb_upstream *u, size_t size, void **va)
{
    return u->ops->va_reserve(u, size, va);
}
static inline cmb_status cmb_up_va_release(cmb_upstream *u, void *va, size_t size)
{
    return u->ops->va_release(u, va, size);
}
static inline cmb_status cmb_up_map(cmb_upstream *u, void *va, size_t size)
{
    return u->ops->map(u, va, size);
}
static inline cmb_status cmb_up_unmap(cmb_upstream *u, void *va, size_t size)
{
    return u->ops->unmap(u, va, size);
}
static inline cmb_status cmb_up_event_record(cmb_upstream *u, cmb_stream stream, cmb_event *ev)
{
    return u->ops->event_record(u, stream, ev);
}
static inline cmb_status cmb_up_event_rerecord(cmb_upstream *u, cmb_stream stream, cmb_event ev)
{
    return u->ops->event_rerecord(u, stream, ev);
}
static inline cmb_status cmb_up_event_query(cmb_upstream *u, cmb_event ev)
{
    return u->ops->event_query(u, ev);
}
static inline cmb_status cmb_up_event_destroy(cmb_upstream *u, cmb_event ev)
{
    return u->ops->event_destroy(u, ev);
}
static inline cmb_status cmb_up_stream_sync(cmb_upstream *u, cmb_stream stream)
{
    return u->ops->stream_sync(u, stream);
}
static inline cmb_status cmb_up_mem_info(cmb_upstream *u, size_t *free_bytes, size_t *total_bytes)
{
    return u->ops->mem_info(u, free_bytes, total_bytes);
}

#ifdef __cplusplus
}
#endif

#endif /* CMB_UPSTREAM_H */
