/* threads.cu - do the driver's virtual memory calls run in parallel from
 * several host threads, and do they hold up kernel launches on another?
 *
 * A growth of cmb's maps tens of handles, each cuMemCreate + cuMemMap +
 * cuMemSetAccess, 35-50 us a handle on an H200 whatever its size
 * (../cmb-va-warm/): time is the number of handles. Two ways to take it off
 * the allocating thread's path: split a growth's handles over a few threads,
 * or make them on a thread of their own while the program goes on launching.
 *  1. scale: T threads (1, 2, 4, 8) each make, map and set access on M
 *     handles of HANDLE_MIB over ranges of their own, then unmap and release
 *     them; wall time of the make-map-access phase and of the unmap-release
 *     phase, against T = 1 doing all T x M handles (the same total work);
 *  2. launch: the main thread launches L empty kernels and synchronizes,
 *     timed, alone and while one other thread makes, maps, sets access,
 *     unmaps and releases handles in a loop; also how many handles that thread
 *     got through meanwhile.
 * Driver entry points through cudaGetDriverEntryPointByVersion (no -lcuda).
 * usage: threads HANDLE_MIB M L REPS
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <atomic>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("threads: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { printf("threads: %s: CUresult %d (line %d)\n", #x, (int)r_, __LINE__); exit(1); } } while (0)

static CUresult (*pCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
static CUresult (*pMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
static CUresult (*pSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult (*pUnmap)(CUdeviceptr, size_t);
static CUresult (*pRelease)(CUmemGenericAllocationHandle);
static CUresult (*pReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*pCtxGetCurrent)(CUcontext *);
static CUresult (*pCtxSetCurrent)(CUcontext);

static void entry(const char *name, void **fn)
{
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !*fn) { printf("threads: no entry point %s\n", name); exit(1); }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__global__ void nop(void) {}

static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double median(double *v, int n) { qsort(v, n, sizeof *v, cmp); return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2; }

static CUmemAllocationProp prop;
static CUmemAccessDesc acc;
static CUcontext ctx;
static size_t hs;
static CUdeviceptr base;
static pthread_barrier_t bar;

typedef struct job {
    int idx, m;
    double map_us, unmap_us;
} job;

static void *grow(void *p)
{
    job *j = (job *)p;
    CU(pCtxSetCurrent(ctx));
    CUmemGenericAllocationHandle *h = (CUmemGenericAllocationHandle *)malloc(j->m * sizeof *h);
    CUdeviceptr va = base + (size_t)j->idx * j->m * hs;
    pthread_barrier_wait(&bar);
    double t0 = now_us();
    for (int i = 0; i < j->m; i++) {
        CU(pCreate(&h[i], hs, &prop, 0));
        CU(pMap(va + i * hs, hs, 0, h[i], 0));
        CU(pSetAccess(va + i * hs, hs, &acc, 1));
    }
    double t1 = now_us();
    pthread_barrier_wait(&bar);
    double t2 = now_us();
    for (int i = 0; i < j->m; i++) {
        CU(pUnmap(va + i * hs, hs));
        CU(pRelease(h[i]));
    }
    j->map_us = t1 - t0;
    j->unmap_us = now_us() - t2;
    free(h);
    return NULL;
}

/* T threads, m handles each; returns wall times of both phases */
static void scale(int t, int m, double *map_wall, double *unmap_wall)
{
    pthread_t th[8];
    job j[8];
    pthread_barrier_init(&bar, NULL, t);
    for (int i = 0; i < t; i++) {
        j[i] = (job){i, m, 0, 0};
        pthread_create(&th[i], NULL, grow, &j[i]);
    }
    double mw = 0, uw = 0;
    for (int i = 0; i < t; i++) {
        pthread_join(th[i], NULL);
        if (j[i].map_us > mw) mw = j[i].map_us;
        if (j[i].unmap_us > uw) uw = j[i].unmap_us;
    }
    pthread_barrier_destroy(&bar);
    *map_wall = mw;
    *unmap_wall = uw;
}

static std::atomic<int> stop;
static std::atomic<long> cycles;

static void *churn(void *p)
{
    (void)p;
    CU(pCtxSetCurrent(ctx));
    CUdeviceptr va = base;
    while (!stop.load()) {
        CUmemGenericAllocationHandle h;
        CU(pCreate(&h, hs, &prop, 0));
        CU(pMap(va, hs, 0, h, 0));
        CU(pSetAccess(va, hs, &acc, 1));
        CU(pUnmap(va, hs));
        CU(pRelease(h));
        cycles.fetch_add(1);
    }
    return NULL;
}

static double launches(int l)
{
    double t0 = now_us();
    for (int i = 0; i < l; i++)
        nop<<<1, 1>>>();
    CK(cudaDeviceSynchronize());
    return now_us() - t0;
}

int main(int argc, char **argv)
{
    if (argc != 5) { printf("usage: threads HANDLE_MIB M L REPS\n"); return 2; }
    hs = (size_t)atol(argv[1]) << 20;
    int m = atoi(argv[2]), l = atoi(argv[3]), reps = atoi(argv[4]);
    if (!hs || m < 1 || m > 4096 || l < 1 || reps < 1 || reps > 100) { printf("threads: bad arguments\n"); return 2; }
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    entry("cuMemCreate", (void **)&pCreate);
    entry("cuMemMap", (void **)&pMap);
    entry("cuMemSetAccess", (void **)&pSetAccess);
    entry("cuMemUnmap", (void **)&pUnmap);
    entry("cuMemRelease", (void **)&pRelease);
    entry("cuMemAddressReserve", (void **)&pReserve);
    entry("cuCtxGetCurrent", (void **)&pCtxGetCurrent);
    entry("cuCtxSetCurrent", (void **)&pCtxSetCurrent);
    CU(pCtxGetCurrent(&ctx));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(pReserve(&base, (size_t)8 * m * hs, 0, 0, 0));
    printf("handle %zu MiB, %d handles a thread, %d launches, %d repetitions\n", hs >> 20, m, l, reps);
    double mw[100], uw[100], one_m[100], one_u[100];
    scale(1, m, &mw[0], &uw[0]); /* warm-up */
    for (int t = 2; t <= 8; t *= 2) {
        for (int r = 0; r < reps; r++) {
            scale(1, t * m, &one_m[r], &one_u[r]);
            scale(t, m, &mw[r], &uw[r]);
        }
        double a = median(one_m, reps), b = median(mw, reps), c = median(one_u, reps), d = median(uw, reps);
        printf("scale T=%d, %d handles: make+map+access 1 thread %.0f us, %d threads %.0f us (%.2fx); unmap+release %.0f us, %.0f us (%.2fx)\n",
               t, t * m, a, t, b, a / b, c, d, c / d);
    }
    double alone[100], busy[100];
    launches(l);
    for (int r = 0; r < reps; r++) {
        alone[r] = launches(l);
        stop.store(0);
        cycles.store(0);
        pthread_t th;
        pthread_create(&th, NULL, churn, NULL);
        while (cycles.load() < 2)
            ;
        long c0 = cycles.load();
        double t0 = now_us();
        busy[r] = launches(l);
        double span = now_us() - t0;
        long c1 = cycles.load();
        stop.store(1);
        pthread_join(th, NULL);
        if (r == 0)
            printf("launch: during the first busy round the other thread made %ld handle cycles in %.0f us\n", c1 - c0, span);
    }
    double ma = median(alone, reps), mb = median(busy, reps);
    qsort(alone, reps, sizeof *alone, cmp);
    qsort(busy, reps, sizeof *busy, cmp);
    printf("launch: %d launches + sync alone %.0f us [%.0f-%.0f], beside a thread making handles %.0f us [%.0f-%.0f] (%.2fx)\n", l, ma,
           alone[0], alone[reps - 1], mb, busy[0], busy[reps - 1], mb / ma);
    printf("ok\n");
    return 0;
}
