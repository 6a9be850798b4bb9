/* real.c - "real:<name>": resolving a real allocator to its plug-in.
 *
 * The table below names, for each original library the suite emulates,
 * its plug-in (built from real/<library>/ where CMake finds the library),
 * its options and what to install where it is missing. Resolution happens
 * once per process (the parent to plan and skip, each case's child to run).
 */
#define _GNU_SOURCE
#include "real.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/cmb_units.h"
#include "../real/cmb_real_plugin.h"

/* --- the real allocators ------------------------------------------------------------------ */

/* The emulation's option names, each mapped by the plug-in to PyTorch's
 * PYTORCH_CUDA_ALLOC_CONF key of the same meaning (docs/real.md). */
static const cmb_real_option torch_options[] = {
    {"max_split_size", CMB_REAL_SIZE, "blocks above it are never split (max_split_size_mb, in MiB)"},
    {"max_split_size_mb", CMB_REAL_COUNT, "the same in MiB, as PyTorch spells it"},
    {"max_non_split_rounding_size", CMB_REAL_SIZE, "oversize requests round up within this (max_non_split_rounding_mb)"},
    {"max_non_split_rounding_mb", CMB_REAL_COUNT, "the same in MiB, as PyTorch spells it"},
    {"roundup_power2_divisions", CMB_REAL_TEXT, "N, or MB=N/MB=N/>=N per size interval"},
    {"garbage_collection_threshold", CMB_REAL_REAL, "fraction in (0, 1) of the memory limit that starts freeing cached blocks"},
    {"per_process_memory_fraction", CMB_REAL_REAL, "setMemoryFraction: share of the device the allocator may hold"},
};

static const cmb_real_option pool_options[] = {
    {"initial_pool_size", CMB_REAL_SIZE, "initial pool (default: percent_of_free_device_memory(50))"},
    {"maximum_pool_size", CMB_REAL_SIZE, "the pool never grows beyond it (default: no maximum)"},
};

static const cmb_real_option arena_options[] = {
    {"arena_size", CMB_REAL_SIZE, "size of the global arena (default: RMM's, half the free memory)"},
};

static const cmb_real_option binning_options[] = {
    {"min_bin_exp", CMB_REAL_COUNT, "smallest bin 2^N bytes (default 18)"},
    {"max_bin_exp", CMB_REAL_COUNT, "largest bin 2^N bytes (default 22)"},
    {"initial_pool_size", CMB_REAL_SIZE, "the pool behind the bins: initial size"},
    {"maximum_pool_size", CMB_REAL_SIZE, "the pool behind the bins: maximum size"},
};

static const cmb_real_option async_options[] = {
    {"release_threshold", CMB_REAL_SIZE, "cudaMemPoolAttrReleaseThreshold (default: RMM's)"},
    {"initial_pool_size", CMB_REAL_SIZE, "allocated and freed once at creation (default: none)"},
};

static const cmb_real_option cupy_options[] = {
    {"limit", CMB_REAL_SIZE, "MemoryPool.set_limit(size=...)"},
    {"limit_fraction", CMB_REAL_REAL, "MemoryPool.set_limit(fraction=...)"},
};

#define OPTS(a) a, sizeof a / sizeof a[0]

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
     "", TORCH_INSTALL, TORCH_TIME, OPTS(torch_options)},
    {"real:torch-expandable", "torch-expandable",
     "PyTorch's c10 CUDACachingAllocator with expandable_segments:True", "libcmb_real_torch.so",
     "expandable_segments=true", TORCH_INSTALL, TORCH_TIME, OPTS(torch_options)},
    {"real:rmm-pool", "rmm-pool", "RMM's pool_memory_resource over cuda_memory_resource (librmm)",
     "libcmb_real_rmm.so", "", RMM_INSTALL, RMM_TIME, OPTS(pool_options)},
    {"real:arena", "arena", "RMM's arena_memory_resource over cuda_memory_resource (librmm)", "libcmb_real_rmm.so",
     "", RMM_INSTALL, RMM_TIME, OPTS(arena_options)},
    {"real:binning", "binning", "RMM's binning_memory_resource (bins 2^18..2^22) over a pool_memory_resource (librmm)",
     "libcmb_real_rmm.so", "", RMM_INSTALL, RMM_TIME, OPTS(binning_options)},
    {"real:cuda-async-retain", "cuda-async-retain", "RMM's cuda_async_memory_resource (librmm)",
     "libcmb_real_rmm.so", "", RMM_INSTALL, RMM_TIME " plus cudaMallocAsync / cudaFreeAsync",
     OPTS(async_options)},
    {"real:cupy", "cupy", "CuPy's MemoryPool, driven from C through the CPython API (cupy)", "libcmb_real_cupy.so",
     "",
     "pip install cupy-cuda13x (or cupy-cuda12x) for the python3 the build uses, with its libpython "
     "(python3-dev), and rebuild",
     "MemoryPool.malloc and the release of its MemoryPointer, each a Python call as every CuPy program "
     "makes it (the interpreter's share included)",
     OPTS(cupy_options)},
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

static const char *kind_text(cmb_real_kind k)
{
    switch (k) {
    case CMB_REAL_SIZE: return "a size such as 512, 64KiB, 2MiB, 1GiB, or max";
    case CMB_REAL_COUNT: return "a whole number";
    case CMB_REAL_REAL: return "a number";
    case CMB_REAL_BOOL: return "true or false";
    case CMB_REAL_TEXT: return "text";
    }
    return "?";
}

static int value_ok(cmb_real_kind k, const char *v)
{
    uint64_t u;
    double d;
    int b;
    switch (k) {
    case CMB_REAL_SIZE: return !strcmp(v, "max") || !strcmp(v, "unlimited") || !cmb_parse_size(v, &u);
    case CMB_REAL_COUNT: return !cmb_parse_u64(v, &u);
    case CMB_REAL_REAL: return !cmb_parse_double(v, &d);
    case CMB_REAL_BOOL: return !cmb_parse_bool(v, &b);
    case CMB_REAL_TEXT: return *v != '\0';
    }
    return 0;
}

int cmb_real_check_option(const cmb_real_info *ri, const char *key, const char *value, char *err, size_t errlen)
{
    for (size_t i = 0; i < ri->n_options; i++) {
        if (strcmp(ri->options[i].key, key))
            continue;
        if (value_ok(ri->options[i].kind, value))
            return 0;
        snprintf(err, errlen, "%s: option %s=%s: expected %s", ri->name, key, value, kind_text(ri->options[i].kind));
        return -1;
    }
    size_t used = (size_t)snprintf(err, errlen, "%s: unknown option '%s' (known:", ri->name, key);
    for (size_t i = 0; i < ri->n_options && used < errlen; i++)
        used += (size_t)snprintf(err + used, errlen - used, "%s %s", i ? "," : "", ri->options[i].key);
    if (!ri->n_options && used < errlen)
        used += (size_t)snprintf(err + used, errlen - used, " none");
    if (used < errlen)
        snprintf(err + used, errlen - used, ")");
    return -1;
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

/* Loads the plug-in at `path` and takes its table for ri; 0, or -1 with
 * st->why set. The library stays loaded for the life of the process. */
static int load(const cmb_real_info *ri, const char *path, resolved *st)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(st->why, sizeof st->why, "cannot load %s (%s): %s", path, dlerror(), ri->install);
        return -1;
    }
    cmb_real_entry_fn entry = (cmb_real_entry_fn)dlsym(lib, CMB_REAL_ENTRY_SYMBOL);
    const cmb_allocator_methods *m = entry ? entry(CMB_ALLOCATOR_ABI_VERSION, ri->name) : NULL;
    if (!m || m->abi_version != CMB_ALLOCATOR_ABI_VERSION || !m->create || !m->allocate || !m->deallocate ||
        !m->stats || !m->destroy) {
        snprintf(st->why, sizeof st->why, "%s holds no table of %s for allocator ABI version %u: rebuild it",
                 path, ri->name, CMB_ALLOCATOR_ABI_VERSION);
        dlclose(lib);
        return -1;
    }
    cmb_real_probe_fn probe = (cmb_real_probe_fn)dlsym(lib, CMB_REAL_PROBE_SYMBOL);
    char reason[320] = "";
    if (probe && probe(ri->name, reason, sizeof reason)) {
        snprintf(st->why, sizeof st->why, "%s: %s", reason[0] ? reason : "library not usable", ri->install);
        return -1; /* stays loaded: its probe may have started an interpreter */
    }
    st->entry.methods = m;
    return 0;
}

const cmb_allocator_entry *cmb_real_resolve(const cmb_real_info *ri, char *why, size_t whylen)
{
    resolved *st = state_of(ri);
    if (!st->done) {
        st->done = 1;
        st->entry = (cmb_allocator_entry){ri->name, NULL, ri->defaults, NULL, NULL};
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
    for (size_t i = 0; i < ri->n_options; i++)
        fprintf(f, "      :%s=%s  %s\n", ri->options[i].key,
                ri->options[i].kind == CMB_REAL_SIZE    ? "SIZE"
                : ri->options[i].kind == CMB_REAL_COUNT ? "N"
                : ri->options[i].kind == CMB_REAL_REAL  ? "X"
                : ri->options[i].kind == CMB_REAL_BOOL  ? "BOOL"
                                                        : "TEXT",
                ri->options[i].help);
}

void cmb_real_list(FILE *f)
{
    fprintf(f, "\nreal allocators (the original libraries, beside their emulations; plug-ins from $%s or "
               "<build>/real; docs/real.md):\n",
            CMB_REAL_DIR_ENV);
    for (size_t i = 0; i < N_REALS; i++)
        list_one(f, &reals[i]);
}
