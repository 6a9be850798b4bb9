/* offset.cu - can a page of a larger physical handle be mapped on its own
 * (cuMemMap with a non-zero offset), and how do such mappings combine?
 * (A pool of physical pages created in large handles but mapped page by page
 * would create few handles and still alias memory page by page.)
 *  1. a handle of N pages; page 3 alone mapped at range P (offset 3 pages),
 *     the whole handle at range F: a kernel writes through P, the host reads
 *     page 3 of F (coherent?);
 *  2. all N pages mapped one by one, in reverse order, into one range S, and
 *     one cuMemSetAccess over S (spanning N mappings): accepted? data right?
 *  3. cuMemUnmap of a range covering two whole adjacent page mappings of S
 *     (one call for two mappings?); cuMemUnmap of the first page of F only
 *     (a part of one mapping: expected to be refused);
 *  4. host time: map + access of one page at an offset, against map +
 *     access of a whole handle (median of R each), and cuMemCreate of the
 *     handle size against one of a page;
 *  5. device memory in use (cudaMemGetInfo) before and after the extra
 *     mappings: aliases take none.
 * Every driver result is printed, not fatal, unless the probe cannot go on.
 * Driver entry points through cudaGetDriverEntryPointByVersion (no -lcuda).
 * usage: offset PAGES_PER_HANDLE REPS
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("offset: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { printf("offset: %s: CUresult %d (line %d)\n", #x, (int)r_, __LINE__); exit(1); } } while (0)

static CUresult (*pCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
static CUresult (*pMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
static CUresult (*pSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult (*pUnmap)(CUdeviceptr, size_t);
static CUresult (*pRelease)(CUmemGenericAllocationHandle);
static CUresult (*pReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*pGran)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);

static void entry(const char *name, void **fn)
{
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !*fn) { printf("offset: no entry point %s\n", name); exit(1); }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__global__ void fill(uint32_t *p, size_t n, uint32_t v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v + (uint32_t)i;
}

static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double median(double *v, int n) { qsort(v, n, sizeof *v, cmp); return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2; }

static CUmemAllocationProp prop;
static CUmemAccessDesc acc;

static size_t used(void)
{
    size_t f, t;
    CK(cudaMemGetInfo(&f, &t));
    return t - f;
}

/* Count words of [va, va + n words) that differ from v + i (host copy). */
static size_t bad(CUdeviceptr va, size_t n, uint32_t v)
{
    uint32_t *h = (uint32_t *)malloc(n * 4);
    CK(cudaMemcpy(h, (void *)va, n * 4, cudaMemcpyDeviceToHost));
    size_t b = 0;
    for (size_t i = 0; i < n; i++) b += h[i] != v + (uint32_t)i;
    free(h);
    return b;
}

int main(int argc, char **argv)
{
    int N = argc > 1 ? atoi(argv[1]) : 10, R = argc > 2 ? atoi(argv[2]) : 50;
    CK(cudaFree(0));
    entry("cuMemCreate", (void **)&pCreate); entry("cuMemMap", (void **)&pMap);
    entry("cuMemSetAccess", (void **)&pSetAccess); entry("cuMemUnmap", (void **)&pUnmap);
    entry("cuMemRelease", (void **)&pRelease); entry("cuMemAddressReserve", (void **)&pReserve);
    entry("cuMemGetAllocationGranularity", (void **)&pGran);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t pg;
    CU(pGran(&pg, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t hs = (size_t)N * pg, words = pg / 4;
    printf("page %zu B, handle %d pages (%zu B), %d repetitions\n", pg, N, hs, R);

    size_t u0 = used();
    CUmemGenericAllocationHandle h;
    CU(pCreate(&h, hs, &prop, 0));
    size_t u1 = used();
    CUdeviceptr P, F, S;
    CU(pReserve(&P, pg, 0, 0, 0)); CU(pReserve(&F, hs, 0, 0, 0)); CU(pReserve(&S, hs, 0, 0, 0));

    /* 1 */
    CUresult r = pMap(P, pg, 3 * pg, h, 0);
    printf("1. cuMemMap of page 3 alone (offset %zu): %d\n", 3 * pg, (int)r);
    if (r != CUDA_SUCCESS) { printf("offset: a page of a handle cannot be mapped alone here; stop\n"); return 2; }
    CU(pSetAccess(P, pg, &acc, 1));
    CU(pMap(F, hs, 0, h, 0)); CU(pSetAccess(F, hs, &acc, 1));
    fill<<<256, 256>>>((uint32_t *)P, words, 7u);
    CK(cudaDeviceSynchronize());
    printf("1. written through the page's range, read through page 3 of the whole handle's: %zu words differ of %zu\n",
           bad(F + 3 * pg, words, 7u), words);

    /* 2 */
    int ok = 1;
    for (int i = N - 1; i >= 0; i--) {
        r = pMap(S + (size_t)i * pg, pg, (size_t)i * pg, h, 0);
        if (r != CUDA_SUCCESS) { printf("2. cuMemMap of page %d at its place in S: %d\n", i, (int)r); ok = 0; }
    }
    r = pSetAccess(S, hs, &acc, 1);
    printf("2. %d single-page mappings into one range, then one cuMemSetAccess over all of them: %d\n", N, (int)r);
    if (ok && r == CUDA_SUCCESS) {
        fill<<<256, 256>>>((uint32_t *)S, hs / 4, 11u);
        CK(cudaDeviceSynchronize());
        printf("2. written through S, read through F: %zu words differ of %zu\n", bad(F, hs / 4, 11u), hs / 4);
    }
    size_t u2 = used();

    /* 3 */
    r = pUnmap(S, 2 * pg);
    printf("3. one cuMemUnmap over two whole adjacent page mappings: %d\n", (int)r);
    if (r != CUDA_SUCCESS) { CU(pUnmap(S, pg)); CU(pUnmap(S + pg, pg)); }
    r = pUnmap(F, pg);
    printf("3. cuMemUnmap of the first page of a whole-handle mapping: %d\n", (int)r);
    fill<<<256, 256>>>((uint32_t *)(S + 2 * pg), (hs - 2 * pg) / 4, 13u);
    CK(cudaDeviceSynchronize());
    printf("3. S's remaining pages still written and read back: %zu words differ\n", bad(S + 2 * pg, (hs - 2 * pg) / 4, 13u));

    /* 4 */
    double *tp = (double *)malloc(R * sizeof(double)), *tw = (double *)malloc(R * sizeof(double));
    double *cp = (double *)malloc(R * sizeof(double)), *cw = (double *)malloc(R * sizeof(double));
    CUdeviceptr Q, W;
    CU(pReserve(&Q, pg, 0, 0, 0)); CU(pReserve(&W, hs, 0, 0, 0));
    for (int i = 0; i < R; i++) {
        double t0 = now_us();
        CU(pMap(Q, pg, (size_t)(i % N) * pg, h, 0)); CU(pSetAccess(Q, pg, &acc, 1));
        double t1 = now_us();
        CU(pMap(W, hs, 0, h, 0)); CU(pSetAccess(W, hs, &acc, 1));
        double t2 = now_us();
        tp[i] = t1 - t0; tw[i] = t2 - t1;
        CU(pUnmap(Q, pg)); CU(pUnmap(W, hs));
        CUmemGenericAllocationHandle a, b;
        t0 = now_us(); CU(pCreate(&a, pg, &prop, 0)); t1 = now_us(); CU(pCreate(&b, hs, &prop, 0)); t2 = now_us();
        cp[i] = t1 - t0; cw[i] = t2 - t1;
        CU(pRelease(a)); CU(pRelease(b));
    }
    double mp = median(tp, R), mw = median(tw, R), mcp = median(cp, R), mcw = median(cw, R);
    qsort(tp, R, sizeof *tp, cmp); qsort(tw, R, sizeof *tw, cmp);
    printf("4. map + access of one page at an offset: median %.1f us [%.1f-%.1f]\n", mp, tp[0], tp[R - 1]);
    printf("4. map + access of the whole %d-page handle: median %.1f us [%.1f-%.1f]\n", N, mw, tw[0], tw[R - 1]);
    qsort(cp, R, sizeof *cp, cmp); qsort(cw, R, sizeof *cw, cmp);
    printf("4. cuMemCreate of one page: median %.1f us [%.1f-%.1f]; of %d pages: median %.1f us [%.1f-%.1f]\n",
           mcp, cp[0], cp[R - 1], N, mcw, cw[0], cw[R - 1]);

    /* 5 */
    printf("5. device memory in use: before %zu, after the handle %zu (+%zu), after %d further mappings of it %zu (+%zu)\n",
           u0, u1, u1 - u0, N + 1, u2, u2 - u1);
    return 0;
}
