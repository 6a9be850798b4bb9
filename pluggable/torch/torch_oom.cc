/* torch_oom.cc - libcmb_torch_oom.so: the library's PyTorch pair, with an
 * out-of-memory thrown as PyTorch's own c10::OutOfMemoryError, which
 * PyTorch's Python binding raises as torch.OutOfMemoryError (torch/csrc/
 * Exceptions.h, CATCH_CORE_ERRORS). Built against the running PyTorch's
 * headers and libc10 (nothing else of libtorch), on the machine that runs
 * it: the exception's type must be that PyTorch's. libcmb_pluggable.so
 * itself stays free of PyTorch; without this shim its std::runtime_error
 * reaches Python as a RuntimeError with the same message.
 *
 * The message starts as PyTorch's caching allocator words its own ("CUDA
 * out of memory. Tried to allocate ...", c10/cuda/CUDACachingAllocator.cpp),
 * which is what batch-size finders match, then gives the library's account.
 */
#include <c10/util/Exception.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "pluggable/cmb_pluggable.h"

static std::string size_text(size_t n)
{
    char buf[64];
    if (n >= (1ull << 30))
        std::snprintf(buf, sizeof buf, "%.2f GiB", (double)n / (double)(1ull << 30));
    else
        std::snprintf(buf, sizeof buf, "%.2f MiB", (double)n / (double)(1ull << 20));
    return buf;
}

[[noreturn]] static void throw_oom(size_t size, const std::string &why)
{
    std::string msg = "CUDA out of memory. Tried to allocate " + size_text(size) + ". " + why;
    throw c10::OutOfMemoryError(c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg);
}

extern "C" __attribute__((visibility("default"))) void *cmb_torch_oom_malloc(size_t size, int device, void *stream)
{
    void *p;
    try {
        p = cmb_torch_malloc(size, device, stream);
    } catch (const std::runtime_error &e) {
        throw_oom(size, e.what());
    }
    if (!p && size)
        throw_oom(size, std::string("cumembench pluggable: ") + cmb_pluggable_last_error());
    return p;
}

extern "C" __attribute__((visibility("default"))) void cmb_torch_oom_free(void *ptr, size_t size, int device,
                                                                          void *stream)
{
    cmb_torch_free(ptr, size, device, stream);
}
