/* results.h - the results store: the one module that creates, appends to,
 * reopens, repairs and reads a run's results.csv and results.json.
 *
 *   results.csv  - one row per case, repetition and metric (columns:
 *                  harness/schema.def, read by name in both directions);
 *   results.json - Google Benchmark JSON ("context" and "benchmarks"),
 *                  written with jansson, strict: a number that is not
 *                  finite (a cv over zeros) is null, never NaN;
 *   run.lock     - there while a writer holds the directory (flock, for
 *                  the whole run), with its pid: a second writer of the
 *                  same directory (a fresh run or a --resume) is refused
 *                  at once; removed when the run ends (a killed run
 *                  leaves it, unlocked: the next writer takes it).
 *
 * What survives what (docs/reliability.md): a case is appended as one
 * commit, JSON entries first, then CSV rows; a failed append (ENOSPC, a
 * file-size limit, EIO) is undone before the error is returned, so the
 * files on disk are valid at all times; a crash in the middle of an append
 * leaves a torn tail that cmb_results_recover() cuts off (the case runs
 * again). Anything else that does not read as this suite's files (a NUL
 * byte, a row that does not parse, another version's header) is refused
 * with the reason, never kept.
 */
#ifndef CMB_RESULTS_H
#define CMB_RESULTS_H

#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#include "schema.h"

/* The longest output directory: a longer --out is refused before anything runs. */
#define CMB_RESULTS_DIR_MAX 767

typedef struct cmb_results {
    char dir[CMB_RESULTS_DIR_MAX + 1];
    int lock_fd;     /* run.lock, flock'ed for the life of the store      */
    int csv_fd;
    off_t csv_len;   /* bytes of results.csv committed                     */
    int json_fd;
    off_t json_len;  /* bytes of results.json before its closing           */
    size_t n_entries;
} cmb_results;

/* --- writing ------------------------------------------------------------------------------- */

/* 0 when `dir` can name an output directory, else -1 and why. */
int cmb_results_check_dir(const char *dir, char *err, size_t errlen);

/* Creates `dir` (and its parents), takes its lock, refuses a directory
 * that already holds results, and writes results.csv (the header) and
 * results.json (`context`, no entries). 0, or -1 with a one-line reason. */
int cmb_results_create(cmb_results *s, const char *dir, json_t *context, char *err, size_t errlen);

/* Takes the lock of an existing run directory (--resume: before
 * cmb_results_recover reads it). */
int cmb_results_lock(cmb_results *s, const char *dir, char *err, size_t errlen);

/* After the lock and cmb_results_recover: opens both files for appending. */
int cmb_results_reopen(cmb_results *s, char *err, size_t errlen);

/* One case, as one commit: `entries` (a JSON array, may be empty) and
 * `csv` (whole rows, as cmb_results_csv_row makes them), each written at
 * its file's end and synced, JSON first. On failure both files are put
 * back as before the call (when that fails too, the error says so and
 * cmb_results_recover repairs them). */
int cmb_results_append(cmb_results *s, json_t *entries, const char *csv, size_t csv_len, char *err,
                       size_t errlen);

/* Closes the files and gives the lock back. */
int cmb_results_close(cmb_results *s, char *err, size_t errlen);

/* Appends one CSV row (fields by cmb_col, NULL for "") to a growing buffer. */
int cmb_results_csv_row(char **buf, size_t *len, size_t *cap, const char *const fields[CMB_N_COLS]);

/* A number for the JSON: null when not finite (strict JSON has no NaN). */
json_t *cmb_results_number(double v);

/* --- reading ------------------------------------------------------------------------------- */

/* Called for every row of results.csv: the fields by cmb_col ("" for the
 * columns an older run did not have); `at`: the row's byte offset. A
 * non-zero return stops the walk and is returned. */
typedef int (*cmb_results_row_fn)(const char *const *f, size_t at, void *ctx);

enum {
    CMB_RESULTS_THIS_VERSION = 1, /* the header must be this version's whole header     */
    CMB_RESULTS_TORN_OK = 2       /* a last line without its newline is reported, not refused */
};

/* Reads DIR/results.csv (the C side reads a run it has just written or
 * resumes; tools/cmb_schema.py reads committed .csv.gz runs). Refuses a NUL byte, a header that is not a prefix
 * of schema.def's columns (at least the first thirteen) and a row that
 * does not parse into as many fields as the header. *torn (may be NULL):
 * the offset of a torn last line, or the file's length. 0, the callback's
 * return, or -1 with the reason. */
int cmb_results_read_csv(const char *dir, unsigned flags, cmb_results_row_fn fn, void *ctx, size_t *torn,
                         char *err, size_t errlen);

/* --- recovery (--resume) ----------------------------------------------------------------------- */

typedef struct cmb_results_cases {
    char run_id[128];    /* as the CSV rows carry it ("" when none)        */
    char gpu[96];
    char mode[8];
    char **done;         /* names of finished cases, sorted                 */
    size_t n_done;
    size_t n_failed;     /* finished cases with a failed row                */
    size_t json_dropped; /* JSON entries removed (an unfinished case)       */
    int csv_repaired;    /* a torn or short last case was dropped          */
    int json_repaired;   /* CMB_RESULTS_TORN | CMB_RESULTS_NON_NUMBERS, or 0  */
    json_t *context;     /* results.json's "context": the run's configuration */
} cmb_results_cases;

/* Reads a locked run directory, repairs what an interrupted append can
 * leave (a torn CSV tail and the case before it, a torn JSON tail, JSON
 * entries of a case the CSV does not hold) and fills *c. Anything else
 * that is wrong is refused: 0 or -1 with the reason. */
int cmb_results_recover(const char *dir, cmb_results_cases *c, char *err, size_t errlen);

/* 1 when `name` is a finished case of *c. */
int cmb_results_is_done(const cmb_results_cases *c, const char *name);

void cmb_results_cases_free(cmb_results_cases *c);

/* How cmb_results_parse_json read a document. */
enum {
    CMB_RESULTS_TORN = 1,       /* a torn tail was cut off after the last whole entry */
    CMB_RESULTS_NON_NUMBERS = 2 /* NaN or Infinity (an older run) were read as null  */
};

/* The text of a results.json as recover reads it: the document (strict
 * JSON, a "context" object and a "benchmarks" list whose entries have a
 * run_name), or NULL with why. *how: CMB_RESULTS_TORN | _NON_NUMBERS.
 * The fuzzer's entry point. */
json_t *cmb_results_parse_json(const char *text, size_t len, int *how, char *err, size_t errlen);

#endif /* CMB_RESULTS_H */
