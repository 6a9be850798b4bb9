/* output.h - a run's cases as the result files hold them: each finished,
 * failed or skipped case becomes JSON entries (Google Benchmark's layout:
 * one per repetition and aggregate, every metric a counter) and CSV rows
 * (one per case, repetition and metric; columns: harness/schema.def), which
 * the results store (harness/results.c) appends as one commit; run.log
 * holds everything the case processes printed.
 */
#ifndef CMB_OUTPUT_H
#define CMB_OUTPUT_H

#include <stdio.h>

#include "cmb_bench.h"
#include "env.h"
#include "results.h"

typedef struct cmb_output {
    cmb_results store;
    char run_id[128];
    char gpu[96];
    char mode[8];
    FILE *log;
} cmb_output;

/* What identifies a case in the CSV (harness/schema.def). */
typedef struct cmb_case_row {
    const char *name;
    const char *scenario;
    const char *allocator; /* the name only                              */
    const char *options;   /* the user's options, verbatim ("" for none)  */
    const char *impl;      /* real, emulation or suite                    */
    const char *upstream;
    const char *params;
} cmb_case_row;

/* Creates the directory (refusing one that already holds results or that
 * another run is writing) and the three files. 0, or -1 with a reason. */
int cmb_output_open(cmb_output *o, const char *dir, const cmb_env *env, const char *mode, const char *argv0,
                    char *err, size_t errlen);
/* Writes a finished case: its runs to JSON and CSV. */
int cmb_output_case(cmb_output *o, const cmb_case_row *row, const cmb_bench_run *runs, size_t n, char *err,
                    size_t errlen);
/* A case whose process failed (crash, timeout, error): the runs it
 * finished, then the failure with its reason, in one write per file. */
int cmb_output_case_failed(cmb_output *o, const cmb_case_row *row, const cmb_bench_run *runs, size_t n,
                           const char *reason, char *err, size_t errlen);
/* The number of allocations that did not fit in a run (its
 * CMB_OOM_COUNTER), or 0: such a run's rows have status oom. */
double cmb_output_oom_count(const cmb_bench_run *r);

/* A case that produced no runs: failed (could not start) or skipped. */
int cmb_output_case_status(cmb_output *o, const cmb_case_row *row, const char *status, const char *reason,
                           char *err, size_t errlen);
/* --resume: takes the lock of the run in `dir` (before harness/resume.c
 * reads and repairs its files), then reopens them for appending; run_id:
 * the run id the CSV rows carry so far. */
int cmb_output_lock(cmb_output *o, const char *dir, const cmb_env *env, const char *mode, char *err,
                    size_t errlen);
int cmb_output_reopen(cmb_output *o, const char *run_id, char *err, size_t errlen);
int cmb_output_close(cmb_output *o, char *err, size_t errlen);

#endif /* CMB_OUTPUT_H */
