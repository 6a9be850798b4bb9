/* cmb_real_plugin.h - what a plug-in of an original library exports, on
 * top of the allocator ABI (allocators/cmb_allocator.h).
 *
 * One plug-in serves one library and may hold several allocators of it
 * (libcmb_real_rmm.so: rmm-pool, arena, binning, cuda-async-retain). The
 * suite (allocators/real.c) asks it for each table by name:
 *
 *     const cmb_allocator_methods *cmb_real_allocator(uint32_t abi_version, const char *name);
 *
 * with the name as the user writes it ("real:rmm-pool"); NULL when the
 * plug-in does not hold that allocator or not that ABI version. A plug-in
 * may also export
 *
 *     int cmb_real_probe(const char *name, char *why, size_t len);
 *
 * which says, without touching a GPU, whether the library itself can be
 * used (0), or writes a one-line reason (non-zero): CuPy's plug-in checks
 * that its Python finds the cupy package. Every plug-in also exports
 * cmb_plugin_allocator(), returning its first table, so it loads as
 * `external:/path/libcmb_real_X.so` too.
 *
 * Tables of real allocators set CMB_ALLOC_NEEDS_GPU and not
 * CMB_ALLOC_USES_UPSTREAM: the library takes its memory from the CUDA
 * driver itself, as it does in the programs that use it.
 */
#ifndef CMB_REAL_PLUGIN_H
#define CMB_REAL_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "cmb_allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CMB_REAL_ENTRY_SYMBOL "cmb_real_allocator"
typedef const cmb_allocator_methods *(*cmb_real_entry_fn)(uint32_t abi_version, const char *name);

#define CMB_REAL_PROBE_SYMBOL "cmb_real_probe"
typedef int (*cmb_real_probe_fn)(const char *name, char *why, size_t len);

#define CMB_REAL_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
}
#endif

#endif /* CMB_REAL_PLUGIN_H */
