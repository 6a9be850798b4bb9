/* cmb_torch.h - calls specific to the PyTorch allocators ("torch-caching",
 * "torch-expandable") beyond the common method table.
 */
#ifndef CMB_TORCH_H
#define CMB_TORCH_H

#include "cmb_allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's Tensor.record_stream(): the block at `ptr`, allocated on its own
 * stream, was also used on `stream`. When the program frees it, the block
 * goes back to the cache only once an event recorded on `stream` at that
 * moment has completed (checked at the next allocate, or synchronously by
 * trim and by the out-of-memory retry). A use on the allocation stream is
 * ignored, as PyTorch ignores it.
 *
 * `m` and `state` are the allocator's method table and instance; any
 * allocator other than the two PyTorch ones gives CMB_ERR_UNSUPPORTED, so a
 * scenario may call this whatever allocator it runs. CMB_ERR_INVALID when
 * `ptr` is not a live block of this instance. */
cmb_status cmb_torch_record_stream(const cmb_allocator_methods *m, void *state, void *ptr, cmb_stream stream);

#ifdef __cplusplus
}
#endif

#endif /* CMB_TORCH_H */
