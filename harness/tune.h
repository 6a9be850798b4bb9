/* tune.h - `cumembench tune`: from a recorded workload to the allocator
 * setting that fits the smallest GPU at no time cost (docs/tune.md).
 *
 * The pieces, one file each:
 *   tune.c        the command: arguments, the order of the search, exit status;
 *   tune_input.c  the input (suite trace, RMM log, PyTorch snapshot) in memory,
 *                 and the setting it was recorded under;
 *   tune_eval.c   one candidate replayed in-process on a simulated device:
 *                 what it holds, what it costs (the cost file), whether it fits;
 *   tune_pool.c   the searches of a stage on several threads;
 *   tune_fit.c    the smallest GPU, bounded by what is known (peak requested
 *                 below, the device peak at unlimited capacity above, the
 *                 front found so far), as docs/costs.md defines it;
 *   tune_space.c  the candidates per framework, and how each is pasted;
 *   tune_front.c  the Pareto front and the recommendation;
 *   tune_out.c    the table, the recommendation and why, and --json;
 *   tune_verify.c --verify: the program run under a setting (GPU).
 */
#ifndef CMB_TUNE_H
#define CMB_TUNE_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "../traces/trace.h"
#include "costs.h"

#define CMB_TUNE_MAX_CANDIDATES 1024
#define CMB_TUNE_STEP ((uint64_t)2 << 20) /* the capacity grid, as replay's search */
#define CMB_TUNE_MEMO 512

typedef enum cmb_tune_for { CMB_TUNE_TORCH, CMB_TUNE_CUPY, CMB_TUNE_RMM, CMB_TUNE_ANY } cmb_tune_for;
typedef enum cmb_tune_objective { CMB_TUNE_MEMORY, CMB_TUNE_TIME, CMB_TUNE_BALANCED } cmb_tune_objective;

/* --- the input ------------------------------------------------------------------------------------- */

typedef struct cmb_tune_trace {
    char path[512];        /* the trace replayed (a converted snapshot: the temporary file) */
    char input[512];       /* as the user named it                                          */
    cmb_trace_loaded trace;  /* the events; no GPU below trace.peak_requested fits any candidate */
    char recorded[256];      /* the recorded setting as a spec ("torch-expandable:...")        */
    char recorded_from[64];  /* where that came from ("the trace's allocator_settings")         */
} cmb_tune_trace;

/* Loads INPUT (converting a snapshot pickle with traces/torch_snapshot_to_trace.py);
 * 0, or -1 with a one-line reason. */
int cmb_tune_load(const char *input, cmb_tune_for fw, cmb_tune_trace *t, char *err, size_t errlen);
void cmb_tune_trace_free(cmb_tune_trace *t);

/* --- a candidate ----------------------------------------------------------------------------------- */

typedef struct cmb_tune_cand {
    char spec[256];      /* the allocator spec replayed ("torch-caching:max_split_size_mb=128") */
    int pluggable;       /* runs through libcmb_pluggable (priced as the suite's own code) */
    int stage;           /* 0 recorded, 1 one knob, 2 combined, 3 refined */
    int evaluated;       /* the unlimited replay ran */
    int failed;          /* could not be created or replayed: why */
    char why[160];
    /* at unlimited capacity */
    uint64_t peak_reserved, peak_allocated, device_peak;
    uint64_t upstream_calls;  /* every upstream call of the replay */
    double time_s;            /* predicted allocator time per pass, NAN without a cost file */
    /* the smallest GPU */
    int searched;        /* 1: min_capacity is exact; 0 with dominated: only a bound */
    int dominated;       /* a faster-or-as-fast candidate fits a smaller GPU */
    uint64_t min_capacity, island;
    int trials;
    /* on a GPU of the budget (cmb_tune_price_at_budget): a garbage-collection
     * threshold or a pool's limit acts only near the device's capacity */
    int at_budget;        /* 1: priced there */
    double budget_time_s; /* predicted allocator time per pass there; NAN: it did not run there */
} cmb_tune_cand;

typedef struct cmb_tune_set {
    cmb_tune_cand c[CMB_TUNE_MAX_CANDIDATES];
    int n;
} cmb_tune_set;

/* --- evaluating ------------------------------------------------------------------------------------ */

typedef struct cmb_tune_ctx {
    const cmb_tune_trace *t;
    const cmb_costs *costs;  /* NULL: no cost file, memory alone */
    uint64_t passes;
    void **ptr;              /* per slot */
    uint64_t trials;         /* replays run, all candidates */
    /* the capacities tried in the current search and whether each fit: the
     * bound check, the bisection and the scans meet the same ones */
    uint64_t memo_cap[CMB_TUNE_MEMO];
    uint8_t memo_fit[CMB_TUNE_MEMO];
    int memo_n;
} cmb_tune_ctx;

/* What one replay of a candidate at a capacity found. */
typedef struct cmb_tune_replay {
    uint64_t ooms;
    uint64_t peak_reserved, peak_allocated, device_peak, upstream_calls;
    double time_s;           /* predicted, whole replay; NAN without costs */
    int have_account;        /* the first failure's free bytes by reason */
    uint64_t fail_size;
    cmb_free_account account;
} cmb_tune_replay;

/* Replays the trace under `spec` on a simulated device of `capacity`
 * bytes, `passes` times (metered when `price`); 0, or -1 with why. */
int cmb_tune_replay_at(cmb_tune_ctx *x, const cmb_tune_cand *cand, uint64_t capacity, uint64_t passes, int price,
                       cmb_tune_replay *out, char *err, size_t errlen);

/* The unlimited replay: peaks, upstream calls, predicted time. */
void cmb_tune_evaluate(cmb_tune_ctx *x, cmb_tune_cand *cand);

/* The smallest GPU of `cand`: exact, or only "not below `bound`" (dominated)
 * when a candidate no slower fits `bound` (0: none yet). */
void cmb_tune_fit(cmb_tune_ctx *x, cmb_tune_cand *cand, uint64_t bound);
/* Searches the smallest GPU of s->c[order[0..n)] (fastest first) on
 * several threads; the replays run. fn(ctx, done, replays) after each. */
typedef void (*cmb_tune_progress_fn)(void *ctx, int done, uint64_t replays);
uint64_t cmb_tune_fit_all(const cmb_tune_ctx *x, cmb_tune_set *s, const int *order, int n, cmb_tune_progress_fn fn,
                          void *ctx);
/* Smaller capacities that also fit (below the answer, 128 MiB on the grid). */
void cmb_tune_islands(cmb_tune_ctx *x, cmb_tune_cand *cand);
/* Prices the searched candidates that fit `budget` (the first
 * CMB_TUNE_BUDGET_PRICED of them) on a GPU of the budget. */
#define CMB_TUNE_BUDGET_PRICED 64
void cmb_tune_price_at_budget(cmb_tune_ctx *x, cmb_tune_set *s, uint64_t budget);

/* --- the space --------------------------------------------------------------------------------------- */

/* Adds `spec` unless already there; the index, or -1 when full or a duplicate. */
int cmb_tune_add(cmb_tune_set *s, const char *spec, int pluggable, int stage);
/* The recorded setting and every single knob moved from it. */
void cmb_tune_space_start(cmb_tune_set *s, const cmb_tune_trace *t, cmb_tune_for fw);
/* Combinations of the knob values that were not dominated alone. */
void cmb_tune_space_combine(cmb_tune_set *s, const cmb_tune_trace *t, cmb_tune_for fw);
/* Neighbours of the front's members (values between the grid's). */
void cmb_tune_space_refine(cmb_tune_set *s, const int *front, int n_front);
/* What to paste for a candidate: one or two lines into out. */
void cmb_tune_paste(const cmb_tune_cand *c, char *out, size_t len);
/* The setting as `python3 -m cumembench_alloc run SETTING` takes it. */
void cmb_tune_run_setting(const cmb_tune_cand *c, char *out, size_t len);

/* --- the front ------------------------------------------------------------------------------------- */

/* Indices of the non-dominated searched candidates, by smallest GPU; count. */
int cmb_tune_front(const cmb_tune_set *s, int *front, int max);
/* The front member for the budget (0: none) and objective; -1 when none fits.
 * recorded: the recorded setting's index (balanced's reference). */
int cmb_tune_recommend(const cmb_tune_set *s, const int *front, int n_front, uint64_t budget,
                       cmb_tune_objective obj, int recorded);
/* The same choice among the candidates priced on a GPU of the budget, each
 * at its time there (a candidate that fits but was not priced there is not
 * chosen); front receives their front, its count in *n_front. */
int cmb_tune_recommend_at_budget(const cmb_tune_set *s, uint64_t budget, cmb_tune_objective obj, int recorded,
                                 int *front, int *n_front);

/* --- output ------------------------------------------------------------------------------------------ */

typedef struct cmb_tune_report {
    const cmb_tune_trace *t;
    const cmb_tune_set *s;
    const int *front;
    int n_front;
    const int *budget_front; /* the front on a GPU of the budget, its members that fit (priced there) */
    int n_budget_front;
    int recorded;          /* index of the recorded setting */
    int recommended;       /* -1: nothing fits the budget */
    uint64_t budget;       /* 0: none */
    cmb_tune_objective obj;
    const char *costs_path; /* NULL: no cost file */
    cmb_tune_replay rec_at_budget;   /* the recommendation replayed on a GPU of the budget */
    cmb_tune_replay recorded_at_fit; /* the recorded setting on the recommendation's GPU: why it fails */
    double seconds;
    uint64_t trials;
    uint64_t passes;
} cmb_tune_report;

void cmb_tune_print(FILE *f, const cmb_tune_report *r);
int cmb_tune_print_json(FILE *f, const cmb_tune_report *r);

/* --- the command ------------------------------------------------------------------------------------- */

int cmb_tune_main(int argc, char **argv);

/* --verify: runs CMD under the recommended and the recorded setting; 0, or
 * the exit status (2: no GPU, the wrapper or a program failed). */
int cmb_tune_verify(const cmb_tune_report *r, char **cmd, int n_cmd, int json);

#endif /* CMB_TUNE_H */
