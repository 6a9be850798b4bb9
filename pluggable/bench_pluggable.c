/* bench_pluggable.c - what the library adds to a policy's own cost, and how
 * it scales with threads.
 *
 * Each thread keeps a ring of live blocks of mixed sizes (512 B to 4 MiB)
 * and, per step, frees the oldest, allocates a new one and does some work
 * (bench_threads.h): the policy's cached path, as a training step that
 * reuses its memory. Measured:
 *   direct          the policy's methods, one thread, no lock
 *   direct+mutex    the same inside an uncontended pthread mutex
 *   library         cmb_torch_malloc/free from one thread (PyTorch's pair:
 *                   the size and stream come with the free) - the overhead
 *                   is library minus direct
 *   threads         1 to N threads on the same device at once: aggregate
 *                   pairs per second and the p50/p99 of one pair
 * Over the sim upstream the cost is the host's alone; over @cuda (on a GPU)
 * the policy's first upstream calls are real, the measured pairs cached.
 *
 *   cmb_pluggable_bench [--allocator SPEC] [--pairs N] [--threads 1,2,4,8,16]
 *                       [--work-ns NS] [--json FILE]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/policy.h"
#include "allocators/registry.h"
#include "allocators/upstream.h"
#include "pluggable/bench_threads.h"
#include "pluggable/cmb_pluggable.h"

/* --- the policy called directly, and the library from one thread ------------------------- */

typedef struct direct_ctx {
    const cmb_allocator_methods *m;
    void *state;
    pthread_mutex_t *lock;
} direct_ctx;

static void *direct_alloc(void *ctx, size_t size, void *stream)
{
    direct_ctx *c = ctx;
    void *p = NULL;
    if (c->lock)
        pthread_mutex_lock(c->lock);
    if (c->m->allocate(c->state, size, (cmb_stream)stream, &p) != CMB_OK)
        p = NULL;
    if (c->lock)
        pthread_mutex_unlock(c->lock);
    return p;
}

static void direct_free(void *ctx, void *ptr, size_t size, void *stream)
{
    direct_ctx *c = ctx;
    if (c->lock)
        pthread_mutex_lock(c->lock);
    c->m->deallocate(c->state, ptr, size, (cmb_stream)stream);
    if (c->lock)
        pthread_mutex_unlock(c->lock);
}

static void *library_alloc(void *ctx, size_t size, void *stream)
{
    (void)ctx;
    return cmb_torch_malloc(size, 0, stream);
}

static void library_free(void *ctx, void *ptr, size_t size, void *stream)
{
    (void)ctx;
    cmb_torch_free(ptr, size, 0, stream);
}

/* One thread, no work between calls: the time of a pair itself. */
static double single_ns(const cmb_bench_ops *ops, long pairs, double iters_per_ns)
{
    cmb_bench_result r;
    if (cmb_bench_threads(ops, 1, pairs, 0, iters_per_ns, &r) || r.failed)
        return -1;
    return 1e9 / r.pairs_per_s;
}

/* The policy created directly over its own upstream (the spec's kind). */
static int open_direct(const char *spec, cmb_policy *pol, char *err, size_t errlen)
{
    cmb_alloc_spec s;
    if (cmb_alloc_spec_parse(spec, &s, err, errlen))
        return -1;
    const cmb_allocator_methods *m = cmb_policy_methods(&s, err, errlen);
    if (!m)
        return -1;
    cmb_upstream_kind kind = cmb_policy_upstream_kind(&s, m, 1);
    cmb_policy_place place = {.upstream = kind, .device = 0, .sim = kind == CMB_UPSTREAM_SIM};
    return cmb_policy_open(&s, m, &place, pol, err, errlen) == CMB_OK ? 0 : -1;
}

/* --- main ------------------------------------------------------------------------------------ */

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [--allocator SPEC] [--pairs N] [--threads 1,2,4] [--work-ns NS] [--json FILE]\n",
            argv0);
    return 2;
}

int main(int argc, char **argv)
{
    const char *spec = "torch-caching@sim", *json = NULL, *threads = "1,2,4,8,16";
    long pairs = 200000, work_ns = 200;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--allocator") && i + 1 < argc)
            spec = argv[++i];
        else if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
            pairs = atol(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = argv[++i];
        else if (!strcmp(argv[i], "--work-ns") && i + 1 < argc)
            work_ns = atol(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else
            return usage(argv[0]);
    }
    if (pairs < 1 || work_ns < 0) {
        fprintf(stderr, "%s: --pairs must be at least 1 and --work-ns at least 0\n", argv[0]);
        return 2;
    }
    setenv("CMB_PLUGGABLE_ALLOW_SIM", "1", 1);
    char err[400];
    cmb_policy pol;
    if (cmb_pluggable_configure(spec) || cmb_pluggable_set_torch_oom(0)) {
        fprintf(stderr, "%s: %s\n", argv[0], cmb_pluggable_last_error());
        return 2;
    }
    if (open_direct(spec, &pol, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        return 2;
    }
    FILE *jf = json ? fopen(json, "w") : NULL;
    if (json && !jf) {
        fprintf(stderr, "%s: cannot write %s\n", argv[0], json);
        return 2;
    }
    double iters_per_ns;
    cmb_bench_calibrate(&iters_per_ns);
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    direct_ctx dc = {.m = pol.m, .state = pol.state}, lc = {.m = pol.m, .state = pol.state, .lock = &lock};
    cmb_bench_ops direct = {direct_alloc, direct_free, &dc}, locked = {direct_alloc, direct_free, &lc},
                  library = {library_alloc, library_free, NULL};
    double d_ns = single_ns(&direct, pairs, iters_per_ns), m_ns = single_ns(&locked, pairs, iters_per_ns);
    cmb_policy_close(&pol, NULL);
    double l_ns = single_ns(&library, pairs, iters_per_ns);
    printf("%s: one thread, ns per pair: direct %.1f, direct+mutex %.1f, library %.1f (overhead %.1f)\n", spec, d_ns,
           m_ns, l_ns, l_ns - d_ns);
    printf("%8s %16s %14s %10s %10s   (work between calls: %ld ns)\n", "threads", "pairs/s", "ns/pair agg", "p50 ns",
           "p99 ns", work_ns);
    if (jf)
        fprintf(jf, "{\"allocator\": \"%s\", \"pairs\": %ld, \"work_ns\": %ld, \"direct_ns\": %.1f, "
                "\"direct_mutex_ns\": %.1f, \"library_ns\": %.1f, \"threads\": [", spec, pairs, work_ns, d_ns, m_ns, l_ns);
    int failed = d_ns < 0 || m_ns < 0 || l_ns < 0, first = 1;
    char *list = strdup(threads), *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        cmb_bench_result r;
        int n = atoi(t);
        if (n < 1 || n > CMB_BENCH_MAX_THREADS || cmb_bench_threads(&library, n, pairs, work_ns, iters_per_ns, &r))
            continue;
        failed |= r.failed;
        printf("%8d %16.0f %14.1f %10.0f %10.0f\n", n, r.pairs_per_s, 1e9 / r.pairs_per_s, r.p50_ns, r.p99_ns);
        if (jf)
            fprintf(jf, "%s{\"threads\": %d, \"pairs_per_s\": %.0f, \"p50_ns\": %.0f, \"p99_ns\": %.0f}",
                    first ? "" : ", ", n, r.pairs_per_s, r.p50_ns, r.p99_ns);
        first = 0;
    }
    free(list);
    if (jf) {
        fprintf(jf, "], \"failed\": %s}\n", failed ? "true" : "false");
        fclose(jf);
    }
    if (failed)
        fprintf(stderr, "%s: some allocations failed: %s\n", argv[0], cmb_pluggable_last_error());
    return failed ? 1 : 0;
}
