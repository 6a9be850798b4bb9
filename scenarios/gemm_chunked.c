/* gemm_chunked.c - a large matrix product, whole and in chunks under a
 * memory budget, with cuBLAS and buffers from the allocator under test.
 *
 * Question: my matrix product does not fit (or runs out of memory); how
 * much slower is it in chunks that fit a memory budget, how much memory does
 * each allocator hold for the chunk buffers, and is the result still right?
 *
 * C = A x B, all n x n, float32 or float64. The entries of A and B are
 * counter-based random numbers in [-1, 1) (kernels/cmb_hash.h), generated on
 * the device where they are needed, so the host can recompute any entry.
 *   mode=whole   - allocate A, B and C, generate A and B, one GEMM.
 *   mode=chunked - tiles of b x b with b the largest multiple of 64 for
 *                  which a row panel of A (b x n), a column panel of B
 *                  (n x b), a tile of C (b x b), the cuBLAS workspace and
 *                  the sample buffer fit in `budget`. For each row panel i:
 *                  allocate and generate A_i; for each column panel j:
 *                  allocate and generate B_j, allocate C_ij, GEMM, gather
 *                  the tile's samples, free C_ij and B_j; then free A_i.
 *                  B panels are regenerated for every row panel, as they
 *                  would be streamed in again. chunks = tiles (ceil(n/b)^2).
 * Timed region: allocation, generation, GEMMs and sample gathers, to the
 * final synchronization. tflops = 2 n^3 / time; gemm_tflops = 2 n^3 / the
 * GEMMs' own time (CUDA events around each GEMM).
 * Check: `samples` entries per tile (positions from the counter hash) are
 * compared with a float64 reference computed on the host with compensated
 * (Neumaier) summation of the exact products. With u the unit roundoff of
 * the type (2^-24 or 2^-53) the bound is
 *     |C_ij - ref_ij| <= (gamma_n + 2^-50) * sum_k |a_ik b_kj|,
 *     gamma_n = n u / (1 - n u)         (Higham, Accuracy and Stability, 3.5),
 * which holds for any summation order cuBLAS chooses; 2^-50 covers the
 * reference's own rounding. max_rel_err is the largest observed
 * |C_ij - ref_ij| / sum_k |a_ik b_kj| and err_bound the bound; a case whose
 * error exceeds the bound fails. Sim mode runs the same allocations and
 * skips cuBLAS, the kernels and the check.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cublas_loader.h"
#include <cuda_runtime_api.h>

#include "../kernels/cmb_gemm_kernels.h"
#include "../kernels/cmb_hash.h"
#include "scenario.h"
#include "scn_util.h"

#define TILE_ALIGN 64        /* tile edge granularity (GEMM-friendly)  */
#define MAX_TILES_PER_DIM 256
enum { MATRIX_A = 1, MATRIX_B = 2 };

typedef struct gemm_plan {
    uint64_t n, b, tiles; /* tile edge, tiles per dimension */
    cmb_dtype t;
    size_t e;             /* element bytes */
    uint32_t samples;     /* per tile */
    uint64_t seed;
} gemm_plan;

/* --- the plan ---------------------------------------------------------------------------- */

static uint64_t sample_bytes(uint64_t tiles, uint64_t samples)
{
    return tiles * tiles * samples * sizeof(double);
}

static uint64_t working_set(uint64_t n, size_t e, uint64_t b, uint64_t samples)
{
    uint64_t tiles = (n + b - 1) / b;
    return (2 * n * b + b * b) * e + CMB_CUBLAS_WORKSPACE + sample_bytes(tiles, samples);
}

/* Largest tile edge (n, or a multiple of TILE_ALIGN) whose working set fits
 * `budget`; 0 when none does. */
static uint64_t tile_for_budget(uint64_t n, size_t e, uint64_t budget, uint64_t samples)
{
    if (budget <= CMB_CUBLAS_WORKSPACE)
        return 0;
    double words = (double)(budget - CMB_CUBLAS_WORKSPACE) / (double)e, nd = (double)n;
    /* (2 n b + b^2) e <= budget - workspace, then make room for the samples */
    uint64_t b = (uint64_t)floor(-nd + sqrt(nd * nd + words));
    b = b >= n ? n : b / TILE_ALIGN * TILE_ALIGN;
    while (b && working_set(n, e, b, samples) > budget)
        b = b == n ? (n - 1) / TILE_ALIGN * TILE_ALIGN : b - TILE_ALIGN;
    return b;
}

static int make_plan(const cmb_case *c, gemm_plan *p, char *err, size_t len)
{
    p->n = cmb_param_u64(c, "n");
    p->t = cmb_param_str(c, "dtype")[1] == '6' ? CMB_F64 : CMB_F32;
    p->e = p->t == CMB_F64 ? 8 : 4;
    p->samples = (uint32_t)cmb_param_u64(c, "samples");
    p->seed = cmb_case_seed(c);
    p->b = p->n;
    if (cmb_param_str(c, "mode")[0] == 'c') {
        uint64_t budget = cmb_param_u64(c, "budget");
        p->b = tile_for_budget(p->n, p->e, budget, p->samples);
        if (p->b < TILE_ALIGN || (p->n + p->b - 1) / p->b > MAX_TILES_PER_DIM) {
            snprintf(err, len, "gemm-chunked: budget %llu MiB is too small for n=%llu %s",
                     (unsigned long long)(budget >> 20), (unsigned long long)p->n, cmb_param_str(c, "dtype"));
            return -1;
        }
    }
    p->tiles = (p->n + p->b - 1) / p->b;
    return 0;
}

/* --- the product ---------------------------------------------------------------------------- */

typedef struct gemm_run {
    gemm_plan p;
    _cmb_blas blas;
    double *samples_dev;
    cudaEvent_t ev[2];
    double gemm_s;
} gemm_run;

static cmb_status gemm_tile(cmb_case *c, gemm_run *g, const void *a, const void *b, void *cm, uint64_t rows,
                            uint64_t cols)
{
    const double one = 1, zero = 0;
    const float onef = 1, zerof = 0;
    cublasHandle_t h = g->blas.handle;
    cudaStream_t s = (cudaStream_t)cmb_case_stream(c, 0);
    int m = (int)rows, nn = (int)cols, k = (int)g->p.n;
    float ms = 0;
    cmb_status st = _cmb_cuda(c, cudaEventRecord(g->ev[0], s), "cudaEventRecord");
    if (st != CMB_OK)
        return st;
    if (g->p.t == CMB_F64)
        st = _cmb_cublas(c, g->blas.api->dgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, nn, k, &one, a, m, b, k, &zero, cm, m),
                         "cublasDgemm");
    else
        st = _cmb_cublas(c, g->blas.api->sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, nn, k, &onef, a, m, b, k, &zerof, cm, m),
                         "cublasSgemm");
    if (st == CMB_OK)
        st = _cmb_cuda(c, cudaEventRecord(g->ev[1], s), "cudaEventRecord");
    if (st == CMB_OK)
        st = _cmb_cuda(c, cudaEventSynchronize(g->ev[1]), "GEMM");
    if (st == CMB_OK)
        st = _cmb_cuda(c, cudaEventElapsedTime(&ms, g->ev[0], g->ev[1]), "cudaEventElapsedTime");
    g->gemm_s += ms * 1e-3;
    return st;
}

/* One tile of C: B panel j, C tile, GEMM, samples; frees C and B. */
static cmb_status column_panel(cmb_case *c, gemm_run *g, const void *a, uint64_t i, uint64_t j)
{
    const gemm_plan *p = &g->p;
    uint64_t rows = p->n - i * p->b < p->b ? p->n - i * p->b : p->b;
    uint64_t cols = p->n - j * p->b < p->b ? p->n - j * p->b : p->b;
    cmb_stream s = cmb_case_stream(c, 0);
    void *b = NULL, *cm = NULL;
    cmb_status st = cmb_alloc(c, p->n * cols * p->e, s, &b);
    if (st != CMB_OK)
        return cmb_case_fail(c, st, "B panel of %llu bytes", (unsigned long long)(p->n * cols * p->e));
    st = cmb_alloc(c, rows * cols * p->e, s, &cm);
    if (st != CMB_OK) {
        cm = NULL;
        st = cmb_case_fail(c, st, "C tile of %llu bytes", (unsigned long long)(rows * cols * p->e));
    }
    if (st == CMB_OK && _cmb_gpu(c)) {
        st = _cmb_cuda(c, cmb_kernel_fill_panel(b, p->t, p->n, cols, 0, j * p->b, p->n, p->seed, MATRIX_B, s),
                       "B panel generation");
        if (st == CMB_OK)
            st = gemm_tile(c, g, a, b, cm, rows, cols);
        if (st == CMB_OK)
            st = _cmb_cuda(c,
                           cmb_kernel_gather_samples(cm, p->t, rows, cols, p->seed, (uint32_t)(i * p->tiles + j),
                                                     p->samples, g->samples_dev + (i * p->tiles + j) * p->samples,
                                                     s),
                           "sample gather");
    }
    cmb_status f1 = cm ? cmb_free(c, cm, s) : CMB_OK, f2 = cmb_free(c, b, s);
    if (st == CMB_OK && (f1 != CMB_OK || f2 != CMB_OK))
        st = cmb_case_fail(c, f1 != CMB_OK ? f1 : f2, "panel free failed");
    return st;
}

static cmb_status product(cmb_case *c, gemm_run *g)
{
    const gemm_plan *p = &g->p;
    cmb_stream s = cmb_case_stream(c, 0);
    cmb_status st = CMB_OK;
    for (uint64_t i = 0; i < p->tiles && st == CMB_OK; i++) {
        uint64_t rows = p->n - i * p->b < p->b ? p->n - i * p->b : p->b;
        void *a;
        st = cmb_alloc(c, rows * p->n * p->e, s, &a);
        if (st != CMB_OK)
            return cmb_case_fail(c, st, "A panel of %llu bytes", (unsigned long long)(rows * p->n * p->e));
        if (_cmb_gpu(c))
            st = _cmb_cuda(c, cmb_kernel_fill_panel(a, p->t, rows, p->n, i * p->b, 0, p->n, p->seed, MATRIX_A, s),
                           "A panel generation");
        for (uint64_t j = 0; j < p->tiles && st == CMB_OK; j++)
            st = column_panel(c, g, a, i, j);
        cmb_status fst = cmb_free(c, a, s);
        if (st == CMB_OK && fst != CMB_OK)
            st = cmb_case_fail(c, fst, "A panel free failed");
    }
    return st == CMB_OK ? cmb_case_sync(c) : st;
}

/* --- the check -------------------------------------------------------------------------------- */

static double entry(const gemm_plan *p, uint32_t matrix, uint64_t i, uint64_t j)
{
    uint64_t h = cmb_hash3(p->seed, matrix, i * p->n + j);
    return p->t == CMB_F64 ? cmb_unit_f64(h) : (double)cmb_unit_f32(h);
}

/* Reference C(i, j) by Neumaier summation; *abs_sum = sum |a b|. */
static double reference(const gemm_plan *p, uint64_t i, uint64_t j, double *abs_sum)
{
    double sum = 0, comp = 0, mag = 0;
    for (uint64_t k = 0; k < p->n; k++) {
        double x = entry(p, MATRIX_A, i, k) * entry(p, MATRIX_B, k, j); /* exact for f32 inputs */
        double t = sum + x;
        comp += fabs(sum) >= fabs(x) ? (sum - t) + x : (x - t) + sum;
        sum = t;
        mag += fabs(x);
    }
    *abs_sum = mag;
    return sum + comp;
}

static cmb_status check_result(cmb_case *c, gemm_run *g)
{
    const gemm_plan *p = &g->p;
    size_t count = (size_t)(p->tiles * p->tiles * p->samples);
    double *got = malloc(count * sizeof *got), worst = 0;
    double u = p->t == CMB_F64 ? 0x1p-53 : 0x1p-24, nu = (double)p->n * u;
    double bound = nu / (1 - nu) + 0x1p-50;
    if (!got)
        return cmb_case_fail(c, CMB_ERR_HOST_NOMEM, "host out of memory");
    cmb_status st = _cmb_cuda(c, cudaMemcpy(got, g->samples_dev, count * sizeof *got, cudaMemcpyDeviceToHost),
                              "copying the samples");
    for (uint64_t ti = 0; ti < p->tiles && st == CMB_OK; ti++) {
        for (uint64_t tj = 0; tj < p->tiles && st == CMB_OK; tj++) {
            uint64_t rows = p->n - ti * p->b < p->b ? p->n - ti * p->b : p->b;
            uint64_t cols = p->n - tj * p->b < p->b ? p->n - tj * p->b : p->b;
            uint32_t tile = (uint32_t)(ti * p->tiles + tj);
            for (uint32_t k = 0; k < p->samples; k++) {
                uint64_t r, q;
                double mag;
                cmb_sample_pos(p->seed, tile, k, rows, cols, &r, &q);
                double ref = reference(p, ti * p->b + r, tj * p->b + q, &mag);
                double err = fabs(got[(size_t)tile * p->samples + k] - ref) / (mag > 0 ? mag : 1);
                worst = err > worst ? err : worst;
                if (err > bound || isnan(err)) {
                    st = cmb_case_fail(c, CMB_ERR_STATE,
                                       "result check failed: C(%llu,%llu) relative error %.3g exceeds the bound %.3g",
                                       (unsigned long long)(ti * p->b + r), (unsigned long long)(tj * p->b + q),
                                       err, bound);
                    break;
                }
            }
        }
    }
    cmb_case_counter(c, "max_rel_err", worst);
    cmb_case_counter(c, "err_bound", bound);
    cmb_case_counter(c, "samples_checked", (double)count);
    free(got);
    return st;
}

/* --- the case ---------------------------------------------------------------------------------- */

static cmb_status open_run(cmb_case *c, gemm_run *g)
{
    cmb_stream s = cmb_case_stream(c, 0);
    uint64_t bytes = sample_bytes(g->p.tiles, g->p.samples);
    cmb_status st = cmb_alloc(c, bytes, s, (void **)&g->samples_dev);
    if (st != CMB_OK) {
        g->samples_dev = NULL;
        return cmb_case_fail(c, st, "sample buffer of %llu bytes", (unsigned long long)bytes);
    }
    st = _cmb_blas_open(c, &g->blas);
    if (st == CMB_OK && _cmb_gpu(c)) {
        st = _cmb_cuda(c, cudaEventCreate(&g->ev[0]), "cudaEventCreate");
        if (st == CMB_OK)
            st = _cmb_cuda(c, cudaEventCreate(&g->ev[1]), "cudaEventCreate");
    }
    return st;
}

static void close_run(cmb_case *c, gemm_run *g)
{
    if (g->ev[0])
        cudaEventDestroy(g->ev[0]);
    if (g->ev[1])
        cudaEventDestroy(g->ev[1]);
    _cmb_blas_close(c, &g->blas);
    if (g->samples_dev)
        cmb_free(c, g->samples_dev, cmb_case_stream(c, 0));
}

static void report(cmb_case *c, const gemm_run *g, double seconds)
{
    double flops = 2.0 * (double)g->p.n * (double)g->p.n * (double)g->p.n;
    cmb_case_counter(c, "chunks", (double)(g->p.tiles * g->p.tiles));
    cmb_case_counter(c, "tile_edge", (double)g->p.b);
    if (cmb_param_str(c, "mode")[0] == 'c')
        cmb_case_counter(c, "budget_bytes", (double)cmb_param_u64(c, "budget"));
    if (!_cmb_gpu(c))
        return;
    cmb_case_counter(c, "tflops", flops / seconds * 1e-12);
    cmb_case_counter(c, "gemm_s", g->gemm_s);
    cmb_case_counter(c, "gemm_tflops", g->gemm_s > 0 ? flops / g->gemm_s * 1e-12 : NAN);
}

static cmb_status gemm_run_case(cmb_case *c)
{
    gemm_run g = {0};
    char err[256];
    if (make_plan(c, &g.p, err, sizeof err))
        return cmb_case_fail(c, CMB_ERR_INVALID, "%s", err);
    if (!_cmb_gpu(c))
        cmb_case_note(c, "cuBLAS, kernels and the result check skipped in sim mode");
    cmb_status st = open_run(c, &g);
    double seconds = 0;
    if (st == CMB_OK) {
        double t0 = cmb_case_clock(c);
        st = product(c, &g);
        seconds = cmb_case_clock(c) - t0;
        cmb_case_set_time(c, seconds);
    }
    if (st == CMB_OK && _cmb_gpu(c))
        st = check_result(c, &g);
    if (st == CMB_OK)
        report(c, &g, seconds);
    close_run(c, &g);
    return st;
}

static int gemm_check(const cmb_case *c, char *reason, size_t len)
{
    gemm_plan p;
    if (make_plan(c, &p, reason, len))
        return -1;
    uint64_t need = working_set(p.n, p.e, p.b, p.samples);
    if (need > cmb_case_capacity(c)) {
        snprintf(reason, len, "gemm-chunked: n=%llu needs %llu MiB, more than the device has",
                 (unsigned long long)p.n, (unsigned long long)(need >> 20));
        return 1;
    }
    return 0;
}

static const cmb_param_spec gemm_params[] = {
    {"n", CMB_P_INT, "4096", "10000", 64, 65536, NULL, "matrix order (A, B, C are n x n)"},
    {"dtype", CMB_P_CHOICE, "f64", "f32,f64", 0, 0, "f32|f64", "element type"},
    {"mode", CMB_P_CHOICE, "whole,chunked", "whole,chunked", 0, 0, "whole|chunked",
     "one GEMM, or row/column panels under the budget"},
    {"budget", CMB_P_SIZE, "256MiB", "1GiB", 1048576, 1099511627776.0, NULL,
     "chunked: bytes the panels, tile, workspace and samples may take"},
    {"samples", CMB_P_INT, "16", "32", 1, 4096, NULL, "result entries checked per tile"},
};

/* quick: whole and one budget (the quick suite's time limit); full: both
 * element types whole, and the curve of time against memory over three
 * budgets in f64 (n=10000 f64 whole takes 2.4 GB, so a larger budget
 * would not chunk) */
static const char *const gemm_quick_grids[] = {
    "mode=whole",
    "mode=chunked;budget=128MiB",
    NULL,
};

static const char *const gemm_full_grids[] = {
    "mode=whole",
    "dtype=f64;mode=chunked;budget=256MiB,512MiB,1GiB",
    NULL,
};

static const cmb_headline gemm_headline = {
    NULL, NULL, NULL, NULL,
    {"{chunks} chunks", "time {time}", "peak reserved {peak_reserved_bytes}", "max rel. error {max_rel_err}", NULL},
};

const cmb_scenario cmb_scenario_gemm_chunked = {
    .name = "gemm-chunked",
    .question = "My matrix product does not fit: how much slower is it in chunks under a memory budget, what does "
                "each allocator hold for the chunk buffers, and is the result still right?",
    .params = gemm_params,
    .n_params = sizeof gemm_params / sizeof gemm_params[0],
    .flags = CMB_SCN_NO_PROBE,
    .quick_grids = gemm_quick_grids,
    .full_grids = gemm_full_grids,
    .check = gemm_check,
    .run = gemm_run_case,
    .headline = &gemm_headline,
};
