/* upstream.h - opening upstreams and configuring fault injection (private to
 * the suite; policies only need cmb_upstream.h). */
#ifndef CMB_UPSTREAM_PRIVATE_H
#define CMB_UPSTREAM_PRIVATE_H

#include "cmb_upstream.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cmb_upstream_kind {
    CMB_UPSTREAM_SIM = 0,
    CMB_UPSTREAM_CUDA = 1,
    CMB_UPSTREAM_VMM = 2
} cmb_upstream_kind;

/* Fault injection, applied to every request that takes memory (alloc, map). */
typedef struct cmb_fault_spec {
    uint64_t fail_nth;   /* fail the Nth request (1-based); 0 = off        */
    uint64_t fail_every; /* fail every Kth request; 0 = off                */
    double fail_prob;    /* fail each request with this probability        */
    uint64_t seed;       /* seed of the fail_prob draws                    */
    uint64_t cap_bytes;  /* fail requests that would hold more; 0 = none   */
} cmb_fault_spec;

typedef struct cmb_upstream_config {
    cmb_upstream_kind kind;
    uint64_t sim_capacity;    /* sim: device bytes                          */
    uint64_t sim_alignment;   /* sim: alignment and rounding of alloc()     */
    uint64_t sim_granularity; /* sim: VMM page size                         */
    int device;               /* cuda / vmm: device ordinal                 */
    cmb_fault_spec fault;
} cmb_upstream_config;

/* Defaults: sim of 80 GiB, 512 B alignment, 2 MiB pages (H100's measured
 * VMM granularity), no faults. */
void cmb_upstream_config_default(cmb_upstream_config *cfg);

const char *cmb_upstream_kind_name(cmb_upstream_kind kind);
int cmb_upstream_kind_parse(const char *name, cmb_upstream_kind *kind);

/* Open an upstream; on failure writes a one-line reason into err. */
cmb_status cmb_upstream_open(const cmb_upstream_config *cfg, cmb_upstream **out, char *err, size_t errlen);

/* Bytes still held (allocated or mapped) by whoever used the upstream. */
static inline int64_t cmb_upstream_held(const cmb_upstream *u)
{
    return u->stats.held_current;
}

/* Bytes of device memory the upstream's backend consumes now, after its
 * rounding (sim: exact; cuda/vmm: held bytes). */
uint64_t cmb_upstream_device_used(const cmb_upstream *u);
uint64_t cmb_upstream_device_peak(const cmb_upstream *u);

/* A second upstream over the same backend as `parent` (one memory, one
 * address space, the device's own accounting): its own held bytes, calls
 * and validation, under the parent's cap (cmb_upstream_set_cap on the
 * parent), which counts what its children hold. Closed before the parent
 * (cmb_upstream_close frees what it holds, never the backend). */
cmb_status cmb_upstream_open_child(cmb_upstream *parent, cmb_upstream **out, char *err, size_t errlen);

/* While hold(ctx) is non-zero, the upstream's event_record, event_query,
 * event_rerecord and stream_sync answer CMB_ERR_STATE ("not yet") without
 * reaching the device, as an event still pending would: a CUDA graph's
 * capture forbids them, and a policy then keeps what they would have
 * ordered until a later call (a graph pool's instance, pluggable/). */
void cmb_upstream_hold_stream_ops(cmb_upstream *u, int (*hold)(void *ctx), void *ctx);

/* Free whatever is still held, then the upstream itself. Returns the bytes
 * that were still held (a leak by the user of the upstream). */
int64_t cmb_upstream_close(cmb_upstream *u);

/* Changes the capacity cap (fault.cap_bytes; 0 = none) of an open upstream
 * and returns the previous one. The contention scenario models another
 * process taking device memory this way on the sim upstream: the policy
 * then sees fewer bytes available, its own statistics untouched. */
uint64_t cmb_upstream_set_cap(cmb_upstream *u, uint64_t cap_bytes);

/* Validation failures (free of an unknown pointer, double map, ...) are
 * counted; a correct policy keeps this at zero. */
uint64_t cmb_upstream_misuse_count(const cmb_upstream *u);

/* 1 when [ptr, ptr+size) lies inside one live alloc() result or inside
 * mapped pages of one reservation: memory a policy may hand out. */
int cmb_upstream_contains(const cmb_upstream *u, const void *ptr, size_t size);
const char *cmb_upstream_last_misuse(const cmb_upstream *u);

/* One range the upstream holds: a live alloc() result, or a run of
 * contiguous mapped pages inside a reservation (`reserved_at` its start). */
typedef struct cmb_upstream_segment {
    uintptr_t start;
    size_t size;
    uintptr_t reserved_at; /* 0 for an alloc() result */
} cmb_upstream_segment;

/* The ranges held now, in address order, their sizes adding up to the held
 * bytes: the first `cap` written to out; returns how many there are (read
 * only: the memory timeline records them, harness/timeline.c). */
size_t cmb_upstream_segments(const cmb_upstream *u, cmb_upstream_segment *out, size_t cap);

/* --- host time in driver calls (vmm) ------------------------------------------ */

enum { CMB_DT_CREATE, CMB_DT_MAP, CMB_DT_SET_ACCESS, CMB_DT_UNMAP, CMB_DT_RELEASE, CMB_DT_EVENT, CMB_DT_KINDS };
extern const char *const cmb_dt_names[CMB_DT_KINDS]; /* "cuMemCreate", ..., "events" (park_after's) */

/* The calls of each kind the backend made and the host time they took, on
 * the monotonic clock, since it was opened (shared with child upstreams);
 * zeros where the backend keeps none (sim, cuda). A diagnostic: what a
 * program's allocator spends in the driver (CMB_PROFILE in the library). */
void cmb_upstream_driver_time(const cmb_upstream *u, uint64_t calls[CMB_DT_KINDS], uint64_t ns[CMB_DT_KINDS]);

/* --- host time in each op (any backend) ---------------------------------------- */

#define _CMB_OP_INDEX(name, params, args, how) CMB_OP_##name,
enum { CMB_UPSTREAM_OPS(_CMB_OP_INDEX) CMB_OP_KINDS };
#undef _CMB_OP_INDEX
extern const char *const cmb_op_names[CMB_OP_KINDS]; /* "alloc", "free", ..., "park_after" */

/* On: every op of u is counted and timed on the monotonic clock, the
 * accounting layer's own work included (its validation, the backend's
 * bookkeeping and events), so that beside cmb_upstream_driver_time it
 * says where a policy's host time goes; off (default): no clock read. A
 * diagnostic (CMB_PROFILE in the library). */
void cmb_upstream_time_ops(cmb_upstream *u, int on);
void cmb_upstream_op_time(const cmb_upstream *u, uint64_t calls[CMB_OP_KINDS], uint64_t ns[CMB_OP_KINDS]);

/* --- several simulated devices (upstream_sim.c) ------------------------------- */

/* A sim stream of simulated device `device` (0..255); `index` tells apart
 * the streams of one device. The case's own sim streams (small integers)
 * carry no device. */
#define CMB_SIM_STREAM_TAG ((uintptr_t)1 << 40)
static inline cmb_stream cmb_sim_stream(int device, int index)
{
    return (cmb_stream)(CMB_SIM_STREAM_TAG | (uintptr_t)(device & 0xff) << 16 | ((uintptr_t)(index & 0x7fff) + 1));
}
/* The device of a stream made by cmb_sim_stream, or -1. */
int cmb_sim_stream_device(cmb_stream s);
/* The process's current simulated device, as cudaSetDevice sets the real
 * one: sim events are made on it. -1 (the default): none, nothing checked. */
void cmb_sim_set_device(int device);

/* --- backends (upstream_sim.c, upstream_cuda.c, upstream_vmm.c) ---------- */

typedef struct _cmb_backend {
    const char *name;
    cmb_status (*open)(const cmb_upstream_config *cfg, void **state, size_t *granularity,
                       size_t *alignment, char *err, size_t errlen);
    void (*close)(void *state);
    /* the ops of CMB_UPSTREAM_OPS (cmb_upstream.h), on the backend's state;
     * the backend's drop_parked releases ONE kept handle of exactly `size`
     * (the accounting layer loops over what its own upstream kept) */
#define _CMB_BACKEND_FIELD(name, params, args, how) cmb_status (*name)(void *state, CMB_UNPAREN params);
    CMB_UPSTREAM_OPS(_CMB_BACKEND_FIELD)
#undef _CMB_BACKEND_FIELD
    /* defer_access (upstream.c keeps what is deferred): map and unpark
     * without setting access, and access set over one range; NULL where the
     * backend has no access to set (sim: map and unpark, and nothing) */
    cmb_status (*map_noaccess)(void *state, void *va, size_t size);
    cmb_status (*unpark_noaccess)(void *state, void *va, size_t size);
    cmb_status (*set_access)(void *state, void *va, size_t size);
    /* host time spent in driver calls, by call (cmb_upstream_driver_time);
     * NULL where not kept */
    void (*driver_time)(void *state, uint64_t calls[], uint64_t ns[]);
    uint64_t (*device_used)(void *state); /* NULL: use the held bytes */
    uint64_t (*device_peak)(void *state); /* NULL: use the held peak  */
} _cmb_backend;

extern const _cmb_backend _cmb_backend_sim;
extern const _cmb_backend _cmb_backend_cuda;
extern const _cmb_backend _cmb_backend_vmm;

#ifdef __cplusplus
}
#endif

#endif /* CMB_UPSTREAM_PRIVATE_H */
