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
 * them, and cuMemUnmap'd once it completes, by a worker thread that also
 * makes drop_parked's cuMemRelease (off the allocating thread):
 * the driver maps one handle at several addresses, so unpark can place it
 * under a block for work queued after on that stream without waiting. A
 * map into a range still waiting, a reservation's release and close wait
 * for its event; a cuMemCreate out of memory waits for all and tries again
 * (a released handle's memory returns with its last mapping).
 * The granularity is the device's minimum (2 MiB on H100 and H200,
 * measured; see DESIGN.md). Entry points come from cudaGetDriverEntryPoint*.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    /* work for the worker thread, in the order made: a park_after's old
     * mappings, one per handle (va != 0), unmapped once `ev` (one per
     * park_after, shared by its handles) completes; a dropped handle
     * (va == 0, ev NULL) released. Guarded by `lk`; only the worker
     * removes entries, from the front. */
    struct later { CUdeviceptr va; size_t size; cudaEvent_t ev; CUmemGenericAllocationHandle h; } *later;
    size_t n_later, cap_later;
    pthread_mutex_t lk;
    pthread_cond_t more, done; /* entries added; entries removed */
    pthread_t worker;
    int worker_on, no_worker, stop;
    int device;
} vmm_state;

static void later_wait(vmm_state *s, CUdeviceptr lo, CUdeviceptr hi);
static void later_stop(vmm_state *s);

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
    s->device = cfg->device;
    pthread_mutex_init(&s->lk, NULL);
    pthread_cond_init(&s->more, NULL);
    pthread_cond_init(&s->done, NULL);
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
    later_stop(s);
    pthread_mutex_destroy(&s->lk);
    pthread_cond_destroy(&s->more);
    pthread_cond_destroy(&s->done);
    cmb_hashmap_free(&s->handles);
    cmb_hashmap_free(&s->sizes);
    free(s->parked);
    free(s->later);
    free(s);
}

/* --- park_after's old mappings and dropped handles: a worker thread ------------------------------ *
 * cuMemUnmap (about 20-30 us a call on an H200) and cuMemRelease are taken
 * off the allocating thread: where a step is host-bound, every call made
 * there shows in the step's time. The worker waits for each park_after's
 * event, then unmaps what it left; the allocating thread waits only when it
 * maps into a range still listed, releases its reservation, runs out of
 * memory, or closes. */

/* The end of the group (one event, or a run of releases) that starts at i. */
static size_t later_group(const vmm_state *s, size_t i)
{
    size_t j = i + 1;
    while (j < s->n_later && s->later[j].ev == s->later[i].ev)
        j++;
    return j;
}

#define LATER_BATCH 64

static void *later_worker(void *arg)
{
    vmm_state *s = arg;
    struct later g[LATER_BATCH];
    cudaSetDevice(s->device); /* the primary context, current for the driver calls */
    pthread_mutex_lock(&s->lk);
    for (;;) {
        while (!s->n_later && !s->stop)
            pthread_cond_wait(&s->more, &s->lk);
        if (!s->n_later)
            break;
        size_t end = later_group(s, 0), n = end < LATER_BATCH ? end : LATER_BATCH;
        memcpy(g, s->later, n * sizeof *g);
        pthread_mutex_unlock(&s->lk);
        if (g[0].ev)
            cudaEventSynchronize(g[0].ev); /* done at once when waited for before */
        for (size_t k = 0; k < n; k++) {
            if (g[k].va)
                s->cu->cuMemUnmap(g[k].va, g[k].size); /* a failure leaves the range unusable, no more */
            else
                s->cu->cuMemRelease(g[k].h);
        }
        pthread_mutex_lock(&s->lk);
        memmove(s->later, s->later + n, (s->n_later - n) * sizeof *s->later);
        s->n_later -= n;
        pthread_cond_broadcast(&s->done);
        if (n == end && g[0].ev) { /* the group's last entry gone: nothing refers to its event */
            pthread_mutex_unlock(&s->lk);
            cudaEventDestroy(g[0].ev);
            pthread_mutex_lock(&s->lk);
        }
    }
    pthread_mutex_unlock(&s->lk);
    return NULL;
}

/* Starts the worker on first use; 0 when it runs. */
static int later_start(vmm_state *s)
{
    if (s->worker_on)
        return 0;
    if (s->no_worker)
        return -1;
    if (pthread_create(&s->worker, NULL, later_worker, s) != 0) {
        s->no_worker = 1;
        return -1;
    }
    s->worker_on = 1;
    return 0;
}

/* Lets the worker finish what is listed, then joins it. */
static void later_stop(vmm_state *s)
{
    if (!s->worker_on)
        return;
    pthread_mutex_lock(&s->lk);
    s->stop = 1;
    pthread_cond_signal(&s->more);
    pthread_mutex_unlock(&s->lk);
    pthread_join(s->worker, NULL);
    s->worker_on = 0;
    free(s->later);
    s->later = NULL;
}

/* Room for n more entries; call with lk held. */
static int later_room(vmm_state *s, size_t n)
{
    if (s->n_later + n <= s->cap_later)
        return 0;
    size_t cap = (s->n_later + n) * 2;
    void *grown = realloc(s->later, cap * sizeof *s->later);
    if (!grown)
        return -1;
    s->later = grown;
    s->cap_later = cap;
    return 0;
}

static int later_overlaps(const vmm_state *s, CUdeviceptr lo, CUdeviceptr hi)
{
    for (size_t i = 0; i < s->n_later; i++)
        if (s->later[i].va && s->later[i].va < hi && lo < s->later[i].va + s->later[i].size)
            return 1;
    return 0;
}

/* Waits until nothing listed lies in [lo, hi) (nothing at all when hi == 0):
 * before mapping there, releasing a reservation, retrying out of memory. */
static void later_wait(vmm_state *s, CUdeviceptr lo, CUdeviceptr hi)
{
    if (!s->worker_on)
        return;
    pthread_mutex_lock(&s->lk);
    while (hi ? later_overlaps(s, lo, hi) : s->n_later != 0)
        pthread_cond_wait(&s->done, &s->lk);
    pthread_mutex_unlock(&s->lk);
}

/* Waits for the worker to finish the groups at the front whose work is
 * already done (their memory about to return), not for queued work. */
static void later_settle(vmm_state *s)
{
    if (!s->worker_on)
        return;
    pthread_mutex_lock(&s->lk);
    while (s->n_later && (!s->later[0].ev || cudaEventQuery(s->later[0].ev) == cudaSuccess))
        pthread_cond_wait(&s->done, &s->lk);
    pthread_mutex_unlock(&s->lk);
}

/* Create one handle of `size` bytes and map it at va with access set. */
static cmb_status map_one(vmm_state *s, CUdeviceptr va, size_t size)
{
    CUmemGenericAllocationHandle h;
    later_wait(s, va, va + size);
    CUresult r = s->cu->cuMemCreate(&h, size, &s->prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && s->worker_on) {
        later_wait(s, 0, 0); /* released handles still mapped hold memory */
        r = s->cu->cuMemCreate(&h, size, &s->prop, 0);
    }
    if (r != CUDA_SUCCESS)
        return cu_status(r);
    r = s->cu->cuMemMap(va, size, 0, h, 0);
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
    CUresult r = s->cu->cuMemUnmap(va, size);
    CUresult r2 = s->cu->cuMemRelease((CUmemGenericAllocationHandle)h);
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

/* park: cuMemUnmap of each whole handle in the range, the handle kept
 * (GMLake's stitching moves physical memory so, without a release and a
 * create); unpark: cuMemMap + cuMemSetAccess of a kept handle of exactly
 * `size` bytes; drop_parked: cuMemRelease of one. */
/* park (ev NULL: each handle unmapped now) or park_after (ev recorded on
 * the stream: each old mapping left for the worker) */
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
    if (ev) {
        pthread_mutex_lock(&s->lk);
        if (later_room(s, need)) {
            pthread_mutex_unlock(&s->lk);
            return CMB_ERR_HOST_NOMEM;
        }
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
            s->later[s->n_later++] = (struct later){at, (size_t)len, ev, 0};
        else
            r = s->cu->cuMemUnmap(at, (size_t)len);
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
    if (ev) {
        pthread_cond_signal(&s->more);
        pthread_mutex_unlock(&s->lk);
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
    if (!covers_whole_handles(s, (uintptr_t)va, size))
        return CMB_ERR_INVALID;
    if (later_start(s) || cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
        ev = NULL;
    else if (cudaEventRecord(ev, (cudaStream_t)stream) != cudaSuccess) {
        cudaEventDestroy(ev);
        ev = NULL;
    }
    if (!ev) {
        cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
        if (e != cudaSuccess)
            return CMB_ERR_CUDA;
        return park_handles(s, (uintptr_t)va, size, NULL);
    }
    cmb_status st = park_handles(s, (uintptr_t)va, size, ev);
    if (st == CMB_ERR_INVALID || st == CMB_ERR_HOST_NOMEM)
        cudaEventDestroy(ev); /* nothing was listed behind it */
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
    later_wait(s, at, at + size);
    CUresult r = s->cu->cuMemMap(at, size, 0, h, 0);
    if (r != CUDA_SUCCESS)
        return cu_status(r);
    if (access && (r = s->cu->cuMemSetAccess(at, size, &s->access, 1)) != CUDA_SUCCESS) {
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
    CUresult r = CUDA_SUCCESS;
    int queued = 0;
    if (s->worker_on) { /* the worker releases it, off this thread */
        pthread_mutex_lock(&s->lk);
        if (!later_room(s, 1)) {
            s->later[s->n_later++] = (struct later){0, size, NULL, s->parked[i - 1].h};
            pthread_cond_signal(&s->more);
            queued = 1;
        }
        pthread_mutex_unlock(&s->lk);
    }
    if (!queued)
        r = s->cu->cuMemRelease(s->parked[i - 1].h);
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
    st = cu_status(s->cu->cuMemSetAccess(base, size, &s->access, 1));
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
    return cu_status(s->cu->cuMemSetAccess((CUdeviceptr)(uintptr_t)va, size, &s->access, 1));
}

/* The driver's free memory, after unmapping what waited behind work now
 * done (a released handle's memory returns with its last mapping). */
static cmb_status vmm_mem_info(void *state, size_t *free_bytes, size_t *total_bytes)
{
    later_settle(state);
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
