/* external.c - "external:/path/lib.so": a user's allocator, loaded at run
 * time with dlopen, so it is benchmarked without rebuilding the suite.
 *
 * The library exports
 *     const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version);
 * (cmb_allocator.h, the only header it needs). The table is checked: the
 * ABI version must be today's or an older one still read
 * (CMB_ALLOCATOR_ABI_VERSION_MIN), and create/allocate/deallocate/stats/
 * destroy must be present. The plug-in may take memory from the upstream it is given
 * (through the function pointers of cmb_upstream.h) or call CUDA itself.
 */
#include "external.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the loader of a process that must not run plug-in code ----------------------- */

static cmb_plugin_loader_fn plugin_loader;

void cmb_plugin_loader_set(cmb_plugin_loader_fn fn)
{
    plugin_loader = fn;
}

cmb_plugin_loader_fn cmb_plugin_loader_get(void)
{
    return plugin_loader;
}

/* --- loading here ------------------------------------------------------------------------ */

int cmb_external_load(const char *path, const cmb_allocator_methods **out, char *err, size_t errlen)
{
    if (plugin_loader)
        return plugin_loader(path, NULL, out, err, errlen);
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
    for (uint32_t v = CMB_ALLOCATOR_ABI_VERSION; !m && v-- > CMB_ALLOCATOR_ABI_VERSION_MIN;)
        m = cmb_methods_from_abi(entry(v), v);
    if (!m) {
        snprintf(err, errlen, "%s does not support allocator ABI version %u (nor %u)", path, CMB_ALLOCATOR_ABI_VERSION,
                 CMB_ALLOCATOR_ABI_VERSION_MIN);
        dlclose(lib);
        return -1;
    }
    if (m->abi_version < CMB_ALLOCATOR_ABI_VERSION_MIN || m->abi_version > CMB_ALLOCATOR_ABI_VERSION || !m->name ||
        !m->create || !m->allocate || !m->deallocate || !m->stats || !m->destroy) {
        snprintf(err, errlen, "%s: incomplete method table (ABI version %u, need %u and create, allocate, "
                 "deallocate, stats, destroy)", path, m->abi_version, CMB_ALLOCATOR_ABI_VERSION);
        dlclose(lib);
        return -1;
    }
    *out = m; /* the library stays loaded */
    return 0;
}

/* A table of an older version is a prefix of today's: copy it into a whole
 * one whose later fields are empty (version 1: no option declarations;
 * version 2: no free account).
 * The copy lives as long as the process, like the library. */
const cmb_allocator_methods *cmb_methods_from_abi(const cmb_allocator_methods *m, uint32_t version)
{
    if (!m || version >= CMB_ALLOCATOR_ABI_VERSION)
        return m;
    if (m->abi_version != version)
        return NULL;
    /* One copy per table, kept where it stays reachable (a library loaded
     * twice hands back the same table): no copy per load, none leaked. */
    static struct {
        const cmb_allocator_methods *from;
        cmb_allocator_methods whole;
    } copies[16];
    static size_t n_copies;
    for (size_t i = 0; i < n_copies; i++)
        if (copies[i].from == m)
            return &copies[i].whole;
    if (n_copies == sizeof copies / sizeof copies[0])
        return NULL;
    cmb_allocator_methods *whole = &copies[n_copies].whole;
    memset(whole, 0, sizeof *whole);
    /* version 1 ends before `options`, version 2 before `free_account` */
    memcpy(whole, m, version == 1 ? offsetof(cmb_allocator_methods, options)
                                  : offsetof(cmb_allocator_methods, free_account));
    copies[n_copies++].from = m;
    return whole;
}
