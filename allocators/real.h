/* real.h - "real:<name>": the original libraries beside their emulations.
 *
 * Each real allocator is the library an emulation imitates (PyTorch's
 * CUDACachingAllocator, RMM's memory resources, CuPy's MemoryPool), run
 * through a plug-in (real/<library>/) that CMake builds where the library
 * is found. Nothing here links the libraries: the plug-in is located at run
 * time, in this order, in
 *   1. every directory of $CUMEMBENCH_REAL_DIR (':'-separated);
 *   2. <directory of the cumembench binary>/real (the build directory);
 * loaded with dlopen, and asked for its table by name. Where it is missing,
 * or its library cannot be loaded, the allocator resolves to a table that
 * refuses to run and a one-line reason naming what to install; the runner
 * skips its cases with that reason, and the other cases run.
 *
 * Options are declared here, so a typo is refused (exit 2) before anything
 * runs, also where the plug-in is missing; the plug-in checks them again.
 */
#ifndef CMB_REAL_H
#define CMB_REAL_H

#include <stddef.h>
#include <stdio.h>

#include "cmb_allocator.h"
#include "registry.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CMB_REAL_PREFIX "real:"
#define CMB_REAL_DIR_ENV "CUMEMBENCH_REAL_DIR"

typedef struct cmb_real_info {
    const char *name;          /* "real:torch-caching"                          */
    const char *emulation;     /* the suite's emulation of it: "torch-caching"  */
    const char *library;       /* what it is, one line                          */
    const char *plugin;        /* file name of its plug-in                      */
    const char *defaults;      /* options the plug-in gets before the user's    */
    const char *install;       /* what to install where it is missing           */
    const char *time_includes; /* what its measured time contains               */
    const cmb_option_decl *options; /* allocators/cmb_real_options.h, ending with {NULL}    */
} cmb_real_info;

size_t cmb_real_count(void);
const cmb_real_info *cmb_real_at(size_t i);
/* "real:NAME" (the prefix included), or NULL. */
const cmb_real_info *cmb_real_find(const char *name);

/* 0 when `key=value` is an option of `ri` with a well-formed value; else
 * -1 with a one-line reason naming the known options. */
int cmb_real_check_option(const cmb_real_info *ri, const char *key, const char *value, char *err, size_t errlen);

/* The registry entry to run `ri` with (resolved once per process): its
 * methods are the plug-in's table, or, where it cannot run here, a table
 * whose create() refuses with the reason, which is also written to `why`
 * (empty when it can run). The entry's `emulates` is NULL: it is real. */
const cmb_allocator_entry *cmb_real_resolve(const cmb_real_info *ri, char *why, size_t whylen);

/* Loads the plug-in at `path` here (dlopen) and takes its table for ri,
 * checking the ABI and the plug-in's own probe of its library: 0, or -1
 * with a one-line reason. The library stays loaded. cmb_real_resolve calls
 * it, or, where a plug-in loader is installed (external.h), the loader,
 * whose probe process calls it. */
int cmb_real_load(const cmb_real_info *ri, const char *path, const cmb_allocator_methods **out, char *why,
                  size_t whylen);

/* Where the plug-in was found ("" when not). Valid after cmb_real_resolve. */
const char *cmb_real_plugin_path(const cmb_real_info *ri);

/* The --list section: every real allocator, whether it was found (and
 * where) or why not, its options and what its time includes. */
void cmb_real_list(FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* CMB_REAL_H */
