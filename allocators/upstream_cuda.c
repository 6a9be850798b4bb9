/* upstream_cuda.c - cudaMalloc / cudaFree on one device.
 *
 * cudaMalloc is synchronous and returns memory usable on every stream, so
 * the stream argument is ignored; cudaFree synchronizes the device. Events
 * are real CUDA events (timing disabled) so policies that defer frees see
 * true completion.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_util.h"
#include "upstream.h"

typedef struct cuda_state {
    int device;
} cuda_state;

static cmb_status cuda_open(const cmb_upstream_config *cfg, void **state, size_t *granularity,
                            size_t *alignment, char *err, size_t errlen)
{
    cudaError_t e = cudaSetDevice(cfg->device);
    if (e != cudaSuccess) {
        _cmb_cuda_note(err, errlen, "cuda upstream: cudaSetDevice", e);
        return CMB_ERR_CUDA;
    }
    cuda_state *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "host out of memory");
        return CMB_ERR_HOST_NOMEM;
    }
    s->device = cfg->device;
    *state = s;
    *granularity = 2u << 20; /* only used by VMM calls, which this upstream refuses */
    *alignment = 256;        /* cudaMalloc guarantees at least 256 B */
    return CMB_OK;
}

static void cuda_close(void *state)
{
    free(state);
}

static cmb_status cuda_alloc(void *state, size_t size, cmb_stream stream, void **ptr)
{
    (void)state;
    (void)stream;
    return _cmb_cuda_status(cudaMalloc(ptr, size));
}

static cmb_status cuda_free(void *state, void *ptr, size_t size, cmb_stream stream)
{
    (void)state;
    (void)size;
    (void)stream;
    return _cmb_cuda_status(cudaFree(ptr));
}

cmb_status _cmb_cuda_event_record(void *state, cmb_stream stream, cmb_event *ev)
{
    (void)state;
    cudaEvent_t e;
    cmb_status st = _cmb_cuda_status(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    if (st != CMB_OK)
        return st;
    st = _cmb_cuda_status(cudaEventRecord(e, (cudaStream_t)stream));
    if (st != CMB_OK) {
        cudaEventDestroy(e);
        return st;
    }
    *ev = (cmb_event)e;
    return CMB_OK;
}

cmb_status _cmb_cuda_event_rerecord(void *state, cmb_stream stream, cmb_event ev)
{
    (void)state;
    return _cmb_cuda_status(cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream));
}

cmb_status _cmb_cuda_event_query(void *state, cmb_event ev)
{
    (void)state;
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaErrorNotReady)
        return CMB_ERR_STATE;
    return _cmb_cuda_status(e);
}

cmb_status _cmb_cuda_event_destroy(void *state, cmb_event ev)
{
    (void)state;
    return _cmb_cuda_status(cudaEventDestroy((cudaEvent_t)ev));
}

cmb_status _cmb_cuda_stream_sync(void *state, cmb_stream stream)
{
    (void)state;
    return _cmb_cuda_status(cudaStreamSynchronize((cudaStream_t)stream));
}

cmb_status _cmb_cuda_mem_info(void *state, size_t *free_bytes, size_t *total_bytes)
{
    (void)state;
    return _cmb_cuda_status(cudaMemGetInfo(free_bytes, total_bytes));
}

const _cmb_backend _cmb_backend_cuda = {
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .event_record = _cmb_cuda_event_record,
    .event_query = _cmb_cuda_event_query,
    .event_destroy = _cmb_cuda_event_destroy,
    .stream_sync = _cmb_cuda_stream_sync,
    .mem_info = _cmb_cuda_mem_info,
    .event_rerecord = _cmb_cuda_event_rerecord,
};
