/* plan.h - the cases a command line selects: every scenario x parameter
 * set x allocator, each with its spec (what its child process runs) or the
 * reason it is skipped. The parent plans a run; a --child given options
 * instead of a case record plans its one case the same way. */
#ifndef CMB_PLAN_H
#define CMB_PLAN_H

#include "case.h"
#include "cli.h"

typedef struct cmb_planned_case {
    cmb_case_spec spec;
    const cmb_allocator_methods *methods;
    int skip;          /* 1: skipped, reason says why */
    char reason[320];
} cmb_planned_case;

typedef struct cmb_plan {
    cmb_planned_case *cases;
    size_t n, cap;
    size_t n_skipped;
} cmb_plan;

/* What the cases of a plan share besides the command line. */
typedef struct cmb_plan_setting {
    cmb_mode mode;
    uint64_t capacity;        /* each case's --capacity: sim device size, GPU cap (0: none) */
    uint64_t check_capacity;  /* the device scenarios' checks assume */
    const char *out_dir;      /* timelines go to OUT/timelines (NULL: none) */
} cmb_plan_setting;

/* The capacity a case of this mode gets from the command line: the sim
 * default where none is given in sim mode. */
uint64_t cmb_plan_capacity(const cmb_cli *cli, cmb_mode mode);

/* Plans every case. 0, or -1 with a one-line reason (bad input). */
int cmb_plan_build(const cmb_cli *cli, const cmb_plan_setting *set, cmb_plan *p, char *err, size_t errlen);
void cmb_plan_free(cmb_plan *p);

/* The --scenario and --allocator names alone, as cmb_plan_build checks them
 * (--list refuses an unknown one too). 0, or -1 with a one-line reason. */
int cmb_plan_check_names(const cmb_cli *cli, char *err, size_t errlen);

/* One line per distinct allocator skipped for a reason of its own. */
void cmb_plan_print_skipped(const cmb_plan *p, FILE *f);

/* A plan whose every case is skipped: why, one line per distinct reason
 * with its count. The run then writes nothing (no run directory). */
void cmb_plan_print_nothing_runs(const cmb_plan *p, FILE *f);

#endif /* CMB_PLAN_H */
