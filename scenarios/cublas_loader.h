/* cublas_loader.h - cuBLAS opened at run time, on first use.
 *
 * Only gemm-chunked and batch-sweep call cuBLAS, yet every case is a process
 * of its own: linking the library would load it (with cuBLASLt, some hundred
 * MiB of mappings) into every case. It is opened once, by the first case
 * that needs it, and its entry points are taken from the library itself. */
#ifndef CMB_CUBLAS_LOADER_H
#define CMB_CUBLAS_LOADER_H

#include <stddef.h>

#include <cublas_v2.h>

typedef struct _cmb_cublas_api {
    __typeof__(cublasCreate_v2) *create;
    __typeof__(cublasDestroy_v2) *destroy;
    __typeof__(cublasSetStream_v2) *set_stream;
    __typeof__(cublasSetWorkspace_v2) *set_workspace;
    __typeof__(cublasSgemm_v2) *sgemm;
    __typeof__(cublasDgemm_v2) *dgemm;
    __typeof__(cublasGetStatusString) *status_string;
} _cmb_cublas_api;

/* The loaded entry points, or NULL with why in err (the library or one of
 * its symbols is missing). Opens the library on the first call only. */
const _cmb_cublas_api *_cmb_cublas_load(char *err, size_t errlen);

#endif
