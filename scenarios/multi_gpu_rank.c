/* multi_gpu_rank.c - one rank of the multi-gpu scenario: the process a
 * distributed job runs per GPU (protocol in multi_gpu.h).
 *
 * Steps, each on the coordinator's "go":
 *   init    the mistake, if any (ctx0: a CUDA call before cudaSetDevice
 *           makes a context on device 0; pool0: also one block allocated
 *           and freed through an instance of the allocator while device 0
 *           is current), then cudaSetDevice(rank) and its context;
 *   traffic the allocator on the rank's device: `size` bytes in
 *           CMB_MGPU_BLOCKS blocks, each written by a kernel (GPU);
 *   free    every block freed and the stream synchronized: what stays is
 *           what the allocator keeps;
 *   xfree   (rank 0) a block freed through its allocator on a stream of
 *           device 1 while device 1 is current: refused, works or corrupts;
 *   peer, map (rank 0, GPU, cudaMemPool allocators) a block of the pool is
 *           made readable by device 1 with cudaMemPoolSetAccess: its time,
 *           and a kernel on device 1 reads it back.
 * Sim: every device is a sim upstream of its own, contexts are modelled
 * (CMB_MGPU_SIM_CONTEXT) and every answer carries take=: the bytes this
 * rank holds on each device, since no other process can see them.
 */
#define _GNU_SOURCE
#include "multi_gpu.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include "../allocators/upstream.h"
#include "../common/cmb_units.h"
#include "../allocators/policy.h"
#include "../common/cmb_clock.h"
#include "../kernels/cmb_kernels.h"

#define ANSWER_FD 3
#define PATTERN_SENTINEL 0x5e471e11u
#define PATTERN_FREED 0xf7eedu
#define PATTERN_REUSED 0x7e05edu
#define PATTERN_PEER 0x9ee7u

/* --- the job line ------------------------------------------------------------------ */

static const char *const mistake_names[] = {"none", "ctx0", "pool0"};

int cmb_mgpu_job_format(const cmb_mgpu_job *j, char *out, size_t len)
{
    int n = snprintf(out, len, "gpu=%d\trank=%d\tdevices=%d\tmistake=%s\tsize=%llu\tstray=%llu\tcapacity=%llu\t"
                     "seed=%llu\talloc=%s\n", j->gpu, j->rank, j->devices, mistake_names[j->mistake],
                     (unsigned long long)j->size, (unsigned long long)j->stray, (unsigned long long)j->capacity,
                     (unsigned long long)j->seed, j->alloc);
    return n < 0 || (size_t)n >= len || strchr(j->alloc, '\t') || strchr(j->alloc, '\n') ? -1 : 0;
}

static int job_field(cmb_mgpu_job *j, const char *key, const char *v)
{
    uint64_t u = 0;
    if (!strcmp(key, "alloc"))
        return snprintf(j->alloc, sizeof j->alloc, "%s", v) >= (int)sizeof j->alloc ? -1 : 0;
    if (!strcmp(key, "mistake")) {
        for (int m = CMB_MGPU_NONE; m <= CMB_MGPU_POOL0; m++)
            if (!strcmp(v, mistake_names[m]))
                return j->mistake = m, 0;
        return -1;
    }
    if (cmb_parse_u64(v, &u))
        return -1;
    if (!strcmp(key, "gpu"))
        j->gpu = u != 0;
    else if (!strcmp(key, "rank"))
        j->rank = (int)u;
    else if (!strcmp(key, "devices"))
        j->devices = (int)u;
    else if (!strcmp(key, "size"))
        j->size = u;
    else if (!strcmp(key, "stray"))
        j->stray = u;
    else if (!strcmp(key, "capacity"))
        j->capacity = u;
    else if (!strcmp(key, "seed"))
        j->seed = u;
    else
        return -1;
    return 0;
}

int cmb_mgpu_job_parse(const char *line, cmb_mgpu_job *j, char *err, size_t errlen)
{
    char buf[1024], *save = NULL;
    memset(j, 0, sizeof *j);
    j->devices = -1;
    snprintf(buf, sizeof buf, "%s", line);
    buf[strcspn(buf, "\n")] = '\0';
    for (char *f = strtok_r(buf, "\t", &save); f; f = strtok_r(NULL, "\t", &save)) {
        char *eq = strchr(f, '=');
        if (eq)
            *eq = '\0';
        if (!eq || job_field(j, f, eq + 1)) {
            snprintf(err, errlen, "bad job field '%s%s%s'", f, eq ? "=" : "", eq ? eq + 1 : "");
            return -1;
        }
    }
    if (j->devices < 1 || j->devices > CMB_MGPU_MAX_DEVICES || j->rank < 0 || j->rank >= j->devices ||
        !j->alloc[0] || j->size < CMB_MGPU_BLOCKS) {
        snprintf(err, errlen, "incomplete job: devices, rank, alloc and size are needed");
        return -1;
    }
    return 0;
}

/* --- the rank's state --------------------------------------------------------------- */

typedef struct inst {
    cmb_policy pol;    /* the instance (pol.state NULL when none) and its
                          upstream (pol.up NULL for driver-level allocators) */
    int device;
} inst;

typedef struct rank {
    cmb_mgpu_job job;
    cmb_alloc_spec spec;
    const cmb_allocator_methods *m;
    int ctx[CMB_MGPU_MAX_DEVICES];   /* sim: the modelled contexts */
    inst main, stray;
    cmb_stream own, other;           /* streams of the rank's device and of device 1 */
    int have_other;
    void *blocks[CMB_MGPU_BLOCKS];
    size_t n_blocks, block;
    void *peer_block;
    unsigned long long *counter, *peer_counter; /* device words for the check kernel */
    void *pool;                      /* the cudaMemPool of the main instance's blocks */
    int broken;                      /* a sticky CUDA error: no more GPU work */
    char answer[2048];
    size_t used;
} rank;

static void put(rank *rk, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(rank *rk, const char *fmt, ...)
{
    va_list ap;
    if (rk->used + 2 >= sizeof rk->answer)
        return;
    rk->answer[rk->used++] = ' ';
    va_start(ap, fmt);
    int n = vsnprintf(rk->answer + rk->used, sizeof rk->answer - rk->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        rk->used = rk->used + (size_t)n < sizeof rk->answer ? rk->used + (size_t)n : sizeof rk->answer - 1;
}

static void send_line(const char *line)
{
    size_t len = strlen(line), off = 0;
    while (off < len) {
        ssize_t w = write(ANSWER_FD, line + off, len - off);
        if (w <= 0)
            _exit(1); /* the coordinator is gone */
        off += (size_t)w;
    }
}

/* "ok STEP fields... [take=...]\n"; note= is last (the rest of the line). */
static void answer_ok(rank *rk, const char *step, const char *note)
{
    char line[2400], take[160] = "";
    if (!rk->job.gpu) {
        size_t used = 0;
        for (int d = 0; d < rk->job.devices; d++) {
            uint64_t b = rk->ctx[d] ? CMB_MGPU_SIM_CONTEXT : 0;
            if (rk->main.pol.up && rk->main.device == d)
                b += cmb_upstream_device_used(rk->main.pol.up);
            if (rk->stray.pol.up && rk->stray.device == d)
                b += cmb_upstream_device_used(rk->stray.pol.up);
            used += (size_t)snprintf(take + used, sizeof take - used, "%s%llu", d ? "," : " take=",
                                     (unsigned long long)b);
        }
    }
    rk->answer[rk->used] = '\0';
    snprintf(line, sizeof line, "ok %s%s%s%s%s\n", step, rk->answer, take, note ? " note=" : "", note ? note : "");
    send_line(line);
    rk->used = 0;
}

static void answer(const char *kind, const char *step, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void answer(const char *kind, const char *step, const char *fmt, ...)
{
    char msg[1024], line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    msg[strcspn(msg, "\n")] = '\0';
    snprintf(line, sizeof line, "%s %s %s\n", kind, step, msg);
    send_line(line);
}

/* --- devices, instances, pools ---------------------------------------------------------- */

static int set_device(rank *rk, int d)
{
    if (!rk->job.gpu) {
        cmb_sim_set_device(d);
        return 0;
    }
    return (int)cudaSetDevice(d);
}

/* A context on the current device (cudaFree(0) makes it; sim: the model). */
static int make_context(rank *rk, int d)
{
    if (!rk->job.gpu) {
        rk->ctx[d] = 1;
        return 0;
    }
    return (int)cudaFree(0);
}

static int real_memory(const rank *rk, const inst *in)
{
    return rk->job.gpu && !(in->pol.up && !strcmp(in->pol.up->name, "sim"));
}

/* An instance of the allocator for device d (the current device). */
static cmb_status open_inst(rank *rk, inst *in, int d, char *err, size_t errlen)
{
    cmb_policy_place place = {
        .upstream = cmb_policy_upstream_kind(&rk->spec, rk->m, rk->job.gpu),
        .device = d,
        .sim = !rk->job.gpu,
        .capacity = rk->job.capacity,
    };
    in->device = d;
    return cmb_policy_open(&rk->spec, rk->m, &place, &in->pol, err, errlen);
}

/* Destroys the instance; the bytes its upstream still held (a leak). */
static int64_t close_inst(rank *rk, inst *in)
{
    (void)rk;
    cmb_policy_end end;
    cmb_policy_close(&in->pol, &end);
    return end.leaked > 0 ? end.leaked : 0;
}

static const char *last_error(const rank *rk, const inst *in)
{
    const char *e = rk->m->last_error ? rk->m->last_error(in->pol.state) : NULL;
    return e ? e : "no message";
}

/* The cudaMemPool a block comes from (NULL: not from a pool), asked of the
 * driver through its entry point (the binary does not link libcuda). */
static void *mempool_of(void *p)
{
    static PFN_cuPointerGetAttribute_v4000 get;
    static int tried;
    enum cudaDriverEntryPointQueryResult q;
    void *pool = NULL;
    if (!tried) {
        tried = 1;
        if (cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", (void **)&get, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            get = NULL;
    }
    if (!get || get(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
        return NULL;
    return pool;
}

static unsigned long long pool_attr(void *pool, enum cudaMemPoolAttr attr)
{
    unsigned long long v = 0;
    if (cudaMemPoolGetAttribute((cudaMemPool_t)pool, attr, &v) != cudaSuccess)
        cudaGetLastError();
    return v;
}

/* Fills with a kernel and waits (GPU memory only); 0 or a cudaError_t. */
static int fill(void *p, size_t size, uint32_t pattern, cmb_stream s)
{
    int e = cmb_kernel_fill_u32(p, size, pattern, s);
    return e ? e : (int)cudaStreamSynchronize((cudaStream_t)s);
}

/* Words of [p, p+size) that differ from pattern, read by a kernel on the
 * current device through `counter` (a device word there); -1 on an error. */
static long long mismatches(void *p, size_t size, uint32_t pattern, unsigned long long *counter, cmb_stream s)
{
    unsigned long long n = 0;
    if (cudaMemsetAsync(counter, 0, sizeof n, (cudaStream_t)s) ||
        cmb_kernel_check_u32(p, size, pattern, counter, s) ||
        cudaMemcpyAsync(&n, counter, sizeof n, cudaMemcpyDeviceToHost, (cudaStream_t)s) ||
        cudaStreamSynchronize((cudaStream_t)s)) {
        cudaGetLastError();
        return -1;
    }
    return (long long)n;
}

static cmb_status make_stream(rank *rk, int d, int index, cmb_stream *s)
{
    if (!rk->job.gpu) {
        *s = cmb_sim_stream(d, index);
        return CMB_OK;
    }
    cudaStream_t cs;
    if (cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) != cudaSuccess)
        return CMB_ERR_CUDA;
    *s = (cmb_stream)cs;
    return CMB_OK;
}

/* --- init: the mistakes, then the rank's own device ------------------------------------- */

/* pool0: the allocator's first use happens while device 0 is current. */
static int stray_use(rank *rk, char *err, size_t errlen)
{
    void *p = NULL;
    cmb_stream s = rk->job.gpu ? NULL : cmb_sim_stream(0, 0); /* the default stream, as a first use has */
    if (open_inst(rk, &rk->stray, 0, err, errlen) != CMB_OK)
        return -1;
    cmb_status st = rk->m->allocate(rk->stray.pol.state, rk->job.stray, s, &p);
    if (st != CMB_OK) {
        snprintf(err, errlen, "the stray block on device 0: %s (%s)", cmb_status_str(st), last_error(rk, &rk->stray));
        return -1;
    }
    if (real_memory(rk, &rk->stray) && fill(p, rk->job.stray, PATTERN_SENTINEL, s)) {
        snprintf(err, errlen, "writing the stray block: %s", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    void *pool = rk->job.gpu ? mempool_of(p) : NULL; /* asked once the block is in use */
    st = rk->m->deallocate(rk->stray.pol.state, p, rk->job.stray, s);
    if (st != CMB_OK) {
        snprintf(err, errlen, "freeing the stray block: %s (%s)", cmb_status_str(st), last_error(rk, &rk->stray));
        return -1;
    }
    if (rk->job.gpu)
        cudaDeviceSynchronize(); /* a pool gives back what it releases at a synchronization */
    if (pool)
        put(rk, "stray_pool_reserved_bytes=%llu", pool_attr(pool, cudaMemPoolAttrReservedMemCurrent));
    return 0;
}

static void step_init(rank *rk)
{
    char err[512];
    int e;
    double t0 = cmb_now_s();
    int mistaken = rk->job.mistake != CMB_MGPU_NONE && rk->job.rank != 0;
    if (mistaken && ((e = set_device(rk, 0)) || (e = make_context(rk, 0)))) {
        answer("fail", "init", "a context on device 0: %s", cudaGetErrorString((cudaError_t)e));
        return;
    }
    if (mistaken && rk->job.mistake == CMB_MGPU_POOL0 && stray_use(rk, err, sizeof err)) {
        answer("fail", "init", "%s", err);
        return;
    }
    if ((e = set_device(rk, rk->job.rank)) || (e = make_context(rk, rk->job.rank))) {
        answer("fail", "init", "cudaSetDevice(%d): %s", rk->job.rank, cudaGetErrorString((cudaError_t)e));
        return;
    }
    put(rk, "init_ms=%.3f", (cmb_now_s() - t0) * 1e3);
    answer_ok(rk, "init", NULL);
}

/* --- traffic and free on the rank's device ------------------------------------------------- */

static void put_pool(rank *rk, const char *what)
{
    if (!rk->pool)
        return;
    if (!strcmp(what, "live")) {
        put(rk, "pool_reserved_bytes=%llu", pool_attr(rk->pool, cudaMemPoolAttrReservedMemCurrent));
        put(rk, "pool_used_bytes=%llu", pool_attr(rk->pool, cudaMemPoolAttrUsedMemCurrent));
    } else {
        put(rk, "pool_cached_bytes=%llu", pool_attr(rk->pool, cudaMemPoolAttrReservedMemCurrent));
    }
}

static void step_traffic(rank *rk)
{
    char err[512];
    double t0 = cmb_now_s();
    if (open_inst(rk, &rk->main, rk->job.rank, err, sizeof err) != CMB_OK) {
        answer("fail", "traffic", "%s", err);
        return;
    }
    if (make_stream(rk, rk->job.rank, 0, &rk->own) != CMB_OK) {
        answer("fail", "traffic", "cudaStreamCreate: %s", cudaGetErrorString(cudaGetLastError()));
        return;
    }
    rk->block = (size_t)(rk->job.size / CMB_MGPU_BLOCKS);
    for (rk->n_blocks = 0; rk->n_blocks < CMB_MGPU_BLOCKS; rk->n_blocks++) {
        void **p = &rk->blocks[rk->n_blocks];
        cmb_status st = rk->m->allocate(rk->main.pol.state, rk->block, rk->own, p);
        if (st != CMB_OK) {
            answer("fail", "traffic", "allocation of %zu bytes: %s (%s)", rk->block, cmb_status_str(st),
                   last_error(rk, &rk->main));
            return;
        }
        if (real_memory(rk, &rk->main) && fill(*p, rk->block, PATTERN_SENTINEL, rk->own)) {
            answer("fail", "traffic", "writing a block: %s", cudaGetErrorString(cudaGetLastError()));
            return;
        }
    }
    rk->pool = rk->job.gpu ? mempool_of(rk->blocks[0]) : NULL;
    put(rk, "traffic_ms=%.3f", (cmb_now_s() - t0) * 1e3);
    put_pool(rk, "live");
    answer_ok(rk, "traffic", NULL);
}

static void step_free(rank *rk)
{
    while (rk->n_blocks) {
        cmb_status st = rk->m->deallocate(rk->main.pol.state, rk->blocks[rk->n_blocks - 1], rk->block, rk->own);
        if (st != CMB_OK) {
            answer("fail", "free", "free of a %zu-byte block: %s (%s)", rk->block, cmb_status_str(st),
                   last_error(rk, &rk->main));
            return;
        }
        rk->n_blocks--;
    }
    if (rk->job.gpu && cudaStreamSynchronize((cudaStream_t)rk->own) != cudaSuccess) {
        answer("fail", "free", "cudaStreamSynchronize: %s", cudaGetErrorString(cudaGetLastError()));
        return;
    }
    put_pool(rk, "cached");
    answer_ok(rk, "free", NULL);
}

/* --- xfree: a block freed from another device's stream ------------------------------------ */

typedef struct xfree {
    void *x, *p, *q;            /* a sentinel, the block freed across, the next block */
    int refused, retry_failed, sticky, next_failed, wrong_device, reused, stats_disagree;
    long long bad_x, bad_q;     /* words changed (-1: the check itself failed) */
    uint64_t misuse;            /* upstream misuse during the test */
    char why[400];
} xfree;

/* The stream (and a check word) on device 1, made while device 1 is current. */
static int other_stream(rank *rk)
{
    if (rk->have_other)
        return 0;
    if (set_device(rk, 1))
        return -1;
    cmb_status st = make_stream(rk, 1, 0, &rk->other);
    if (st == CMB_OK && rk->job.gpu && cudaMalloc((void **)&rk->peer_counter, sizeof *rk->peer_counter))
        st = CMB_ERR_CUDA;
    if (set_device(rk, 0) || st != CMB_OK)
        return -1;
    rk->have_other = 1;
    return 0;
}

/* Frees every device's work; 1 when an error stays (sticky: the context is lost). */
static int sync_both(rank *rk)
{
    int sticky = 0;
    if (!rk->job.gpu)
        return 0;
    for (int d = 1; d >= 0; d--) {
        if (cudaSetDevice(d) != cudaSuccess) {
            sticky = 1;
            continue;
        }
        if (cudaDeviceSynchronize() != cudaSuccess) {
            cudaGetLastError();
            sticky |= cudaDeviceSynchronize() != cudaSuccess;
        }
    }
    return sticky;
}

static int xfree_setup(rank *rk, xfree *x)
{
    size_t S = rk->block;
    if (rk->m->allocate(rk->main.pol.state, S, rk->own, &x->x) != CMB_OK ||
        rk->m->allocate(rk->main.pol.state, S, rk->own, &x->p) != CMB_OK) {
        answer("fail", "xfree", "allocation of %zu bytes: %s", S, last_error(rk, &rk->main));
        return -1;
    }
    if (real_memory(rk, &rk->main) &&
        (fill(x->x, S, PATTERN_SENTINEL, rk->own) || fill(x->p, S, PATTERN_FREED, rk->own) ||
         cudaMalloc((void **)&rk->counter, sizeof *rk->counter))) {
        answer("fail", "xfree", "writing the blocks: %s", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    x->misuse = rk->main.pol.up ? cmb_upstream_misuse_count(rk->main.pol.up) : 0;
    return 0;
}

/* The free from device 1's side, and the program's retry on its own stream
 * when it was refused. */
static void xfree_free(rank *rk, xfree *x)
{
    size_t S = rk->block;
    set_device(rk, 1);
    cmb_status st = rk->m->deallocate(rk->main.pol.state, x->p, S, rk->other);
    set_device(rk, 0);
    if (st == CMB_OK)
        return;
    x->refused = 1;
    snprintf(x->why, sizeof x->why, "cross-device free refused: %s", last_error(rk, &rk->main));
    if (rk->job.gpu)
        cudaGetLastError(); /* a refusal is not sticky; sync_both finds out */
    if (rk->m->deallocate(rk->main.pol.state, x->p, S, rk->own) != CMB_OK) {
        x->retry_failed = 1;
        snprintf(x->why, sizeof x->why, "cross-device free corrupts: refused, and the free on its own stream failed too: %s",
                 last_error(rk, &rk->main));
    }
}

/* After the free: can the allocator serve the size again, on the right
 * device, without touching live data? */
static void xfree_check(rank *rk, xfree *x)
{
    size_t S = rk->block;
    x->reused = 0;
    if (rk->m->allocate(rk->main.pol.state, S, rk->own, &x->q) != CMB_OK) {
        x->next_failed = 1;
        x->q = NULL;
        return;
    }
    x->reused = x->q == x->p;
    if (rk->main.pol.up && !cmb_upstream_contains(rk->main.pol.up, x->q, S))
        x->wrong_device = 1;
    if (real_memory(rk, &rk->main)) {
        struct cudaPointerAttributes a;
        if (cudaPointerGetAttributes(&a, x->q) == cudaSuccess && a.device != 0)
            x->wrong_device = 1;
        cudaGetLastError();
        x->bad_q = fill(x->q, S, PATTERN_REUSED, rk->own) ? -1
                                                          : mismatches(x->q, S, PATTERN_REUSED, rk->counter, rk->own);
        x->bad_x = mismatches(x->x, S, PATTERN_SENTINEL, rk->counter, rk->own);
    }
    cmb_alloc_stats s;
    if (rk->m->stats && rk->m->stats(rk->main.pol.state, &s) == CMB_OK && (s.valid & CMB_STAT_REQUESTED))
        x->stats_disagree = s.requested.current != (int64_t)(2 * S); /* x and q */
}

static int xfree_verdict(rank *rk, xfree *x)
{
    if (rk->main.pol.up)
        x->misuse = cmb_upstream_misuse_count(rk->main.pol.up) - x->misuse;
    if (x->retry_failed)
        return 2; /* x->why says so */
    const char *what = x->sticky ? "a sticky CUDA error: the context is lost"
                       : x->refused ? NULL
                       : x->next_failed ? "the next allocation of the same size failed"
                       : x->wrong_device ? "the next block is not device 0's memory"
                       : x->bad_x || x->bad_q ? "data changed under a live block (check kernel)"
                       : x->misuse ? "the upstream saw a misuse (a bad free)"
                       : x->stats_disagree ? "the allocator's statistics no longer add up"
                                           : "";
    if (!what)
        return 1;
    if (!*what)
        return 0;
    snprintf(x->why, sizeof x->why, "cross-device free corrupts: %s", what);
    return 2;
}

static void step_xfree(rank *rk)
{
    xfree x = {0};
    if (rk->job.rank != 0 || rk->job.devices < 2 || other_stream(rk)) {
        answer("fail", "xfree", "needs rank 0 and a second device (%s)",
               rk->job.gpu ? cudaGetErrorString(cudaGetLastError()) : "sim");
        return;
    }
    if (xfree_setup(rk, &x))
        return;
    xfree_free(rk, &x);
    x.sticky = sync_both(rk);
    if (!x.sticky)
        xfree_check(rk, &x);
    int v = xfree_verdict(rk, &x);
    if (x.sticky)
        rk->broken = 1;
    if (!rk->broken) {
        if (x.q)
            rk->m->deallocate(rk->main.pol.state, x.q, rk->block, rk->own);
        rk->m->deallocate(rk->main.pol.state, x.x, rk->block, rk->own);
        sync_both(rk);
        set_device(rk, 0);
    }
    put(rk, "xfree_verdict=%d", v);
    put(rk, "xfree_refused=%d", x.refused);
    put(rk, "xfree_reused=%d", x.reused);
    put(rk, "xfree_misuse=%llu", (unsigned long long)x.misuse);
    if (real_memory(rk, &rk->main) && !x.sticky)
        put(rk, "xfree_changed_words=%lld", x.bad_x < 0 || x.bad_q < 0 ? -1 : x.bad_x + x.bad_q);
    if (!v)
        snprintf(x.why, sizeof x.why, "cross-device free works%s",
                 x.reused ? " (the block came back on device 0's stream)" : "");
    answer_ok(rk, "xfree", x.why);
}

/* --- peer: a pool's memory made readable by device 1 ---------------------------------------- */

static void step_peer(rank *rk)
{
    int can = 0;
    if (!rk->job.gpu) {
        answer("skip", "peer", "sim: peer mapping is driver work, not simulated");
        return;
    }
    if (rk->broken || !rk->pool) {
        answer("skip", "peer", "%s", rk->broken ? "the context was lost in the cross-device free"
                                                : "not a cudaMemPool allocator (peer access is cudaMemPoolSetAccess)");
        return;
    }
    if (cudaDeviceCanAccessPeer(&can, 1, 0) != cudaSuccess || !can) {
        cudaGetLastError();
        answer("skip", "peer", "device 1 cannot access device 0 (cudaDeviceCanAccessPeer)");
        return;
    }
    cmb_status st = rk->m->allocate(rk->main.pol.state, rk->job.size, rk->own, &rk->peer_block);
    if (st != CMB_OK || fill(rk->peer_block, rk->job.size, PATTERN_PEER, rk->own)) {
        if (st != CMB_OK)
            rk->peer_block = NULL;
        answer("fail", "peer", "a %llu-byte block: %s", (unsigned long long)rk->job.size,
               st != CMB_OK ? last_error(rk, &rk->main) : cudaGetErrorString(cudaGetLastError()));
        return;
    }
    put(rk, "peer_pool_reserved_bytes=%llu", pool_attr(rk->pool, cudaMemPoolAttrReservedMemCurrent));
    answer_ok(rk, "peer", NULL);
}

static void step_map(rank *rk)
{
    struct cudaMemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = cudaMemLocationTypeDevice;
    d.location.id = 1;
    d.flags = cudaMemAccessFlagsProtReadWrite;
    double t0 = cmb_now_s();
    cudaError_t e = cudaMemPoolSetAccess((cudaMemPool_t)rk->pool, &d, 1);
    double t1 = cmb_now_s();
    if (e != cudaSuccess) {
        cudaGetLastError();
        answer("skip", "map", "cudaMemPoolSetAccess: %s", cudaGetErrorString(e));
        return;
    }
    cudaMemPoolSetAccess((cudaMemPool_t)rk->pool, &d, 1);
    double t2 = cmb_now_s();
    set_device(rk, 1);
    long long bad = mismatches(rk->peer_block, rk->job.size, PATTERN_PEER, rk->peer_counter, rk->other);
    set_device(rk, 0);
    put(rk, "peer_map_first_us=%.1f", (t1 - t0) * 1e6);
    put(rk, "peer_map_again_us=%.1f", (t2 - t1) * 1e6);
    put(rk, "peer_read_ok=%d", bad == 0);
    answer_ok(rk, "map", NULL);
}

/* --- the end, and the loop ---------------------------------------------------------------- */

static void step_exit(rank *rk)
{
    int64_t leaked = 0;
    if (rk->main.pol.state && !rk->broken) {
        if (rk->peer_block)
            rk->m->deallocate(rk->main.pol.state, rk->peer_block, rk->job.size, rk->own);
        while (rk->n_blocks) {
            rk->n_blocks--;
            rk->m->deallocate(rk->main.pol.state, rk->blocks[rk->n_blocks], rk->block, rk->own);
        }
        if (rk->job.gpu)
            cudaDeviceSynchronize();
    }
    if (!rk->broken) {
        leaked += close_inst(rk, &rk->main);
        leaked += close_inst(rk, &rk->stray);
    }
    put(rk, "leaked_bytes=%lld", (long long)leaked);
    answer_ok(rk, "exit", NULL);
}

static int resolve(rank *rk, char *err, size_t errlen)
{
    if (cmb_alloc_spec_parse(rk->job.alloc, &rk->spec, err, errlen))
        return -1;
    if (rk->spec.unavailable[0]) {
        snprintf(err, errlen, "%s", rk->spec.unavailable);
        return -1;
    }
    rk->m = cmb_policy_methods(&rk->spec, err, errlen);
    return rk->m ? 0 : -1;
}

static const struct {
    const char *name;
    void (*fn)(rank *);
} steps[] = {
    {"init", step_init}, {"traffic", step_traffic}, {"free", step_free},
    {"xfree", step_xfree}, {"peer", step_peer},     {"map", step_map},
};

static void dispatch(rank *rk, const char *line)
{
    if (!strncmp(line, "go ", 3)) {
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
            if (!strcmp(line + 3, steps[i].name)) {
                steps[i].fn(rk);
                return;
            }
        }
    }
    answer("fail", "?", "unknown request '%s'", line);
}

int cmb_multi_gpu_rank_main(void)
{
    static rank rk;
    char line[1200], err[512];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1)
        return 1; /* the coordinator is already gone */
    for (int fd = ANSWER_FD + 1; fd < 1024; fd++)
        close(fd); /* the case's own result pipe must not be held open */
    if (!fgets(line, sizeof line, stdin) || cmb_mgpu_job_parse(line, &rk.job, err, sizeof err) ||
        resolve(&rk, err, sizeof err)) {
        answer("fail", "job", "%s", feof(stdin) ? "no job line" : err);
        return 2;
    }
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        dispatch(&rk, line);
    }
    step_exit(&rk);
    return 0;
}
