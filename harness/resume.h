/* resume.h - continuing an interrupted run: cumembench --resume DIR.
 *
 * A fresh run saves its command line and working directory in DIR/run.args.
 * --resume DIR reads them back, so the same cases are planned (same
 * scenarios, allocators, parameters, seed, mode), skips every case that
 * results.csv records as finished (ok, failed or skipped) and appends the
 * rest to the same results.json, results.csv and run.log.
 *
 * The results store (harness/results.c) takes the directory's lock, then
 * reads and repairs the files (results.h says what it repairs and what it
 * refuses); resume checks that they are this configuration's: the same
 * mode and device, the seed, preset and capacity results.json's context
 * records, and no finished case the command line does not plan.
 */
#ifndef CMB_RESUME_H
#define CMB_RESUME_H

#include <stddef.h>

#include "cli.h"
#include "env.h"
#include "results.h"

struct cmb_output;

/* The finished cases of the run (harness/results.h). */
typedef cmb_results_cases cmb_resume;

/* main(): the command line, for the run.args a fresh run writes. */
void cmb_resume_remember_args(int argc, char **argv);

/* Writes DIR/run.args (temporary name, then rename). 0 or -1 + err. */
int cmb_resume_save_command(const char *dir, char *err, size_t errlen);

/* main(), when --resume DIR was given: replaces *cli with the options DIR
 * was started with (only --quiet and --case-timeout may be given beside
 * --resume), enters the run's working directory and points --out at DIR.
 * 0, or -1 with a one-line reason. */
int cmb_resume_prepare(int argc, char **argv, cmb_cli *cli, char *err, size_t errlen);

/* Frees what cmb_resume_prepare kept (after the run). */
void cmb_resume_release(void);

/* Reads DIR's results through the results store (cmb_results_recover),
 * repairs them as above and fills *r. 0 or -1 + err. */
int cmb_resume_load(cmb_resume *r, const char *dir, char *err, size_t errlen);

/* 1 when the case named `name` finished in the earlier part of the run. */
int cmb_resume_is_done(const cmb_resume *r, const char *name);

void cmb_resume_free(cmb_resume *r);

/* Every finished case must be one that the run's command line (run.args)
 * plans: `names`, the plan's case names (sorted here). 0 or -1 + err. */
int cmb_resume_check_plan(const cmb_resume *r, const char **names, size_t n, const char *dir, char *err,
                          size_t errlen);

/* The run's outputs: a fresh run opens them (and saves run.args); with
 * --resume they are loaded, repaired, checked against this run's mode and
 * device, and reopened for appending. 0 or -1 + err. */
int cmb_resume_open_output(struct cmb_output *out, cmb_resume *r, const cmb_cli *cli, const char *dir,
                           cmb_env *env, const char *mode, char *err, size_t errlen);

#endif /* CMB_RESUME_H */
