/* schema.h - the columns of results.csv (harness/schema.def). */
#ifndef CMB_SCHEMA_H
#define CMB_SCHEMA_H

#include <stddef.h>

typedef enum cmb_col {
#define CMB_COLUMN(id, name, doc) CMB_COL_##id,
#include "schema.def"
#undef CMB_COLUMN
    CMB_N_COLS
} cmb_col;

/* The columns every results.csv has had (later ones were appended). */
#define CMB_FIRST_COLS 13

/* "run_id,gpu,...\n": the first line of every results.csv. */
extern const char *const cmb_csv_header;
extern const size_t cmb_csv_header_len;

/* A column's name ("allocator"), or NULL past the last. */
const char *cmb_col_name(int col);

/* Status values of the status column. */
#define CMB_STATUS_OK "ok"
#define CMB_STATUS_OOM "oom"
#define CMB_STATUS_FAILED "failed"
#define CMB_STATUS_SKIPPED "skipped"

/* A repetition whose workload did not fit (cmb_case_set_oom) carries this
 * counter, the number of allocations that failed; its rows get status oom
 * and the error column says "did not fit: N allocations failed". */
#define CMB_OOM_COUNTER "did_not_fit_allocs"
void cmb_oom_message(double n_failed, char *out, size_t len);

#endif /* CMB_SCHEMA_H */
