/* caseline.h - a case's line on the console. A case's full name
 * ("churn/cuda/n:300/max_size:2MiB/dist:uniform/...") is often over 200
 * columns; the line names the case by its scenario, its allocator and only
 * the parameters that differ between the run's cases of that scenario
 * ("churn cuda max_size:2MiB"; an allocator's options that no other spec
 * of it in the run gives another value are "...": "torch-caching:..."),
 * which with its [k/N] index is unambiguous within the run, and fits its result into CMB_CASELINE_WIDTH columns.
 * The result files always keep the full name; --verbose prints it, and the
 * whole result, on the console too. Console only.
 */
#ifndef CMB_CASELINE_H
#define CMB_CASELINE_H

#include <stddef.h>

#include "plan.h"

#define CMB_CASELINE_WIDTH 120   /* columns of a case line (without --verbose) */
#define CMB_CASELINE_NAME_MAX 64 /* columns of a short name; longer ones lose their middle */
#define CMB_CASELINE_ITEM_SEP "  " /* between a result's items (answer.h) */
#define CMB_CASELINE_INDENT 6      /* the lines after a case line's first */

#define CMB_CASELINE_MAX_PARAMS 512 /* parameters of the run's scenarios told apart */
#define CMB_CASELINE_MAX_ALLOCS 256 /* allocator specs told apart (more: shown whole) */

/* Which parameters take more than one value among a plan's cases (a
 * parameter belongs to one scenario: its cmb_param_spec tells it apart),
 * and the run's distinct allocator specs (an option all the specs of one
 * allocator share is left out of their short names). */
typedef struct cmb_caseline_plan {
    size_t n, n_alloc;
    int alloc_overflow; /* more specs than alloc[] holds: options shown whole */
    struct {
        const void *spec;  /* the cmb_param_spec */
        const char *first; /* its value in the first case that has it */
        int varies;
    } param[CMB_CASELINE_MAX_PARAMS];
    const cmb_alloc_spec *alloc[CMB_CASELINE_MAX_ALLOCS];
} cmb_caseline_plan;

void cmb_caseline_scan(const cmb_plan *p, cmb_caseline_plan *out);

/* The short name of a case of the scanned plan: "scenario allocator k:v
 * ..." with the parameters that vary in the plan and the allocator's
 * options that tell it from the run's other specs of that allocator
 * ("torch-caching:max_split_size_mb=64:..." where it has others), at most
 * CMB_CASELINE_NAME_MAX columns ("..." in the middle of a longer one).
 * Returns 1 when it leaves out anything of the full name. */
int cmb_caseline_name(const cmb_caseline_plan *cp, const cmb_case_spec *cs, char *out, size_t len);

/* `text` cut to `width` columns: its middle replaced by "..." when longer. */
void cmb_caseline_elide(const char *text, size_t width, char *out, size_t len);

/* The result of a case on lines of CMB_CASELINE_WIDTH columns: `result`'s
 * items (separated by CMB_CASELINE_ITEM_SEP; the first is the status word
 * or FAILED: why), then `tail`, as many on a line as fit; the first line
 * has `first_room` columns (the name is before it), the next ones start
 * with CMB_CASELINE_INDENT spaces. An item too long for a line of its own
 * is cut ("..." at its end: the files and --verbose have it whole). */
void cmb_caseline_fit(const char *result, const char *tail, size_t first_room, char *out, size_t len);

/* (cmb_caseline_fit's state) */
typedef struct cmb_caseline_wrap {
    char *out;
    size_t len, used;
    size_t cols, room; /* the current line's columns used, and its room */
} cmb_caseline_wrap;

#endif /* CMB_CASELINE_H */
