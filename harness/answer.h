/* answer.h - what a run found, said first: each case's console line leads
 * with its scenario's answer (scenario.h: cmb_headline), and the run ends
 * with an answer table per scenario (best for memory, best for time on a
 * GPU among real allocators, what did not fit) and where to look next.
 * plots/cmb_report/analysis.py computes the same answers for the report.
 */
#ifndef CMB_ANSWER_H
#define CMB_ANSWER_H

#include <stddef.h>
#include <stdio.h>

#include "../scenarios/scenario.h"
#include "cmb_bench.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a time measured in sim mode is, said beside it wherever it is printed. */
#define CMB_ANSWER_SIM_TIME "sim bookkeeping"

/* The headline items of a case (after its status word), from `r`, the
 * median over its repetitions; items whose counters `r` lacks are left
 * out. time_s: the case's time. time_label (NULL: none): said after every
 * item that shows a time ("time 146 us (sim bookkeeping)"). */
void cmb_answer_items(const cmb_scenario *s, const cmb_bench_run *r, double time_s, const char *time_label,
                      char *out, size_t len);

/* A finished case's status word: the scenario's (replay: "fits") or "ok". */
const char *cmb_answer_ok_word(const cmb_scenario *s);

/* Reads DIR/results.csv (every case of the run, a resumed run's earlier
 * ones included) and prints the answer table and where to look next to
 * `out`; `resumed`: first the counts of the whole run, which the session's
 * own summary line does not cover. When no case ran, it says why instead,
 * grouped by reason. Returns 0 when some case ran, 1 when none did, -1
 * (with a line on `out`) when the file cannot be read. */
int cmb_answer_table(const char *dir, int resumed, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* CMB_ANSWER_H */
