/* calibrate.c - cumembench calibrate: what every upstream and driver call
 * costs on the card as found, written as a cost file (docs/costs.md) that
 * harness/costs.c reads to predict a case's allocator time.
 *
 * Each call is timed alone on the monotonic clock, `repetitions` times per
 * size (bytes) or page count; the file keeps the median, min and max. A
 * device synchronization is measured as what it loses: spin kernels queued
 * back to back, once plain and once with the call between each pair; the
 * difference per call is the overlap it destroys (cudaFree, and
 * cudaDeviceSynchronize for comparison; the virtual memory calls, to see
 * which of them wait for queued work). Driver calls come through
 * cudaGetDriverEntryPoint (allocators/cuda_util.c), never -lcuda. Each
 * available real: plug-in is timed as alloc+free pairs through the same
 * registry entry the harness runs. The whole run takes well under a minute
 * on an H100 at the default repetitions.
 */
#include "calibrate.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "../allocators/cuda_util.h"
#include "../allocators/real.h"
#include "../allocators/upstream.h"
#include "../kernels/cmb_kernels.h"
#include "build_info.h"
#include "env.h"

#define CAL_MAX_REPS 1000
#define CAL_SPIN_NS 50000ull /* one queued kernel: 50 us of GPU time */
#define CAL_CHAIN 20         /* kernels in a chain                    */

static const size_t cal_sizes[] = {512, 64 << 10, 2 << 20, 32 << 20, 256 << 20, 1ul << 30};
static const size_t cal_pages[] = {1, 8, 64, 512};
static const size_t real_sizes[] = {512, 64 << 10, 2 << 20, 32 << 20};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

typedef struct cal_run {
    int reps;
    double t[CAL_MAX_REPS];
    json_t *calls; /* name -> [{x, median_s, min_s, max_s, n}] */
    char err[256];
} cal_run;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --- recording ----------------------------------------------------------------------------------- */

/* Appends the point (x, median/min/max of t[0..n)) to calls[name]. */
static void cal_point(cal_run *r, const char *name, const char *unit, double x, int n)
{
    if (n <= 0)
        return;
    qsort(r->t, (size_t)n, sizeof r->t[0], cmp_double);
    double med = n % 2 ? r->t[n / 2] : (r->t[n / 2 - 1] + r->t[n / 2]) / 2;
    json_t *entry = json_object_get(r->calls, name);
    if (!entry) {
        entry = json_pack("{s:s, s:[]}", "unit", unit, "points");
        json_object_set_new(r->calls, name, entry);
    }
    json_array_append_new(json_object_get(entry, "points"),
                          json_pack("{s:f, s:f, s:f, s:f, s:i}", "x", x, "median_s", med, "min_s", r->t[0],
                                    "max_s", r->t[n - 1], "n", n));
}

static int cuda_fail(cal_run *r, const char *what, cudaError_t e)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(r->err, sizeof r->err, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

/* --- the runtime's calls --------------------------------------------------------------------------- */

static int cal_malloc_free(cal_run *r)
{
    for (size_t i = 0; i < N_OF(cal_sizes); i++) {
        double tf[CAL_MAX_REPS];
        for (int k = 0; k < r->reps; k++) {
            void *p = NULL;
            double t0 = now_s();
            cudaError_t e = cudaMalloc(&p, cal_sizes[i]);
            double t1 = now_s();
            if (cuda_fail(r, "cudaMalloc", e))
                return -1;
            e = cudaFree(p);
            tf[k] = now_s() - t1;
            r->t[k] = t1 - t0;
            if (cuda_fail(r, "cudaFree", e))
                return -1;
        }
        cal_point(r, "cudaMalloc", "bytes", (double)cal_sizes[i], r->reps);
        memcpy(r->t, tf, sizeof(double) * (size_t)r->reps);
        cal_point(r, "cudaFree", "bytes", (double)cal_sizes[i], r->reps);
    }
    return 0;
}

/* A chain of CAL_CHAIN spin kernels on `s`, with `between` (may be NULL)
 * called between each pair; returns the wall time until the chain is done. */
static double chain_of(cudaStream_t s, uint64_t spin_ns, int (*between)(void *ctx, int i), void *ctx)
{
    cudaStreamSynchronize(s);
    double t0 = now_s();
    for (int i = 0; i < CAL_CHAIN; i++) {
        cmb_kernel_spin(spin_ns, s);
        if (between && between(ctx, i))
            return -1;
    }
    cudaStreamSynchronize(s);
    return now_s() - t0;
}

static double chain(cudaStream_t s, int (*between)(void *ctx, int i), void *ctx)
{
    return chain_of(s, CAL_SPIN_NS, between, ctx);
}

typedef struct free_ctx {
    void *p[CAL_CHAIN];
} free_ctx;

static int between_free(void *ctx, int i)
{
    return cudaFree(((free_ctx *)ctx)->p[i]) != cudaSuccess;
}

static int between_sync(void *ctx, int i)
{
    (void)ctx;
    (void)i;
    return cudaDeviceSynchronize() != cudaSuccess;
}

/* The overlap a synchronizing call destroys, per call: (chain with the call
 * between kernels - plain chain) / CAL_CHAIN. */
static int cal_sync_loss(cal_run *r, cudaStream_t s)
{
    for (size_t i = 0; i < N_OF(cal_sizes); i++) {
        if (cal_sizes[i] > (256u << 20))
            continue; /* CAL_CHAIN blocks of 1 GiB would not fit every card */
        for (int k = 0; k < r->reps; k++) {
            free_ctx fc;
            for (int j = 0; j < CAL_CHAIN; j++)
                if (cuda_fail(r, "cudaMalloc", cudaMalloc(&fc.p[j], cal_sizes[i])))
                    return -1;
            double plain = chain(s, NULL, NULL);
            double with = chain(s, between_free, &fc);
            if (with < 0)
                return cuda_fail(r, "cudaFree", cudaErrorUnknown);
            r->t[k] = (with - plain) / CAL_CHAIN;
        }
        cal_point(r, "cudaFree_in_flight", "bytes", (double)cal_sizes[i], r->reps);
    }
    for (int k = 0; k < r->reps; k++)
        r->t[k] = (chain(s, between_sync, NULL) - chain(s, NULL, NULL)) / CAL_CHAIN;
    cal_point(r, "cudaDeviceSynchronize_in_flight", "call", 1, r->reps);
    return 0;
}

static int cal_async(cal_run *r, cudaStream_t s)
{
    for (size_t i = 0; i < N_OF(cal_sizes); i++) {
        double tf[CAL_MAX_REPS];
        for (int k = 0; k < r->reps; k++) {
            void *p = NULL;
            double t0 = now_s();
            cudaError_t e = cudaMallocAsync(&p, cal_sizes[i], s);
            double t1 = now_s();
            if (cuda_fail(r, "cudaMallocAsync", e))
                return -1;
            e = cudaFreeAsync(p, s);
            tf[k] = now_s() - t1;
            r->t[k] = t1 - t0;
            if (cuda_fail(r, "cudaFreeAsync", e))
                return -1;
        }
        cudaStreamSynchronize(s);
        cal_point(r, "cudaMallocAsync", "bytes", (double)cal_sizes[i], r->reps);
        memcpy(r->t, tf, sizeof(double) * (size_t)r->reps);
        cal_point(r, "cudaFreeAsync", "bytes", (double)cal_sizes[i], r->reps);
    }
    return 0;
}

static int cal_events(cal_run *r, cudaStream_t s)
{
    cudaEvent_t ev;
    if (cuda_fail(r, "cudaEventCreate", cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)))
        return -1;
    double tq[CAL_MAX_REPS], ts[CAL_MAX_REPS];
    for (int k = 0; k < r->reps; k++) {
        double t0 = now_s();
        cudaEventRecord(ev, s);
        double t1 = now_s();
        cudaEventQuery(ev);
        double t2 = now_s();
        cudaStreamSynchronize(s);
        ts[k] = now_s() - t2; /* an idle stream: the call alone */
        r->t[k] = t1 - t0;
        tq[k] = t2 - t1;
    }
    cudaEventDestroy(ev);
    cal_point(r, "cudaEventRecord", "call", 1, r->reps);
    memcpy(r->t, tq, sizeof(double) * (size_t)r->reps);
    cal_point(r, "cudaEventQuery", "call", 1, r->reps);
    memcpy(r->t, ts, sizeof(double) * (size_t)r->reps);
    cal_point(r, "cudaStreamSynchronize", "call", 1, r->reps);
    return 0;
}

/* --- the driver's virtual memory calls ------------------------------------------------------------- */

typedef struct vmm_times {
    double t[5][CAL_MAX_REPS]; /* create, map, set_access, unmap, release */
} vmm_times;

static const char *const vmm_names[5] = {"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap",
                                         "cuMemRelease"};

/* One create/map/set-access/unmap/release round of `bytes`, each timed. */
static int vmm_round(const _cmb_driver_api *cu, CUdeviceptr va, size_t bytes, const CUmemAllocationProp *prop,
                     const CUmemAccessDesc *acc, double out[5])
{
    CUmemGenericAllocationHandle h;
    double t[6];
    t[0] = now_s();
    if (cu->cuMemCreate(&h, bytes, prop, 0) != CUDA_SUCCESS)
        return -1;
    t[1] = now_s();
    int bad = cu->cuMemMap(va, bytes, 0, h, 0) != CUDA_SUCCESS;
    t[2] = now_s();
    bad |= cu->cuMemSetAccess(va, bytes, acc, 1) != CUDA_SUCCESS;
    t[3] = now_s();
    bad |= cu->cuMemUnmap(va, bytes) != CUDA_SUCCESS;
    t[4] = now_s();
    bad |= cu->cuMemRelease(h) != CUDA_SUCCESS;
    t[5] = now_s();
    for (int i = 0; i < 5; i++)
        out[i] = t[i + 1] - t[i];
    return bad ? -1 : 0;
}

static int cal_vmm_in_flight(cal_run *r, cudaStream_t s, const _cmb_driver_api *cu, const CUmemAllocationProp *prop,
                             const CUmemAccessDesc *acc, size_t gran);

/* One cuMemSetAccess over k handles of one page each, mapped side by side:
 * what a growth's access costs when its range is many handles (an
 * expandable segment's growth, cmb's), against one handle of k pages above. */
static int set_access_handles(const _cmb_driver_api *cu, CUdeviceptr va, size_t k, size_t gran,
                              const CUmemAllocationProp *prop, const CUmemAccessDesc *acc, double *t)
{
    static CUmemGenericAllocationHandle h[512];
    size_t made = 0;
    int bad = 0;
    while (made < k && !bad) {
        bad = cu->cuMemCreate(&h[made], gran, prop, 0) != CUDA_SUCCESS;
        if (!bad && cu->cuMemMap(va + made * gran, gran, 0, h[made], 0) != CUDA_SUCCESS) {
            cu->cuMemRelease(h[made]);
            bad = 1;
        }
        made += !bad;
    }
    if (!bad) {
        double t0 = now_s();
        bad = cu->cuMemSetAccess(va, k * gran, acc, 1) != CUDA_SUCCESS;
        *t = now_s() - t0;
    }
    if (made)
        bad |= cu->cuMemUnmap(va, made * gran) != CUDA_SUCCESS;
    for (size_t i = 0; i < made; i++)
        bad |= cu->cuMemRelease(h[i]) != CUDA_SUCCESS;
    return bad ? -1 : 0;
}

static int cal_set_access_handles(cal_run *r, const _cmb_driver_api *cu, CUdeviceptr va, size_t gran,
                                  const CUmemAllocationProp *prop, const CUmemAccessDesc *acc)
{
    for (size_t i = 0; i < N_OF(cal_pages); i++) {
        for (int k = 0; k < r->reps; k++)
            if (set_access_handles(cu, va, cal_pages[i], gran, prop, acc, &r->t[k]))
                return snprintf(r->err, sizeof r->err, "cuMemSetAccess over %zu handles failed", cal_pages[i]), -1;
        cal_point(r, "cuMemSetAccess_handles", "handles", (double)cal_pages[i], r->reps);
    }
    return 0;
}

static int cal_vmm(cal_run *r, int device, cudaStream_t s)
{
    const _cmb_driver_api *cu = _cmb_driver(r->err, sizeof r->err);
    if (!cu)
        return -1;
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    CUmemAccessDesc acc = {prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    size_t gran = 0;
    if (cu->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || !gran)
        return snprintf(r->err, sizeof r->err, "cuMemGetAllocationGranularity failed"), -1;
    size_t most = cal_pages[N_OF(cal_pages) - 1] * gran;
    CUdeviceptr va;
    if (cu->cuMemAddressReserve(&va, most, 0, 0, 0) != CUDA_SUCCESS)
        return snprintf(r->err, sizeof r->err, "cuMemAddressReserve failed"), -1;
    static vmm_times vt;
    int rc = 0;
    for (size_t i = 0; i < N_OF(cal_pages) && !rc; i++) {
        for (int k = 0; k < r->reps && !rc; k++) {
            double one[5] = {0};
            rc = vmm_round(cu, va, cal_pages[i] * gran, &prop, &acc, one);
            for (int j = 0; j < 5; j++)
                vt.t[j][k] = one[j];
        }
        for (int j = 0; j < 5 && !rc; j++) {
            memcpy(r->t, vt.t[j], sizeof(double) * (size_t)r->reps);
            cal_point(r, vmm_names[j], "pages", (double)cal_pages[i], r->reps);
        }
    }
    if (rc)
        snprintf(r->err, sizeof r->err, "a cuMemCreate/Map/SetAccess/Unmap/Release round failed");
    else
        rc = cal_set_access_handles(r, cu, va, gran, &prop, &acc);
    cu->cuMemAddressFree(va, most);
    if (!rc)
        rc = cal_vmm_in_flight(r, s, cu, &prop, &acc, gran);
    json_object_set_new(r->calls, "granularity_bytes", json_integer((json_int_t)gran));
    return rc;
}

/* --- the virtual memory calls with kernels queued ------------------------------------------------- *
 * Whether a call waits for work already queued, measured as the sync loss
 * above: a chain of spin kernels, plain and with one call between each
 * pair, each call on a handle of its own that no kernel touches. Longer
 * kernels than above (200 us), so that even cuMemSetAccess (about 40 us on
 * an H200 when idle) leaves the host ahead of the device: a call that does
 * not wait loses nothing. Spin kernels touch no memory, so what remapping
 * costs kernels that do (their translations invalidated) is not in it. */

#define CAL_VMM_SPIN_NS 200000ull
#define CAL_VMM_PAGES 4 /* cmb's default handle (chunk=4) */
enum { V_CREATE, V_MAP, V_ACCESS, V_UNMAP, V_RELEASE, V_OPS };

typedef struct vmm_chain_ctx {
    const _cmb_driver_api *cu;
    CUdeviceptr va;
    size_t bytes;
    const CUmemAllocationProp *prop;
    const CUmemAccessDesc *acc;
    CUmemGenericAllocationHandle h[CAL_CHAIN];
    int op;
} vmm_chain_ctx;

static int between_vmm(void *ctx, int i)
{
    vmm_chain_ctx *c = ctx;
    CUdeviceptr at = c->va + (CUdeviceptr)i * c->bytes;
    switch (c->op) {
    case V_CREATE: return c->cu->cuMemCreate(&c->h[i], c->bytes, c->prop, 0) != CUDA_SUCCESS;
    case V_MAP: return c->cu->cuMemMap(at, c->bytes, 0, c->h[i], 0) != CUDA_SUCCESS;
    case V_ACCESS: return c->cu->cuMemSetAccess(at, c->bytes, c->acc, 1) != CUDA_SUCCESS;
    case V_UNMAP: return c->cu->cuMemUnmap(at, c->bytes) != CUDA_SUCCESS;
    default: return c->cu->cuMemRelease(c->h[i]) != CUDA_SUCCESS;
    }
}

static int cal_vmm_in_flight(cal_run *r, cudaStream_t s, const _cmb_driver_api *cu, const CUmemAllocationProp *prop,
                             const CUmemAccessDesc *acc, size_t gran)
{
    static const char *const names[V_OPS] = {"cuMemCreate_in_flight", "cuMemMap_in_flight",
                                             "cuMemSetAccess_in_flight", "cuMemUnmap_in_flight",
                                             "cuMemRelease_in_flight"};
    static double loss[V_OPS][CAL_MAX_REPS];
    vmm_chain_ctx c = {cu, 0, CAL_VMM_PAGES * gran, prop, acc, {0}, 0};
    if (cu->cuMemAddressReserve(&c.va, CAL_CHAIN * c.bytes, 0, 0, 0) != CUDA_SUCCESS)
        return snprintf(r->err, sizeof r->err, "cuMemAddressReserve failed"), -1;
    int rc = 0;
    for (int k = 0; k < r->reps && !rc; k++) {
        /* each chain leaves the state the next one's calls need */
        for (c.op = 0; c.op < V_OPS && !rc; c.op++) {
            double plain = chain_of(s, CAL_VMM_SPIN_NS, NULL, NULL);
            double with = chain_of(s, CAL_VMM_SPIN_NS, between_vmm, &c);
            if (with < 0)
                rc = -1;
            loss[c.op][k] = (with - plain) / CAL_CHAIN;
        }
    }
    cu->cuMemAddressFree(c.va, CAL_CHAIN * c.bytes);
    if (rc)
        return snprintf(r->err, sizeof r->err, "a VMM call between queued kernels failed"), -1;
    for (int j = 0; j < V_OPS; j++) {
        memcpy(r->t, loss[j], sizeof(double) * (size_t)r->reps);
        cal_point(r, names[j], "pages", CAL_VMM_PAGES, r->reps);
    }
    return 0;
}

/* --- the real libraries ------------------------------------------------------------------------------ */

/* alloc+free pairs of one real: plug-in through its registry entry, the
 * same table the harness runs; skipped (with the reason) when missing. */
static void cal_real_one(cal_run *r, const cmb_real_info *ri, cmb_upstream *up, json_t *real)
{
    char why[320] = "";
    const cmb_allocator_entry *e = cmb_real_resolve(ri, why, sizeof why);
    void *state = NULL;
    cmb_config cfg = {NULL, 0, 0, 0, why, sizeof why};
    if (!e || e->methods->create(&cfg, up, &state) != CMB_OK) {
        json_object_set_new(real, ri->name, json_pack("{s:s}", "skipped", why[0] ? why : "cannot run here"));
        return;
    }
    json_t *saved = r->calls;
    r->calls = json_object();
    for (size_t i = 0; i < N_OF(real_sizes); i++) {
        int n = 0;
        for (int k = 0; k < r->reps; k++) {
            void *p = NULL;
            double t0 = now_s();
            if (e->methods->allocate(state, real_sizes[i], NULL, &p) != CMB_OK)
                break;
            e->methods->deallocate(state, p, real_sizes[i], NULL);
            r->t[n++] = now_s() - t0;
        }
        cal_point(r, "alloc_free_pair", "bytes", (double)real_sizes[i], n);
    }
    e->methods->destroy(state);
    json_object_set(real, ri->name, json_object_get(r->calls, "alloc_free_pair"));
    json_decref(r->calls);
    r->calls = saved;
}

static void cal_real(cal_run *r, int device, json_t *real)
{
    cmb_upstream_config ucfg;
    cmb_upstream_config_default(&ucfg);
    ucfg.kind = CMB_UPSTREAM_CUDA;
    ucfg.device = device;
    cmb_upstream *up = NULL;
    char err[256];
    if (cmb_upstream_open(&ucfg, &up, err, sizeof err) != CMB_OK) {
        json_object_set_new(real, "error", json_string(err));
        return;
    }
    for (size_t i = 0; i < cmb_real_count(); i++)
        cal_real_one(r, cmb_real_at(i), up, real);
    cmb_upstream_close(up);
}

/* --- the command ------------------------------------------------------------------------------------- */

static json_t *gpu_info(int device)
{
    struct cudaDeviceProp p;
    int drv = 0, rt = 0;
    cudaGetDeviceProperties(&p, device);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    char slug[96], dv[32], rv[32];
    cmb_env_slug(p.name, slug, sizeof slug);
    snprintf(dv, sizeof dv, "%d.%d", drv / 1000, (drv % 1000) / 10);
    snprintf(rv, sizeof rv, "%d.%d", rt / 1000, (rt % 1000) / 10);
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:i}", "name", p.name, "slug", slug, "total_bytes",
                     (json_int_t)p.totalGlobalMem, "driver_cuda_version", dv, "cuda_runtime", rv,
                     "compute_capability", p.major * 10 + p.minor);
}

static int parse_args(int argc, char **argv, const char **out, int *reps)
{
    for (int i = 2; i < argc; i++) {
        if ((!strcmp(argv[i], "--out") || !strcmp(argv[i], "--repetitions")) && i + 1 == argc) {
            fprintf(stderr, "cumembench calibrate: %s needs a value (usage: cumembench calibrate "
                            "[--out FILE] [--repetitions N])\n", argv[i]);
            return -1;
        }
        if (!strcmp(argv[i], "--out"))
            *out = argv[++i];
        else if (!strcmp(argv[i], "--repetitions")) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 3 || v > CAL_MAX_REPS) {
                fprintf(stderr, "cumembench calibrate: --repetitions takes 3..%d, not %s\n", CAL_MAX_REPS, argv[i]);
                return -1;
            }
            *reps = (int)v;
        } else {
            fprintf(stderr, "cumembench calibrate: unknown argument %s (usage: cumembench calibrate "
                            "[--out FILE] [--repetitions N])\n", argv[i]);
            return -1;
        }
    }
    return 0;
}

/* --out FILE can be written: checked before anything is measured, so that
 * a measurement is never lost to a bad path. A FILE that exists is
 * replaced (a card calibrated again). */
static int out_ok(const char *out)
{
    char parent[PATH_MAX];
    struct stat st;
    if (!*out) {
        fprintf(stderr, "cumembench calibrate: --out needs a file\n");
        return -1;
    }
    snprintf(parent, sizeof parent, "%s", out);
    char *slash = strrchr(parent, '/');
    if (slash == parent)
        slash[1] = '\0'; /* "/x": its parent is "/" */
    else if (slash)
        *slash = '\0';
    else
        snprintf(parent, sizeof parent, ".");
    char why[PATH_MAX + 64] = "";
    if (!stat(out, &st)) {
        if (S_ISDIR(st.st_mode))
            snprintf(why, sizeof why, "a directory; give a file in it");
        else if (access(out, W_OK))
            snprintf(why, sizeof why, "%s", strerror(errno));
    } else if (stat(parent, &st)) {
        snprintf(why, sizeof why, "directory %s: %s", parent, strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        snprintf(why, sizeof why, "%s is not a directory", parent);
    } else if (access(parent, W_OK | X_OK)) {
        snprintf(why, sizeof why, "directory %s: %s", parent, strerror(errno));
    }
    if (why[0]) {
        fprintf(stderr, "cumembench calibrate: --out %s: %s\n", out, why);
        return -1;
    }
    return 0;
}

static json_t *header(int argc, char **argv, int device, int reps)
{
    char cmd[1024] = "", date[32];
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(cmd);
        snprintf(cmd + n, sizeof cmd - n, "%s%s", i ? " " : "", argv[i]);
    }
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    return json_pack("{s:s, s:o, s:s, s:s, s:s, s:i, s:s}", "format", "cumembench-costs/1", "gpu",
                     gpu_info(device), "command", cmd, "date", date, "revision", CMB_GIT_REVISION,
                     "repetitions", reps, "note",
                     "seconds per call; x is bytes, pages (granularity_bytes each) or 1 per call; "
                     "*_in_flight is the overlap lost per call with kernels queued (docs/costs.md)");
}

static int measure(cal_run *r, int device, json_t *doc)
{
    cudaStream_t s;
    if (cuda_fail(r, "cudaSetDevice", cudaSetDevice(device)) ||
        cuda_fail(r, "cudaStreamCreate", cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)))
        return -1;
    cudaFree(NULL); /* the context exists before the first timed call */
    int rc = cal_malloc_free(r) || cal_sync_loss(r, s) || cal_async(r, s) || cal_events(r, s) ||
             cal_vmm(r, device, s);
    cudaStreamDestroy(s);
    if (rc)
        return -1;
    json_t *real = json_object();
    cal_real(r, device, real);
    json_object_set_new(doc, "real", real);
    return 0;
}

int cmb_calibrate_main(int argc, char **argv)
{
    const char *out = NULL;
    static cal_run r;
    r.reps = 15;
    if (parse_args(argc, argv, &out, &r.reps) || (out && out_ok(out)))
        return 2;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        fprintf(stderr, "cumembench calibrate: no usable GPU (%s); calibration measures a real card\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no device");
        return 2;
    }
    double t0 = now_s();
    json_t *doc = header(argc, argv, 0, r.reps);
    r.calls = json_object();
    json_object_set_new(doc, "calls", r.calls);
    if (measure(&r, 0, doc)) {
        fprintf(stderr, "cumembench calibrate: %s\n", r.err);
        json_decref(doc);
        return 1;
    }
    json_object_set_new(doc, "calibrate_seconds", json_real(now_s() - t0));
    int rc = out ? json_dump_file(doc, out, JSON_INDENT(1) | JSON_SORT_KEYS) : json_dumpf(doc, stdout, JSON_INDENT(1) | JSON_SORT_KEYS);
    if (rc && out && !json_dumpf(doc, stdout, JSON_INDENT(1) | JSON_SORT_KEYS)) { /* the measurement kept */
        json_decref(doc);
        fprintf(stderr, "cumembench calibrate: cannot write %s; the cost file is on stdout instead\n", out);
        return 1;
    }
    json_decref(doc);
    if (rc) {
        fprintf(stderr, "cumembench calibrate: cannot write %s\n", out ? out : "stdout");
        return 1;
    }
    if (out)
        fprintf(stderr, "cumembench calibrate: wrote %s\n", out);
    return 0;
}
