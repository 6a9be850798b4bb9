/* scn_util.c - helpers the scenarios share. */
#include "scn_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cublas_loader.h"
#include <cuda_runtime_api.h>

/* --- a list of live blocks ------------------------------------------------------------ */

int _cmb_blocks_push(_cmb_blocks *b, void *p, size_t size)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        void **np = realloc(b->p, cap * sizeof *np);
        if (!np)
            return -1;
        b->p = np;
        size_t *ns = realloc(b->size, cap * sizeof *ns);
        if (!ns)
            return -1;
        b->size = ns;
        b->cap = cap;
    }
    b->p[b->n] = p;
    b->size[b->n++] = size;
    return 0;
}

cmb_status _cmb_blocks_free_all(cmb_case *c, _cmb_blocks *b, cmb_stream s)
{
    while (b->n) {
        b->n--;
        cmb_status st = cmb_free(c, b->p[b->n], s);
        if (st != CMB_OK)
            return cmb_case_fail(c, st, "free of a %zu-byte block failed", b->size[b->n]);
    }
    return CMB_OK;
}

void _cmb_blocks_release(_cmb_blocks *b)
{
    free(b->p);
    free(b->size);
    b->p = NULL;
    b->size = NULL;
    b->n = b->cap = 0;
}

/* --- CUDA calls -------------------------------------------------------------------------- */

cmb_status _cmb_cuda(cmb_case *c, int err, const char *what)
{
    if (!err)
        return CMB_OK;
    cudaGetLastError(); /* clear a non-sticky error; a sticky one stays */
    return cmb_case_fail(c, CMB_ERR_CUDA, "%s: %s", what, cudaGetErrorString((cudaError_t)err));
}

cmb_status _cmb_cublas(cmb_case *c, int status, const char *what)
{
    if (status == CUBLAS_STATUS_SUCCESS)
        return CMB_OK;
    char err[64];
    const _cmb_cublas_api *api = _cmb_cublas_load(err, sizeof err);
    if (!api)
        return cmb_case_fail(c, CMB_ERR_CUDA, "%s: cuBLAS status %d", what, status);
    return cmb_case_fail(c, CMB_ERR_CUDA, "%s: %s", what, api->status_string((cublasStatus_t)status));
}

/* --- cuBLAS ---------------------------------------------------------------------------------- */

cmb_status _cmb_blas_attach(cmb_case *c, _cmb_blas *b)
{
    cmb_status st = cmb_alloc(c, CMB_CUBLAS_WORKSPACE, cmb_case_stream(c, 0), &b->workspace);
    if (st != CMB_OK) {
        b->workspace = NULL;
        return st == CMB_ERR_OOM ? st : cmb_case_fail(c, st, "cuBLAS workspace of %llu bytes", CMB_CUBLAS_WORKSPACE);
    }
    if (!b->handle)
        return CMB_OK;
    return _cmb_cublas(c, b->api->set_workspace((cublasHandle_t)b->handle, b->workspace, CMB_CUBLAS_WORKSPACE),
                       "cublasSetWorkspace");
}

void _cmb_blas_detach(cmb_case *c, _cmb_blas *b)
{
    if (b->handle) {
        cudaStreamSynchronize((cudaStream_t)cmb_case_stream(c, 0));
        b->api->set_workspace((cublasHandle_t)b->handle, NULL, 0);
    }
    if (b->workspace)
        cmb_free(c, b->workspace, cmb_case_stream(c, 0));
    b->workspace = NULL;
}

cmb_status _cmb_blas_create(cmb_case *c, _cmb_blas *b)
{
    cublasHandle_t h = NULL;
    char err[320];
    b->handle = b->workspace = NULL;
    b->api = NULL;
    if (!_cmb_gpu(c))
        return CMB_OK;
    const _cmb_cublas_api *api = _cmb_cublas_load(err, sizeof err);
    if (!api)
        return cmb_case_fail(c, CMB_ERR_UNSUPPORTED, "%s", err);
    cmb_status st = _cmb_cublas(c, api->create(&h), "cublasCreate");
    if (st != CMB_OK)
        return st;
    b->api = api;
    b->handle = h;
    return _cmb_cublas(c, api->set_stream(h, (cudaStream_t)cmb_case_stream(c, 0)), "cublasSetStream");
}

cmb_status _cmb_blas_open(cmb_case *c, _cmb_blas *b)
{
    cmb_status st = _cmb_blas_create(c, b);
    if (st == CMB_OK)
        st = _cmb_blas_attach(c, b);
    return st == CMB_ERR_OOM ? cmb_case_fail(c, st, "cuBLAS workspace of %llu bytes", CMB_CUBLAS_WORKSPACE) : st;
}

void _cmb_blas_close(cmb_case *c, _cmb_blas *b)
{
    _cmb_blas_detach(c, b);
    if (b->handle)
        b->api->destroy((cublasHandle_t)b->handle);
    b->handle = NULL;
}

/* --- numbers ------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double _cmb_median(double *v, size_t n)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* --- explaining a failed allocation (CMB_EXPLAIN_OOM=1) ------------------------------------ */

static const char *const free_reason_counter[CMB_FREE_N_REASONS] = {
    [CMB_FREE_OTHER_POOL] = "oom_free_other_pool_bytes",
    [CMB_FREE_OTHER_STREAM] = "oom_free_other_stream_bytes",
    [CMB_FREE_EVENT_WAIT] = "oom_free_event_wait_bytes",
    [CMB_FREE_OVERSIZE] = "oom_free_oversize_bytes",
    [CMB_FREE_NOT_CONTIGUOUS] = "oom_free_not_contiguous_bytes",
    [CMB_FREE_TOO_SMALL] = "oom_free_too_small_bytes",
    [CMB_FREE_USABLE] = "oom_free_usable_bytes",
};

int _cmb_explain_wanted(void)
{
    const char *v = getenv("CMB_EXPLAIN_OOM");
    return v && *v && strcmp(v, "0") != 0;
}

void _cmb_explain_request(cmb_case *c, uint64_t size, int stream_index, cmb_stream s)
{
    cmb_alloc_stats stats;
    cmb_free_account acct;
    cmb_case_counter(c, "oom_request_bytes", (double)size);
    cmb_case_counter(c, "oom_stream", (double)stream_index);
    cmb_case_counter(c, "oom_live_requested_bytes", (double)cmb_case_live_bytes(c));
    if (cmb_case_alloc_stats(c, &stats) == CMB_OK) {
        if (stats.valid & CMB_STAT_RESERVED)
            cmb_case_counter(c, "oom_reserved_bytes", (double)stats.reserved.current);
        if (stats.valid & CMB_STAT_ALLOCATED)
            cmb_case_counter(c, "oom_allocated_bytes", (double)stats.allocated.current);
    }
    cmb_case_counter(c, "oom_device_free_bytes", (double)cmb_case_device_free(c));
    if (cmb_case_free_account(c, size, s, &acct) != CMB_OK) {
        cmb_case_note(c, "explain-oom: %s gives no account of its free memory", cmb_case_allocator_name(c));
        return;
    }
    cmb_case_counter(c, "oom_rounded_bytes", (double)acct.rounded);
    cmb_case_counter(c, "oom_largest_free_bytes", (double)acct.largest_free);
    for (int r = 0; r < CMB_FREE_N_REASONS; r++)
        cmb_case_counter(c, free_reason_counter[r], (double)acct.bytes[r]);
}
