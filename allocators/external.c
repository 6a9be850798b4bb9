/* external.c - "external:/path/lib.so": a user's allocator, loaded at run
 * time with dlopen, so it is benchmarked without rebuilding the suite.
 *
 * The library exports
 *     const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version);
 * (cmb_allocator.h, the only header it needs). The table is checked: the
 * ABI version must match and create/allocate/deallocate/stats/destroy must
 * be present. The plug-in may take memory from the upstream it is given
 * (through the function pointers of cmb_upstream.h) or call CUDA itself.
 */
#include "external.h"

#include <dlfcn.h>
#include <stdio.h>

int cmb_external_load(const char *path, const cmb_allocator_methods **out, char *err, size_t errlen)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "cannot load external allocator %s: %s", path, dlerror());
        return -1;
    }
    cmb_plugin_entry_fn entry = (cmb_plugin_entry_fn)dlsym(lib, CMB_PLUGIN_ENTRY_SYMBOL);
    if (!entry) {
        snprintf(err, errlen, "%s does not export %s()", path, CMB_PLUGIN_ENTRY_SYMBOL);
        dlclose(lib);
        return -1;
    }
    const cmb_allocator_methods *m = entry(CMB_ALLOCATOR_ABI_VERSION);
    if (!m) {
        snprintf(err, errlen, "%s does not support allocator ABI version %u", path, CMB_ALLOCATOR_ABI_VERSION);
        dlclose(lib);
        return -1;
    }
    if (m->abi_version != CMB_ALLOCATOR_ABI_VERSION || !m->name || !m->create || !m->allocate ||
        !m->deallocate || !m->stats || !m->destroy) {
        snprintf(err, errlen, "%s: incomplete method table (ABI version %u, need %u and create, allocate, "
                 "deallocate, stats, destroy)", path, m->abi_version, CMB_ALLOCATOR_ABI_VERSION);
        dlclose(lib);
        return -1;
    }
    *out = m; /* the library stays loaded */
    return 0;
}
