/* progress.h - the console while a run goes on: the running case's own
 * progress (its child's progress records, wire.h) and the time left,
 * estimated from the cases that finished. Console only: results never see
 * it. */
#ifndef CMB_PROGRESS_H
#define CMB_PROGRESS_H

#include <stddef.h>
#include <stdio.h>

#include "wire.h"

/* --- the time left ------------------------------------------------------------------------------ */

typedef struct cmb_eta_case {
    const void *group; /* cases of one group take alike (the scenario) */
    double seconds;    /* finished: its time; < 0: not finished        */
} cmb_eta_case;

/* Seconds left: each unfinished case at the mean time of the finished
 * cases of its group (of all finished cases when its group has none yet; 0
 * when none has finished). The case under way (index `running`, n: none)
 * counts `running_left` when that is known (>= 0, from its progress), else
 * its estimate less the `running_s` it has run, at least 0. */
double cmb_eta_left(const cmb_eta_case *cases, size_t n, size_t running, double running_s, double running_left);

/* The running case's time left from its progress: (total - done) at the
 * loop's rate so far; -1 when it cannot tell. */
double cmb_progress_left(const cmb_wire_progress *p);

/* --- the console line --------------------------------------------------------------------------- */

typedef struct cmb_progress_view {
    FILE *out;
    int tty;          /* rewrite one line (\r); else a line every every_s */
    double every_s;
    double last_shown;
    int shown;        /* a progress line went out for this case */
    unsigned seen;    /* the records shown (cmb_wire_progress.seq) */
    char prefix[560]; /* "[3/8] replay bfc" (the case line's; --verbose: the full name) */
    char label[160];  /* "[3/8] replay bfc" (the progress line's: the short name)        */
    /* the run's cases, for its time left (NULL: not shown) */
    const cmb_eta_case *eta;
    size_t eta_n, running;
    double case_t0;
} cmb_progress_view;

void cmb_progress_view_init(cmb_progress_view *v, FILE *out);
/* A case starts: prints its prefix ("[3/8] name "; on a terminal the
 * short label until the result); its progress lines lead with `label`;
 * `running` indexes it in v->eta. */
void cmb_progress_case_start(cmb_progress_view *v, const char *prefix, const char *label, size_t running);
/* Shows p when it is new (and, off a terminal, every_s after the last). */
void cmb_progress_show(cmb_progress_view *v, const cmb_wire_progress *p);
/* The case ended: its result line goes after the prefix again. */
void cmb_progress_case_end(cmb_progress_view *v);

/* "3.2M/10.0M events, 1.1M/s, ~6 s left" */
void cmb_progress_format(const cmb_wire_progress *p, char *out, size_t len);

#endif /* CMB_PROGRESS_H */
