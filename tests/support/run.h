/* run.h - running the cumembench binary from tests (CMB_BIN, set by CTest). */
#ifndef CMB_TEST_RUN_H
#define CMB_TEST_RUN_H

#include <stddef.h>

/* Runs `$CMB_BIN <args>` through /bin/sh with stdout and stderr captured
 * into out; returns the exit status (or -1). */
int cmb_test_run(const char *args, char *out, size_t outlen);
/* Same for any shell command line. */
int cmb_test_sh(const char *cmd, char *out, size_t outlen);
/* A fresh empty temporary directory under $TMPDIR (static buffer), removed
 * when the test exits unless CMB_TEST_KEEP=1. */
const char *cmb_test_tmpdir(void);
/* The source tree (CMB_SRC). */
const char *cmb_test_src(void);
/* 1 when path exists. */
int cmb_test_exists(const char *path);
/* The PyTorch sample traces cmb is checked on: the two it was designed on,
 * then the two recorded later (a convnet, an LLM decode loop). */
#define CMB_TEST_TORCH_TRACES 4
extern const char *const cmb_test_torch_traces[CMB_TEST_TORCH_TRACES];
/* path = CMB_SRC/traces/samples/NAME; 1 when it exists. */
int cmb_test_sample(const char *name, char *path, size_t pathlen);

#endif /* CMB_TEST_RUN_H */
