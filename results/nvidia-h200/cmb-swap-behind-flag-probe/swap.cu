/* swap.cu - can a growth map into a range whose old mapping still serves
 * queued work without the host waiting for that work?
 *
 * The range R holds handles H_old, mapped with access; work queued on stream
 * S still writes R (the old block's last use), and H_old is also mapped at a
 * second range A (the handles were moved there for another block). A growth
 * now wants R for a new block with new handles H_new. Inline, the host waits
 * for the old work, unmaps R, maps H_new and sets access. Behind a flag, the
 * host queues cuStreamWaitValue32 on S and returns at once; the new block's
 * work (memset, d2d copy, kernel) is queued on R while R still maps H_old, and
 * a mapping thread waits for the old work (an event recorded before the
 * wait), unmaps R, maps H_new, sets access and sets the flag. Asks:
 *  1. do the queued calls accept R (it is mapped, with access, at queue time)?
 *  2. do they land in H_new, leaving H_old (seen through A) with the old work?
 *  3. does cuMemUnmap/cuMemMap return while S waits on the flag (no hang)?
 *  4. host time per growth and wall time per round, inline against behind
 *     the flag, with a GPU backlog before each growth and, optionally, other
 *     GPU work queued between the old block's last use and the growth.
 * Driver entry points through cudaGetDriverEntryPointByVersion (no -lcuda).
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("swap: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { printf("swap: %s: CUresult %d (line %d)\n", #x, (int)r_, __LINE__); exit(1); } } while (0)

static CUresult (*pCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
static CUresult (*pMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
static CUresult (*pSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult (*pUnmap)(CUdeviceptr, size_t);
static CUresult (*pRelease)(CUmemGenericAllocationHandle);
static CUresult (*pReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*pWait32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static CUresult (*pGran)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);

static void entry(const char *name, void **fn)
{
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !*fn) { printf("swap: no entry point %s\n", name); exit(1); }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

__global__ void spin(long long cycles) { long long t0 = clock64(); while (clock64() - t0 < cycles) ; }
__global__ void fill(uint32_t *p, size_t n, uint32_t v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v + (uint32_t)i;
}

static CUmemAllocationProp prop;
static CUmemAccessDesc acc;
static size_t hs;      /* bytes a handle */
static int K;          /* handles a growth */
static volatile uint32_t *flag_host;
static CUdeviceptr flag_dev;
static int verbose;

/* the swap: wait for the old work, unmap R, map new handles, access */
typedef struct job { CUdeviceptr r; CUmemGenericAllocationHandle *hnew; cudaEvent_t old; uint32_t ticket; } job;

static void swap_now(const job *j)
{
    CK(cudaEventSynchronize(j->old));
    CU(pUnmap(j->r, hs * K));
    if (verbose) printf("mapper: cuMemUnmap returned while the stream waits\n");
    for (int k = 0; k < K; k++) {
        CU(pCreate(&j->hnew[k], hs, &prop, 0));
        CU(pMap(j->r + (CUdeviceptr)k * hs, hs, 0, j->hnew[k], 0));
    }
    if (verbose) printf("mapper: cuMemCreate/cuMemMap returned\n");
    CU(pSetAccess(j->r, hs * K, &acc, 1));
    if (verbose) printf("mapper: cuMemSetAccess returned\n");
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static job q[4096];
static int qh, qt, qstop;

static void *mapper(void *arg)
{
    (void)arg;
    CK(cudaSetDevice(0));
    for (;;) {
        pthread_mutex_lock(&mu);
        while (qh == qt && !qstop) pthread_cond_wait(&cv, &mu);
        if (qh == qt) { pthread_mutex_unlock(&mu); return NULL; }
        job j = q[qh++ % 4096];
        pthread_mutex_unlock(&mu);
        swap_now(&j);
        __atomic_store_n(flag_host, j.ticket, __ATOMIC_RELEASE);
    }
}

static void submit(const job *j)
{
    pthread_mutex_lock(&mu);
    q[qt++ % 4096] = *j;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

/* R and A both map handles h (with access) */
static void map_old(CUdeviceptr r, CUdeviceptr a, CUmemGenericAllocationHandle *h)
{
    for (int k = 0; k < K; k++) {
        CU(pCreate(&h[k], hs, &prop, 0));
        CU(pMap(r + (CUdeviceptr)k * hs, hs, 0, h[k], 0));
        CU(pMap(a + (CUdeviceptr)k * hs, hs, 0, h[k], 0));
    }
    CU(pSetAccess(r, hs * K, &acc, 1));
    CU(pSetAccess(a, hs * K, &acc, 1));
}

static void drop(CUdeviceptr va, CUmemGenericAllocationHandle *h)
{
    CU(pUnmap(va, hs * K));
    for (int k = 0; k < K; k++) CU(pRelease(h[k]));
}

static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
static void report(const char *name, double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_d);
    printf("%s median %.1f min %.1f max %.1f n %d\n", name, v[n / 2], v[0], v[n - 1], n);
}

int main(int argc, char **argv)
{
    K = argc > 1 ? atoi(argv[1]) : 16;
    int R = argc > 2 ? atoi(argv[2]) : 50;
    long long backlog = argc > 3 ? atoll(argv[3]) : 2000000;
    int T = argc > 4 ? atoi(argv[4]) : 100;
    int reps = argc > 5 ? atoi(argv[5]) : 5;
    long long middle = argc > 6 ? atoll(argv[6]) : 0; /* GPU work queued between the old block's last use and the growth */
    setvbuf(stdout, NULL, _IONBF, 0);
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    entry("cuMemCreate", (void **)&pCreate); entry("cuMemMap", (void **)&pMap);
    entry("cuMemSetAccess", (void **)&pSetAccess); entry("cuMemUnmap", (void **)&pUnmap);
    entry("cuMemRelease", (void **)&pRelease); entry("cuMemAddressReserve", (void **)&pReserve);
    entry("cuStreamWaitValue32", (void **)&pWait32); entry("cuMemGetAllocationGranularity", (void **)&pGran);
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t gran;
    CU(pGran(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    hs = gran * 4;
    size_t len = hs * (size_t)K;
    printf("granularity %zu handle %zu handles %d rounds %d backlog_cycles %lld kernels_per_round %d reps %d middle_cycles %lld\n", gran, hs, K, R, backlog, T, reps, middle);
    void *fh;
    CK(cudaHostAlloc(&fh, 4096, cudaHostAllocMapped));
    flag_host = (volatile uint32_t *)fh;
    *flag_host = 0;
    void *fd;
    CK(cudaHostGetDevicePointer(&fd, fh, 0));
    flag_dev = (CUdeviceptr)(uintptr_t)fd;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    pthread_t th;
    pthread_create(&th, NULL, mapper, NULL);
    uint32_t *chk = (uint32_t *)malloc(len);
    CUdeviceptr src;
    CK(cudaMalloc((void **)&src, len));
    CK(cudaMemset((void *)src, 0x5a, len));

    /* part 1: correctness and no hang */
    {
        CUdeviceptr r, a;
        CU(pReserve(&r, len, gran, 0, 0));
        CU(pReserve(&a, len, gran, 0, 0));
        CUmemGenericAllocationHandle *hold = (CUmemGenericAllocationHandle *)calloc(K, sizeof *hold);
        CUmemGenericAllocationHandle *hnew = (CUmemGenericAllocationHandle *)calloc(K, sizeof *hnew);
        map_old(r, a, hold);
        CK(cudaMemset((void *)r, 0, len));
        CK(cudaDeviceSynchronize());
        cudaEvent_t old;
        CK(cudaEventCreateWithFlags(&old, cudaEventDisableTiming));
        spin<<<1, 1, 0, s>>>(backlog);
        fill<<<256, 256, 0, s>>>((uint32_t *)r, len / 4, 100u);           /* the old block's last work */
        CK(cudaEventRecord(old, s));
        CU(pWait32((CUstream)s, flag_dev, 1, CU_STREAM_WAIT_VALUE_GEQ));
        cudaError_t em = cudaMemsetAsync((void *)r, 0x11, hs, s);          /* the new block's work */
        cudaError_t ec = cudaMemcpyAsync((void *)(r + hs), (void *)src, hs, cudaMemcpyDeviceToDevice, s);
        cudaError_t ed = cudaMemcpyAsync((void *)(r + 2 * hs), (void *)src, hs, cudaMemcpyDefault, s);
        fill<<<256, 256, 0, s>>>((uint32_t *)(r + 3 * hs), (len - 3 * hs) / 4, 7u);
        cudaError_t ek = cudaGetLastError();
        printf("queued_on_old_mapping memset %s copy_d2d %s copy_default %s kernel %s\n", cudaGetErrorName(em),
               cudaGetErrorName(ec), cudaGetErrorName(ed), cudaGetErrorName(ek));
        cudaError_t q0 = cudaStreamQuery(s);
        verbose = 1;
        job j = {r, hnew, old, 1};
        double t0 = now_us();
        submit(&j);
        cudaError_t qs;
        double dl = now_us() + 20e6;
        while ((qs = cudaStreamQuery(s)) == cudaErrorNotReady && now_us() < dl) ;
        if (qs != cudaSuccess) { printf("part1: stream not done after 20 s: %s flag %u\n", cudaGetErrorName(qs), *flag_host); return 2; }
        printf("stream_blocked_before_flag %s\nswap_then_drain_us %.1f\n", q0 == cudaErrorNotReady ? "yes" : cudaGetErrorName(q0), now_us() - t0);
        verbose = 0;
        int ok_new = 1, ok_old = 1;
        CK(cudaMemcpy(chk, (void *)r, len, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < hs / 4; i++) {
            ok_new &= chk[i] == 0x11111111u;
            ok_new &= chk[hs / 4 + i] == 0x5a5a5a5au;
            ok_new &= chk[2 * hs / 4 + i] == 0x5a5a5a5au;
        }
        for (size_t i = 3 * hs / 4; i < len / 4; i++) ok_new &= chk[i] == 7u + (uint32_t)(i - 3 * hs / 4);
        CK(cudaMemcpy(chk, (void *)a, len, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < len / 4; i++) ok_old &= chk[i] == 100u + (uint32_t)i;
        printf("new_block_contents %s\nold_handles_keep_old_work %s\n", ok_new ? "correct" : "WRONG", ok_old ? "correct" : "WRONG");
        drop(r, hnew);
        drop(a, hold);
    }

    /* part 2: rounds of backlog, old work on R, growth into R, T kernels on the new block */
    CUdeviceptr rb, ab;
    CU(pReserve(&rb, len * (size_t)R, gran, 0, 0));
    CU(pReserve(&ab, len * (size_t)R, gran, 0, 0));
    CUmemGenericAllocationHandle *ho = (CUmemGenericAllocationHandle *)calloc((size_t)K * R, sizeof *ho);
    CUmemGenericAllocationHandle *hn = (CUmemGenericAllocationHandle *)calloc((size_t)K * R, sizeof *hn);
    cudaEvent_t *ev = (cudaEvent_t *)calloc(R, sizeof *ev);
    for (int r = 0; r < R; r++) CK(cudaEventCreateWithFlags(&ev[r], cudaEventDisableTiming));
    double *hi = (double *)malloc(R * sizeof(double)), *ha = (double *)malloc(R * sizeof(double));
    double *wall[2] = {(double *)malloc(reps * sizeof(double)), (double *)malloc(reps * sizeof(double))};
    uint32_t ticket = 1;
    for (int rep = 0; rep < reps; rep++)
        for (int mode = 0; mode < 2; mode++) {
            for (int r = 0; r < R; r++) map_old(rb + (CUdeviceptr)r * len, ab + (CUdeviceptr)r * len, ho + (size_t)r * K);
            CK(cudaDeviceSynchronize());
            double w0 = now_us();
            for (int r = 0; r < R; r++) {
                CUdeviceptr at = rb + (CUdeviceptr)r * len;
                spin<<<1, 1, 0, s>>>(backlog / 10);
                fill<<<64, 256, 0, s>>>((uint32_t *)at, len / 4, (uint32_t)r);
                CK(cudaEventRecord(ev[r], s));
                if (middle)
                    spin<<<1, 1, 0, s>>>(middle);
                double t0 = now_us();
                job j = {at, hn + (size_t)r * K, ev[r], 0};
                if (mode == 0) {
                    swap_now(&j);
                } else {
                    j.ticket = ++ticket;
                    CU(pWait32((CUstream)s, flag_dev, j.ticket, CU_STREAM_WAIT_VALUE_GEQ));
                    submit(&j);
                }
                double t1 = now_us();
                if (rep == reps / 2) (mode ? ha : hi)[r] = t1 - t0;
                for (int k = 0; k < T; k++) fill<<<1, 128, 0, s>>>((uint32_t *)(at + (CUdeviceptr)(k % K) * hs), 4096, (uint32_t)k);
            }
            CK(cudaStreamSynchronize(s));
            wall[mode][rep] = (now_us() - w0) / R;
            CK(cudaMemcpy(chk, (void *)(rb + (CUdeviceptr)(R - 1) * len), 16, cudaMemcpyDeviceToHost));
            if (chk[0] != (uint32_t)(((T - 1) / K) * K)) printf("round_contents WRONG mode %d got %u\n", mode, chk[0]);
            for (int r = 0; r < R; r++) { drop(rb + (CUdeviceptr)r * len, hn + (size_t)r * K); drop(ab + (CUdeviceptr)r * len, ho + (size_t)r * K); }
        }
    report("host_us_per_growth_inline", hi, R);
    report("host_us_per_growth_behind_flag", ha, R);
    report("wall_us_per_round_inline", wall[0], reps);
    report("wall_us_per_round_behind_flag", wall[1], reps);
    pthread_mutex_lock(&mu); qstop = 1; pthread_cond_signal(&cv); pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
    printf("done\n");
    return 0;
}
