/* case.h - one case: a scenario under one allocator with one parameter set.
 *
 * The parent builds cmb_case_spec values and runs each in a fresh child
 * process (runner.c), handing it the spec as one record (wire.h); the
 * child calls cmb_case_run_child, which runs the repetitions through
 * Google Benchmark and writes every finished run to the result descriptor
 * (wire.c). A spec owns all its strings: copy it with cmb_case_spec_copy
 * (its allocator's options point into itself).
 */
#ifndef CMB_CASE_H
#define CMB_CASE_H

#include "../allocators/upstream.h"
#include "../scenarios/scenario.h"
#include "../allocators/policy.h"
#include "cmb_bench.h"
#include "params.h"

typedef struct cmb_case_spec {
    const cmb_scenario *scenario;
    cmb_alloc_spec alloc;
    cmb_param_set params;
    cmb_mode mode;
    uint64_t seed;
    int device;
    uint64_t capacity;     /* sim: device size; GPU: cap for upstream policies (0 = none) */
    int repetitions;
    cmb_fault_spec fault;
    char record_trace[512]; /* write the first repetition's traffic here */
    char timeline_dir[768];    /* first repetition's memory timeline goes here; "": none */
    unsigned timeline_points;  /* at most this many samples (0: the default) */
    char name[CMB_BENCH_NAME_MAX];
} cmb_case_spec;

void cmb_case_spec_copy(cmb_case_spec *dst, const cmb_case_spec *src);

/* cs->name = "scenario/allocator/k:v/...". A name that does not fit is
 * refused, never cut (--resume and the tools key on names): -1 with a
 * one-line reason. */
int cmb_case_spec_make_name(cmb_case_spec *cs, char *err, size_t errlen);

/* Which upstream the case uses (explicit @UP, else sim in sim mode, vmm for
 * policies that need it, cuda otherwise). */
cmb_upstream_kind cmb_case_upstream_kind(const cmb_case_spec *cs, const cmb_allocator_methods *m);

/* Parent-side check of a case before it is scheduled: 0 runs, 1 skipped
 * (reason says why), -1 invalid combination (reason is the error). */
int cmb_case_check(const cmb_case_spec *cs, uint64_t capacity, char *reason, size_t len);

/* Child side: runs the repetitions and writes the runs to result_fd.
 * Returns the process exit status. */
int cmb_case_run_child(const cmb_case_spec *cs, int result_fd);

#endif /* CMB_CASE_H */
