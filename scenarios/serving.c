/* serving.c - the memory life of an LLM serving engine.
 *
 * Question: how much of the GPU can I give the KV cache (vLLM's
 * gpu_memory_utilization) under each allocator before the request stream
 * runs out of memory, and what does the allocator cost per step?
 *
 * One run at utilization u, in the order vLLM's engine does it
 * (vllm/worker/worker.py, determine_num_available_blocks, v0.6):
 *  1. load weights: the model's tensors are allocated, then each is filled
 *     through a short-lived float32 staging buffer (the checkpoint's dtype,
 *     converted on the GPU; none when dtype is f32);
 *  2. one profiling forward pass at max_batched_tokens tokens over
 *     min(max_seqs, max_batched_tokens) sequences, with the sampler;
 *     profile_peak_bytes is the rise of live bytes over the weights;
 *  3. the KV slab: total x u - weights - profile peak - non_torch - the
 *     graph estimate, in blocks of block_size tokens, one tensor per layer
 *     (vllm/worker/cache_engine.py, _allocate_kv_cache);
 *  4. CUDA-graph capture of the decode step for every batch size of vLLM's
 *     list [1, 2, 4] + [8 i for i = 1..32] (vllm/worker/model_runner.py,
 *     _BATCH_SIZES_TO_CAPTURE, v0.4-0.6) up to graph_max, largest first,
 *     into one private pool: the pool keeps the largest capture's
 *     activations (smaller captures reuse them inside the pool) and each
 *     graph's output; the static inputs are allocated once at the largest
 *     size. The graph estimate is exactly these bytes;
 *  5. continuous batching (vLLM V1's scheduler, vllm/v1/core/scheduler.py):
 *     each step serves the running requests first (a decode token, or the
 *     next prefill chunk), preempting the newest running request when the
 *     KV blocks run out (recompute: it returns to the front of the queue),
 *     then admits waiting requests while the token budget
 *     (max_batched_tokens), max_seqs and free blocks allow (chunked
 *     prefill). A step of decodes only, at most graph_max of them, replays
 *     a graph and allocates only the sampler's buffers; any other step runs
 *     the model eagerly: per layer norm, qkv, attention, output projection,
 *     norm, gate/up, activation and down, freed as PyTorch frees them.
 *     Only activations churn; the slab and the pool stay.
 * Requests arrive open loop on a virtual clock (step_ms per step; an idle
 * engine jumps to the next arrival), so sim and GPU make the same
 * allocations in the same order. Inter-arrival times are exponential
 * (burstiness 1: Poisson) or gamma with shape burstiness and mean 1/rate
 * (vLLM's benchmarks/benchmark_serving.py, --burstiness).
 * Lengths (lengths=):
 *   sharegpt - log-normal prompt and output lengths with ShareGPT's means,
 *              161.31 and 337.99 tokens (vLLM, SOSP'23, Fig. 11);
 *   alpaca   - log-normal with Alpaca's means, 19.31 and 58.45 (same
 *              figure);
 *   fixed    - prompt_len and output_len for every request.
 *   The log-normal spreads (sigma 1.0 for prompts, 0.8 for outputs) are
 *   this suite's assumption of a long tail, not fitted to the traces. A
 *   prompt is clipped to max_model_len - 1 tokens and prompt + output to
 *   max_model_len. scripts/serving_server.py draws the same stream.
 * kv=vattention keeps each request's KV as vAttention does (ASPLOS'25):
 *   virtually contiguous per layer for K and V, physical pages of
 *   page_size mapped as the sequence grows. The scenario cannot reserve
 *   address space itself: each page is one allocation from the allocator
 *   under test when a sequence crosses a page boundary (2 x layers pages:
 *   K and V of every layer), freed when the request ends or is preempted.
 *   Run it over the vmm upstream (ALLOCATOR@vmm) for pages the driver maps.
 *   The same budget, in pages, bounds the scheduler.
 * find_max_utilization searches, on fresh instances, the highest u (0.001
 * steps) at which the whole stream completes: from `utilization`, down in
 * steps of 0.1 until it completes, then bisection against the lowest u
 * that failed (or 1.0). Serving is deterministic, so the search runs in a
 * case's first repetition and the others report it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_rng.h"
#include "scenario.h"
#include "scn_util.h"

#define N_CAPTURE 35
#define UTIL_STEPS 1000 /* the utilization grid: 0.001 */
#define SRV_PI 3.14159265358979323846

/* vllm/worker/model_runner.py (v0.4-0.6): [1, 2, 4] + [8 i for i in 1..32] */
static uint64_t capture_size(int i)
{
    return i < 3 ? (uint64_t)1 << i : 8 * (uint64_t)(i - 2);
}

/* --- the model ------------------------------------------------------------------------------ */

typedef struct srv_model {
    uint64_t layers, hidden, inter, vocab, kvd, dt; /* kvd: kv_heads x head_dim */
    uint64_t kv_token_bytes;                         /* K and V, all layers      */
    double weight_scale;                             /* weights= / the shape's   */
    uint64_t block_size, max_batched, max_seqs, graph_max, max_len;
    int vattention;
    uint64_t page_size, unit_tokens, unit_bytes;     /* scheduler's KV unit      */
} srv_model;

static uint64_t dtype_bytes(const char *d)
{
    return !strcmp(d, "f32") ? 4 : !strcmp(d, "fp8") ? 1 : 2;
}

static uint64_t shape_weight_bytes(const srv_model *m)
{
    uint64_t h = m->hidden;
    uint64_t layer = 2 * h + (h + 2 * m->kvd) * h + h * h + 3 * m->inter * h;
    return (2 * m->vocab * h + h + m->layers * layer) * m->dt;
}

static void model_from_params(const cmb_case *c, srv_model *m)
{
    memset(m, 0, sizeof *m);
    m->layers = cmb_param_u64(c, "layers");
    m->hidden = cmb_param_u64(c, "hidden");
    m->inter = cmb_param_u64(c, "intermediate");
    m->vocab = cmb_param_u64(c, "vocab");
    m->kvd = cmb_param_u64(c, "kv_heads") * cmb_param_u64(c, "head_dim");
    m->dt = dtype_bytes(cmb_param_str(c, "dtype"));
    m->kv_token_bytes = 2 * m->layers * m->kvd * m->dt;
    uint64_t w = cmb_param_u64(c, "weights");
    m->weight_scale = w ? (double)w / (double)shape_weight_bytes(m) : 1.0;
    m->block_size = cmb_param_u64(c, "block_size");
    m->max_batched = cmb_param_u64(c, "max_batched_tokens");
    m->max_seqs = cmb_param_u64(c, "max_seqs");
    m->graph_max = cmb_param_u64(c, "graph_max");
    m->max_len = cmb_param_u64(c, "max_model_len");
    m->vattention = !strcmp(cmb_param_str(c, "kv"), "vattention");
    m->page_size = cmb_param_u64(c, "page_size");
    if (m->vattention) {
        m->unit_tokens = m->page_size / (m->kvd * m->dt); /* one layer's K in one page */
        m->unit_bytes = 2 * m->layers * m->page_size;
    } else {
        m->unit_tokens = m->block_size;
        m->unit_bytes = m->block_size * m->kv_token_bytes;
    }
}

/* --- the request stream ------------------------------------------------------------------- */

typedef struct srv_req {
    double arrival;
    uint64_t prompt, out, gen, computed, units;
    _cmb_blocks pages; /* kv=vattention: the pages mapped for it */
} srv_req;

/* Box-Muller, one normal per two uniforms (scripts/serving_server.py
 * draws the same numbers). */
static double draw_normal(cmb_rng *r)
{
    double u1 = 1.0 - cmb_rng_uniform(r), u2 = cmb_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * SRV_PI * u2);
}

/* Marsaglia and Tsang's method; shape < 1 boosted by U^(1/shape). */
static double draw_gamma(cmb_rng *r, double shape)
{
    if (shape < 1.0) {
        double g = draw_gamma(r, shape + 1.0);
        return g * pow(1.0 - cmb_rng_uniform(r), 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, k = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = draw_normal(r), v = 1.0 + k * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = 1.0 - cmb_rng_uniform(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
            return d * v;
    }
}

static uint64_t draw_lognormal(cmb_rng *r, double mean, double sigma)
{
    double v = exp(log(mean) - 0.5 * sigma * sigma + sigma * draw_normal(r));
    return v < 1.0 ? 1 : (uint64_t)llround(v);
}

static void draw_lengths(const cmb_case *c, cmb_rng *r, const srv_model *m, srv_req *q)
{
    const char *dist = cmb_param_str(c, "lengths");
    if (dist[0] == 's') {
        q->prompt = draw_lognormal(r, 161.31, 1.0);
        q->out = draw_lognormal(r, 337.99, 0.8);
    } else if (dist[0] == 'a') {
        q->prompt = draw_lognormal(r, 19.31, 1.0);
        q->out = draw_lognormal(r, 58.45, 0.8);
    } else {
        q->prompt = cmb_param_u64(c, "prompt_len");
        q->out = cmb_param_u64(c, "output_len");
    }
    if (q->prompt > m->max_len - 1)
        q->prompt = m->max_len - 1;
    if (q->prompt + q->out > m->max_len)
        q->out = m->max_len - q->prompt;
}

static srv_req *make_requests(const cmb_case *c, const srv_model *m, uint64_t n)
{
    srv_req *q = calloc(n, sizeof *q);
    cmb_rng r;
    double rate = cmb_param_real(c, "rate"), burst = cmb_param_real(c, "burstiness"), t = 0;
    if (!q)
        return NULL;
    cmb_rng_seed(&r, cmb_case_seed(c));
    for (uint64_t i = 0; i < n; i++) {
        if (rate > 0)
            t += burst == 1.0 ? -log(1.0 - cmb_rng_uniform(&r)) / rate : draw_gamma(&r, burst) / (rate * burst);
        q[i].arrival = t;
        draw_lengths(c, &r, m, &q[i]);
    }
    return q;
}

/* --- one run: state and allocation ------------------------------------------------------------ */

typedef struct srv_run {
    const srv_model *m;
    uint64_t total;         /* device bytes u is a share of */
    double util;
    uint64_t n_req;
    srv_req *req;
    _cmb_blocks weights, slab, pool, step;
    uint64_t live, peak;    /* the scenario's own count of live bytes */
    double alloc_s;         /* time inside cmb_alloc / cmb_free       */
    int oom;                /* an allocation failed                   */
    int kv_short;           /* the KV budget cannot hold max_model_len */
    /* results */
    uint64_t weight_bytes, profile_peak, graph_bytes, slab_bytes, units, units_free, unit_peak;
    uint64_t preemptions, completed, steps, graph_steps, eager_steps, slack_peak;
    double held_tokens, stored_tokens; /* for kv_waste_ratio */
    uint64_t stream_tokens;            /* prompts + outputs of the stream */
    double stream_span;                /* the last arrival, virtual seconds */
} srv_run;

/* Out of memory is the answer here: the run stops (r->oom) and says so
 * with CMB_ERR_OOM, without failing the case. */
static cmb_status srv_alloc(cmb_case *c, srv_run *r, _cmb_blocks *into, uint64_t size)
{
    void *p = NULL;
    double t0 = cmb_case_clock(c);
    cmb_status st = cmb_alloc(c, size, cmb_case_stream(c, 0), &p);
    r->alloc_s += cmb_case_clock(c) - t0;
    if (st == CMB_ERR_OOM) {
        r->oom = 1;
        return st;
    }
    if (st != CMB_OK)
        return cmb_case_fail(c, st, "allocation of %llu bytes failed", (unsigned long long)size);
    if (_cmb_blocks_push(into, p, size)) {
        cmb_free(c, p, cmb_case_stream(c, 0));
        return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
    }
    r->live += size;
    if (r->live > r->peak)
        r->peak = r->live;
    return CMB_OK;
}

/* Frees the newest `n` blocks of a list. */
static cmb_status srv_pop(cmb_case *c, srv_run *r, _cmb_blocks *from, size_t n)
{
    double t0 = cmb_case_clock(c);
    cmb_status st = CMB_OK;
    while (n-- && from->n && st == CMB_OK) {
        from->n--;
        r->live -= from->size[from->n];
        st = cmb_free(c, from->p[from->n], cmb_case_stream(c, 0));
    }
    r->alloc_s += cmb_case_clock(c) - t0;
    return st == CMB_OK ? CMB_OK : cmb_case_fail(c, st, "free failed");
}

/* Frees the block at index i of the step's list (activations die out of
 * order), swapping the newest into its place. */
static cmb_status srv_drop(cmb_case *c, srv_run *r, size_t i)
{
    _cmb_blocks *b = &r->step;
    void *p = b->p[i];
    r->live -= b->size[i];
    b->p[i] = b->p[b->n - 1];
    b->size[i] = b->size[b->n - 1];
    b->n--;
    double t0 = cmb_case_clock(c);
    cmb_status st = cmb_free(c, p, cmb_case_stream(c, 0));
    r->alloc_s += cmb_case_clock(c) - t0;
    return st == CMB_OK ? CMB_OK : cmb_case_fail(c, st, "free failed");
}

/* --- phases 1 and 2: weights, profile ------------------------------------------------------------ */

static cmb_status load_weights(cmb_case *c, srv_run *r)
{
    const srv_model *m = r->m;
    uint64_t h = m->hidden;
    uint64_t layer[6] = {h, (h + 2 * m->kvd) * h, h * h, h, 2 * m->inter * h, m->inter * h};
    cmb_status st = srv_alloc(c, r, &r->weights, (uint64_t)((double)(m->vocab * h * m->dt) * m->weight_scale) + 1);
    for (uint64_t l = 0; l < m->layers && st == CMB_OK; l++)
        for (int k = 0; k < 6 && st == CMB_OK; k++)
            st = srv_alloc(c, r, &r->weights, (uint64_t)((double)(layer[k] * m->dt) * m->weight_scale) + 1);
    if (st == CMB_OK)
        st = srv_alloc(c, r, &r->weights, h * m->dt);
    if (st == CMB_OK)
        st = srv_alloc(c, r, &r->weights, (uint64_t)((double)(m->vocab * h * m->dt) * m->weight_scale) + 1);
    /* each tensor filled through a float32 staging copy, freed at once */
    for (size_t i = 0; i < r->weights.n && st == CMB_OK && m->dt < 4; i++) {
        st = srv_alloc(c, r, &r->step, r->weights.size[i] / m->dt * 4);
        if (st == CMB_OK)
            st = srv_pop(c, r, &r->step, 1);
    }
    r->weight_bytes = r->live;
    return st;
}

/* A chain of ops: each output is allocated, then its input freed; the
 * last output is added into the residual and freed. */
static cmb_status chain(cmb_case *c, srv_run *r, const uint64_t *sizes, int n)
{
    cmb_status st = CMB_OK;
    for (int k = 0; k < n && st == CMB_OK; k++) {
        st = srv_alloc(c, r, &r->step, sizes[k]);
        if (st == CMB_OK && k > 0)
            st = srv_drop(c, r, r->step.n - 2);
    }
    return st == CMB_OK ? srv_drop(c, r, r->step.n - 1) : st;
}

/* One layer's activations at t tokens, freed as PyTorch frees them:
 * norm -> qkv -> attention -> o-proj, then norm -> gate/up -> act -> down. */
static cmb_status forward_layer(cmb_case *c, srv_run *r, uint64_t t)
{
    const srv_model *m = r->m;
    uint64_t h = t * m->hidden * m->dt;
    uint64_t attn[4] = {h, t * (m->hidden + 2 * m->kvd) * m->dt, h, h};
    uint64_t mlp[4] = {h, 2 * t * m->inter * m->dt, t * m->inter * m->dt, h};
    cmb_status st = chain(c, r, attn, 4);
    return st == CMB_OK ? chain(c, r, mlp, 4) : st;
}

/* The sampler: logits and probabilities in float32 for `s` sequences. */
static cmb_status sampler(cmb_case *c, srv_run *r, uint64_t s)
{
    uint64_t lg = s * r->m->vocab * 4;
    cmb_status st = srv_alloc(c, r, &r->step, lg);
    if (st == CMB_OK)
        st = srv_alloc(c, r, &r->step, lg);
    if (st == CMB_OK)
        st = srv_drop(c, r, r->step.n - 1);
    if (st == CMB_OK)
        st = srv_alloc(c, r, &r->step, s * 8); /* sampled ids */
    return st;
}

/* An eager forward pass of t tokens over n sequences, s of which sample. */
static cmb_status forward_eager(cmb_case *c, srv_run *r, uint64_t t, uint64_t n, uint64_t s)
{
    const srv_model *m = r->m;
    uint64_t max_blocks = (m->max_len + m->block_size - 1) / m->block_size;
    uint64_t meta[4] = {t * 8, t * 8, n * max_blocks * 4, n * 4}; /* positions, slots, block table, lens */
    cmb_status st = CMB_OK;
    for (int k = 0; k < 4 && st == CMB_OK; k++)
        st = srv_alloc(c, r, &r->step, meta[k]);
    if (st == CMB_OK)
        st = srv_alloc(c, r, &r->step, t * m->hidden * m->dt); /* residual */
    for (uint64_t l = 0; l < m->layers && st == CMB_OK; l++)
        st = forward_layer(c, r, t);
    if (st == CMB_OK && s)
        st = srv_alloc(c, r, &r->step, s * m->hidden * m->dt); /* the sampled rows */
    if (st == CMB_OK && s)
        st = sampler(c, r, s);
    return st;
}

static cmb_status end_step(cmb_case *c, srv_run *r)
{
    return srv_pop(c, r, &r->step, r->step.n);
}

static cmb_status profile(cmb_case *c, srv_run *r)
{
    const srv_model *m = r->m;
    uint64_t n = m->max_seqs < m->max_batched ? m->max_seqs : m->max_batched;
    uint64_t before = r->live;
    r->peak = r->live;
    cmb_status st = forward_eager(c, r, m->max_batched, n, n);
    if (st == CMB_OK)
        st = end_step(c, r);
    r->profile_peak = r->peak - before;
    return st;
}

/* --- phases 3 and 4: the KV slab, graph capture ------------------------------------------------- */

/* The capture's allocations, largest size first: the static inputs at the
 * largest size, the pool's activations (one layer's at that size) and each
 * graph's output. sizes may be NULL (count only); returns the count. */
static size_t capture_plan(const srv_model *m, uint64_t *sizes)
{
    size_t n = 0;
    int top = -1;
    for (int i = 0; i < N_CAPTURE; i++)
        if (capture_size(i) <= m->graph_max && capture_size(i) <= m->max_seqs)
            top = i;
    if (top < 0)
        return 0;
    uint64_t b = capture_size(top), h = b * m->hidden * m->dt;
    uint64_t max_blocks = (m->max_len + m->block_size - 1) / m->block_size;
    uint64_t fixed[13] = {b * 8, b * 8, b * 8, b * max_blocks * 4, b * 4,
                          h, h, b * (m->hidden + 2 * m->kvd) * m->dt, h, h, 2 * b * m->inter * m->dt,
                          b * m->inter * m->dt, h};
    for (int k = 0; k < 13; k++, n++)
        if (sizes)
            sizes[n] = fixed[k];
    for (int i = top; i >= 0; i--, n++)
        if (sizes)
            sizes[n] = capture_size(i) * m->hidden * m->dt;
    return n;
}

static uint64_t graph_estimate(const srv_model *m)
{
    uint64_t sizes[13 + N_CAPTURE], sum = 0;
    size_t n = capture_plan(m, sizes);
    for (size_t i = 0; i < n; i++)
        sum += sizes[i];
    return sum;
}

static cmb_status capture(cmb_case *c, srv_run *r)
{
    uint64_t sizes[13 + N_CAPTURE];
    size_t n = capture_plan(r->m, sizes);
    cmb_status st = CMB_OK;
    for (size_t i = 0; i < n && st == CMB_OK; i++)
        st = srv_alloc(c, r, &r->pool, sizes[i]);
    r->graph_bytes = 0;
    for (size_t i = 0; i < r->pool.n; i++)
        r->graph_bytes += r->pool.size[i];
    return st;
}

/* The KV budget at utilization u; the paged slab is allocated now (one
 * tensor per layer), vAttention's pages as sequences grow. */
static cmb_status kv_slab(cmb_case *c, srv_run *r)
{
    const srv_model *m = r->m;
    double budget = (double)r->total * r->util - (double)r->weight_bytes - (double)r->profile_peak -
                    (double)cmb_param_u64(c, "non_torch") - (double)graph_estimate(m);
    r->units = budget > 0 ? (uint64_t)(budget / (double)m->unit_bytes) : 0;
    r->units_free = r->units;
    if (r->units * m->unit_tokens < m->max_len) {
        r->kv_short = 1;
        return CMB_ERR_OOM;
    }
    cmb_status st = CMB_OK;
    for (uint64_t l = 0; l < m->layers && !m->vattention && st == CMB_OK; l++)
        st = srv_alloc(c, r, &r->slab, r->units * m->unit_bytes / m->layers);
    r->slab_bytes = r->units * m->unit_bytes;
    return st;
}

/* --- phase 5: continuous batching ------------------------------------------------------------ */

typedef struct srv_sched {
    uint64_t *running, n_running; /* admission order          */
    uint64_t *waiting, n_waiting; /* arrived, not running     */
    uint64_t next_arrival;        /* requests not yet arrived */
    uint64_t *tokens;             /* this step's per request  */
    double now;
} srv_sched;

static uint64_t units_for(const srv_model *m, uint64_t tokens)
{
    return (tokens + m->unit_tokens - 1) / m->unit_tokens;
}

static cmb_status acquire(cmb_case *c, srv_run *r, srv_req *q, uint64_t n)
{
    r->units_free -= n;
    q->units += n;
    if (r->units - r->units_free > r->unit_peak)
        r->unit_peak = r->units - r->units_free;
    cmb_status st = CMB_OK;
    for (uint64_t i = 0; r->m->vattention && i < n * 2 * r->m->layers && st == CMB_OK; i++)
        st = srv_alloc(c, r, &q->pages, r->m->page_size);
    return st;
}

static cmb_status release(cmb_case *c, srv_run *r, srv_req *q)
{
    r->units_free += q->units;
    q->units = 0;
    q->computed = 0;
    return srv_pop(c, r, &q->pages, q->pages.n);
}

/* vLLM V1: the newest running request goes back to the front of the
 * queue and will recompute its prompt and what it generated. */
static cmb_status preempt(cmb_case *c, srv_run *r, srv_sched *s)
{
    uint64_t v = s->running[--s->n_running];
    memmove(s->waiting + 1, s->waiting, s->n_waiting * sizeof *s->waiting);
    s->waiting[0] = v;
    s->n_waiting++;
    s->tokens[v] = 0;
    r->preemptions++;
    return release(c, r, &r->req[v]);
}

/* Running requests first; 1 when one was preempted (no admissions then). */
static cmb_status schedule_running(cmb_case *c, srv_run *r, srv_sched *s, uint64_t *budget, int *preempted)
{
    cmb_status st = CMB_OK;
    for (uint64_t i = 0; i < s->n_running && *budget && st == CMB_OK; i++) {
        uint64_t id = s->running[i];
        srv_req *q = &r->req[id];
        uint64_t k = q->prompt + q->gen - q->computed;
        k = k < *budget ? k : *budget;
        uint64_t need = units_for(r->m, q->computed + k) - q->units;
        while (need > r->units_free && st == CMB_OK && s->n_running > i) {
            st = preempt(c, r, s);
            *preempted = 1;
        }
        if (st != CMB_OK || s->n_running <= i)
            break; /* it preempted itself */
        st = acquire(c, r, q, need);
        s->tokens[id] = k;
        *budget -= k;
    }
    return st;
}

static cmb_status schedule_waiting(cmb_case *c, srv_run *r, srv_sched *s, uint64_t *budget)
{
    cmb_status st = CMB_OK;
    while (s->n_waiting && *budget && s->n_running < r->m->max_seqs && st == CMB_OK) {
        uint64_t id = s->waiting[0];
        srv_req *q = &r->req[id];
        uint64_t k = q->prompt + q->gen;
        k = k < *budget ? k : *budget;
        uint64_t need = units_for(r->m, k);
        if (need > r->units_free)
            break;
        memmove(s->waiting, s->waiting + 1, --s->n_waiting * sizeof *s->waiting);
        s->running[s->n_running++] = id;
        st = acquire(c, r, q, need);
        s->tokens[id] = k;
        *budget -= k;
    }
    return st;
}

/* The step's forward pass: a graph replay for decodes only, else eager. */
static cmb_status run_model(cmb_case *c, srv_run *r, srv_sched *s)
{
    uint64_t t = 0, n = 0, samples = 0;
    int decode = 1;
    for (uint64_t i = 0; i < s->n_running; i++) {
        srv_req *q = &r->req[s->running[i]];
        uint64_t k = s->tokens[s->running[i]];
        if (!k)
            continue;
        t += k;
        n++;
        decode &= k == 1 && q->computed + 1 == q->prompt + q->gen;
        samples += q->computed + k == q->prompt + q->gen;
    }
    if (decode && n <= r->m->graph_max && r->pool.n) {
        r->graph_steps++;
        return sampler(c, r, n);
    }
    r->eager_steps++;
    return forward_eager(c, r, t, n, samples);
}

/* After the step: KV written, a token sampled where a prompt is done,
 * finished requests leave. */
static cmb_status advance(cmb_case *c, srv_run *r, srv_sched *s)
{
    uint64_t kept = 0;
    cmb_status st = CMB_OK;
    for (uint64_t i = 0; i < s->n_running && st == CMB_OK; i++) {
        uint64_t id = s->running[i];
        srv_req *q = &r->req[id];
        q->computed += s->tokens[id];
        s->tokens[id] = 0;
        if (q->computed == q->prompt + q->gen)
            q->gen++;
        if (q->gen >= q->out) {
            r->completed++;
            st = release(c, r, q);
            continue;
        }
        r->held_tokens += (double)(q->units * r->m->unit_tokens);
        r->stored_tokens += (double)q->computed;
        s->running[kept++] = id;
    }
    s->n_running = kept;
    return st;
}

static void note_slack(cmb_case *c, srv_run *r)
{
    cmb_alloc_stats a;
    uint64_t live = cmb_case_live_bytes(c);
    if (cmb_case_alloc_stats(c, &a) == CMB_OK && (a.valid & CMB_STAT_RESERVED) && a.reserved.current > (int64_t)live &&
        (uint64_t)a.reserved.current - live > r->slack_peak)
        r->slack_peak = (uint64_t)a.reserved.current - live;
}

static cmb_status serve_step(cmb_case *c, srv_run *r, srv_sched *s, double step_s)
{
    while (s->next_arrival < r->n_req && r->req[s->next_arrival].arrival <= s->now)
        s->waiting[s->n_waiting++] = s->next_arrival++;
    if (!s->n_running && !s->n_waiting) {
        s->now = r->req[s->next_arrival].arrival; /* idle until the next arrival */
        return CMB_OK;
    }
    uint64_t budget = r->m->max_batched;
    int preempted = 0;
    cmb_status st = schedule_running(c, r, s, &budget, &preempted);
    if (st == CMB_OK && !preempted)
        st = schedule_waiting(c, r, s, &budget);
    if (st == CMB_OK)
        st = run_model(c, r, s);
    if (st == CMB_OK)
        note_slack(c, r);
    if (st == CMB_OK)
        st = end_step(c, r);
    if (st == CMB_OK)
        st = advance(c, r, s);
    r->steps++;
    s->now += step_s;
    return st;
}

static cmb_status serve(cmb_case *c, srv_run *r)
{
    srv_sched s = {0};
    double step_s = cmb_param_real(c, "step_ms") / 1e3;
    uint64_t work = 0;
    s.running = calloc(r->n_req, sizeof *s.running);
    s.waiting = calloc(r->n_req, sizeof *s.waiting);
    s.tokens = calloc(r->n_req, sizeof *s.tokens);
    cmb_status st = s.running && s.waiting && s.tokens ? CMB_OK : cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
    for (uint64_t i = 0; i < r->n_req; i++)
        work += r->req[i].prompt + r->req[i].out;
    r->stream_tokens = work;
    r->stream_span = r->n_req ? r->req[r->n_req - 1].arrival : 0;
    /* every step does at least one token of work unless it preempts; a
     * stream that needs far more steps than tokens is stuck */
    while (st == CMB_OK && r->completed < r->n_req) {
        cmb_case_progress(c, r->completed, r->n_req, "requests");
        if (r->steps > 4 * work + 1000) {
            st = cmb_case_fail(c, CMB_ERR_STATE, "serving: no progress after %llu steps", (unsigned long long)r->steps);
            break;
        }
        st = serve_step(c, r, &s, step_s);
    }
    for (uint64_t i = 0; i < r->n_req; i++)
        if (r->req[i].units && release(c, r, &r->req[i]) != CMB_OK && st == CMB_OK)
            st = CMB_ERR_STATE;
    free(s.running);
    free(s.waiting);
    free(s.tokens);
    return st;
}

/* --- a whole run ---------------------------------------------------------------------------------- */

static void run_release(cmb_case *c, srv_run *r)
{
    end_step(c, r);
    for (uint64_t i = 0; i < r->n_req; i++) {
        srv_pop(c, r, &r->req[i].pages, r->req[i].pages.n);
        _cmb_blocks_release(&r->req[i].pages);
    }
    srv_pop(c, r, &r->pool, r->pool.n);
    srv_pop(c, r, &r->slab, r->slab.n);
    srv_pop(c, r, &r->weights, r->weights.n);
    _cmb_blocks_release(&r->step);
    _cmb_blocks_release(&r->pool);
    _cmb_blocks_release(&r->slab);
    _cmb_blocks_release(&r->weights);
    free(r->req);
    r->req = NULL;
}

/* The engine's life at r->util; CMB_OK also when it ran out of memory
 * (r->oom, r->kv_short): only a real failure is returned. */
static cmb_status run_life(cmb_case *c, void *arg)
{
    srv_run *r = arg;
    const srv_model *m = r->m;
    srv_run keep = {.m = m, .total = r->total, .util = r->util, .n_req = r->n_req};
    *r = keep;
    r->req = make_requests(c, m, r->n_req);
    cmb_status st = r->req ? load_weights(c, r) : cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
    if (st == CMB_OK)
        st = profile(c, r);
    if (st == CMB_OK)
        st = kv_slab(c, r);
    if (st == CMB_OK)
        st = capture(c, r);
    if (st == CMB_OK)
        st = serve(c, r);
    run_release(c, r);
    return st == CMB_ERR_OOM ? CMB_OK : st;
}

static int run_fits(const srv_run *r)
{
    return !r->oom && !r->kv_short && r->completed == r->n_req;
}

/* --- the ceiling --------------------------------------------------------------------------------- */

/* 1 when the stream completes at m/1000 on a fresh instance, 0 when not,
 * -1 on a failure. */
static int trial(cmb_case *c, srv_run *r, int m, int *trials)
{
    r->util = (double)m / UTIL_STEPS;
    (*trials)++;
    cmb_status st = cmb_case_try_fresh_allocator(c, 0, run_life, r, NULL);
    if (st == CMB_ERR_OOM)
        return 0; /* the instance itself does not fit */
    return st != CMB_OK ? -1 : run_fits(r);
}

/* Highest milli-utilization that completes (0: none), bisected on the grid. */
static int search_ceiling(cmb_case *c, srv_run *r, int start, int *trials)
{
    int lo = start, hi = UTIL_STEPS + 1, f;
    if ((f = trial(c, r, UTIL_STEPS, trials)) != 0)
        return f < 0 ? -1 : UTIL_STEPS;
    hi = UTIL_STEPS;
    while ((f = trial(c, r, lo, trials)) == 0) {
        hi = lo;
        if (lo <= 1)
            return 0;
        lo = lo > 100 ? lo - 100 : 1;
    }
    if (f < 0)
        return -1;
    while (hi - lo > 1) { /* lo completes, hi does not */
        int mid = lo + (hi - lo) / 2;
        if ((f = trial(c, r, mid, trials)) < 0)
            return -1;
        *(f ? &lo : &hi) = mid;
    }
    return lo;
}

static cmb_status max_utilization(cmb_case *c, const srv_model *m, uint64_t total)
{
    static int searched, found, trials;
    if (!searched) {
        srv_run r = {.m = m, .total = total, .n_req = cmb_param_u64(c, "requests")};
        int start = (int)lround(cmb_param_real(c, "utilization") * UTIL_STEPS);
        found = search_ceiling(c, &r, start < 1 ? 1 : start, &trials);
        if (found < 0)
            return CMB_ERR_STATE;
        searched = 1;
    }
    cmb_case_counter(c, "max_utilization", (double)found / UTIL_STEPS);
    cmb_case_counter(c, "search_trials", (double)trials);
    if (!found)
        cmb_case_note(c, "the stream completes at no utilization: max_model_len does not fit the KV budget");
    return CMB_OK;
}

/* --- the scenario ---------------------------------------------------------------------------------- */

static void run_counters(cmb_case *c, const srv_run *r)
{
    const srv_model *m = r->m;
    cmb_case_counter(c, "weights_bytes", (double)r->weight_bytes);
    cmb_case_counter(c, "profile_peak_bytes", (double)r->profile_peak);
    cmb_case_counter(c, "graph_pool_bytes", (double)r->graph_bytes);
    cmb_case_counter(c, "kv_slab_bytes", (double)r->slab_bytes);
    cmb_case_counter(c, "kv_blocks", (double)r->units);
    cmb_case_counter(c, "kv_tokens", (double)(r->units * m->unit_tokens));
    cmb_case_counter(c, "kv_peak_blocks", (double)r->unit_peak);
    cmb_case_counter(c, "kv_waste_ratio", r->held_tokens > 0 ? 1.0 - r->stored_tokens / r->held_tokens : NAN);
    cmb_case_counter(c, "requests_completed", (double)r->completed);
    cmb_case_counter(c, "preemptions", (double)r->preemptions);
    cmb_case_counter(c, "steps", (double)r->steps);
    cmb_case_counter(c, "graph_steps", (double)r->graph_steps);
    cmb_case_counter(c, "eager_steps", (double)r->eager_steps);
    cmb_case_counter(c, "non_kv_slack_bytes", (double)r->slack_peak);
    cmb_case_counter(c, "stream_tokens", (double)r->stream_tokens);
    cmb_case_counter(c, "stream_span_s", r->stream_span);
    if (cmb_case_mode(c) == CMB_MODE_GPU && r->steps) /* sim has no cost model for the policies' time */
        cmb_case_counter(c, "alloc_us_per_step", r->alloc_s / (double)r->steps * 1e6);
}

static cmb_status serving_run(cmb_case *c)
{
    srv_model m;
    model_from_params(c, &m);
    srv_run r = {.m = &m, .total = cmb_case_capacity(c), .util = cmb_param_real(c, "utilization"),
                 .n_req = cmb_param_u64(c, "requests")};
    double t0 = cmb_case_clock(c);
    cmb_status st = run_life(c, &r);
    if (st == CMB_OK)
        st = cmb_case_sync(c);
    cmb_case_set_time(c, cmb_case_clock(c) - t0);
    if (st != CMB_OK)
        return st;
    run_counters(c, &r);
    if (r.kv_short)
        cmb_case_note(c, "the KV budget at utilization %.3f holds %llu tokens, fewer than max_model_len", r.util,
                      (unsigned long long)(r.units * m.unit_tokens));
    if (!run_fits(&r))
        cmb_case_set_oom(c, 1); /* did not serve the stream: an answer, not a failure */
    if (cmb_param_bool(c, "find_max_utilization")) {
        cmb_case_trim(c);
        st = max_utilization(c, &m, r.total);
    }
    return st;
}

static int serving_check(const cmb_case *c, char *err, size_t len)
{
    srv_model m;
    model_from_params(c, &m);
    const char *bad = NULL;
    if (m.vattention && m.unit_tokens == 0)
        bad = "page_size is smaller than one token's K of one layer (kv_heads x head_dim x dtype)";
    else if (m.max_len > m.max_batched * 1024)
        bad = "max_model_len is more than 1024 x max_batched_tokens";
    else if (!strcmp(cmb_param_str(c, "lengths"), "fixed") &&
             cmb_param_u64(c, "prompt_len") + cmb_param_u64(c, "output_len") > m.max_len)
        bad = "prompt_len + output_len exceeds max_model_len";
    else if (cmb_param_real(c, "burstiness") <= 0)
        bad = "burstiness must be above 0 (1: Poisson)";
    if (bad) {
        snprintf(err, len, "serving: %s", bad);
        return -1;
    }
    return 0;
}

static const cmb_param_spec serving_params[] = {
    {"layers", CMB_P_INT, "8", "32", 1, 1024, NULL, "transformer layers"},
    {"hidden", CMB_P_INT, "1024", "4096", 64, 65536, NULL, "hidden size (query heads x head_dim)"},
    {"intermediate", CMB_P_INT, "2816", "14336", 64, 262144, NULL, "MLP intermediate size"},
    {"vocab", CMB_P_INT, "32000", "128256", 256, 1048576, NULL, "vocabulary (logits are float32)"},
    {"kv_heads", CMB_P_INT, "8", "8", 1, 1024, NULL, "KV heads (grouped-query attention)"},
    {"head_dim", CMB_P_INT, "128", "128", 16, 1024, NULL, "head dimension"},
    {"dtype", CMB_P_CHOICE, "bf16", "bf16", 0, 0, "f16|bf16|f32|fp8", "weights, activations and KV"},
    {"weights", CMB_P_SIZE, "0", "0", 0, 1099511627776.0, NULL,
     "total weight bytes, the shape's tensors scaled to it (0: the shape's own)"},
    {"max_batched_tokens", CMB_P_INT, "2048", "2048", 1, 1048576, NULL,
     "token budget of a step: chunked prefill and the profile run (vLLM: max_num_batched_tokens)"},
    {"max_seqs", CMB_P_INT, "64", "256", 1, 65536, NULL, "running requests at most (vLLM: max_num_seqs)"},
    {"graph_max", CMB_P_INT, "64", "256", 0, 256, NULL,
     "largest decode batch captured as a CUDA graph (sizes 1, 2, 4, 8, 16, ... 256; 0: none)"},
    {"block_size", CMB_P_INT, "16", "16", 1, 4096, NULL, "tokens per KV block (vLLM's default 16)"},
    {"kv", CMB_P_CHOICE, "paged", "paged,vattention", 0, 0, "paged|vattention",
     "KV as one paged slab, or per-request pages mapped as sequences grow"},
    {"page_size", CMB_P_SIZE, "2MiB", "2MiB", 4096, 1073741824.0, NULL, "kv=vattention: physical page size"},
    {"max_model_len", CMB_P_INT, "4096", "8192", 2, 1048576, NULL, "longest prompt + output"},
    {"requests", CMB_P_INT, "64", "1000", 1, 1e6, NULL, "requests in the stream"},
    {"rate", CMB_P_REAL, "20", "10", 0, 1e6, NULL, "arrivals per second of virtual time (0: all at once)"},
    {"burstiness", CMB_P_REAL, "1", "1,0.25", 0, 1000, NULL,
     "gamma shape of inter-arrival times: 1 Poisson, below 1 bursty (vLLM benchmark_serving)"},
    {"step_ms", CMB_P_REAL, "25", "25", 0.001, 1e6, NULL, "virtual time one engine step takes"},
    {"lengths", CMB_P_CHOICE, "sharegpt", "sharegpt,alpaca", 0, 0, "sharegpt|alpaca|fixed",
     "prompt and output length distribution (built in; see docs)"},
    {"prompt_len", CMB_P_INT, "512", "512", 1, 1048576, NULL, "lengths=fixed: prompt tokens"},
    {"output_len", CMB_P_INT, "128", "128", 1, 1048576, NULL, "lengths=fixed: output tokens"},
    {"non_torch", CMB_P_SIZE, "0", "0", 0, 1099511627776.0, NULL,
     "memory outside the allocator subtracted from the budget (CUDA context, NCCL)"},
    {"utilization", CMB_P_REAL, "0.9", "0.9", 0.001, 1, NULL,
     "share of the device the engine may use (vLLM: gpu_memory_utilization)"},
    {"capacity", CMB_P_SIZE, "1GiB", "0", 0, 1099511627776.0, NULL,
     "device size (sim) or cap (GPU, policies); 0 = the run's --capacity / the GPU"},
    {"find_max_utilization", CMB_P_BOOL, "true", "true", 0, 0, NULL,
     "also search the highest utilization that serves the stream (0.001 steps, fresh instances)"},
};

static const cmb_headline serving_headline = {
    "served", "+max_utilization", "-", NULL,
    {"max utilization {max_utilization}", "KV {kv_tokens} tokens", "preemptions {preemptions}",
     "slack {non_kv_slack_bytes}", "time {time}", NULL},
};

const cmb_scenario cmb_scenario_serving = {
    .name = "serving",
    .question = "How much of the GPU can an LLM serving engine give its KV cache (gpu_memory_utilization) under "
                "each allocator before the request stream runs out of memory, and what does allocation cost per step?",
    .params = serving_params,
    .n_params = sizeof serving_params / sizeof serving_params[0],
    .flags = CMB_SCN_NO_PROBE,
    .check = serving_check,
    .run = serving_run,
    .headline = &serving_headline,
};
