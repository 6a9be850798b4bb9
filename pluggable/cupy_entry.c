/* cupy_entry.c - CuPy's CFunctionAllocator pair.
 *
 * cupy/cuda/memory.pyx (CuPy 13-14) calls malloc as
 * void *(*)(void *param, size_t size, int device_id), only for size > 0,
 * and free as void (*)(void *param, void *ptr, int device_id), only for a
 * non-NULL pointer; it checks no result, so a NULL return becomes a
 * MemoryPointer at address 0 unless the caller checks (python/
 * cumembench_alloc.py's install_cupy does, and raises CuPy's
 * OutOfMemoryError). Neither call carries a stream, so `param` does: it is
 * the stream to allocate on (a CuPy Stream's .ptr; 0 is the legacy default
 * stream). The Python module keeps one CFunctionAllocator per stream and
 * picks the current stream's at each allocation, with no ctypes call on
 * the way. A free goes back to the stream its block was allocated on.
 */
#include "pl_internal.h"

void *cmb_cupy_malloc(void *param, size_t size, int device)
{
    return _cmb_pl_malloc(size, device, param, 1);
}

void cmb_cupy_free(void *param, void *ptr, int device)
{
    (void)param;
    _cmb_pl_free(ptr, 0, device, NULL, 0);
}
