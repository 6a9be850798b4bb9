/* real.c - "real:<name>": resolving a real allocator to its plug-in.
 *
 * The table below names, for each original library the suite emulates,
 * its plug-in (built from real/<library>/ where CMake finds the library),
 * its options and what to install where it is missing. Resolution happens
 * once per process: each case's child loads the plug-in to run it; the
 * parent, which plans and skips, only learns from a probe process what the
 * plug-in holds (cmb_plugin_loader_set, harness/plugin_probe.c).
 */
#define _GNU_SOURCE
#include "real.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/cmb_units.h"
#include "cmb_real_plugin.h"
#include "cmb_real_options.h"
#include "cmb_option_check.h"
#include "external.h"
#include "options.h"

/* --- the real allocators ------------------------------------------------------------------ */

/* The options of each: allocators/cmb_real_options.h (the plug-ins read the same). */

#define TORCH_INSTALL                                                                                      \
    "install PyTorch with CUDA (pip install torch) for the python3 the build uses, or give CMake "          \
    "-DTorch_DIR=, and rebuild"
#define TORCH_TIME                                                                                         \
    "raw_alloc_with_stream + raw_delete from C++: the allocator's mutex, block and pointer maps, stats "    \
    "and events, no Python"
#define RMM_INSTALL                                                                                        \
    "pip install librmm-cu13 (or librmm-cu12; rapids-logger comes with it), or give CMake "                \
    "-DCMB_RMM_ROOT=<directory holding librmm/>, and rebuild"
#define RMM_TIME "the resource's allocate/deallocate called from C++ (its mutex, per-stream free lists and events)"

static const cmb_real_info reals[] = {
    {"real:torch-caching", "torch-caching", "PyTorch's c10 CUDACachingAllocator (libc10_cuda)", "libcmb_real_torch.so",
     "", TORCH_INSTALL, TORCH_TIME, cmb_real_torch_options},
    {"real:torch-expandable", "torch-expandable",
     "PyTorch's c10 CUDACachingAllocator with expandable_segments:True", "libcmb_real_torch.so",
     "expandable_segments=true", TORCH_INSTALL, TORCH_TIME, cmb_real_torch_options},
    {"real:rmm-pool", "rmm-pool", "RMM's pool_memory_resource over cuda_memory_resource (librmm)",
     "libcmb_real_rmm.so", "", RMM_INSTALL, RMM_TIME, cmb_real_pool_options},
    {"real:arena", "arena", "RMM's arena_memory_resource over cuda_memory_resource (librmm)", "libcmb_real_rmm.so",
     "", RMM_INSTALL, RMM_TIME, cmb_real_arena_options},
    {"real:binning", "binning", "RMM's binning_memory_resource (bins 2^18..2^22) over a pool_memory_resource (librmm)",
     "libcmb_real_rmm.so", "", RMM_INSTALL, RMM_TIME, cmb_real_binning_options},
    {"real:cuda-async-retain", "cuda-async-retain", "RMM's cuda_async_memory_resource (librmm)",
     "libcmb_real_rmm.so", "", RMM_INSTALL, RMM_TIME " plus cudaMallocAsync / cudaFreeAsync",
     cmb_real_async_options},
    {"real:cupy", "cupy", "CuPy's MemoryPool, driven from C through the CPython API (cupy)", "libcmb_real_cupy.so",
     "",
     "pip install cupy-cuda13x (or cupy-cuda12x) for the python3 the build uses, with its libpython "
     "(python3-dev), and rebuild",
     "MemoryPool.malloc and the release of its MemoryPointer, each a Python call as every CuPy program "
     "makes it (the interpreter's share included)",
     cmb_real_cupy_options},
};

#define N_REALS (sizeof reals / sizeof reals[0])

size_t cmb_real_count(void)
{
    return N_REALS;
}

const cmb_real_info *cmb_real_at(size_t i)
{
    return i < N_REALS ? &reals[i] : NULL;
}

const cmb_real_info *cmb_real_find(const char *name)
{
    for (size_t i = 0; name && i < N_REALS; i++)
        if (!strcmp(reals[i].name, name))
            return &reals[i];
    return NULL;
}

/* --- options ------------------------------------------------------------------------------------ */

int cmb_real_check_option(const cmb_real_info *ri, const char *key, const char *value, char *err, size_t errlen)
{
    const cmb_option_decl *d = cmb_optck_find(ri->options, key);
    if (!d)
        return cmb_optck_unknown(ri->name, ri->options, key, err, errlen);
    return cmb_optck_value(ri->name, d, value, err, errlen);
}

/* --- the table of an allocator that cannot run here ------------------------------------------- */

typedef struct resolved {
    int done;
    cmb_allocator_entry entry;
    cmb_allocator_methods missing; /* the refusing table, when unavailable */
    char path[PATH_MAX];
    char why[512];
} resolved;

static resolved states[N_REALS];

static resolved *state_of(const cmb_real_info *ri)
{
    return &states[ri - reals];
}

/* create() of an unavailable allocator: the name tells which one. */
static cmb_status missing_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    (void)up;
    (void)state;
    snprintf(cfg->error, cfg->error_len, "a real allocator whose plug-in or library is missing here "
                                         "(cumembench --list says what to install)");
    return CMB_ERR_UNSUPPORTED;
}

static cmb_status missing_op(void *state)
{
    (void)state;
    return CMB_ERR_STATE;
}

static cmb_status missing_alloc(void *state, size_t size, cmb_stream stream, void **ptr)
{
    (void)size, (void)stream, (void)ptr;
    return missing_op(state);
}

static cmb_status missing_free(void *state, void *ptr, size_t size, cmb_stream stream)
{
    (void)ptr, (void)size, (void)stream;
    return missing_op(state);
}

static cmb_status missing_stats(void *state, cmb_alloc_stats *out)
{
    (void)out;
    return missing_op(state);
}

/* --- locating and loading a plug-in -------------------------------------------------------------- */

static int file_exists(const char *path)
{
    return access(path, R_OK) == 0;
}

/* The first candidate path that exists, else 0 and out = the build
 * directory's candidate (for the message). */
static int locate(const cmb_real_info *ri, char *out, size_t len)
{
    const char *env = getenv(CMB_REAL_DIR_ENV);
    if (env && *env) {
        char dirs[PATH_MAX];
        char *save = NULL;
        snprintf(dirs, sizeof dirs, "%s", env);
        for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
            snprintf(out, len, "%s/%s", d, ri->plugin);
            if (file_exists(out))
                return 1;
        }
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 0;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, len, "%s/real/%s", self, ri->plugin);
    return file_exists(out);
}

int cmb_real_load(const cmb_real_info *ri, const char *path, const cmb_allocator_methods **out, char *why,
                  size_t whylen)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, whylen, "cannot load %s (%s): %s", path, dlerror(), ri->install);
        return -1;
    }
    cmb_real_entry_fn entry = (cmb_real_entry_fn)dlsym(lib, CMB_REAL_ENTRY_SYMBOL);
    const cmb_allocator_methods *m = entry ? entry(CMB_ALLOCATOR_ABI_VERSION, ri->name) : NULL;
    for (uint32_t v = CMB_ALLOCATOR_ABI_VERSION; entry && !m && v-- > CMB_ALLOCATOR_ABI_VERSION_MIN;)
        m = cmb_methods_from_abi(entry(v, ri->name), v); /* a plug-in built before the last bump */
    if (!m || m->abi_version < CMB_ALLOCATOR_ABI_VERSION_MIN || m->abi_version > CMB_ALLOCATOR_ABI_VERSION ||
        !m->create || !m->allocate || !m->deallocate || !m->stats || !m->destroy) {
        snprintf(why, whylen, "%s holds no table of %s for allocator ABI version %u: rebuild it", path, ri->name,
                 CMB_ALLOCATOR_ABI_VERSION);
        dlclose(lib);
        return -1;
    }
    cmb_real_probe_fn probe = (cmb_real_probe_fn)dlsym(lib, CMB_REAL_PROBE_SYMBOL);
    char reason[320] = "";
    if (probe && probe(ri->name, reason, sizeof reason)) {
        snprintf(why, whylen, "%s: %s", reason[0] ? reason : "library not usable", ri->install);
        return -1; /* stays loaded: its probe may have started an interpreter */
    }
    *out = m;
    return 0;
}

/* The table for ri from the plug-in at `path`: loaded here, or where a
 * plug-in loader is installed (cumembench's parent), described by it. 0,
 * or -1 with st->why set. */
static int load(const cmb_real_info *ri, const char *path, resolved *st)
{
    cmb_plugin_loader_fn loader = cmb_plugin_loader_get();
    const cmb_allocator_methods *m = NULL;
    int rc = loader ? loader(path, ri->name, &m, st->why, sizeof st->why)
                    : cmb_real_load(ri, path, &m, st->why, sizeof st->why);
    if (!rc)
        st->entry.methods = m;
    return rc;
}

const cmb_allocator_entry *cmb_real_resolve(const cmb_real_info *ri, char *why, size_t whylen)
{
    resolved *st = state_of(ri);
    if (!st->done) {
        st->done = 1;
        st->entry = (cmb_allocator_entry){ri->name, NULL, ri->defaults, NULL, NULL, NULL};
        char where[PATH_MAX];
        if (!locate(ri, where, sizeof where)) {
            snprintf(st->why, sizeof st->why, "plug-in %s not built (looked in $%s and %s): %s", ri->plugin,
                     CMB_REAL_DIR_ENV, where, ri->install);
        } else {
            if (!load(ri, where, st))
                memcpy(st->path, where, sizeof where);
        }
        if (!st->entry.methods) {
            st->missing = (cmb_allocator_methods){
                .abi_version = CMB_ALLOCATOR_ABI_VERSION,
                .name = ri->name,
                .summary = ri->library,
                .flags = CMB_ALLOC_NEEDS_GPU,
                .create = missing_create,
                .allocate = missing_alloc,
                .deallocate = missing_free,
                .stats = missing_stats,
                .destroy = missing_op,
            };
            st->entry.methods = &st->missing;
        }
    }
    snprintf(why, whylen, "%s", st->why);
    return &st->entry;
}

const char *cmb_real_plugin_path(const cmb_real_info *ri)
{
    return state_of(ri)->path;
}

/* --- --list ----------------------------------------------------------------------------------------- */

static void list_one(FILE *f, const cmb_real_info *ri)
{
    char why[512];
    cmb_real_resolve(ri, why, sizeof why);
    fprintf(f, "  %-22s %s, beside %s  [GPU only]\n", ri->name, ri->library, ri->emulation);
    if (why[0])
        fprintf(f, "      NOT FOUND: %s\n", why);
    else
        fprintf(f, "      found: %s\n", cmb_real_plugin_path(ri));
    fprintf(f, "      time includes: %s\n", ri->time_includes);
    cmb_allocator_describe_options(ri->name, f);
}

void cmb_real_list(FILE *f)
{
    fprintf(f, "\nreal allocators (the original libraries, beside their emulations; plug-ins from $%s or "
               "<build>/real; docs/real.md):\n",
            CMB_REAL_DIR_ENV);
    for (size_t i = 0; i < N_REALS; i++)
        list_one(f, &reals[i]);
}
