/* bench_pluggable.c - what the library adds to a policy's own cost.
 *
 * Each thread keeps a ring of live blocks of mixed sizes (512 B to 4 MiB)
 * and, per step, frees the oldest and allocates a new one: the policy's
 * cached path, as a training step that reuses its memory. The time per
 * alloc+free pair is measured four ways over the same policy on the sim
 * upstream (no GPU needed; the cost measured is host-side):
 *   direct          the policy's methods, one thread
 *   direct+mutex    the same inside an uncontended pthread mutex
 *   library         cmb_pluggable_malloc/free (lock, block table, counters)
 *   library xT      T threads allocating on the same device at once
 *
 *   cmb_pluggable_bench [--allocator SPEC@sim] [--pairs N] [--threads 1,2,4,8] [--json FILE]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/registry.h"
#include "allocators/upstream.h"
#include "allocators/policy.h"
#include "common/cmb_clock.h"
#include "pluggable/cmb_pluggable.h"

#define RING 64

static const size_t sizes[] = {512, 4096, 65536, 262144, 1 << 20, 3 << 20, 4 << 20, 1536, 8192, 2 << 20};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

typedef struct run_arg {
    long pairs;
    int use_lock;
    const cmb_allocator_methods *m;
    void *state;
    pthread_mutex_t *lock;
    double ns_per_pair;
    int failed;
} run_arg;

/* --- the policy called directly ------------------------------------------------------ */

static double run_direct(const cmb_allocator_methods *m, void *state, long pairs, pthread_mutex_t *lock)
{
    void *ring[RING] = {0};
    size_t ring_size[RING] = {0};
    uint64_t t0 = 0;
    for (long i = -RING; i < pairs; i++) {
        if (i == 0)
            t0 = cmb_now_ns();
        long k = (i + RING) % RING;
        size_t sz = sizes[(unsigned long)(i + RING) % N_SIZES];
        if (lock)
            pthread_mutex_lock(lock);
        if (ring[k])
            m->deallocate(state, ring[k], ring_size[k], NULL);
        if (m->allocate(state, sz, NULL, &ring[k]) != CMB_OK)
            ring[k] = NULL;
        if (lock)
            pthread_mutex_unlock(lock);
        ring_size[k] = sz;
    }
    double ns = (double)(cmb_now_ns() - t0) / (double)pairs;
    for (int k = 0; k < RING; k++)
        if (ring[k])
            m->deallocate(state, ring[k], ring_size[k], NULL);
    return ns;
}

/* --- through the library ------------------------------------------------------------------ */

static void *run_library(void *p)
{
    run_arg *a = p;
    void *ring[RING] = {0};
    uint64_t t0 = 0;
    for (long i = -RING; i < a->pairs; i++) {
        if (i == 0)
            t0 = cmb_now_ns();
        long k = (i + RING) % RING;
        size_t sz = sizes[(unsigned long)(i + RING) % N_SIZES];
        if (ring[k])
            cmb_pluggable_free(ring[k], 0, 0, NULL);
        ring[k] = cmb_pluggable_malloc(sz, 0, NULL);
        if (!ring[k])
            a->failed = 1;
    }
    a->ns_per_pair = (double)(cmb_now_ns() - t0) / (double)a->pairs;
    for (int k = 0; k < RING; k++)
        cmb_pluggable_free(ring[k], 0, 0, NULL);
    return NULL;
}

static double run_threads(int n, long pairs, int *failed)
{
    pthread_t tid[64];
    run_arg args[64];
    double sum = 0;
    for (int i = 0; i < n; i++) {
        args[i] = (run_arg){.pairs = pairs};
        pthread_create(&tid[i], NULL, run_library, &args[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(tid[i], NULL);
        sum += args[i].ns_per_pair;
        *failed |= args[i].failed;
    }
    return sum / n; /* mean per-thread time per pair */
}

/* --- main ------------------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    const char *spec = "torch-caching@sim", *json = NULL, *threads = "1,2,4,8";
    long pairs = 200000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--allocator") && i + 1 < argc)
            spec = argv[++i];
        else if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
            pairs = atol(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--allocator SPEC@sim] [--pairs N] [--threads 1,2,4] [--json FILE]\n",
                    argv[0]);
            return 2;
        }
    }
    if (pairs < 1) {
        fprintf(stderr, "%s: --pairs must be at least 1\n", argv[0]);
        return 2;
    }
    setenv("CMB_PLUGGABLE_ALLOW_SIM", "1", 1);
    if (cmb_pluggable_configure(spec)) {
        fprintf(stderr, "%s: %s\n", argv[0], cmb_pluggable_last_error());
        return 2;
    }

    /* The same policy created directly, over its own sim upstream. */
    char err[400];
    cmb_alloc_spec s;
    cmb_upstream_config ucfg;
    cmb_upstream *up = NULL;
    void *state = NULL;
    if (cmb_alloc_spec_parse(spec, &s, err, sizeof err) || !s.entry) {
        fprintf(stderr, "%s: %s\n", argv[0], s.entry ? err : "a registry allocator is needed");
        return 2;
    }
    cmb_upstream_config_default(&ucfg);
    cmb_config c = {.options = s.options, .n_options = s.n_options, .sim = 1, .error = err,
                    .error_len = sizeof err};
    if (cmb_upstream_open(&ucfg, &up, err, sizeof err) != CMB_OK ||
        s.entry->methods->create(&c, up, &state) != CMB_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        return 2;
    }
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    double direct = run_direct(s.entry->methods, state, pairs, NULL);
    double locked = run_direct(s.entry->methods, state, pairs, &lock);
    s.entry->methods->destroy(state);
    cmb_upstream_close(up);

    FILE *jf = json ? fopen(json, "w") : NULL;
    if (json && !jf) {
        fprintf(stderr, "%s: cannot write %s\n", argv[0], json);
        return 2;
    }
    printf("%-22s %10s\n", spec, "ns/pair");
    printf("%-22s %10.1f\n", "direct", direct);
    printf("%-22s %10.1f\n", "direct+mutex", locked);
    if (jf)
        fprintf(jf, "{\"allocator\": \"%s\", \"pairs\": %ld, \"direct_ns\": %.1f, \"direct_mutex_ns\": %.1f, "
                "\"library_ns\": {", spec, pairs, direct, locked);
    int failed = 0, first = 1;
    char *list = strdup(threads), *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int n = atoi(t);
        if (n < 1 || n > 64)
            continue;
        double ns = run_threads(n, pairs, &failed);
        printf("library x%-13d %10.1f\n", n, ns);
        if (jf)
            fprintf(jf, "%s\"%d\": %.1f", first ? "" : ", ", n, ns);
        first = 0;
    }
    free(list);
    if (jf) {
        fprintf(jf, "}, \"failed\": %s}\n", failed ? "true" : "false");
        fclose(jf);
    }
    if (failed)
        fprintf(stderr, "%s: some allocations failed: %s\n", argv[0], cmb_pluggable_last_error());
    return failed ? 1 : 0;
}
