/* costs.h - predicted allocator time: a case's counts (allocator
 * operations, upstream calls by kind and size, synchronizations) priced by
 * a cost file that `cumembench calibrate` measured on a real GPU
 * (docs/costs.md). A sim time is host bookkeeping; this is what the same
 * traffic would cost on the calibrated card. */
#ifndef CMB_COSTS_H
#define CMB_COSTS_H

#include <stddef.h>
#include <stdint.h>

#include "metered.h"

#define CMB_COSTS_ENV "CMB_COSTS"        /* a cost file to use               */
#define CMB_COSTS_GPU_ENV "CMB_GPU_MODEL" /* the GPU whose cost file to find  */
#define CMB_COSTS_OPS_ENV "CMB_COSTS_OPS"  /* "bookkeeping": price an emulation as its own code */
#define CMB_COST_POINTS 16
#define CMB_COST_REALS 8

typedef struct cmb_cost_curve {
    int n;                      /* 0: not measured */
    double x[CMB_COST_POINTS];  /* bytes, pages or 1, ascending */
    double s[CMB_COST_POINTS];  /* median seconds per call      */
} cmb_cost_curve;

typedef enum cmb_cost_call {
    CMB_CC_MALLOC, CMB_CC_FREE, CMB_CC_FREE_IN_FLIGHT, CMB_CC_MEM_CREATE, CMB_CC_MEM_MAP, CMB_CC_SET_ACCESS,
    CMB_CC_MEM_UNMAP, CMB_CC_MEM_RELEASE, CMB_CC_MALLOC_ASYNC, CMB_CC_FREE_ASYNC, CMB_CC_EVENT_RECORD,
    CMB_CC_EVENT_QUERY, CMB_CC_STREAM_SYNC,
    CMB_CC_SET_ACCESS_HANDLES, /* one cuMemSetAccess by the handles of its range; optional (older
                                  files: an access run priced as one handle of its pages) */
    CMB_CC_COUNT
} cmb_cost_call;

typedef struct cmb_costs {
    char path[512];
    char gpu[128];
    double granularity; /* bytes per page of the cuMem* curves */
    cmb_cost_curve call[CMB_CC_COUNT];
    int n_real;
    char real_name[CMB_COST_REALS][64]; /* "real:rmm-pool" */
    cmb_cost_curve real_pair[CMB_COST_REALS]; /* alloc+free pair by bytes */
} cmb_costs;

/* What a case did, as the prediction needs it. */
typedef struct cmb_cost_input {
    const char *allocator;  /* "torch-caching", "real:rmm-pool", "cuda", ... */
    const cmb_up_counts *up; /* NULL: no upstream */
    uint64_t allocs, frees;
    double mean_request;    /* bytes per allocation                          */
    double bookkeeping_s;   /* measured time in alloc/free (the suite's own) */
    int own_code;           /* the policy's own code runs (libcmb_pluggable): priced
                               by bookkeeping_s, as CMB_COSTS_OPS=bookkeeping does */
} cmb_cost_input;

typedef struct cmb_cost_parts {
    double upstream_s; /* cudaMalloc/cuMem* calls, events                   */
    double sync_s;     /* overlap lost to synchronizing calls               */
    double ops_s;      /* the allocator's own work per operation            */
    double total_s;
    const char *ops_from; /* "real:NAME calibration", "measured bookkeeping", ... */
} cmb_cost_parts;

/* 0, or -1 with a one-line reason (missing file, malformed, wrong format). */
int cmb_costs_load(const char *path, cmb_costs *out, char *err, size_t errlen);

/* The committed cost file of `gpu_model` (a slug or name, as --gpu-model
 * takes it), else the one whose results/<dir>/costs.json directory shares
 * the longest prefix with it, else H100's; 0 with the path, -1 when none is
 * committed. */
int cmb_costs_default_path(const char *gpu_model, char *path, size_t len);

/* --costs FILE: loads it (0, or -1 with a one-line reason: missing,
 * malformed, another format) and makes it every case's cost file: the
 * run's CMB_COSTS, which the case processes inherit, set to its absolute
 * path (a resumed run enters its directory). */
int cmb_costs_use_file(const char *path, char *err, size_t errlen);

/* --gpu-model NAME: the committed cost file of the GPU NAME names becomes
 * the run's (CMB_COSTS): NAME a slug or a name, read as a slug ("NVIDIA
 * H200" is nvidia-h200), that is a results/ directory's words, then nothing
 * or more ("NVIDIA H100 80GB HBM3"), the vendor's word optional ("H100");
 * -1 with the committed ones named where none matches ("n", "nosuch-gpu"). */
int cmb_costs_use_gpu_model(const char *model, char *err, size_t errlen);

/* 1 when the file prices a deferred access run per handle (it has
 * cuMemSetAccess_handles), 0 when as one handle of the run's pages. */
int cmb_costs_access_per_handle(const cmb_costs *c);

/* Seconds per call of `cc` at x (bytes, pages or handles): piecewise linear in
 * log x between measured points, flat beyond them; 0 when not measured. */
double cmb_cost_at(const cmb_cost_curve *cv, double x);

/* The prediction; its parts add up to total_s. */
void cmb_costs_predict(const cmb_costs *c, const cmb_cost_input *in, cmb_cost_parts *out);

struct cmb_case;
/* The case's counts and predicted time as counters (predicted_alloc_time_s
 * and its parts, up_<kind>_calls); nothing predicted, and one note, when
 * no cost file is found; a note too when the file lacks
 * cuMemSetAccess_handles and the case set access over runs of several
 * handles (priced then as one handle each: under-priced). */
void cmb_costs_put(struct cmb_case *c, const cmb_metered *mt, const char *allocator);

/* The counts at a moment of a case (a replay's last pass starts), so the
 * part after it is priced alone: the warm pass of a policy that the passes
 * before it grew, as a training loop's steady steps meet it. */
typedef struct cmb_costs_mark {
    int set;
    cmb_up_counts up;
    uint64_t allocs, frees, ops_ns;
    int64_t requested;
} cmb_costs_mark;

void cmb_costs_mark_take(cmb_costs_mark *k, const cmb_metered *mt);
/* predicted_alloc_time_last_pass_s: what the case did after the mark, priced
 * as cmb_costs_put prices the whole. */
void cmb_costs_put_since(struct cmb_case *c, const cmb_metered *mt, const cmb_costs_mark *k,
                         const char *allocator);

#endif /* CMB_COSTS_H */
