/* trace_file.h - traces for tests, written by the suite's own writer
 * (traces/trace_writer.c): a test's trace is then the format every recorder
 * writes and the reader reads. Block ids are the test's own numbers. */
#ifndef CMB_TEST_TRACE_FILE_H
#define CMB_TEST_TRACE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "traces/trace.h"

typedef struct cmb_test_trace {
    cmb_trace_writer w;
    char path[512];
} cmb_test_trace;

/* Opens a fresh file in the test's temporary directory (cmb_test_tmpdir). */
void cmb_test_trace_open(cmb_test_trace *t);
void cmb_test_trace_alloc(cmb_test_trace *t, uint64_t id, uint64_t size, int stream);
void cmb_test_trace_free(cmb_test_trace *t, uint64_t id, int stream);
/* Writes the file into place; its path (t's own). */
const char *cmb_test_trace_close(cmb_test_trace *t);

/* A trace of events written as "a ID SIZE STREAM" and "f ID STREAM"; its
 * path, copied into buf. */
const char *cmb_test_trace_of(char *buf, size_t len, const char *const *ev, size_t n);

#endif /* CMB_TEST_TRACE_FILE_H */
