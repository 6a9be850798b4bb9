/* torch_entry.cc - PyTorch's CUDAPluggableAllocator entry points.
 *
 * torch/csrc/cuda/CUDAPluggableAllocator.{h,cpp} (PyTorch 2.11) keeps the
 * pair as std::function<void*(size_t, int, cudaStream_t)> and
 * std::function<void(void*, size_t, int, cudaStream_t)>; malloc is called
 * with the current device and stream, free with the size, device and
 * stream recorded at malloc (PyTorch keeps that table itself, so the
 * library keeps none on this path). CUDAPluggableAllocator::malloc does
 * not check the pointer it gets: a NULL for a non-empty tensor reaches the
 * kernels. With CMB_TORCH_OOM=raise a failed allocation throws instead,
 * and the message starts with "CUDA out of memory." as PyTorch's own does,
 * then carries the library's one-line account. Without PyTorch's headers
 * the exception is a std::runtime_error (Python: RuntimeError);
 * pluggable/torch.cc, built against the running PyTorch, throws its
 * c10::OutOfMemoryError (Python: torch.OutOfMemoryError) instead.
 *
 * The graph-pool hooks have C++ signatures (torch/csrc/cuda/Module.cpp
 * binds them as void(int, c10::cuda::MempoolId_t,
 * std::function<bool(cudaStream_t)>) and void(int, MempoolId_t), MempoolId_t
 * being std::pair<unsigned long long, unsigned long long>): they are
 * written here with those standard types, so no PyTorch header is needed.
 * This is the library's only C++ file: a C function cannot throw.
 */
#include <cuda_runtime_api.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include "cmb_pluggable.h"

/* From pluggable.c (pl_internal.h is C11: <stdatomic.h>). */
extern "C" {
void *_cmb_pl_malloc(size_t size, int device, void *stream, int keep);
void _cmb_pl_free(void *ptr, size_t size, int device, void *stream, int known);
int _cmb_pl_torch_raises(void);
int _cmb_pl_stream_device(void *stream);
}

typedef std::pair<unsigned long long, unsigned long long> cmb_mempool_id;
typedef std::function<bool(cudaStream_t)> cmb_stream_filter;

extern "C" void *cmb_torch_malloc(size_t size, int device, void *stream)
{
    void *p = _cmb_pl_malloc(size, device, stream, 0);
    if (!p && size && _cmb_pl_torch_raises())
        throw std::runtime_error(std::string("CUDA out of memory. cumembench pluggable: ") +
                                 cmb_pluggable_last_error());
    return p;
}

extern "C" void cmb_torch_free(void *ptr, size_t size, int device, void *stream)
{
    _cmb_pl_free(ptr, size, device, stream, 1);
}

extern "C" void cmb_torch_init_fn(int device_count)
{
    (void)device_count; /* instances are made at each device's first allocation */
}

extern "C" void cmb_torch_reset_fn(void)
{
    cmb_pluggable_empty_cache(-1);
}

extern "C" void cmb_torch_memory_fraction_fn(double fraction, int device)
{
    if (cmb_pluggable_set_memory_fraction(fraction, device))
        throw std::runtime_error(std::string("cumembench pluggable: ") + cmb_pluggable_last_error());
}

extern "C" void cmb_torch_record_stream_fn(void *ptr, void *stream)
{
    /* PyTorch passes no device: the stream's is the block's (Tensor.record_stream
     * refuses a stream of another device). */
    if (cmb_pluggable_record_stream(ptr, _cmb_pl_stream_device(stream), stream))
        throw std::runtime_error(std::string("cumembench pluggable: ") + cmb_pluggable_last_error());
}

/* --- graph pools ----------------------------------------------------------------- */

static int call_filter(void *ctx, void *stream)
{
    return (*static_cast<cmb_stream_filter *>(ctx))(static_cast<cudaStream_t>(stream)) ? 1 : 0;
}

static void drop_filter(void *ctx)
{
    delete static_cast<cmb_stream_filter *>(ctx);
}

extern "C" void cmb_torch_begin_allocate_to_pool_fn(int device, cmb_mempool_id id, cmb_stream_filter filter)
{
    cmb_stream_filter *ctx = filter ? new cmb_stream_filter(std::move(filter)) : nullptr;
    if (cmb_pluggable_pool_begin(device, id.first, id.second, ctx ? call_filter : nullptr, ctx, drop_filter))
        throw std::runtime_error(std::string("cumembench pluggable: ") + cmb_pluggable_last_error());
}

extern "C" void cmb_torch_end_allocate_to_pool_fn(int device, cmb_mempool_id id)
{
    cmb_pluggable_pool_end(device, id.first, id.second);
}

extern "C" void cmb_torch_release_pool_fn(int device, cmb_mempool_id id)
{
    cmb_pluggable_pool_release(device, id.first, id.second);
}
