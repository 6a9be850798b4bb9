/* cublas_loader.c - cuBLAS opened at run time (see cublas_loader.h). */
#include "cublas_loader.h"

#include <dlfcn.h>
#include <stdio.h>

#define CMB_STR_(x) #x
#define CMB_STR(x) CMB_STR_(x)
/* the major version this build was compiled against: its ABI */
#define CUBLAS_SONAME "libcublas.so." CMB_STR(CUBLAS_VER_MAJOR)

static _cmb_cublas_api api;
static int loaded;
static char load_error[256];

static int take(void *lib, void **slot, const char *name)
{
    *slot = dlsym(lib, name);
    if (*slot)
        return 0;
    snprintf(load_error, sizeof load_error, "%s has no %s", CUBLAS_SONAME, name);
    return -1;
}

static int load(void)
{
    void *lib = dlopen(CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(load_error, sizeof load_error, "cannot open %s: %s", CUBLAS_SONAME, dlerror());
        return -1;
    }
    if (take(lib, (void **)&api.create, "cublasCreate_v2") || take(lib, (void **)&api.destroy, "cublasDestroy_v2") ||
        take(lib, (void **)&api.set_stream, "cublasSetStream_v2") ||
        take(lib, (void **)&api.set_workspace, "cublasSetWorkspace_v2") ||
        take(lib, (void **)&api.sgemm, "cublasSgemm_v2") || take(lib, (void **)&api.dgemm, "cublasDgemm_v2") ||
        take(lib, (void **)&api.status_string, "cublasGetStatusString")) {
        dlclose(lib);
        return -1;
    }
    return 0; /* kept open for the life of the process */
}

const _cmb_cublas_api *_cmb_cublas_load(char *err, size_t errlen)
{
    if (!loaded)
        loaded = load() == 0 ? 1 : -1;
    if (loaded > 0)
        return &api;
    snprintf(err, errlen, "%s", load_error);
    return NULL;
}
