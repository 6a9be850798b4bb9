/* warm.cu - what does a first mapping of fresh virtual address space cost,
 * and can it be paid once, ahead, for a whole region?
 *
 * cmb maps most of its first pass's handles into address space never mapped
 * before, and such a first map + access costs more than one at a range mapped
 * before (../cmb-alias-probe/). If the extra is set-up the driver keeps after
 * an unmap (page tables), one large mapping over a region, made and dropped
 * ahead of need, would spare every later handle there the extra.
 *
 * Each part uses its own region (REGION_MIB, aligned to itself) of one
 * reservation and maps N handles of HANDLE_MIB there side by side, timing
 * cuMemMap + cuMemSetAccess of each (the handle made beforehand, untimed):
 *   fresh  - a region never mapped;
 *   again  - the fresh part's region once its handles are unmapped;
 *   big    - a region first mapped whole by one handle (access set), then
 *            unmapped and released;
 *   slide  - a region first covered by one handle of SLIDE_MIB mapped, access
 *            set and unmapped at each position in turn;
 *   noacc  - as slide, with no access set;
 *   late   - a fresh region again, last (the process's age is not the cause).
 * The warming's own host time is printed beside each. A kernel writes every
 * mapped handle of each part and the host checks one word per handle.
 * Driver entry points through cudaGetDriverEntryPointByVersion (no -lcuda).
 * usage: warm HANDLE_MIB N REGION_MIB SLIDE_MIB REVERSE(0|1)
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("warm: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { printf("warm: %s: CUresult %d (line %d)\n", #x, (int)r_, __LINE__); exit(1); } } while (0)

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
    if (q != cudaDriverEntryPointSuccess || !*fn) { printf("warm: no entry point %s\n", name); exit(1); }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__global__ void stamp(uint32_t *p, size_t words, size_t stride, uint32_t v)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < words)
        p[i * stride] = v + (uint32_t)i;
}

static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

static CUmemAllocationProp prop;
static CUmemAccessDesc acc;
static size_t hs, region, slide;
static int n;

static void report(const char *part, const double *t, double warm_us)
{
    double *v = (double *)malloc(n * sizeof *v);
    memcpy(v, t, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp);
    double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    printf("%-6s map+access us: median %.1f p10 %.1f p90 %.1f min %.1f max %.1f sum %.0f | warming %.0f us\n", part, med,
           v[n / 10], v[(n * 9) / 10], v[0], v[n - 1], [&] { double s = 0; for (int i = 0; i < n; i++) s += t[i]; return s; }(),
           warm_us);
    printf("%-6s each:", part);
    for (int i = 0; i < n; i++)
        printf(" %.0f", t[i]);
    printf("\n");
    free(v);
}

/* Maps n fresh handles side by side from va, timing map + access of each;
 * checks them with a kernel; unmaps (unless keep) and releases them. */
static void map_run(CUdeviceptr va, double *t, CUmemGenericAllocationHandle *h, int keep)
{
    for (int i = 0; i < n; i++) {
        CU(pCreate(&h[i], hs, &prop, 0));
        double t0 = now_us();
        CU(pMap(va + i * hs, hs, 0, h[i], 0));
        CU(pSetAccess(va + i * hs, hs, &acc, 1));
        t[i] = now_us() - t0;
    }
    size_t stride = hs / sizeof(uint32_t);
    stamp<<<(n + 127) / 128, 128>>>((uint32_t *)va, n, stride, 7);
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < n; i += n / 4 > 0 ? n / 4 : 1) {
        uint32_t w;
        CK(cudaMemcpy(&w, (void *)(va + i * hs), sizeof w, cudaMemcpyDeviceToHost));
        if (w != 7u + (uint32_t)i) { printf("warm: handle %d read %u, not %u\n", i, w, 7u + i); exit(1); }
    }
    if (keep)
        return;
    for (int i = 0; i < n; i++) {
        CU(pUnmap(va + i * hs, hs));
        CU(pRelease(h[i]));
    }
}

static double warm_big(CUdeviceptr va)
{
    CUmemGenericAllocationHandle h;
    double t0 = now_us();
    CU(pCreate(&h, region, &prop, 0));
    CU(pMap(va, region, 0, h, 0));
    CU(pSetAccess(va, region, &acc, 1));
    CU(pUnmap(va, region));
    CU(pRelease(h));
    return now_us() - t0;
}

static double warm_slide(CUdeviceptr va, int access)
{
    CUmemGenericAllocationHandle h;
    double t0 = now_us();
    CU(pCreate(&h, slide, &prop, 0));
    for (size_t off = 0; off + slide <= region; off += slide) {
        CU(pMap(va + off, slide, 0, h, 0));
        if (access)
            CU(pSetAccess(va + off, slide, &acc, 1));
        CU(pUnmap(va + off, slide));
    }
    CU(pRelease(h));
    return now_us() - t0;
}

int main(int argc, char **argv)
{
    if (argc != 6) { printf("usage: warm HANDLE_MIB N REGION_MIB SLIDE_MIB REVERSE\n"); return 2; }
    hs = (size_t)atol(argv[1]) << 20;
    n = atoi(argv[2]);
    region = (size_t)atol(argv[3]) << 20;
    slide = (size_t)atol(argv[4]) << 20;
    int reverse = atoi(argv[5]);
    if (!hs || n < 4 || (size_t)n * hs > region || !slide || region % slide) { printf("warm: bad arguments\n"); return 2; }
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
    CUdeviceptr base;
    CU(pReserve(&base, 8 * region, region, 0, 0));
    printf("handle %zu MiB, %d handles, region %zu MiB, slide %zu MiB, order %s\n", hs >> 20, n, region >> 20,
           slide >> 20, reverse ? "reversed" : "forward");
    double *t = (double *)malloc(n * sizeof *t);
    CUmemGenericAllocationHandle *h = (CUmemGenericAllocationHandle *)malloc(n * sizeof *h);
    const char *parts[] = {"fresh", "big", "slide", "noacc", "late"};
    for (int k = 0; k < 5; k++) {
        int p = reverse && k > 0 && k < 4 ? 4 - k : k; /* fresh first, late last; the three warmings in either order */
        CUdeviceptr va = base + (size_t)(p + 2) * region;
        double w = 0;
        if (p == 0) { /* fresh, then again at the same range */
            map_run(base, t, h, 1);
            report("fresh", t, 0);
            double t0 = now_us();
            for (int i = 0; i < n; i++)
                CU(pUnmap(base + i * hs, hs));
            w = now_us() - t0;
            for (int i = 0; i < n; i++) {
                double t1 = now_us();
                CU(pMap(base + i * hs, hs, 0, h[i], 0));
                CU(pSetAccess(base + i * hs, hs, &acc, 1));
                t[i] = now_us() - t1;
            }
            report("again", t, w);
            for (int i = 0; i < n; i++) {
                CU(pUnmap(base + i * hs, hs));
                CU(pRelease(h[i]));
            }
            continue;
        }
        if (p == 1) w = warm_big(va);
        if (p == 2) w = warm_slide(va, 1);
        if (p == 3) w = warm_slide(va, 0);
        map_run(va, t, h, 0);
        report(parts[p], t, w);
    }
    printf("ok\n");
    return 0;
}
