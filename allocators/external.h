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

/* --- a process that must not run plug-in code -----------------------------
 *
 * cumembench's parent plans a run without running a line of any plug-in:
 * it installs a loader, and every load (cmb_external_load, and real.c's
 * loading of real: plug-ins) goes to it instead of dlopen. The loader
 * (harness/plugin_probe.c) has a short-lived process load and check the
 * plug-in and answers with a table that describes it (name, summary,
 * flags, options) and whose methods refuse to run. `real_name` is NULL
 * for external:, else "real:NAME". 0, or -1 with a one-line reason. */
typedef int (*cmb_plugin_loader_fn)(const char *path, const char *real_name, const cmb_allocator_methods **out,
                                    char *err, size_t errlen);
void cmb_plugin_loader_set(cmb_plugin_loader_fn fn);
cmb_plugin_loader_fn cmb_plugin_loader_get(void);

/* A table a plug-in returned for ABI `version` as a whole table of today's
 * (the fields added since then empty); NULL when m is NULL or claims
 * another version. Used by the loaders of external: and real: plug-ins. */
const cmb_allocator_methods *cmb_methods_from_abi(const cmb_allocator_methods *m, uint32_t version);

#ifdef __cplusplus
}
#endif

#endif /* CMB_EXTERNAL_H */
