/* alias.cu - can one physical handle be mapped at several virtual ranges at
 * once, what does each alias cost, and does unmapping one alias disturb work
 * in flight on another? (GMLake-style reuse of stitched ranges: a moved handle
 * keeps its old mapping, so a repeated layout finds it mapped.)
 *  1. a handle mapped at ranges A and B, access set on both: a kernel writes
 *     through A, the host reads through B (coherent?);
 *  2. host time of cuMemMap + cuMemSetAccess for a fresh handle against a
 *     second mapping of a handle already mapped (median of R);
 *  3. one handle mapped at K ranges (K up to 1024): the time of each further
 *     map + access, and the device memory cudaMemGetInfo reports in use;
 *  4. cuMemUnmap of alias A while a kernel writing through B runs for about
 *     50 ms: host time of the unmap, and B's contents after the kernel.
 * Driver entry points through cudaGetDriverEntryPointByVersion (no -lcuda).
 *  With PRECYCLE 1, part 4 first maps, unmaps and maps again a fresh range D
 *  with nothing in flight (the first remap of the process then is not A's).
 * usage: alias HANDLE_MIB REPS MAX_ALIASES PRECYCLE
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("alias: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { printf("alias: %s: CUresult %d (line %d)\n", #x, (int)r_, __LINE__); exit(1); } } while (0)

static CUresult (*pCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
static CUresult (*pMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
static CUresult (*pSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult (*pUnmap)(CUdeviceptr, size_t);
static CUresult (*pRelease)(CUmemGenericAllocationHandle);
static CUresult (*pReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);

static void entry(const char *name, void **fn)
{
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !*fn) { printf("alias: no entry point %s\n", name); exit(1); }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__global__ void fill(uint32_t *p, size_t n, uint32_t v, long long spin)
{
    long long t0 = clock64();
    while (clock64() - t0 < spin)
        ;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v + (uint32_t)i;
}

static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double median(double *v, int n) { qsort(v, n, sizeof *v, cmp); return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2; }

static CUmemAllocationProp prop;
static CUmemAccessDesc acc;
static size_t hs;

static double map_access(CUdeviceptr va, CUmemGenericAllocationHandle h)
{
    double t0 = now_us();
    CU(pMap(va, hs, 0, h, 0));
    CU(pSetAccess(va, hs, &acc, 1));
    return now_us() - t0;
}

static size_t used(void)
{
    size_t f, t;
    CK(cudaMemGetInfo(&f, &t));
    return t - f;
}

static int check(CUdeviceptr va, size_t n, uint32_t v)
{
    uint32_t *h = (uint32_t *)malloc(n * 4);
    CK(cudaMemcpy(h, (void *)va, n * 4, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += h[i] != v + (uint32_t)i;
    free(h);
    return bad == 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) { printf("usage: alias HANDLE_MIB REPS MAX_ALIASES PRECYCLE\n"); return 2; }
    int precycle = atoi(argv[4]);
    hs = (size_t)atoi(argv[1]) << 20;
    int reps = atoi(argv[2]), maxk = atoi(argv[3]);
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    entry("cuMemCreate", (void **)&pCreate);
    entry("cuMemMap", (void **)&pMap);
    entry("cuMemSetAccess", (void **)&pSetAccess);
    entry("cuMemUnmap", (void **)&pUnmap);
    entry("cuMemRelease", (void **)&pRelease);
    entry("cuMemAddressReserve", (void **)&pReserve);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t n = hs / 4;
    int nk = maxk > reps ? maxk : reps;
    CUdeviceptr base;
    CU(pReserve(&base, hs * (size_t)(nk + 2), hs, 0, 0));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int dev_clock_khz;
    CK(cudaDeviceGetAttribute(&dev_clock_khz, cudaDevAttrClockRate, 0));
    long long spin50 = (long long)dev_clock_khz * 50; /* about 50 ms */
    printf("handle %zu MiB, reps %d, max aliases %d, precycle %d\n", hs >> 20, reps, maxk, precycle);

    /* 1. coherence */
    CUmemGenericAllocationHandle h;
    CU(pCreate(&h, hs, &prop, 0));
    CUdeviceptr A = base, B = base + hs;
    map_access(A, h);
    map_access(B, h);
    fill<<<256, 256, 0, s>>>((uint32_t *)A, n, 7, 0);
    CK(cudaStreamSynchronize(s));
    printf("part 1: written through A, read through B: %s\n", check(B, n, 7) ? "same" : "DIFFERENT");
    fill<<<256, 256, 0, s>>>((uint32_t *)B, n, 11, 0);
    CK(cudaStreamSynchronize(s));
    printf("part 1: written through B, read through A: %s\n", check(A, n, 11) ? "same" : "DIFFERENT");

    /* 4, first with nothing in flight: a fresh range D mapped, unmapped, mapped again */
    if (precycle) {
        CUdeviceptr D = base + 3 * hs;
        double t1 = map_access(D, h);
        CU(pUnmap(D, hs));
        double t2 = map_access(D, h);
        CU(pUnmap(D, hs));
        printf("part 4: nothing in flight: range D first mapped %.1f us, mapped again after an unmap %.1f us\n", t1, t2);
    }
    /* 4. unmap A while a kernel writes through B */
    fill<<<256, 256, 0, s>>>((uint32_t *)B, n, 23, spin50);
    double t0 = now_us();
    CU(pUnmap(A, hs));
    double tu = now_us() - t0;
    cudaError_t busy = cudaStreamQuery(s);
    CK(cudaStreamSynchronize(s));
    double tall = now_us() - t0;
    printf("part 4: cuMemUnmap of alias A with a ~50 ms kernel in flight on B: %.1f us (kernel still running after it: %s; kernel done %.1f ms after the unmap began); B after: %s\n",
           tu, busy == cudaErrorNotReady ? "yes" : "no", tall / 1e3, check(B, n, 23) ? "intact" : "WRONG");
    CUdeviceptr C = base + 2 * hs; /* a range never mapped */
    t0 = now_us();
    map_access(C, h);
    double tc = now_us() - t0;
    t0 = now_us();
    CU(pMap(A, hs, 0, h, 0));
    double tmap = now_us() - t0;
    CU(pSetAccess(A, hs, &acc, 1));
    double tacc = now_us() - t0 - tmap;
    printf("part 4: then map + access at C, a range never mapped: %.1f us; at A again: cuMemMap %.1f us, cuMemSetAccess %.1f us; A reads B's data: %s\n",
           tc, tmap, tacc, check(A, n, 23) ? "yes" : "NO");
    /* the same unmap with nothing in flight */
    CU(pUnmap(A, hs));
    t0 = now_us();
    map_access(A, h);
    printf("part 4: unmap of A with nothing in flight, then map + access of A: %.1f us\n", now_us() - t0);
    CU(pUnmap(C, hs));
    CU(pUnmap(A, hs));
    CU(pUnmap(B, hs));

    /* 2. fresh handle against a second mapping */
    double *tf = (double *)malloc(sizeof(double) * reps), *ta = (double *)malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
        CUmemGenericAllocationHandle g;
        CU(pCreate(&g, hs, &prop, 0));
        tf[r] = map_access(base, g);        /* first mapping of a new handle */
        ta[r] = map_access(base + hs, g);   /* a second mapping of it */
        CU(pUnmap(base, hs));
        CU(pUnmap(base + hs, hs));
        CU(pRelease(g));
    }
    printf("part 2: map + access, first mapping of a handle: median %.1f us; a second mapping: median %.1f us (%d reps)\n",
           median(tf, reps), median(ta, reps), reps);

    /* 3. one handle at K ranges */
    size_t before = used();
    double *tk = (double *)malloc(sizeof(double) * maxk);
    for (int k = 0; k < maxk; k++)
        tk[k] = map_access(base + hs * (size_t)k, h);
    size_t after = used();
    fill<<<256, 256, 0, s>>>((uint32_t *)(base + hs * (size_t)(maxk - 1)), n, 31, 0);
    CK(cudaStreamSynchronize(s));
    int ok = check(base, n, 31);
    for (int lo = 0, hi = 1; lo < maxk; lo = hi, hi *= 4) {
        int e = hi < maxk ? hi : maxk;
        double m = median(tk + lo, e - lo);
        printf("part 3: aliases %d-%d: map + access median %.1f us\n", lo + 1, e, m);
    }
    printf("part 3: device memory in use before %zu MiB, after %d aliases %zu MiB (%+.3f MiB); written through the last, read through the first: %s\n",
           before >> 20, maxk, after >> 20, ((double)after - (double)before) / 1048576.0, ok ? "same" : "DIFFERENT");
    t0 = now_us();
    for (int k = 0; k < maxk; k++)
        CU(pUnmap(base + hs * (size_t)k, hs));
    printf("part 3: unmapping all %d: %.1f us each\n", maxk, (now_us() - t0) / maxk);
    CU(pRelease(h));
    printf("done\n");
    return 0;
}
