/* wire.h - what passes between the parent and a case's child process.
 *
 * Parent to child: the case, as one record (the child's --case argument):
 * a "key<TAB>value" line per field of cmb_case_spec, one "param" line per
 * parameter. wire.c holds the one table of the fields; a round trip
 * (tests/test_wire.c) keeps it complete.
 *
 * Child to parent: its runs, one text record per run on a pipe,
 * tab-separated, numbers in %.17g so no precision is lost. A run the child
 * did not finish never arrives, so a crash loses only the case in flight.
 * Between runs, progress records (cmb_case_progress): the parent keeps the
 * latest, for the console only. */
#ifndef CMB_WIRE_H
#define CMB_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "cmb_bench.h"

struct cmb_case_spec;

/* The case's record (malloc'd), or NULL with a one-line reason (a value
 * holds a tab or a newline, or no host memory). */
char *cmb_wire_case_encode(const struct cmb_case_spec *cs, char *err, size_t errlen);

/* Fills *cs from a record: finds the scenario, parses the allocator,
 * checks every parameter against the scenario and rebuilds the name.
 * 0, or -1 with a one-line reason. */
int cmb_wire_case_decode(const char *record, struct cmb_case_spec *cs, char *err, size_t errlen);

/* Writes one run; 0 or -1 on a write error. */
int cmb_wire_write_run(int fd, const cmb_bench_run *r);

/* Writes one progress record: done of total `what`, `seconds` into the
 * loop; 0 or -1 on a write error. */
int cmb_wire_write_progress(int fd, uint64_t done, uint64_t total, double seconds, const char *what);

typedef struct cmb_wire_progress {
    unsigned seq; /* records received; 0: none yet */
    uint64_t done, total;
    double seconds;
    char what[64];
} cmb_wire_progress;

typedef struct cmb_wire_reader {
    cmb_bench_run *runs;
    size_t n, cap;
    cmb_bench_run cur;
    int in_run;
    char pending[8192]; /* partial line between reads */
    size_t pending_len;
    char error[256];
    cmb_wire_progress progress; /* the latest progress record */
} cmb_wire_reader;

void cmb_wire_reader_init(cmb_wire_reader *r);
void cmb_wire_reader_free(cmb_wire_reader *r);
/* Feeds raw bytes read from the pipe; 0, or -1 on a malformed record. */
int cmb_wire_feed(cmb_wire_reader *r, const char *data, size_t len);

#endif /* CMB_WIRE_H */
