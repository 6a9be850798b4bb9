/* upstream_vmm.c - CUDA virtual memory management.
 *
 * va_reserve -> cuMemAddressReserve; map -> one cuMemCreate physical handle
 * of the whole range, cuMemMap, then cuMemSetAccess over it: one handle per
 * call, as PyTorch's ExpandableSegment::map creates one per page of
 * segment_size_ (2 MiB or 20 MiB; c10/cuda/CUDACachingAllocator.cpp);
 * unmap -> cuMemUnmap + cuMemRelease of each handle the range covers, which
 * must be whole (the driver cannot unmap part of a handle). alloc() reserves
 * and maps one handle of the size rounded up to the granularity, which is
 * what cudaMalloc does for large sizes. park -> cuMemUnmap of each handle,
 * kept; unpark -> cuMemMap + cuMemSetAccess of a kept handle at a new
 * address; drop_parked -> cuMemRelease (moving physical memory, GMLake).
 * Under defer_access map and unpark skip cuMemSetAccess, and upstream.c
 * sets it once over each contiguous range mapped (set_access).
 * park_after -> the handles kept at once, their old mappings left in place
 * behind an event recorded on the stream whose queued work may still use
 * them, and cuMemUnmap'd once it completes (looked at by later calls):
 * the driver maps one handle at several addresses, so unpark can place it
 * under a block for work queued after on that stream without waiting. A
 * map into a range still waiting, a reservation's release and close wait
 * for its event; a cuMemCreate out of memory waits for all and tries again
 * (a released handle's memory returns with its last mapping).
 * The granularity is the device's minimum (2 MiB on H100 and H200,
 * measured; see DESIGN.md). Entry points come from cudaGetDriverEntryPoint*.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_clock.h"
#include "../common/cmb_size.h"
#include "../common/cmb_hashmap.h"
#include "cuda_util.h"
#include "upstream.h"

/* The event and stream helpers are the cuda upstream's. */
cmb_status _cmb_cuda_event_record(void *state, cmb_stream stream, cmb_event *ev);
cmb_status _cmb_cuda_event_rerecord(void *state, cmb_stream stream, cmb_event ev);
cmb_status _cmb_cuda_event_query(void *state, cmb_event ev);
cmb_status _cmb_cuda_event_destroy(void *state, cmb_event ev);
cmb_status _cmb_cuda_stream_sync(void *state, cmb_stream stream);
cmb_status _cmb_cuda_mem_info(void *state, size_t *free_bytes, size_t *total_bytes);

typedef struct vmm_state {
    const _cmb_driver_api *cu;
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    size_t granularity;
    cmb_hashmap handles; /* mapped range's va (or alloc ptr) -> handle */
    cmb_hashmap sizes;   /* the same va -> the handle's size */
    uint64_t used;       /* physical bytes after rounding */
    uint64_t used_peak;
    /* handles park() unmapped and kept: still held, mapped again by unpark */
    struct { CUmemGenericAllocationHandle h; size_t size; } *parked;
    size_t n_parked, cap_parked;
    /* park_after's old mappings, one per handle, unmapped once `ev` (one
     * per park_after, shared by its handles, in the order made) completes */
    struct later { CUdeviceptr va; size_t size; cudaEvent_t ev; } *later;
    size_t n_later, cap_later;
    uint64_t dt_calls[CMB_DT_KINDS], dt_ns[CMB_DT_KINDS]; /* host time in driver calls */
} vmm_state;

static void later_wait(vmm_state *s, CUdeviceptr lo, CUdeviceptr hi);

/* --- host time in driver calls ------------------------------------------------------------------ */

static inline void dt_add(vmm_state *s, int kind, uint64_t since)
{
    s->dt_calls[kind]++;
    s->dt_ns[kind] += cmb_now_ns() - since;
}

static void vmm_driver_time(void *state, uint64_t calls[], uint64_t ns[])
{
    vmm_state *s = state;
    memcpy(calls, s->dt_calls, sizeof s->dt_calls);
    memcpy(ns, s->dt_ns, sizeof s->dt_ns);
}

static cmb_status cu_status(CUresult r)
{
    if (r == CUDA_SUCCESS)
        return CMB_OK;
    return r == CUDA_ERROR_OUT_OF_MEMORY ? CMB_ERR_OOM : CMB_ERR_CUDA;
}

static void account(vmm_state *s, int64_t delta)
{
    s->used = (uint64_t)((int64_t)s->used + delta);
    if (s->used > s->used_peak)
        s->used_peak = s->used;
}

static cmb_status vmm_open(const cmb_upstream_config *cfg, void **state, size_t *granularity,
                           size_t *alignment, char *err, size_t errlen)
{
    const _cmb_driver_api *cu = _cmb_driver(err, errlen);
    if (!cu)
        return CMB_ERR_UNSUPPORTED;
    cudaError_t e = cudaSetDevice(cfg->device);
    if (e == cudaSuccess)
        e = cudaFree(0); /* make the primary context current for driver calls */
    if (e != cudaSuccess) {
        _cmb_cuda_note(err, errlen, "vmm upstream: context", e);
        return CMB_ERR_CUDA;
    }
    vmm_state *s = calloc(1, sizeof *s);
    if (!s || cmb_hashmap_init(&s->handles, 1024) || cmb_hashmap_init(&s->sizes, 1024)) {
        if (s)
            cmb_hashmap_free(&s->handles);
        free(s);
        snprintf(err, errlen, "host out of memory");
        return CMB_ERR_HOST_NOMEM;
    }
    s->cu = cu;
    s->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    s->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    s->prop.location.id = cfg->device;
    s->access.location = s->prop.location;
    s->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUresult r = cu->cuMemGetAllocationGranularity(&s->granularity, &s->prop,
                                                   CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS || !s->granularity) {
        snprintf(err, errlen, "vmm upstream: cuMemGetAllocationGranularity failed (%d)", (int)r);
        cmb_hashmap_free(&s->handles);
        cmb_hashmap_free(&s->sizes);
        free(s);
        return CMB_ERR_CUDA;
    }
    *state = s;
    *granularity = s->granularity;
    *alignment = s->granularity;
    return CMB_OK;
}

static void vmm_close(void *state)
{
    vmm_state *s = state;
    later_wait(s, 0, 0);
    cmb_hashmap_free(&s->handles);
    cmb_hashmap_free(&s->sizes);
    free(s->parked);
    free(s->later);
    free(s);
}

/* --- park_after's mappings left for later ---------------------------------------------------- */

/* Unmaps the old mappings of later[i, j) (one park_after's, their event
 * done or waited for) and destroys their event. */
static void later_unmap(vmm_state *s, size_t i, size_t j)
{
    for (size_t k = i; k < j; k++) {
        uint64_t t0 = cmb_now_ns();
        s->cu->cuMemUnmap(s->later[k].va, s->later[k].size); /* a failure leaves the range unusable, no more */
        dt_add(s, CMB_DT_UNMAP, t0);
    }
    uint64_t t0 = cmb_now_ns();
    cudaEventDestroy(s->later[i].ev);
    dt_add(s, CMB_DT_EVENT, t0);
    memmove(s->later + i, s->later + j, (s->n_later - j) * sizeof *s->later);
    s->n_later -= j - i;
}

/* The end of the group (one event) that starts at i. */
static size_t later_group(const vmm_state *s, size_t i)
{
    size_t j = i + 1;
    while (j < s->n_later && s->later[j].ev == s->later[i].ev)
        j++;
    return j;
}

/* Unmaps what waits behind completed events, oldest first, up to the
 * first still pending: one query while nothing is done (events recorded on
 * one stream complete in order; a group behind a pending one waits for a
 * later poll). Made by park_after and mem_info, not before every map. */
static void later_poll(vmm_state *s)
{
    while (s->n_later) {
        uint64_t t0 = cmb_now_ns();
        int done = cudaEventQuery(s->later[0].ev) == cudaSuccess;
        dt_add(s, CMB_DT_EVENT, t0);
        if (!done)
            return;
        later_unmap(s, 0, later_group(s, 0));
    }
}

/* Waits for the groups with a mapping inside [lo, hi) (every group when
 * lo == hi == 0) and unmaps them. */
static void later_wait(vmm_state *s, CUdeviceptr lo, CUdeviceptr hi)
{
    for (size_t i = 0; i < s->n_later;) {
        size_t j = later_group(s, i), k = i;
        while (k < j && hi && (s->later[k].va + s->later[k].size <= lo || s->later[k].va >= hi))
            k++;
        if (k == j) {
            i = j;
            continue;
        }
        uint64_t t0 = cmb_now_ns();
        cudaEventSynchronize(s->later[i].ev);
        dt_add(s, CMB_DT_EVENT, t0);
        later_unmap(s, i, j);
    }
}

/* Before mapping [va, va + size): old mappings there must go first (a
 * wait only where one overlaps; no polling: maps are the most frequent
 * call, and a query per pending group on each cost more than the unmaps it
 * brings forward). */
static void later_clear(vmm_state *s, CUdeviceptr va, size_t size)
{
    if (s->n_later)
        later_wait(s, va, va + size);
}

/* Create one handle of `size` bytes and map it at va with access set. */
static cmb_status map_one(vmm_state *s, CUdeviceptr va, size_t size)
{
    CUmemGenericAllocationHandle h;
    later_clear(s, va, size);
    uint64_t t0 = cmb_now_ns();
    CUresult r = s->cu->cuMemCreate(&h, size, &s->prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && s->n_later) {
        later_wait(s, 0, 0); /* released handles still mapped hold memory */
        t0 = cmb_now_ns();
        r = s->cu->cuMemCreate(&h, size, &s->prop, 0);
    }
    dt_add(s, CMB_DT_CREATE, t0);
    if (r != CUDA_SUCCESS)
        return cu_status(r);
    t0 = cmb_now_ns();
    r = s->cu->cuMemMap(va, size, 0, h, 0);
    dt_add(s, CMB_DT_MAP, t0);
    if (r != CUDA_SUCCESS) {
        s->cu->cuMemRelease(h);
        return cu_status(r);
    }
    if (cmb_hashmap_put(&s->handles, (uint64_t)va, (uint64_t)h) || cmb_hashmap_put(&s->sizes, (uint64_t)va, size)) {
        cmb_hashmap_remove(&s->handles, (uint64_t)va, NULL);
        s->cu->cuMemUnmap(va, size);
        s->cu->cuMemRelease(h);
        return CMB_ERR_HOST_NOMEM;
    }
    account(s, (int64_t)size);
    return CMB_OK;
}

static cmb_status unmap_one(vmm_state *s, CUdeviceptr va, size_t size)
{
    uint64_t h;
    if (!cmb_hashmap_remove(&s->handles, (uint64_t)va, &h))
        return CMB_ERR_INVALID;
    cmb_hashmap_remove(&s->sizes, (uint64_t)va, NULL);
    uint64_t t0 = cmb_now_ns();
    CUresult r = s->cu->cuMemUnmap(va, size);
    dt_add(s, CMB_DT_UNMAP, t0);
    t0 = cmb_now_ns();
    CUresult r2 = s->cu->cuMemRelease((CUmemGenericAllocationHandle)h);
    dt_add(s, CMB_DT_RELEASE, t0);
    account(s, -(int64_t)size);
    return cu_status(r != CUDA_SUCCESS ? r : r2);
}

static cmb_status vmm_va_reserve(void *state, size_t size, void **va)
{
    vmm_state *s = state;
    CUdeviceptr p;
    CUresult r = s->cu->cuMemAddressReserve(&p, size, s->granularity, 0, 0);
    if (r != CUDA_SUCCESS)
        return cu_status(r);
    *va = (void *)(uintptr_t)p;
    return CMB_OK;
}

static cmb_status vmm_va_release(void *state, void *va, size_t size)
{
    vmm_state *s = state;
    if (s->n_later)
        later_wait(s, (CUdeviceptr)(uintptr_t)va, (CUdeviceptr)(uintptr_t)va + size);
    return cu_status(s->cu->cuMemAddressFree((CUdeviceptr)(uintptr_t)va, size));
}

/* Does [va, va+size) cover whole mapped handles, back to back? */
static int covers_whole_handles(vmm_state *s, uintptr_t va, size_t size)
{
    size_t off = 0;
    while (off < size) {
        uint64_t len;
        if (!cmb_hashmap_get(&s->sizes, (uint64_t)(va + off), &len) || !len || len > size - off)
            return 0;
        off += (size_t)len;
    }
    return 1;
}

static cmb_status vmm_unmap(void *state, void *va, size_t size)
{
    vmm_state *s = state;
    uintptr_t base = (uintptr_t)va;
    cmb_status first_error = CMB_OK;
    if (!covers_whole_handles(s, base, size))
        return CMB_ERR_INVALID;
    for (size_t off = 0; off < size;) {
        uint64_t len = 0;
        cmb_hashmap_get(&s->sizes, (uint64_t)(base + off), &len);
        cmb_status st = unmap_one(s, (CUdeviceptr)(base + off), (size_t)len);
        if (st != CMB_OK && first_error == CMB_OK)
            first_error = st;
        off += (size_t)len;
    }
    return first_error;
}

/* park (ev NULL: each handle unmapped now) or park_after (ev recorded on
 * the stream: each old mapping left for later_poll) */
static cmb_status park_handles(vmm_state *s, uintptr_t base, size_t size, cudaEvent_t ev)
{
    if (!covers_whole_handles(s, base, size))
        return CMB_ERR_INVALID;
    size_t need = 0;
    for (size_t off = 0; off < size; need++) {
        uint64_t len = 0;
        cmb_hashmap_get(&s->sizes, (uint64_t)(base + off), &len);
        off += (size_t)len;
    }
    if (s->n_parked + need > s->cap_parked) {
        size_t cap = (s->n_parked + need) * 2;
        void *grown = realloc(s->parked, cap * sizeof *s->parked);
        if (!grown)
            return CMB_ERR_HOST_NOMEM;
        s->parked = grown;
        s->cap_parked = cap;
    }
    if (ev && s->n_later + need > s->cap_later) {
        size_t cap = (s->n_later + need) * 2;
        void *grown = realloc(s->later, cap * sizeof *s->later);
        if (!grown)
            return CMB_ERR_HOST_NOMEM;
        s->later = grown;
        s->cap_later = cap;
    }
    cmb_status first_error = CMB_OK;
    for (size_t off = 0; off < size;) {
        uint64_t len = 0, h = 0;
        CUdeviceptr at = (CUdeviceptr)(base + off);
        cmb_hashmap_get(&s->sizes, (uint64_t)at, &len);
        cmb_hashmap_remove(&s->handles, (uint64_t)at, &h);
        cmb_hashmap_remove(&s->sizes, (uint64_t)at, NULL);
        CUresult r = CUDA_SUCCESS;
        if (ev)
            s->later[s->n_later++] = (struct later){at, (size_t)len, ev};
        else {
            uint64_t t0 = cmb_now_ns();
            r = s->cu->cuMemUnmap(at, (size_t)len);
            dt_add(s, CMB_DT_UNMAP, t0);
        }
        if (r == CUDA_SUCCESS) {
            s->parked[s->n_parked].h = (CUmemGenericAllocationHandle)h;
            s->parked[s->n_parked++].size = (size_t)len;
        } else {
            /* still mapped or lost: give the memory back rather than keep a
             * handle that cannot be mapped again */
            s->cu->cuMemRelease((CUmemGenericAllocationHandle)h);
            account(s, -(int64_t)len);
            if (first_error == CMB_OK)
                first_error = cu_status(r);
        }
        off += (size_t)len;
    }
    return first_error;
}

/* park: cuMemUnmap of each whole handle in the range, the handle kept
 * (GMLake's stitching moves physical memory so, without a release and a
 * create); unpark: cuMemMap + cuMemSetAccess of a kept handle of exactly
 * `size` bytes; drop_parked: cuMemRelease of one. */
static cmb_status vmm_park(void *state, void *va, size_t size)
{
    return park_handles(state, (uintptr_t)va, size, NULL);
}

/* park_after: an event behind the stream's queued work instead of waiting
 * for it; without one, the wait (a synchronization) and park. */
static cmb_status vmm_park_after(void *state, void *va, size_t size, cmb_stream stream)
{
    vmm_state *s = state;
    cudaEvent_t ev;
    if (s->n_later)
        later_poll(s);
    if (!covers_whole_handles(s, (uintptr_t)va, size))
        return CMB_ERR_INVALID;
    uint64_t t0 = cmb_now_ns();
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
        ev = NULL;
    else if (cudaEventRecord(ev, (cudaStream_t)stream) != cudaSuccess) {
        cudaEventDestroy(ev);
        ev = NULL;
    }
    dt_add(s, CMB_DT_EVENT, t0);
    if (!ev) {
        cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
        if (e != cudaSuccess)
            return CMB_ERR_CUDA;
        return park_handles(s, (uintptr_t)va, size, NULL);
    }
    cmb_status st = park_handles(s, (uintptr_t)va, size, ev);
    if (s->n_later == 0 || s->later[s->n_later - 1].ev != ev)
        cudaEventDestroy(ev); /* nothing left behind it */
    return st;
}

/* unpark, the access left to set (defer_access) or set here */
static cmb_status unpark_at(vmm_state *s, CUdeviceptr at, size_t size, int access)
{
    size_t i = s->n_parked;
    while (i && s->parked[i - 1].size != size)
        i--;
    if (!i)
        return CMB_ERR_NOT_FOUND;
    CUmemGenericAllocationHandle h = s->parked[i - 1].h;
    later_clear(s, at, size);
    uint64_t t0 = cmb_now_ns();
    CUresult r = s->cu->cuMemMap(at, size, 0, h, 0);
    dt_add(s, CMB_DT_MAP, t0);
    if (r != CUDA_SUCCESS)
        return cu_status(r);
    if (access) {
        t0 = cmb_now_ns();
        r = s->cu->cuMemSetAccess(at, size, &s->access, 1);
        dt_add(s, CMB_DT_SET_ACCESS, t0);
    }
    if (r != CUDA_SUCCESS) {
        s->cu->cuMemUnmap(at, size);
        return cu_status(r);
    }
    if (cmb_hashmap_put(&s->handles, (uint64_t)at, (uint64_t)h) || cmb_hashmap_put(&s->sizes, (uint64_t)at, size)) {
        cmb_hashmap_remove(&s->handles, (uint64_t)at, NULL);
        s->cu->cuMemUnmap(at, size);
        return CMB_ERR_HOST_NOMEM;
    }
    s->parked[i - 1] = s->parked[--s->n_parked];
    return CMB_OK;
}

static cmb_status vmm_unpark(void *state, void *va, size_t size)
{
    return unpark_at(state, (CUdeviceptr)(uintptr_t)va, size, 1);
}

static cmb_status vmm_unpark_noaccess(void *state, void *va, size_t size)
{
    return unpark_at(state, (CUdeviceptr)(uintptr_t)va, size, 0);
}

static cmb_status vmm_drop_parked(void *state, size_t size)
{
    vmm_state *s = state;
    size_t i = s->n_parked;
    while (i && s->parked[i - 1].size != size)
        i--;
    if (!i)
        return CMB_ERR_NOT_FOUND;
    uint64_t t0 = cmb_now_ns();
    CUresult r = s->cu->cuMemRelease(s->parked[i - 1].h);
    dt_add(s, CMB_DT_RELEASE, t0);
    account(s, -(int64_t)size);
    s->parked[i - 1] = s->parked[--s->n_parked];
    return cu_status(r);
}

static cmb_status vmm_map(void *state, void *va, size_t size)
{
    vmm_state *s = state;
    CUdeviceptr base = (CUdeviceptr)(uintptr_t)va;
    cmb_status st = map_one(s, base, size);
    if (st != CMB_OK)
        return st;
    uint64_t t0 = cmb_now_ns();
    st = cu_status(s->cu->cuMemSetAccess(base, size, &s->access, 1));
    dt_add(s, CMB_DT_SET_ACCESS, t0);
    if (st != CMB_OK)
        unmap_one(s, base, size);
    return st;
}

static cmb_status vmm_map_noaccess(void *state, void *va, size_t size)
{
    return map_one(state, (CUdeviceptr)(uintptr_t)va, size);
}

/* One cuMemSetAccess over a range of several handles (the driver takes any
 * mapped range): what defer_access saves is the call per handle. */
static cmb_status vmm_set_access(void *state, void *va, size_t size)
{
    vmm_state *s = state;
    uint64_t t0 = cmb_now_ns();
    CUresult r = s->cu->cuMemSetAccess((CUdeviceptr)(uintptr_t)va, size, &s->access, 1);
    dt_add(s, CMB_DT_SET_ACCESS, t0);
    return cu_status(r);
}

/* The driver's free memory, after unmapping what waited behind work now
 * done (a released handle's memory returns with its last mapping). */
static cmb_status vmm_mem_info(void *state, size_t *free_bytes, size_t *total_bytes)
{
    vmm_state *s = state;
    if (s->n_later)
        later_poll(s);
    return _cmb_cuda_mem_info(state, free_bytes, total_bytes);
}

static size_t round_up(size_t x, size_t a)
{
    return cmb_size_round_up_sat(x, a); /* saturates: a huge x never wraps to a small one */
}

static cmb_status vmm_alloc(void *state, size_t size, cmb_stream stream, void **ptr)
{
    vmm_state *s = state;
    size_t rounded = round_up(size, s->granularity);
    void *va;
    (void)stream;
    cmb_status st = vmm_va_reserve(s, rounded, &va);
    if (st != CMB_OK)
        return st;
    st = map_one(s, (CUdeviceptr)(uintptr_t)va, rounded);
    if (st == CMB_OK)
        st = cu_status(s->cu->cuMemSetAccess((CUdeviceptr)(uintptr_t)va, rounded, &s->access, 1));
    if (st != CMB_OK) {
        unmap_one(s, (CUdeviceptr)(uintptr_t)va, rounded);
        vmm_va_release(s, va, rounded);
        return st;
    }
    *ptr = va;
    return CMB_OK;
}

static cmb_status vmm_free(void *state, void *ptr, size_t size, cmb_stream stream)
{
    vmm_state *s = state;
    size_t rounded = round_up(size, s->granularity);
    (void)stream;
    cmb_status st = unmap_one(s, (CUdeviceptr)(uintptr_t)ptr, rounded);
    cmb_status st2 = vmm_va_release(s, ptr, rounded);
    return st != CMB_OK ? st : st2;
}

static uint64_t vmm_device_used(void *state)
{
    return ((vmm_state *)state)->used;
}

static uint64_t vmm_device_peak(void *state)
{
    return ((vmm_state *)state)->used_peak;
}

const _cmb_backend _cmb_backend_vmm = {
    .name = "vmm",
    .open = vmm_open,
    .close = vmm_close,
    .alloc = vmm_alloc,
    .free = vmm_free,
    .va_reserve = vmm_va_reserve,
    .va_release = vmm_va_release,
    .map = vmm_map,
    .unmap = vmm_unmap,
    .park = vmm_park,
    .park_after = vmm_park_after,
    .driver_time = vmm_driver_time,
    .unpark = vmm_unpark,
    .drop_parked = vmm_drop_parked,
    .map_noaccess = vmm_map_noaccess,
    .unpark_noaccess = vmm_unpark_noaccess,
    .set_access = vmm_set_access,
    .event_record = _cmb_cuda_event_record,
    .event_query = _cmb_cuda_event_query,
    .event_destroy = _cmb_cuda_event_destroy,
    .stream_sync = _cmb_cuda_stream_sync,
    .mem_info = vmm_mem_info,
    .event_rerecord = _cmb_cuda_event_rerecord,
    .device_used = vmm_device_used,
    .device_peak = vmm_device_peak,
};
