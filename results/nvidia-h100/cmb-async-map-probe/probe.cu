/* probe.cu - can a growth's mapping leave the allocating thread?
 *
 * An allocation returns an address whose pages are not mapped yet; the
 * allocating stream first waits (cuStreamWaitValue32 on a pinned host flag)
 * for a mapping thread that creates, maps and sets access, then sets the
 * flag. What this probe asks of the driver, on the card it runs on:
 *
 *  1. correctness: a kernel, a cudaMemsetAsync and a cudaMemcpyAsync queued
 *     on the address before it is mapped (behind the wait) see the memory
 *     once it is; do those calls accept an address not mapped yet?
 *  2. no deadlock: cuMemCreate / cuMemMap / cuMemSetAccess / cuMemUnmap /
 *     cuMemRelease return while a stream is blocked on the flag;
 *  3. what it saves: the host time of an allocation that maps K handles
 *     inline (create + map + access on the allocating thread) against one
 *     that queues the wait, and the wall time of R rounds of "GPU backlog,
 *     allocate, use", inline against behind the flag.
 *
 * Driver entry points through cudaGetDriverEntryPointByVersion (no -lcuda).
 * Output: one line per result, "name value".
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 5
#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "probe: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);   \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)
#define CU(x)                                                                                     \
    do {                                                                                          \
        CUresult r_ = (x);                                                                        \
        if (r_ != CUDA_SUCCESS) {                                                                 \
            fprintf(stderr, "probe: %s: CUresult %d (line %d)\n", #x, (int)r_, __LINE__);         \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static CUresult (*pCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
static CUresult (*pMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
static CUresult (*pSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult (*pUnmap)(CUdeviceptr, size_t);
static CUresult (*pRelease)(CUmemGenericAllocationHandle);
static CUresult (*pReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*pAddrFree)(CUdeviceptr, size_t);
static CUresult (*pWait32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static CUresult (*pGran)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);

static void entry(const char *name, void **fn)
{
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !*fn) {
        fprintf(stderr, "probe: no driver entry point %s\n", name);
        exit(1);
    }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__global__ void spin(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles)
        ;
}

__global__ void fill(uint32_t *p, size_t n, uint32_t v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v + (uint32_t)i;
}

/* --- the mapping thread ------------------------------------------------------------- */

typedef struct job {
    CUdeviceptr va;
    size_t handle_size;
    int handles;
    uint32_t ticket; /* the flag's value once done */
    int access_only; /* created and mapped already: set access alone */
    CUmemGenericAllocationHandle *h;
} job;

static CUmemAllocationProp prop;
static CUmemAccessDesc acc;
static volatile uint32_t *flag_host;
static CUdeviceptr flag_dev;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static job queue[1024];
static int q_head, q_tail, q_stop;

static int verbose;

static void map_job(const job *j)
{
    for (int k = 0; k < j->handles && !j->access_only; k++) {
        CUdeviceptr at = j->va + (CUdeviceptr)k * j->handle_size;
        CU(pCreate(&j->h[k], j->handle_size, &prop, 0));
        if (verbose && !k)
            printf("mapper: first cuMemCreate returned\n");
        CU(pMap(at, j->handle_size, 0, j->h[k], 0));
        if (verbose && !k)
            printf("mapper: first cuMemMap returned\n");
    }
    CU(pSetAccess(j->va, j->handle_size * (size_t)j->handles, &acc, 1));
    if (verbose)
        printf("mapper: cuMemSetAccess returned\n");
}

static void *mapper(void *arg)
{
    (void)arg;
    CK(cudaSetDevice(0));
    for (;;) {
        pthread_mutex_lock(&mu);
        while (q_head == q_tail && !q_stop)
            pthread_cond_wait(&cv, &mu);
        if (q_head == q_tail && q_stop) {
            pthread_mutex_unlock(&mu);
            return NULL;
        }
        job j = queue[q_head++ % 1024];
        pthread_mutex_unlock(&mu);
        map_job(&j);
        __atomic_store_n(flag_host, j.ticket, __ATOMIC_RELEASE);
    }
}

static void submit(const job *j)
{
    pthread_mutex_lock(&mu);
    queue[q_tail++ % 1024] = *j;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static void unmap_all(CUdeviceptr va, size_t hs, int k, CUmemGenericAllocationHandle *h)
{
    for (int i = 0; i < k; i++) {
        CU(pUnmap(va + (CUdeviceptr)i * hs, hs));
        CU(pRelease(h[i]));
    }
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *name, double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_d);
    printf("%s median %.1f min %.1f max %.1f n %d\n", name, v[n / 2], v[0], v[n - 1], n);
}

int main(int argc, char **argv)
{
    int K = argc > 1 ? atoi(argv[1]) : 16;           /* handles a growth maps */
    int R = argc > 2 ? atoi(argv[2]) : 200;          /* rounds */
    long long backlog = argc > 3 ? atoll(argv[3]) : 2000000; /* spin cycles queued before the first growth */
    int T = argc > 4 ? atoi(argv[4]) : 200;          /* small kernels after each growth */
    setvbuf(stdout, NULL, _IONBF, 0);
    int part = argc > 5 ? atoi(argv[5]) : 3; /* 1: part 1 only, 2: part 3 only, 3: both */
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    entry("cuMemCreate", (void **)&pCreate);
    entry("cuMemMap", (void **)&pMap);
    entry("cuMemSetAccess", (void **)&pSetAccess);
    entry("cuMemUnmap", (void **)&pUnmap);
    entry("cuMemRelease", (void **)&pRelease);
    entry("cuMemAddressReserve", (void **)&pReserve);
    entry("cuMemAddressFree", (void **)&pAddrFree);
    entry("cuStreamWaitValue32", (void **)&pWait32);
    entry("cuMemGetAllocationGranularity", (void **)&pGran);
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t gran;
    CU(pGran(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t hs = gran * 4; /* cmb's default handle: 4 pages */
    size_t len = hs * (size_t)K;
    printf("granularity %zu handle %zu handles %d rounds %d backlog_cycles %lld kernels_per_round %d\n", gran, hs, K, R,
           backlog, T);

    void *fh;
    CK(cudaHostAlloc(&fh, 4096, cudaHostAllocMapped));
    flag_host = (volatile uint32_t *)fh;
    *flag_host = 0;
    void *fd;
    CK(cudaHostGetDevicePointer(&fd, fh, 0));
    flag_dev = (CUdeviceptr)(uintptr_t)fd;

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUdeviceptr va, src;
    CU(pReserve(&va, len, gran, 0, 0));
    CK(cudaMalloc((void **)&src, len));
    CK(cudaMemset((void *)src, 0x5a, len));
    CUmemGenericAllocationHandle *h = (CUmemGenericAllocationHandle *)calloc(K, sizeof *h);
    pthread_t th;
    pthread_create(&th, NULL, mapper, NULL);
    uint32_t *check = (uint32_t *)malloc(len);

    /* 1 + 2: calls queued on the address before it is mapped, and the
     * driver calls made while the stream waits on the flag */
    if (part & 1) {
        verbose = 1;
        CUmemGenericAllocationHandle *h0 = h; (void)h0;
        uint32_t ticket = 1;
        spin<<<1, 1, 0, s>>>(backlog);
        CU(pWait32((CUstream)s, flag_dev, ticket, CU_STREAM_WAIT_VALUE_GEQ));
        int mapped_inline = part & 4, skip_memset = part & 8;
        if (mapped_inline)
            for (int k = 0; k < K; k++) {
                CU(pCreate(&h[k], hs, &prop, 0));
                CU(pMap(va + (CUdeviceptr)k * hs, hs, 0, h[k], 0));
            }
        printf("part1: wait queued, pages %s\n", mapped_inline ? "mapped, access not set" : "not mapped");
        cudaError_t e_memset = skip_memset ? cudaSuccess : cudaMemsetAsync((void *)va, 0x11, len, s);
        printf("part1: memset queued: %s\n", cudaGetErrorName(e_memset));
        cudaError_t e_copy = cudaMemcpyAsync((void *)va, (void *)src, hs, cudaMemcpyDeviceToDevice, s);
        printf("part1: d2d copy queued: %s\n", cudaGetErrorName(e_copy));
        cudaError_t e_copy_default = cudaMemcpyAsync((void *)(va + hs), (void *)src, hs, cudaMemcpyDefault, s);
        fill<<<256, 256, 0, s>>>((uint32_t *)(va + 2 * hs), hs / 4, 7u);
        cudaError_t e_launch = cudaGetLastError();
        printf("queued_before_mapping memset %s copy_d2d %s copy_default %s kernel %s\n", cudaGetErrorName(e_memset),
               cudaGetErrorName(e_copy), cudaGetErrorName(e_copy_default), cudaGetErrorName(e_launch));
        cudaError_t q0 = cudaStreamQuery(s);
        double t0 = now_us();
        job j = {va, hs, K, ticket, mapped_inline ? 1 : 0, h};
        submit(&j);
        cudaError_t qs;
        double dl = now_us() + 20e6;
        while ((qs = cudaStreamQuery(s)) == cudaErrorNotReady && now_us() < dl)
            ;
        if (qs != cudaSuccess) {
            printf("part1: stream not done after 20 s: %s, flag %u\n", cudaGetErrorName(qs), *flag_host);
            return 2;
        }
        double t1 = now_us();
        printf("stream_blocked_before_flag %s\n", q0 == cudaErrorNotReady ? "yes" : cudaGetErrorName(q0));
        printf("map_then_drain_us %.1f\n", t1 - t0);
        CK(cudaMemcpy(check, (void *)va, len, cudaMemcpyDeviceToHost));
        int ok = 1;
        for (size_t i = 0; i < hs / 4 && ok; i++) {
            ok &= check[i] == 0x5a5a5a5au;                           /* the d2d copy */
            ok &= check[hs / 4 + i] == 0x5a5a5a5au;                  /* the default-kind copy */
            ok &= check[2 * hs / 4 + i] == 7u + (uint32_t)i;        /* the kernel */
        }
        for (size_t i = 3 * hs / 4; i < len / 4 && ok && !skip_memset; i++)
            ok &= check[i] == 0x11111111u;                           /* the memset */
        printf("contents_after %s\n", ok ? "correct" : "WRONG");
        unmap_all(va, hs, K, h);
        verbose = 0;
    }
    if (part & 1 && !(part & 2))
        ;
    if (!(part & 2))
        return 0;

    /* 3: R rounds of a growth of K handles then T small kernels using it
     * (the host's other work between growths), each round in its own
     * range; inline (create, map, access on this thread) against behind
     * the flag (the mapping thread does them while this one launches) */
    CUdeviceptr big;
    CU(pReserve(&big, len * (size_t)R, gran, 0, 0));
    CUmemGenericAllocationHandle *hb = (CUmemGenericAllocationHandle *)calloc((size_t)K * R, sizeof *hb);
    double *host_inline = (double *)malloc(R * sizeof(double)), *host_async = (double *)malloc(R * sizeof(double));
    double wall[2][REPS];
    uint32_t next = 1;
    for (int rep = 0; rep < REPS; rep++) {
        for (int mode = 0; mode < 2; mode++) {
            CK(cudaStreamSynchronize(s));
            double w0 = now_us();
            for (int r = 0; r < R; r++) {
                CUdeviceptr at = big + (CUdeviceptr)r * len;
                double t0 = now_us();
                job j = {at, hs, K, 0, 0, hb + (size_t)r * K};
                if (mode == 0) {
                    map_job(&j);
                } else {
                    j.ticket = ++next;
                    submit(&j);
                    CU(pWait32((CUstream)s, flag_dev, j.ticket, CU_STREAM_WAIT_VALUE_GEQ));
                }
                double t1 = now_us();
                if (rep == REPS / 2)
                    (mode ? host_async : host_inline)[r] = t1 - t0;
                for (int k = 0; k < T; k++)
                    fill<<<1, 128, 0, s>>>((uint32_t *)(at + (CUdeviceptr)(k % K) * hs), 4096, (uint32_t)k);
            }
            CK(cudaStreamSynchronize(s));
            wall[mode][rep] = (now_us() - w0) / R;
            CK(cudaMemcpy(check, (void *)(big + (CUdeviceptr)(R - 1) * len), 16, cudaMemcpyDeviceToHost));
            if (check[0] != (uint32_t)(((T - 1) / K) * K))
                printf("round_contents WRONG mode %d got %u\n", mode, check[0]);
            for (int r = 0; r < R; r++)
                unmap_all(big + (CUdeviceptr)r * len, hs, K, hb + (size_t)r * K);
        }
    }
    report("host_us_per_growth_inline", host_inline, R);
    report("host_us_per_growth_behind_flag", host_async, R);
    report("wall_us_per_round_inline", wall[0], REPS);
    report("wall_us_per_round_behind_flag", wall[1], REPS);
    CU(pAddrFree(big, len * (size_t)R));

    pthread_mutex_lock(&mu);
    q_stop = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
    CU(pAddrFree(va, len));
    printf("done\n");
    return 0;
}
