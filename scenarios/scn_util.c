/* scn_util.c - helpers the scenarios share. */
#include "scn_util.h"

#include <math.h>
#include <stdlib.h>

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
