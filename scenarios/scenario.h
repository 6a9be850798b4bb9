/* scenario.h - what a scenario is, and the calls a scenario makes.
 *
 * A scenario is one file that exports one cmb_scenario: a name, the user
 * question it answers, its parameters (with quick and full presets; a
 * comma list in a preset is a sweep), and run(), which performs ONE
 * repetition of the case under the allocator given in the case context.
 *
 * run() allocates only through cmb_alloc / cmb_free (so every operation is
 * metered), reports the time of its measured region with cmb_case_set_time,
 * adds its own counters with cmb_case_counter, and returns CMB_OK or a
 * failure with cmb_case_fail(). Blocks still live when it returns are left
 * for the harness: it probes the largest allocation that still fits, then
 * frees them (unless the scenario keeps them to show a leak).
 */
#ifndef CMB_SCENARIO_H
#define CMB_SCENARIO_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "../allocators/cmb_allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- parameters ------------------------------------------------------------ */

typedef enum cmb_param_type {
    CMB_P_INT,    /* non-negative integer                  */
    CMB_P_SIZE,   /* bytes, with units: 64KiB, 2MiB, 1GiB  */
    CMB_P_REAL,   /* finite number                         */
    CMB_P_BOOL,   /* true/false                            */
    CMB_P_CHOICE, /* one of `choices`, separated by '|'    */
    CMB_P_TEXT    /* free text without ',' or ';' (paths)  */
} cmb_param_type;

typedef struct cmb_param_spec {
    const char *name;
    cmb_param_type type;
    const char *quick;   /* value(s) under --preset quick            */
    const char *full;    /* value(s) under --preset full             */
    double min, max;     /* inclusive bounds for INT, SIZE, REAL     */
    const char *choices; /* CHOICE: "uniform|loguniform|bimodal"     */
    const char *help;
} cmb_param_spec;

/* --- the scenario table ---------------------------------------------------------- */

typedef struct cmb_case cmb_case;

enum {
    CMB_SCN_NEEDS_GPU = 1u << 0,   /* nothing to simulate: skipped in sim mode   */
    CMB_SCN_MICRO = 1u << 1,       /* a micro-benchmark: the library chooses the
                                      iteration count; run() drives the loop with
                                      cmb_case_keep_running                       */
    CMB_SCN_NO_PROBE = 1u << 2,    /* skip the capacity probe after run()         */
    CMB_SCN_TIMELINE = 1u << 3,    /* record a memory timeline by default (the
                                      first repetition's requested / reserved
                                      bytes over time, harness/timeline.h)        */
    CMB_SCN_OWN_PROCESSES = 1u << 4 /* the traffic runs in processes the scenario
                                      starts: the case's own instance stays idle,
                                      so its operation and allocator counters are
                                      left out (multi-gpu)                        */
};

/* What a case's console line and the answer table lead with: the
 * scenario's own answer, not the standard counters. Every field may be
 * NULL (the defaults in brackets). harness/answer.c prints it;
 * plots/cmb_report/headlines.py reads the same initializers for the report,
 * so keep them positional. */
typedef struct cmb_headline {
    const char *ok_word;     /* a finished case's status word ("fits") [ok]                        */
    const char *memory;      /* the counter "best for memory" compares, lower is better; a leading
                                '+' means higher is better ("+max_batch"); "-": a time-only
                                scenario, never ranked on memory [peak_reserved_bytes]              */
    const char *requested;   /* the requested peak behind `memory`: a case that served less than
                                the others is not compared on memory [peak_requested_bytes; "-": none] */
    const char *frag;        /* the fragmentation the report ranks [frag_ratio]                    */
    const char *items[8];    /* the console line after the status word: text with {counter}
                                placeholders ({time}: the case's time); an item whose counters the
                                case did not report is left out. NULL-terminated [time, alloc p50,
                                reserved, frag, capacity ratio]                                    */
} cmb_headline;

typedef struct cmb_scenario {
    const char *name;
    const char *question;           /* the user's question it answers          */
    const cmb_param_spec *params;
    size_t n_params;
    unsigned flags;
    /* Optional sweeps per preset: NULL-terminated lists of "k=v,v;k=v"
     * override sets; each is a grid over the parameters it names (the rest
     * take the preset's value) and the preset runs the union of the grids.
     * NULL: one grid of the preset values. */
    const char *const *quick_grids;
    const char *const *full_grids;
    /* Optional: reject a combination of values (one line into err), or say
     * that it does not fit this device (return 1 and a reason: skipped). */
    int (*check)(const cmb_case *c, char *err, size_t errlen);
    cmb_status (*run)(cmb_case *c);
    const cmb_headline *headline; /* NULL: the standard line */
} cmb_scenario;

/* --- calls available to run() ------------------------------------------------------ */

typedef enum cmb_mode { CMB_MODE_SIM = 0, CMB_MODE_GPU = 1 } cmb_mode;

cmb_mode cmb_case_mode(const cmb_case *c);
uint64_t cmb_case_seed(const cmb_case *c);
int cmb_case_device(const cmb_case *c);
/* Device bytes available to the case (sim: the capacity; GPU: free memory
 * when the case started, or the --capacity cap if lower). */
uint64_t cmb_case_capacity(const cmb_case *c);
const char *cmb_case_allocator_name(const cmb_case *c);
/* The allocator as given: NAME[:k=v...][@UPSTREAM] (for processes the
 * scenario starts, which make instances of their own). */
const char *cmb_case_allocator_spec(const cmb_case *c);

/* Parameter values of this case (validated before run() is called). */
uint64_t cmb_param_u64(const cmb_case *c, const char *name);
double cmb_param_real(const cmb_case *c, const char *name);
int cmb_param_bool(const cmb_case *c, const char *name);
const char *cmb_param_str(const cmb_case *c, const char *name);

/* Allocation through the allocator under test (metered). */
cmb_status cmb_alloc(cmb_case *c, size_t size, cmb_stream s, void **ptr);
cmb_status cmb_free(cmb_case *c, void *ptr, cmb_stream s);
/* The allocator's own calls, without the meters (no clock reads, no live
 * table): for micro-benchmarks of the fast path only, where the meters'
 * ~50 ns would be most of what is measured. Blocks from cmb_alloc_raw must
 * be freed with cmb_free_raw before run() returns. */
cmb_status cmb_alloc_raw(cmb_case *c, size_t size, cmb_stream s, void **ptr);
cmb_status cmb_free_raw(cmb_case *c, void *ptr, size_t size, cmb_stream s);
/* Per-operation clock reads on (default) or off: off for throughput runs,
 * where two clock reads per operation would be most of the cost; the
 * latency counters are then left out. */
void cmb_case_set_op_timing(cmb_case *c, int on);
/* The last of several passes starts now: its allocator time alone is also
 * predicted (predicted_alloc_time_last_pass_s, docs/costs.md). */
void cmb_case_mark_last_pass(cmb_case *c);
/* Size of a live block (0 when unknown). */
size_t cmb_block_size(const cmb_case *c, void *ptr);
cmb_status cmb_case_trim(cmb_case *c);
/* Bytes requested and live now, and their peak so far (the meters' own
 * count, independent of the allocator's statistics). */
uint64_t cmb_case_live_bytes(const cmb_case *c);
uint64_t cmb_case_peak_bytes(const cmb_case *c);

/* The allocator's own statistics now (valid == 0 when it keeps none). */
cmb_status cmb_case_alloc_stats(cmb_case *c, cmb_alloc_stats *out);
/* Right after a cmb_alloc failed: the free bytes by reason, for a request
 * of `size` on `s`, of the allocator instance that refused it
 * (cmb_allocator.h's cmb_free_account): why the request did not fit.
 * CMB_ERR_UNSUPPORTED (out zeroed) when the allocator gives none,
 * CMB_ERR_STATE when no allocation has failed. */
cmb_status cmb_case_free_account(cmb_case *c, size_t size, cmb_stream s, cmb_free_account *out);

/* Runs fn on a fresh instance of the allocator under test (a new upstream
 * too), with `capacity` bytes of device (sim: the simulated size; GPU: a
 * cap for upstream policies, 0 = as the case). Inside fn, cmb_alloc/cmb_free
 * and the statistics calls use the fresh instance; its peaks are returned
 * in *stats (requested from the meters, the rest from the allocator) and it
 * is destroyed before this returns. For sweeps (largest batch that fits)
 * and searches (smallest capacity a trace fits in). */
typedef cmb_status (*cmb_fresh_fn)(cmb_case *c, void *arg);
cmb_status cmb_case_with_fresh_allocator(cmb_case *c, uint64_t capacity, cmb_fresh_fn fn, void *arg,
                                         cmb_alloc_stats *stats);

/* cmb_case_with_fresh_allocator, except that an instance that cannot be
 * set up in `capacity` for lack of memory (a pool that reserves up front)
 * returns CMB_ERR_OOM without failing the case: for sweeps, where that
 * means "does not fit". */
cmb_status cmb_case_try_fresh_allocator(cmb_case *c, uint64_t capacity, cmb_fresh_fn fn, void *arg,
                                        cmb_alloc_stats *stats);

/* Streams: index 0..n-1; created on first use (sim: stand-in handles). */
cmb_stream cmb_case_stream(cmb_case *c, int index);
/* Waits for all work on the device (no-op in sim). */
cmb_status cmb_case_sync(cmb_case *c);

/* The time of this repetition's measured region, in seconds. */
void cmb_case_set_time(cmb_case *c, double seconds);
/* A clock in seconds for the scenario's timed region: the wall clock less
 * the harness's own bookkeeping inside cmb_alloc and cmb_free (device
 * sampling, peak snapshots, timelines), so a timed region measures the
 * allocator and the scenario's work only. */
double cmb_case_clock(const cmb_case *c);
/* A scenario counter of this repetition (a later value of the same name
 * replaces the earlier one; NaN leaves it out). */
void cmb_case_counter(cmb_case *c, const char *name, double value);
/* A note for the output (e.g. "GPU kernels skipped in sim mode"). */
void cmb_case_note(cmb_case *c, const char *fmt, ...);
/* Record why the case failed; returns `status` for `return cmb_case_fail(...)`. */
cmb_status cmb_case_fail(cmb_case *c, cmb_status status, const char *fmt, ...);
/* The workload did not fit: `n_failed` of its allocations failed for lack
 * of memory and the scenario stopped short (or went on without them). The
 * repetition is not a failure: its numbers are recorded with status oom
 * and "did not fit: N allocations failed" (harness/schema.h), the console
 * says so, and the run's exit status stays 0. n_failed 0 clears it. */
void cmb_case_set_oom(cmb_case *c, uint64_t n_failed);
/* How far a long loop has come: `done` of `total` units of `what`
 * ("events"). Cheap enough to call per operation: the clock is read on one
 * call in 256, and a record goes to the parent at most once a second, the
 * first after 2 s (CMB_PROGRESS_AFTER_S, CMB_PROGRESS_EVERY_S), so short
 * cases send none. The parent shows it on the console, never in results.
 * A `done` below the previous one starts a new loop (its own rate). */
void cmb_case_progress(cmb_case *c, uint64_t done, uint64_t total, const char *what);
/* Leave live blocks unfreed at the end (leak-check scenarios). */
void cmb_case_keep_live_blocks(cmb_case *c);

/* Micro-benchmarks (CMB_SCN_MICRO): the library's iteration loop. */
int cmb_case_keep_running(cmb_case *c);
void cmb_case_pause_timing(cmb_case *c);
void cmb_case_resume_timing(cmb_case *c);

/* --- device memory outside the allocator (contention, memory caps) ---------------- */

/* Free device memory now, as the allocator's upstream sees it (GPU:
 * cudaMemGetInfo; sim: the simulated device's free bytes after any cap). */
uint64_t cmb_case_device_free(cmb_case *c);

/* Another process takes `bytes` of device memory until released. GPU: a
 * child process of this binary cudaMallocs them (harness/holder.h; its own
 * CUDA context takes some memory too); sim: the upstream's capacity shrinks
 * by `bytes` (only policies over an upstream run in sim mode, and they see
 * exactly that). CMB_ERR_OOM, without failing the case, when the device
 * does not have the bytes free. One hold at a time; the harness releases a
 * hold the scenario left at the end of run(). */
cmb_status cmb_case_hold_device_memory(cmb_case *c, uint64_t bytes);
void cmb_case_release_device_memory(cmb_case *c);

/* --- the registry ---------------------------------------------------------------------- */

size_t cmb_scenario_count(void);
const cmb_scenario *cmb_scenario_at(size_t i);
const cmb_scenario *cmb_scenario_find(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* CMB_SCENARIO_H */
