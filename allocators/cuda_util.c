/* cuda_util.c - CUDA error translation and run-time driver entry points. */
#include "cuda_util.h"

#include <pthread.h>
#include <stdio.h>

cmb_status _cmb_cuda_status(cudaError_t e)
{
    if (e == cudaSuccess)
        return CMB_OK;
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* an OOM is not sticky: clear it */
        return CMB_ERR_OOM;
    }
    return CMB_ERR_CUDA;
}

void _cmb_cuda_note(char *buf, size_t len, const char *what, cudaError_t e)
{
    snprintf(buf, len, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

static _cmb_driver_api driver;
static int driver_state; /* 0 not tried, 1 loaded, -1 failed */
static char driver_err[256];
static pthread_mutex_t driver_lock = PTHREAD_MUTEX_INITIALIZER;

static int load_symbol(const char *name, void **fn)
{
    enum cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn) {
        snprintf(driver_err, sizeof driver_err, "driver entry point %s unavailable: %s", name,
                 e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found");
        return -1;
    }
    return 0;
}

static void load_driver(void)
{
    struct {
        const char *name;
        void **slot;
    } table[] = {
        {"cuMemAddressReserve", (void **)&driver.cuMemAddressReserve},
        {"cuMemAddressFree", (void **)&driver.cuMemAddressFree},
        {"cuMemCreate", (void **)&driver.cuMemCreate},
        {"cuMemRelease", (void **)&driver.cuMemRelease},
        {"cuMemMap", (void **)&driver.cuMemMap},
        {"cuMemUnmap", (void **)&driver.cuMemUnmap},
        {"cuMemSetAccess", (void **)&driver.cuMemSetAccess},
        {"cuMemGetAllocationGranularity", (void **)&driver.cuMemGetAllocationGranularity},
        {"cuGetErrorString", (void **)&driver.cuGetErrorString},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (load_symbol(table[i].name, table[i].slot)) {
            driver_state = -1;
            return;
        }
    }
    driver_state = 1;
}

const _cmb_driver_api *_cmb_driver(char *err, size_t errlen)
{
    pthread_mutex_lock(&driver_lock);
    if (driver_state == 0)
        load_driver();
    pthread_mutex_unlock(&driver_lock);
    if (driver_state < 0) {
        if (err)
            snprintf(err, errlen, "%s", driver_err);
        return NULL;
    }
    return &driver;
}
