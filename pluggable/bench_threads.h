/* bench_threads.h - alloc+free pairs from 1 to N threads at once, with work
 * between the calls, for any allocator behind two function pointers: the
 * library (bench_pluggable.c) and PyTorch's own CUDACachingAllocator
 * (torch/native_bench.cc) are driven by this same code, so their tables
 * compare. Header-only, C and C++.
 *
 * Each thread keeps a ring of live blocks of mixed sizes (512 B to 4 MiB);
 * a step frees the oldest, allocates a new one (the timed pair), then does
 * `work_ns` of arithmetic, as a program does between allocations. Reported:
 * aggregate pairs per second over the wall time of all threads (work
 * included), and the p50/p99 of one pair's latency (rdtsc, calibrated).
 */
#ifndef CMB_BENCH_THREADS_H
#define CMB_BENCH_THREADS_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMB_BENCH_RING 64
#define CMB_BENCH_MAX_THREADS 64
#define CMB_BENCH_FINE 8192 /* 1 ns buckets below, log2 buckets above */
#define CMB_BENCH_BUCKETS (CMB_BENCH_FINE + 64)

typedef struct cmb_bench_ops {
    void *(*alloc)(void *ctx, size_t size, void *stream);
    void (*release)(void *ctx, void *ptr, size_t size, void *stream);
    void *ctx;
} cmb_bench_ops;

typedef struct cmb_bench_result {
    int threads;
    double pairs_per_s; /* aggregate, work between calls included */
    double p50_ns, p99_ns;
    int failed;
} cmb_bench_result;

static const size_t cmb_bench_sizes[] = {512,      4096,      65536,     262144, 1 << 20,
                                         3 << 20, 4 << 20, 1536, 8192, 2 << 20};
#define CMB_BENCH_N_SIZES (sizeof cmb_bench_sizes / sizeof cmb_bench_sizes[0])

static inline uint64_t cmb_bench_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A cheap timestamp: the TSC where there is one (a few ns), else the clock. */
static inline uint64_t cmb_bench_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return cmb_bench_wall_ns();
#endif
}

static double cmb_bench_ns_per_tick = 1.0;
static volatile uint64_t cmb_bench_sink;

/* Ticks per ns, and loop iterations per ns of work. */
static inline void cmb_bench_calibrate(double *iters_per_ns)
{
    uint64_t w0 = cmb_bench_wall_ns(), t0 = cmb_bench_ticks(), x = 1;
    long n = 0;
    while (cmb_bench_wall_ns() - w0 < 20000000ull) {
        for (int i = 0; i < 1000; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
        n += 1000;
    }
    uint64_t w1 = cmb_bench_wall_ns(), t1 = cmb_bench_ticks();
    cmb_bench_sink = x;
    cmb_bench_ns_per_tick = (double)(w1 - w0) / (double)(t1 - t0 ? t1 - t0 : 1);
    *iters_per_ns = (double)n / (double)(w1 - w0);
}

/* `iters` steps of an LCG on the thread's own state (no shared line). */
static inline void cmb_bench_work(long iters, uint64_t *state)
{
    uint64_t x = *state;
    for (long i = 0; i < iters; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    *state = x;
}

typedef struct cmb_bench_thread {
    const cmb_bench_ops *ops;
    long pairs, work_iters;
    int id, failed;
    uint64_t work_state; /* read after the join, so the work is not optimised away */
    void *stream;
    int *go; /* set once every thread exists */
    uint32_t *hist; /* CMB_BENCH_BUCKETS */
} cmb_bench_thread;

static inline int cmb_bench_bucket(uint64_t ns)
{
    if (ns < CMB_BENCH_FINE)
        return (int)ns;
    int b = 63 - __builtin_clzll(ns);
    return CMB_BENCH_FINE + (b < 63 ? b : 63);
}

static inline double cmb_bench_bucket_ns(int b)
{
    return b < CMB_BENCH_FINE ? (double)b : (double)(1ull << (b - CMB_BENCH_FINE));
}

static void *cmb_bench_thread_main(void *p)
{
    cmb_bench_thread *a = (cmb_bench_thread *)p;
    void *ring[CMB_BENCH_RING];
    size_t ring_size[CMB_BENCH_RING];
    memset(ring, 0, sizeof ring);
    memset(ring_size, 0, sizeof ring_size);
    while (!__atomic_load_n(a->go, __ATOMIC_ACQUIRE))
        sched_yield();
    for (long i = -CMB_BENCH_RING; i < a->pairs; i++) {
        long k = (i + CMB_BENCH_RING) % CMB_BENCH_RING;
        size_t sz = cmb_bench_sizes[(unsigned long)(i + CMB_BENCH_RING + a->id) % CMB_BENCH_N_SIZES];
        uint64_t t0 = cmb_bench_ticks();
        if (ring[k])
            a->ops->release(a->ops->ctx, ring[k], ring_size[k], a->stream);
        ring[k] = a->ops->alloc(a->ops->ctx, sz, a->stream);
        uint64_t t1 = cmb_bench_ticks();
        ring_size[k] = sz;
        if (!ring[k])
            a->failed = 1;
        if (i >= 0)
            a->hist[cmb_bench_bucket((uint64_t)((double)(t1 - t0) * cmb_bench_ns_per_tick))]++;
        cmb_bench_work(a->work_iters, &a->work_state);
    }
    for (int k = 0; k < CMB_BENCH_RING; k++)
        if (ring[k])
            a->ops->release(a->ops->ctx, ring[k], ring_size[k], a->stream);
    return NULL;
}

static double cmb_bench_quantile(const uint64_t *hist, uint64_t total, double q)
{
    uint64_t want = (uint64_t)(q * (double)total), seen = 0;
    for (int b = 0; b < CMB_BENCH_BUCKETS; b++) {
        seen += hist[b];
        if (seen > want)
            return cmb_bench_bucket_ns(b);
    }
    return cmb_bench_bucket_ns(CMB_BENCH_BUCKETS - 1);
}

/* Starts the threads at once, waits for them, sums their histograms. */
static int cmb_bench_gather(cmb_bench_thread *args, pthread_t *tid, int started, int n, long pairs, int *go,
                            uint64_t *sum, cmb_bench_result *out)
{
    uint64_t w0 = cmb_bench_wall_ns();
    __atomic_store_n(go, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    uint64_t wall = cmb_bench_wall_ns() - w0;
    if (started < n) {
        out->failed = 1; /* a thread could not be started */
        return -1;
    }
    for (int i = 0; i < n; i++) {
        out->failed |= args[i].failed;
        cmb_bench_sink += args[i].work_state;
        for (int b = 0; b < CMB_BENCH_BUCKETS; b++)
            sum[b] += args[i].hist[b];
    }
    /* the ring's warm-up pairs run inside the wall time too */
    out->pairs_per_s = (double)n * (double)(pairs + CMB_BENCH_RING) * 1e9 / (double)(wall ? wall : 1);
    out->p50_ns = cmb_bench_quantile(sum, (uint64_t)n * (uint64_t)pairs, 0.50);
    out->p99_ns = cmb_bench_quantile(sum, (uint64_t)n * (uint64_t)pairs, 0.99);
    return 0;
}

/* n threads, `pairs` each, all on the legacy stream of one device (a
 * program's threads share its current stream). 0, or -1 when threads
 * could not be started. */
static int cmb_bench_threads(const cmb_bench_ops *ops, int n, long pairs, long work_ns, double iters_per_ns,
                             cmb_bench_result *out)
{
    pthread_t tid[CMB_BENCH_MAX_THREADS];
    cmb_bench_thread args[CMB_BENCH_MAX_THREADS];
    int go = 0;
    uint64_t *sum = (uint64_t *)calloc(CMB_BENCH_BUCKETS, sizeof *sum);
    uint32_t *hists = (uint32_t *)calloc((size_t)n * CMB_BENCH_BUCKETS, sizeof *hists);
    int rc = -1, started = 0;
    memset(out, 0, sizeof *out);
    out->threads = n;
    if (sum && hists && n >= 1 && n <= CMB_BENCH_MAX_THREADS) {
        for (int i = 0; i < n; i++) {
            memset(&args[i], 0, sizeof args[i]);
            args[i].ops = ops;
            args[i].pairs = pairs;
            args[i].work_iters = (long)((double)work_ns * iters_per_ns);
            args[i].id = i;
            args[i].go = &go;
            args[i].hist = hists + (size_t)i * CMB_BENCH_BUCKETS;
            if (pthread_create(&tid[i], NULL, cmb_bench_thread_main, &args[i]))
                break;
            started++;
        }
        rc = cmb_bench_gather(args, tid, started, n, pairs, &go, sum, out);
    }
    free(sum);
    free(hists);
    return rc;
}

#endif /* CMB_BENCH_THREADS_H */
