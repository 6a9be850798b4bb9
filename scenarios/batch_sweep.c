/* batch_sweep.c - an MLP training step swept over batch sizes until out of
 * memory.
 *
 * Question: what is the largest batch that fits on my GPU (or under a memory
 * cap) with each allocator, how fast is a training step, and how much memory
 * does the allocator lose to fragmentation on the way?
 *
 * The model is the classic example's multilayer perceptron: Linear layers of
 * `layers` widths (default 100x500x10: input 100, hidden 500, output 10),
 * ReLU between them, MSE loss, Adam (torch.optim.Adam defaults: lr 1e-3,
 * betas 0.9 / 0.999, eps 1e-8; torch/optim/adam.py). A training step makes
 * the allocations PyTorch makes, in its order, all through the allocator
 * under test (float32, column-major, features x batch):
 *   input X and target Y; per layer the Linear output Z (GEMM + bias), and
 *   for hidden layers the ReLU output H, after which Z is freed; the loss
 *   and its gradient dY; backward per layer from the last: weight and bias
 *   gradients, and for all but the first layer the input gradient dH and
 *   the pre-activation gradient dZ (dH freed after ReLU backward, the saved
 *   H after its last use); Adam's m and v at the first step (zeroed);
 *   gradients freed after the update (zero_grad(set_to_none=True)); Y-hat,
 *   loss, X, Y freed at the end. X and Y hold the same random data every
 *   step (the classic example's fixed batch), so the loss falls. The loss
 *   is read back every step (as loss.item() would), which synchronizes. GEMMs use cuBLAS with its
 *   workspace from the allocator; the rest are small kernels (kernels/mlp.cu).
 * 1. The sweep: each trial batch runs `steps` steps on a fresh allocator
 *    instance (cmb_case_with_fresh_allocator) of `cap` bytes (0: the whole
 *    device); a batch fits when every step completes without out of memory.
 *    Batches double from `start` until one fails, then bisection until the
 *    gap is at most resolution x the largest fitting batch. An allocator
 *    that cannot even be created in `cap` (a pool reserving more up front)
 *    fits no batch: max_batch = 0. On a GPU the cap
 *    is made real for every allocator, opaque ones included, by holding the
 *    rest of the free memory in one plain cudaMalloc block during the sweep
 *    (cap_bytes: the cap the trials got, less than `cap` when less was free).
 * 2. On the case's allocator, `steps` steps at batch `time_batch`: the case
 *    time is the median step (steps after the first when steps > 1), and the
 *    standard metrics describe these steps. It runs after the sweep, so an
 *    allocator that reserves the whole device at its first request does not
 *    take the trials' memory.
 * Counters: max_batch, fail_batch, trials; step_ms and us_per_sample at
 * time_batch; max_batch_step_ms, max_batch_peak_requested_bytes,
 * max_batch_peak_reserved_bytes and max_batch_frag_ratio (1 - requested /
 * reserved peaks) of the largest fitting trial; loss_first / loss_last of
 * the timed steps of part 2 (GPU), which show that the model trains. Sim
 * mode runs the same allocations and skips cuBLAS and the kernels.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublas_loader.h"
#include <cuda_runtime_api.h>

#include "../common/cmb_metrics.h"
#include "../kernels/cmb_mlp_kernels.h"
#include "scenario.h"
#include "scn_util.h"

#define MAX_LAYERS 16
#define MAX_WIDTH 1048576
/* torch.optim.Adam defaults (torch/optim/adam.py) */
#define ADAM_LR 1e-3f
#define ADAM_BETA1 0.9f
#define ADAM_BETA2 0.999f
#define ADAM_EPS 1e-8f

typedef struct mlp_shape {
    int layers;                   /* Linear layers                  */
    uint64_t d[MAX_LAYERS + 1];   /* d[0] input .. d[layers] output */
} mlp_shape;

typedef struct mlp {
    mlp_shape sh;
    float *w[MAX_LAYERS + 1], *b[MAX_LAYERS + 1];       /* parameters, index 1..layers */
    float *mw[MAX_LAYERS + 1], *vw[MAX_LAYERS + 1];     /* Adam state */
    float *mb[MAX_LAYERS + 1], *vb[MAX_LAYERS + 1];
    int adam_ready;
    _cmb_blas *blas;
} mlp;

/* Buffers of one step, freed on any exit. */
typedef struct step_buffers {
    float *x, *y, *loss, *dh;
    float *z[MAX_LAYERS + 1], *h[MAX_LAYERS + 1], *dz[MAX_LAYERS + 1];
    float *gw[MAX_LAYERS + 1], *gb[MAX_LAYERS + 1];
} step_buffers;

/* --- layers parameter --------------------------------------------------------------------- */

static int parse_layers(const char *text, mlp_shape *sh, char *err, size_t len)
{
    char buf[160];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    for (char *tok = strtok_r(buf, "x", &save); tok; tok = strtok_r(NULL, "x", &save)) {
        char *end;
        unsigned long long v = strtoull(tok, &end, 10);
        if (*end || !*tok || v < 1 || v > MAX_WIDTH || n > MAX_LAYERS) {
            snprintf(err, len, "batch-sweep: layers=%s: expected 2 to %d widths in [1, %d] joined by 'x', e.g. 100x500x10",
                     text, MAX_LAYERS + 1, MAX_WIDTH);
            return -1;
        }
        sh->d[n++] = v;
    }
    if (n < 2 || strstr(text, "xx") || text[0] == 'x' || text[strlen(text) - 1] == 'x') {
        snprintf(err, len, "batch-sweep: layers=%s: expected 2 to %d widths in [1, %d] joined by 'x', e.g. 100x500x10",
                 text, MAX_LAYERS + 1, MAX_WIDTH);
        return -1;
    }
    sh->layers = n - 1;
    return 0;
}

/* --- allocation helpers --------------------------------------------------------------------- */

/* Out of memory is an answer here, not a failure: it is returned as is. */
static cmb_status take(cmb_case *c, float **p, uint64_t floats)
{
    void *q = NULL;
    cmb_status st = cmb_alloc(c, floats * sizeof(float), cmb_case_stream(c, 0), &q);
    *p = st == CMB_OK ? q : NULL;
    if (st != CMB_OK && st != CMB_ERR_OOM)
        return cmb_case_fail(c, st, "allocation of %llu bytes failed", (unsigned long long)(floats * sizeof(float)));
    return st;
}

static cmb_status drop(cmb_case *c, float **p)
{
    if (!*p)
        return CMB_OK;
    cmb_status st = cmb_free(c, *p, cmb_case_stream(c, 0));
    *p = NULL;
    return st == CMB_OK ? CMB_OK : cmb_case_fail(c, st, "free failed");
}

static void drop_layers(cmb_case *c, float **p)
{
    for (int l = 0; l <= MAX_LAYERS; l++)
        drop(c, &p[l]);
}

/* Whatever a step still holds (it failed part way), in the order the
 * buffers are declared. */
static void drop_step(cmb_case *c, step_buffers *sb)
{
    drop(c, &sb->x);
    drop(c, &sb->y);
    drop(c, &sb->loss);
    drop(c, &sb->dh);
    drop_layers(c, sb->z);
    drop_layers(c, sb->h);
    drop_layers(c, sb->dz);
    drop_layers(c, sb->gw);
    drop_layers(c, sb->gb);
}

/* --- the model ---------------------------------------------------------------------------------- */

static void model_close(cmb_case *c, mlp *m)
{
    for (int l = 1; l <= m->sh.layers; l++) {
        drop(c, &m->w[l]);
        drop(c, &m->b[l]);
        drop(c, &m->mw[l]);
        drop(c, &m->vw[l]);
        drop(c, &m->mb[l]);
        drop(c, &m->vb[l]);
    }
    _cmb_blas_detach(c, m->blas);
}

/* Parameters (PyTorch's Linear init: uniform in +-1/sqrt(fan_in)) and the
 * cuBLAS workspace, from the allocator instance in use now. */
static cmb_status model_open(cmb_case *c, mlp *m, uint64_t seed)
{
    int gpu = _cmb_gpu(c); /* sim mode makes the same allocations, no CUDA calls */
    cudaStream_t s = (cudaStream_t)cmb_case_stream(c, 0);
    cmb_status st = _cmb_blas_attach(c, m->blas);
    if (st != CMB_OK)
        return st;
    for (int l = 1; l <= m->sh.layers; l++) {
        uint64_t in = m->sh.d[l - 1], out = m->sh.d[l];
        float bound = 1.0f / sqrtf((float)in);
        if ((st = take(c, &m->w[l], out * in)) != CMB_OK)
            goto out;
        if ((st = take(c, &m->b[l], out)) != CMB_OK)
            goto out;
        if (gpu &&
            (st = _cmb_cuda(c, cmb_mlp_uniform(m->w[l], out * in, bound, seed, 10 + l, s), "weight init")) != CMB_OK)
            goto out;
        if (gpu && (st = _cmb_cuda(c, cmb_mlp_uniform(m->b[l], out, bound, seed, 40 + l, s), "bias init")) != CMB_OK)
            goto out;
    }
out:
    return st;
}

static cmb_status adam_state(cmb_case *c, mlp *m)
{
    int gpu = _cmb_gpu(c); /* sim mode makes the same allocations, no CUDA calls */
    cudaStream_t s = (cudaStream_t)cmb_case_stream(c, 0);
    cmb_status st = CMB_OK;
    for (int l = 1; l <= m->sh.layers; l++) {
        uint64_t nw = m->sh.d[l] * m->sh.d[l - 1], nb = m->sh.d[l];
        if ((st = take(c, &m->mw[l], nw)) != CMB_OK)
            goto out;
        if ((st = take(c, &m->vw[l], nw)) != CMB_OK)
            goto out;
        if ((st = take(c, &m->mb[l], nb)) != CMB_OK)
            goto out;
        if ((st = take(c, &m->vb[l], nb)) != CMB_OK)
            goto out;
        if (gpu &&
            (st = _cmb_cuda(c, cudaMemsetAsync(m->mw[l], 0, nw * sizeof(float), s), "cudaMemsetAsync")) != CMB_OK)
            goto out;
        if (gpu &&
            (st = _cmb_cuda(c, cudaMemsetAsync(m->vw[l], 0, nw * sizeof(float), s), "cudaMemsetAsync")) != CMB_OK)
            goto out;
        if (gpu &&
            (st = _cmb_cuda(c, cudaMemsetAsync(m->mb[l], 0, nb * sizeof(float), s), "cudaMemsetAsync")) != CMB_OK)
            goto out;
        if (gpu &&
            (st = _cmb_cuda(c, cudaMemsetAsync(m->vb[l], 0, nb * sizeof(float), s), "cudaMemsetAsync")) != CMB_OK)
            goto out;
    }
    m->adam_ready = 1;
out:
    return st;
}

/* out = op(a) x op(b) on the model's cuBLAS handle: column-major, `rows`
 * x `cols`, summed over `inner`. */
static int gemm(const mlp *m, cublasOperation_t ta, cublasOperation_t tb, uint64_t rows, uint64_t cols, uint64_t inner,
                const float *a, uint64_t lda, const float *b, uint64_t ldb, float *out)
{
    const float one = 1, zero = 0;
    return m->blas->api->sgemm(m->blas->handle, ta, tb, (int)rows, (int)cols, (int)inner, &one, a, (int)lda, b,
                               (int)ldb, &zero, out, (int)rows);
}

/* --- one training step ----------------------------------------------------------------------------- */

static cmb_status forward(cmb_case *c, mlp *m, step_buffers *sb, uint64_t batch)
{
    int gpu = _cmb_gpu(c); /* sim mode makes the same allocations, no CUDA calls */
    cudaStream_t s = (cudaStream_t)cmb_case_stream(c, 0);
    cmb_status st = CMB_OK;
    sb->h[0] = sb->x;
    for (int l = 1; l <= m->sh.layers; l++) {
        uint64_t in = m->sh.d[l - 1], out = m->sh.d[l];
        if ((st = take(c, &sb->z[l], out * batch)) != CMB_OK)
            goto out;
        if (gpu && (st = _cmb_cublas(
                        c, gemm(m, CUBLAS_OP_N, CUBLAS_OP_N, out, batch, in, m->w[l], out, sb->h[l - 1], in, sb->z[l]),
                        "cublasSgemm (forward)")) != CMB_OK)
            goto out;
        if (gpu && (st = _cmb_cuda(c, cmb_mlp_add_bias(sb->z[l], m->b[l], out, batch, s), "bias kernel")) != CMB_OK)
            goto out;
        if (l < m->sh.layers) {
            if ((st = take(c, &sb->h[l], out * batch)) != CMB_OK)
                goto out;
            if (gpu && (st = _cmb_cuda(c, cmb_mlp_relu(sb->h[l], sb->z[l], out * batch, s), "relu kernel")) != CMB_OK)
                goto out;
            if ((st = drop(c, &sb->z[l])) != CMB_OK)
                goto out;
        }
    }
out:
    sb->h[0] = NULL; /* X is freed as sb->x */
    return st;
}

static cmb_status backward(cmb_case *c, mlp *m, step_buffers *sb, uint64_t batch)
{
    int gpu = _cmb_gpu(c); /* sim mode makes the same allocations, no CUDA calls */
    cudaStream_t s = (cudaStream_t)cmb_case_stream(c, 0);
    int L = m->sh.layers;
    cmb_status st = CMB_OK;
    sb->h[0] = sb->x;
    for (int l = L; l >= 1; l--) {
        uint64_t in = m->sh.d[l - 1], out = m->sh.d[l];
        if ((st = take(c, &sb->gw[l], out * in)) != CMB_OK)
            goto out;
        if ((st = take(c, &sb->gb[l], out)) != CMB_OK)
            goto out;
        if (gpu &&
            (st = _cmb_cublas(
                 c, gemm(m, CUBLAS_OP_N, CUBLAS_OP_T, out, in, batch, sb->dz[l], out, sb->h[l - 1], in, sb->gw[l]),
                 "cublasSgemm (weight gradient)")) != CMB_OK)
            goto out;
        if (gpu && (st = _cmb_cuda(c, cmb_mlp_bias_grad(sb->gb[l], sb->dz[l], out, batch, s),
                                   "bias gradient kernel")) != CMB_OK)
            goto out;
        if (l > 1) {
            if ((st = take(c, &sb->dh, in * batch)) != CMB_OK)
                goto out;
            if (gpu && (st = _cmb_cublas(
                            c, gemm(m, CUBLAS_OP_T, CUBLAS_OP_N, in, batch, out, m->w[l], out, sb->dz[l], out, sb->dh),
                            "cublasSgemm (input gradient)")) != CMB_OK)
                goto out;
            if ((st = take(c, &sb->dz[l - 1], in * batch)) != CMB_OK)
                goto out;
            if (gpu && (st = _cmb_cuda(c, cmb_mlp_relu_backward(sb->dz[l - 1], sb->dh, sb->h[l - 1], in * batch, s),
                                       "relu backward")) != CMB_OK)
                goto out;
            if ((st = drop(c, &sb->dh)) != CMB_OK)
                goto out;
            if ((st = drop(c, &sb->h[l - 1])) != CMB_OK)
                goto out;
        }
        if ((st = drop(c, &sb->dz[l])) != CMB_OK)
            goto out;
    }
out:
    sb->h[0] = NULL;
    return st;
}

static cmb_status optimizer(cmb_case *c, mlp *m, step_buffers *sb, int t)
{
    int gpu = _cmb_gpu(c); /* sim mode makes the same allocations, no CUDA calls */
    cudaStream_t s = (cudaStream_t)cmb_case_stream(c, 0);
    cmb_status st = CMB_OK;
    if (!m->adam_ready && (st = adam_state(c, m)) != CMB_OK)
        return st;
    for (int l = 1; l <= m->sh.layers; l++) {
        uint64_t nw = m->sh.d[l] * m->sh.d[l - 1], nb = m->sh.d[l];
        if (gpu && (st = _cmb_cuda(c,
                                   cmb_mlp_adam(m->w[l], sb->gw[l], m->mw[l], m->vw[l], nw, ADAM_LR, ADAM_BETA1,
                                                ADAM_BETA2, ADAM_EPS, t, s),
                                   "adam kernel")) != CMB_OK)
            goto out;
        if (gpu && (st = _cmb_cuda(c,
                                   cmb_mlp_adam(m->b[l], sb->gb[l], m->mb[l], m->vb[l], nb, ADAM_LR, ADAM_BETA1,
                                                ADAM_BETA2, ADAM_EPS, t, s),
                                   "adam kernel")) != CMB_OK)
            goto out;
    }
    for (int l = 1; l <= m->sh.layers; l++) { /* zero_grad(set_to_none=True) */
        if ((st = drop(c, &sb->gw[l])) != CMB_OK)
            goto out;
        if ((st = drop(c, &sb->gb[l])) != CMB_OK)
            goto out;
    }
out:
    return st;
}

/* One step at `batch`; t counts from 1. *loss gets the loss (GPU). */
static cmb_status train_step(cmb_case *c, mlp *m, uint64_t batch, int t, uint64_t seed, float *loss)
{
    int gpu = _cmb_gpu(c); /* sim mode makes the same allocations, no CUDA calls */
    cudaStream_t s = (cudaStream_t)cmb_case_stream(c, 0);
    uint64_t in = m->sh.d[0], out = m->sh.d[m->sh.layers];
    step_buffers sb;
    cmb_status st = CMB_OK;
    memset(&sb, 0, sizeof sb);
    if ((st = take(c, &sb.x, in * batch)) != CMB_OK)
        goto out;
    if ((st = take(c, &sb.y, out * batch)) != CMB_OK)
        goto out;
    /* the same data every step, as in the classic example: the loss falls */
    if (gpu && (st = _cmb_cuda(c, cmb_mlp_uniform(sb.x, in * batch, 1.0f, seed, 1000, s), "input kernel")) != CMB_OK)
        goto out;
    if (gpu && (st = _cmb_cuda(c, cmb_mlp_uniform(sb.y, out * batch, 1.0f, seed, 2000, s), "target kernel")) != CMB_OK)
        goto out;
    if ((st = forward(c, m, &sb, batch)) != CMB_OK)
        goto out;
    if ((st = take(c, &sb.loss, 1)) != CMB_OK)
        goto out;
    if ((st = take(c, &sb.dz[m->sh.layers], out * batch)) != CMB_OK)
        goto out;
    if (gpu && (st = _cmb_cuda(c, cmb_mlp_mse(sb.dz[m->sh.layers], sb.loss, sb.z[m->sh.layers], sb.y, out * batch, s),
                               "mse kernel")) != CMB_OK)
        goto out;
    if ((st = backward(c, m, &sb, batch)) != CMB_OK || (st = optimizer(c, m, &sb, t)) != CMB_OK)
        goto out;
    if (gpu && (st = _cmb_cuda(c, cudaMemcpyAsync(loss, sb.loss, sizeof *loss, cudaMemcpyDeviceToHost, s),
                               "loss read-back")) != CMB_OK)
        goto out;
    if (gpu && (st = _cmb_cuda(c, cudaStreamSynchronize(s), "training step")) != CMB_OK)
        goto out;
    if ((st = drop(c, &sb.z[m->sh.layers])) != CMB_OK)
        goto out;
    if ((st = drop(c, &sb.loss)) != CMB_OK)
        goto out;
    if ((st = drop(c, &sb.x)) != CMB_OK)
        goto out;
    if ((st = drop(c, &sb.y)) != CMB_OK)
        goto out;
out:
    drop_step(c, &sb);
    return st;
}

/* --- runs of steps ---------------------------------------------------------------------------------- */

typedef struct steps_result {
    int fits;             /* every step completed */
    double step_s;        /* median step, after the first when steps > 1 */
    float loss_first, loss_last;
} steps_result;

static cmb_status run_steps(cmb_case *c, _cmb_blas *blas, const mlp_shape *sh, uint64_t batch, steps_result *r)
{
    int steps = (int)cmb_param_u64(c, "steps");
    double t[1024];
    mlp m;
    memset(&m, 0, sizeof m);
    m.sh = *sh;
    m.blas = blas;
    r->fits = 0;
    cmb_status st = model_open(c, &m, cmb_case_seed(c));
    for (int i = 1; i <= steps && st == CMB_OK; i++) {
        float loss = NAN;
        double t0 = cmb_case_clock(c);
        st = train_step(c, &m, batch, i, cmb_case_seed(c), &loss);
        t[i - 1] = cmb_case_clock(c) - t0;
        if (i == 1)
            r->loss_first = loss;
        r->loss_last = loss;
    }
    model_close(c, &m);
    if (st == CMB_ERR_OOM)
        return CMB_OK;
    if (st == CMB_OK) {
        r->fits = 1;
        r->step_s = steps > 1 ? _cmb_median(t + 1, (size_t)steps - 1) : t[0];
    }
    return st;
}

typedef struct trial_arg {
    _cmb_blas *blas;
    const mlp_shape *sh;
    uint64_t batch;
    steps_result r;
} trial_arg;

static cmb_status trial_fn(cmb_case *c, void *arg)
{
    trial_arg *a = arg;
    return run_steps(c, a->blas, a->sh, a->batch, &a->r);
}

/* --- the sweep ---------------------------------------------------------------------------------------- */

typedef struct sweep {
    uint64_t lo, hi, trials; /* largest fit, smallest failure (0: none) */
    steps_result best;
    cmb_alloc_stats best_stats;
} sweep;

static cmb_status try_batch(cmb_case *c, _cmb_blas *blas, const mlp_shape *sh, uint64_t cap, uint64_t batch,
                            sweep *sw)
{
    trial_arg a = {blas, sh, batch, {0}};
    cmb_alloc_stats stats;
    memset(&stats, 0, sizeof stats);
    cmb_status st = cmb_case_try_fresh_allocator(c, cap, trial_fn, &a, &stats);
    sw->trials++;
    if (st == CMB_ERR_OOM) /* the instance itself did not fit: nor does the batch */
        st = CMB_OK, a.r.fits = 0;
    if (st != CMB_OK)
        return st;
    if (a.r.fits) {
        sw->lo = batch;
        sw->best = a.r;
        sw->best_stats = stats;
    } else {
        sw->hi = batch;
    }
    return CMB_OK;
}

static cmb_status sweep_batches(cmb_case *c, _cmb_blas *blas, const mlp_shape *sh, uint64_t cap, sweep *sw)
{
    uint64_t batch = cmb_param_u64(c, "start"), limit = cmb_param_u64(c, "max_batch");
    double res = cmb_param_real(c, "resolution");
    cmb_status st = CMB_OK;
    while (st == CMB_OK && batch <= limit && !sw->hi) {
        st = try_batch(c, blas, sh, cap, batch, sw);
        batch *= 2;
    }
    while (st == CMB_OK && sw->hi && sw->hi - sw->lo > 1 && (double)(sw->hi - sw->lo) > res * (double)sw->lo)
        st = try_batch(c, blas, sh, cap, sw->lo + (sw->hi - sw->lo) / 2, sw);
    return st;
}

/* GPU: hold all free memory beyond `cap` so opaque allocators see it too.
 * *effective is the cap the trials really get: less than `cap` when less
 * than that is free (a note says so, and cap_bytes reports it). */
static cmb_status ballast_open(cmb_case *c, uint64_t cap, void **ballast, uint64_t *effective)
{
    *ballast = NULL;
    *effective = cap;
    if (!_cmb_gpu(c) || !cap)
        return CMB_OK;
    uint64_t free_now = cmb_case_device_free(c);
    if (free_now == cap)
        return CMB_OK;
    if (free_now < cap) {
        *effective = free_now;
        cmb_case_note(c, "only %llu MiB of the device is free, under the cap of %llu MiB: the trials get that",
                      (unsigned long long)(free_now >> 20), (unsigned long long)(cap >> 20));
        return CMB_OK;
    }
    return _cmb_cuda(c, cudaMalloc(ballast, free_now - cap), "cudaMalloc of the memory-cap ballast");
}

static void report_sweep(cmb_case *c, const sweep *sw, uint64_t cap)
{
    cmb_case_counter(c, "max_batch", (double)sw->lo);
    if (sw->hi)
        cmb_case_counter(c, "fail_batch", (double)sw->hi);
    cmb_case_counter(c, "trials", (double)sw->trials);
    cmb_case_counter(c, "cap_bytes", (double)cap);
    if (!sw->lo)
        return;
    const cmb_alloc_stats *s = &sw->best_stats;
    cmb_case_counter(c, "max_batch_peak_requested_bytes", (double)s->requested.peak);
    if (s->valid & CMB_STAT_RESERVED) {
        cmb_case_counter(c, "max_batch_peak_reserved_bytes", (double)s->reserved.peak);
        cmb_case_counter(c, "max_batch_frag_ratio",
                         cmb_frag_ratio((uint64_t)s->requested.peak, (uint64_t)s->reserved.peak));
    }
    if (_cmb_gpu(c)) {
        cmb_case_counter(c, "max_batch_step_ms", sw->best.step_s * 1e3);
        cmb_case_counter(c, "max_batch_us_per_sample", sw->best.step_s * 1e6 / (double)sw->lo);
    }
}

static cmb_status batch_run(cmb_case *c)
{
    mlp_shape sh;
    char err[256];
    _cmb_blas blas = {0};
    steps_result timed = {0};
    sweep sw;
    void *ballast = NULL;
    uint64_t cap = cmb_param_u64(c, "cap"), batch = cmb_param_u64(c, "time_batch");
    memset(&sw, 0, sizeof sw);
    if (parse_layers(cmb_param_str(c, "layers"), &sh, err, sizeof err))
        return cmb_case_fail(c, CMB_ERR_INVALID, "%s", err);
    if (!_cmb_gpu(c))
        cmb_case_note(c, "cuBLAS and kernels skipped in sim mode");

    /* The sweep first: the case's allocator has taken nothing yet, so an
     * allocator that reserves the device at its first request (bfc-prealloc)
     * does not shrink the trials' cap. */
    uint64_t effective = cap;
    cmb_status st = _cmb_blas_create(c, &blas); /* each model brings its own workspace */
    if (st == CMB_OK)
        st = ballast_open(c, cap, &ballast, &effective);
    if (st == CMB_OK)
        st = sweep_batches(c, &blas, &sh, cap, &sw);
    if (ballast)
        cudaFree(ballast);
    if (st == CMB_OK)
        report_sweep(c, &sw, effective ? effective : cmb_case_capacity(c));
    if (st == CMB_OK)
        st = run_steps(c, &blas, &sh, batch, &timed);
    if (st == CMB_OK && timed.fits) {
        cmb_case_set_time(c, timed.step_s);
        cmb_case_counter(c, "step_ms", timed.step_s * 1e3);
        cmb_case_counter(c, "us_per_sample", timed.step_s * 1e6 / (double)batch);
        if (_cmb_gpu(c)) {
            cmb_case_counter(c, "loss_first", timed.loss_first);
            cmb_case_counter(c, "loss_last", timed.loss_last);
        }
    } else if (st == CMB_OK) {
        cmb_case_note(c, "time_batch=%llu does not fit", (unsigned long long)batch);
    }
    _cmb_blas_close(c, &blas);
    return st;
}

static int batch_check(const cmb_case *c, char *reason, size_t len)
{
    mlp_shape sh;
    uint64_t cap = cmb_param_u64(c, "cap");
    if (parse_layers(cmb_param_str(c, "layers"), &sh, reason, len))
        return -1;
    if (cap && cap < (64u << 20)) {
        snprintf(reason, len, "batch-sweep: cap must be 0 (none) or at least 64MiB");
        return -1;
    }
    if (cmb_param_u64(c, "start") > cmb_param_u64(c, "max_batch")) {
        snprintf(reason, len, "batch-sweep: start must not exceed max_batch");
        return -1;
    }
    if (cap > cmb_case_capacity(c)) {
        snprintf(reason, len, "batch-sweep: cap exceeds the device");
        return 1;
    }
    return 0;
}

static const cmb_param_spec batch_params[] = {
    {"layers", CMB_P_TEXT, "100x500x10", "100x500x10", 0, 0, NULL,
     "layer widths joined by 'x': input, hidden..., output"},
    {"steps", CMB_P_INT, "2", "3", 1, 1000, NULL, "training steps per trial"},
    {"start", CMB_P_INT, "64", "64", 1, 1099511627776.0, NULL, "first batch size of the sweep"},
    {"max_batch", CMB_P_INT, "1073741824", "1073741824", 1, 1099511627776.0, NULL, "the sweep stops here"},
    {"resolution", CMB_P_REAL, "0.05", "0.01", 0, 1, NULL,
     "bisection stops when the gap is at most this share of the largest fitting batch"},
    {"cap", CMB_P_SIZE, "1GiB", "8GiB", 0, 1099511627776.0, NULL, "memory cap of each trial (0: the whole device)"},
    {"time_batch", CMB_P_INT, "1024", "4096", 1, 1099511627776.0, NULL, "batch of the timed steps"},
};

/* The trials that did not fit are the search itself: the answer is the
 * largest batch that did. */
static const cmb_headline batch_headline = {
    "searched", "+max_batch", "-", "max_batch_frag_ratio",
    {"largest batch {max_batch}", "fails at {fail_batch}", "reserved at max {max_batch_peak_reserved_bytes}",
     "frag at max {max_batch_frag_ratio}", "step {step_ms}", NULL},
};

const cmb_scenario cmb_scenario_batch_sweep = {
    .name = "batch-sweep",
    .question = "What is the largest batch that fits with each allocator, how fast is a training step, and how much "
                "memory is lost to fragmentation?",
    .params = batch_params,
    .n_params = sizeof batch_params / sizeof batch_params[0],
    .flags = CMB_SCN_NO_PROBE,
    .check = batch_check,
    .run = batch_run,
    .headline = &batch_headline,
};
