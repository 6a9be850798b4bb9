/* cmb_bench.h - a small C API over Google Benchmark (libbenchmark).
 *
 * Two halves, as the suite uses them:
 *  - in a case's child process: register the case, run the library's timing
 *    loop (keep-running, manual time, repetitions, aggregates, counters), and
 *    receive every finished run as a plain C struct through a sink;
 *  - in the parent: the library's context block (host, CPUs, caches), which
 *    the results store (harness/results.c) puts at the head of results.json;
 *    the store writes the entries itself, in the reporter's layout.
 */
#ifndef CMB_BENCH_H
#define CMB_BENCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CMB_BENCH_MAX_COUNTERS 96
#define CMB_BENCH_NAME_MAX 512

/* Counter flags, as benchmark::Counter::Flags. */
enum {
    CMB_COUNTER_DEFAULT = 0,
    CMB_COUNTER_RATE = 1,           /* divided by the run's time       */
    CMB_COUNTER_AVG_ITERATIONS = 8  /* divided by the iteration count  */
};

typedef enum cmb_time_unit { CMB_UNIT_NS = 0, CMB_UNIT_US, CMB_UNIT_MS, CMB_UNIT_S } cmb_time_unit;

typedef struct cmb_bench_counter {
    char name[64];
    double value;
    unsigned flags;
    int one_k_1024; /* 1: bytes-like, printed with 1024 multiples */
} cmb_bench_counter;

/* One entry of the results: a repetition or an aggregate over them. */
typedef struct cmb_bench_run {
    char name[CMB_BENCH_NAME_MAX];  /* the case name                         */
    int is_aggregate;
    char aggregate_name[32];        /* mean, median, stddev, cv               */
    int aggregate_is_percentage;    /* cv is a percentage, not a time         */
    int64_t repetition_index;       /* -1 for aggregates                      */
    int64_t repetitions;
    int64_t iterations;
    int64_t threads;
    double real_accumulated_time;   /* seconds over all iterations            */
    double cpu_accumulated_time;    /* seconds over all iterations            */
    cmb_time_unit time_unit;
    int error_occurred;
    char error_message[512];
    char label[256];
    size_t n_counters;
    cmb_bench_counter counters[CMB_BENCH_MAX_COUNTERS];
} cmb_bench_run;

/* --- the timing loop (child side) ------------------------------------------ */

typedef struct cmb_bench_state cmb_bench_state;
typedef void (*cmb_bench_fn)(cmb_bench_state *st, void *arg);

typedef struct cmb_bench_options {
    int64_t iterations;   /* fixed iteration count; 0 lets the library choose */
    int repetitions;      /* >= 1                                             */
    int manual_time;      /* report the time given by set_iteration_time      */
    cmb_time_unit unit;
    double min_time_s;    /* with iterations == 0; 0 = the library default    */
} cmb_bench_options;

void cmb_bench_register(const char *name, cmb_bench_fn fn, void *arg, const cmb_bench_options *opt);
int cmb_bench_keep_running(cmb_bench_state *st);
void cmb_bench_pause(cmb_bench_state *st);
void cmb_bench_resume(cmb_bench_state *st);
void cmb_bench_set_iteration_time(cmb_bench_state *st, double seconds);
void cmb_bench_set_counter(cmb_bench_state *st, const char *name, double value, unsigned flags);
void cmb_bench_set_label(cmb_bench_state *st, const char *label);
void cmb_bench_skip_with_error(cmb_bench_state *st, const char *message);
int64_t cmb_bench_max_iterations(const cmb_bench_state *st);

typedef void (*cmb_bench_sink)(const cmb_bench_run *run, void *ctx);

/* Runs every registered benchmark; each finished run goes to sink.
 * Returns the number of benchmarks run. */
size_t cmb_bench_run_registered(const char *argv0, cmb_bench_sink sink, void *ctx);

/* --- output (parent side) ------------------------------------------------------ */

/* A key/value pair for the JSON "context" block; call before context_text. */
void cmb_bench_add_context(const char *key, const char *value);

/* The library's JSON reporter's context, as the text of a document
 * {"context": {...}, "benchmarks": []}; malloc'd (free it), NULL when out
 * of memory. */
char *cmb_bench_context_text(const char *argv0);

/* Replaces characters that the library's JSON writer would not escape. */
void cmb_bench_sanitize(char *s);

/* Parses --benchmark_* style flags the library understands (none needed by
 * default); kept for completeness of the shim. */
const char *cmb_bench_library_version(void);

#ifdef __cplusplus
}
#endif

#endif /* CMB_BENCH_H */
