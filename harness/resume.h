/* resume.h - continuing an interrupted run: cumembench --resume DIR.
 *
 * A fresh run saves its command line and working directory in DIR/run.args.
 * --resume DIR reads them back, so the same cases are planned (same
 * scenarios, allocators, parameters, seed, mode), skips every case that
 * results.csv records as finished (ok, failed or skipped) and appends the
 * rest to the same results.json, results.csv and run.log.
 *
 * results.csv is the record of finished cases: the parent writes a case's
 * JSON entries first and its CSV rows after them, each in one write, and a
 * case that was interrupted is not written at all. Before appending,
 * resume repairs what a kill at the worst moment can leave: a CSV line cut
 * short is dropped, and JSON entries of a case the CSV does not hold (the
 * run was killed between the two writes) are removed, so every case ends
 * up in both files exactly once.
 */
#ifndef CMB_RESUME_H
#define CMB_RESUME_H

#include <stddef.h>

#include "cli.h"
#include "env.h"

struct cmb_output;

typedef struct cmb_resume {
    char run_id[128];  /* as the CSV rows carry it ("" when none)        */
    char gpu[96];
    char mode[8];
    char **done;       /* names of finished cases, sorted                 */
    size_t n_done;
    size_t n_failed;   /* finished cases with a failed row                */
    size_t json_dropped; /* JSON entries removed (killed between writes)  */
    int csv_repaired;  /* a torn last CSV line was dropped                */
} cmb_resume;

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

/* Reads DIR's results, repairs them as above and fills *r. 0 or -1 + err. */
int cmb_resume_load(cmb_resume *r, const char *dir, char *err, size_t errlen);

/* 1 when the case named `name` finished in the earlier part of the run. */
int cmb_resume_is_done(const cmb_resume *r, const char *name);

void cmb_resume_free(cmb_resume *r);

/* The run's outputs: a fresh run opens them (and saves run.args); with
 * --resume they are loaded, repaired, checked against this run's mode and
 * device, and reopened for appending. 0 or -1 + err. */
int cmb_resume_open_output(struct cmb_output *out, cmb_resume *r, const cmb_cli *cli, const char *dir,
                           cmb_env *env, const char *mode, char *err, size_t errlen);

#endif /* CMB_RESUME_H */
