/* scn_util.h - small helpers the scenarios share (private to scenarios/). */
#ifndef CMB_SCN_UTIL_H
#define CMB_SCN_UTIL_H

#include <stddef.h>

#include "scenario.h"

/* --- a list of live blocks ------------------------------------------------------------ */

typedef struct _cmb_blocks {
    void **p;
    size_t *size;
    size_t n, cap;
} _cmb_blocks;

/* 0, or -1 when the host is out of memory. */
int _cmb_blocks_push(_cmb_blocks *b, void *p, size_t size);
/* Frees every block through the allocator under test, newest first. */
cmb_status _cmb_blocks_free_all(cmb_case *c, _cmb_blocks *b, cmb_stream s);
/* Releases the list's own host memory (not the blocks). */
void _cmb_blocks_release(_cmb_blocks *b);

/* --- CUDA calls -------------------------------------------------------------------------- */

/* err is a cudaError_t (or a launcher's int): CMB_OK when 0, else the case
 * fails with CMB_ERR_CUDA and "what: <CUDA's message>". */
cmb_status _cmb_cuda(cmb_case *c, int err, const char *what);

/* A cuBLAS status: CMB_OK when 0, else the case fails with CMB_ERR_CUDA. */
cmb_status _cmb_cublas(cmb_case *c, int status, const char *what);

/* --- cuBLAS with its workspace from the allocator under test ------------------------------ */

/* cuBLAS recommends 32 MiB of workspace on Hopper (cuBLAS documentation,
 * cublasSetWorkspace); less on older GPUs, so 32 MiB serves all. */
#define CMB_CUBLAS_WORKSPACE (32ull << 20)

typedef struct _cmb_cublas_api _cmb_cublas_api;

typedef struct _cmb_blas {
    const _cmb_cublas_api *api; /* cuBLAS's entry points; NULL in sim mode */
    void *handle;    /* cublasHandle_t; NULL in sim mode */
    void *workspace; /* from cmb_alloc, in sim mode too (same traffic) */
} _cmb_blas;

/* Creates the handle on stream 0 (GPU; sim: nothing) without a workspace. */
cmb_status _cmb_blas_create(cmb_case *c, _cmb_blas *b);
/* _cmb_blas_create, then a workspace allocated through the allocator under
 * test (sim: only the workspace allocation). */
cmb_status _cmb_blas_open(cmb_case *c, _cmb_blas *b);
/* Detaches and frees the workspace, destroys the handle. */
void _cmb_blas_close(cmb_case *c, _cmb_blas *b);
/* The workspace alone, from the allocator instance in use now (a fresh
 * instance of cmb_case_with_fresh_allocator); CMB_ERR_OOM is returned
 * without failing the case. */
cmb_status _cmb_blas_attach(cmb_case *c, _cmb_blas *b);
void _cmb_blas_detach(cmb_case *c, _cmb_blas *b);

/* --- numbers ------------------------------------------------------------------------------- */

/* Median of v[0..n) (sorts v); NAN when n == 0. */
double _cmb_median(double *v, size_t n);

static inline int _cmb_gpu(const cmb_case *c)
{
    return cmb_case_mode(c) == CMB_MODE_GPU;
}

/* --- explaining a failed allocation (docs/explain.md) ----------------------------------- */

/* CMB_EXPLAIN_OOM is set (and not 0): explain failed allocations. */
int _cmb_explain_wanted(void);
/* Right after an allocation of `size` on stream `s` (index `stream_index`)
 * failed: the request, what the allocator reserved and allocated, the
 * device's free bytes and the allocator's free bytes by the reason the
 * request could not use them, as oom_* counters (a note when the
 * allocator gives no account). */
void _cmb_explain_request(cmb_case *c, uint64_t size, int stream_index, cmb_stream s);

#endif /* CMB_SCN_UTIL_H */
