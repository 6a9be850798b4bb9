/* spawn.h - running a case (or the GPU probe) in a child process.
 *
 * The child is started with posix_spawn in a process group of its own; its
 * descriptor 3 carries result records, its stdout and stderr are captured
 * (copied to the run's log and kept as a tail for error messages). A child
 * that outlives its timeout, or any child when the user interrupts the run,
 * is killed with its whole group. */
#ifndef CMB_SPAWN_H
#define CMB_SPAWN_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

typedef struct cmb_child_result {
    int ok;          /* exited with status 0                          */
    int exited;
    int exit_code;
    int signaled;
    int signal_no;
    int timed_out;
    int interrupted; /* the run was interrupted (SIGINT / SIGTERM)     */
    double seconds;
    int pipes_held;  /* the child ended, a process it left held its pipes */
    char tail[1536]; /* end of the child's stdout + stderr             */
} cmb_child_result;

/* How long output is still read after the child has ended. */
#define CMB_SPAWN_DRAIN_S 2.0

typedef void (*cmb_spawn_data_fn)(void *ctx, const char *data, size_t len);

/* A bounded buffer that collects a child's output (a cmb_spawn_data_fn
 * with a cmb_spawn_buffer as its context); what does not fit is dropped. */
typedef struct cmb_spawn_buffer {
    char *data;
    size_t cap; /* including the terminating NUL */
    size_t len;
} cmb_spawn_buffer;
void cmb_spawn_buffer_append(void *ctx, const char *data, size_t len);

/* In a process started by cmb_spawn (a case, a probe, a holder): die with
 * the parent, even one killed by SIGKILL (PR_SET_PDEATHSIG; a parent
 * already gone is seen through getppid). Call first thing in main. */
void cmb_spawn_die_with_parent(void);

/* Set by the parent's SIGINT/SIGTERM handler (cmb_spawn_install_signals). */
extern volatile sig_atomic_t cmb_interrupted;
void cmb_spawn_install_signals(void);

/* Runs argv[0] with argv; returns 0 when the child could be started (its
 * fate is in *res), -1 when it could not. */
int cmb_spawn_run(char *const argv[], double timeout_s, cmb_spawn_data_fn result_fn, void *result_ctx,
                  cmb_spawn_data_fn out_fn, void *out_ctx, FILE *log, cmb_child_result *res);

/* "exit status 3", "killed by signal 11 (Segmentation fault)", "timed out
 * after 600 s", "interrupted" */
void cmb_child_result_describe(const cmb_child_result *res, char *out, size_t len);

#endif /* CMB_SPAWN_H */
