/* runner.h - running a whole selection of cases (parent) or one case (child). */
#ifndef CMB_RUNNER_H
#define CMB_RUNNER_H

#include "cli.h"

/* Exit status: 0 all cases ran, 1 some failed, 2 bad input, 130 interrupted. */
int cmb_run(const cmb_cli *cli, const char *argv0);
int cmb_run_child(const cmb_cli *cli);

#endif /* CMB_RUNNER_H */
