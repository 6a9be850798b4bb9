/* external.h - loading a user's allocator from a shared library. */
#ifndef CMB_EXTERNAL_H
#define CMB_EXTERNAL_H

#include "cmb_allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dlopens `path`, calls its cmb_plugin_allocator(CMB_ALLOCATOR_ABI_VERSION)
 * (else with each older version down to CMB_ALLOCATOR_ABI_VERSION_MIN) and
 * checks the table. 0, or -1 with a one-line reason. The library stays
 * loaded for the life of the process. */
int cmb_external_load(const char *path, const cmb_allocator_methods **out, char *err, size_t errlen);

/* A table a plug-in returned for ABI `version` as a whole table of today's
 * (the fields added since then empty); NULL when m is NULL or claims
 * another version. Used by the loaders of external: and real: plug-ins. */
const cmb_allocator_methods *cmb_methods_from_abi(const cmb_allocator_methods *m, uint32_t version);

#ifdef __cplusplus
}
#endif

#endif /* CMB_EXTERNAL_H */
