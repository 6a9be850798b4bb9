/* torch_entry.cc - PyTorch's CUDAPluggableAllocator pair.
 *
 * torch/csrc/cuda/CUDAPluggableAllocator.cpp (PyTorch 2.x) keeps the pair
 * as std::function<void*(size_t, int, cudaStream_t)> and
 * std::function<void(void*, size_t, int, cudaStream_t)>; malloc is called
 * with the current device and stream, free with the size, device and
 * stream recorded at malloc. CUDAPluggableAllocator::malloc does not check
 * the pointer it gets: a NULL for a non-empty tensor reaches the kernels.
 * With CMB_TORCH_OOM=raise a failed allocation throws std::runtime_error
 * instead (as RMM's rmm_torch_allocator throws rmm::out_of_memory), which
 * PyTorch's Python binding turns into a RuntimeError carrying the message.
 * This is the library's only C++ file: a C function cannot throw.
 */
#include <stdexcept>
#include <string>

#include "cmb_pluggable.h"

/* From pluggable.c (pl_internal.h is C11: <stdatomic.h>). */
extern "C" {
void *_cmb_pl_malloc(size_t size, int device, void *stream);
void _cmb_pl_free(void *ptr, size_t size, int device);
int _cmb_pl_torch_raises(void);
}

extern "C" void *cmb_torch_malloc(size_t size, int device, void *stream)
{
    void *p = _cmb_pl_malloc(size, device, stream);
    if (!p && size && _cmb_pl_torch_raises())
        throw std::runtime_error(std::string("cumembench pluggable: ") + cmb_pluggable_last_error());
    return p;
}

extern "C" void cmb_torch_free(void *ptr, size_t size, int device, void *stream)
{
    (void)stream;
    _cmb_pl_free(ptr, size, device);
}
