/* wire.h - how a case's child process hands its runs to the parent: one
 * text record per run on a pipe, tab-separated, numbers in %.17g so no
 * precision is lost. A run the child did not finish never arrives, so a
 * crash loses only the case in flight. */
#ifndef CMB_WIRE_H
#define CMB_WIRE_H

#include <stddef.h>

#include "cmb_bench.h"

/* Writes one run; 0 or -1 on a write error. */
int cmb_wire_write_run(int fd, const cmb_bench_run *r);

typedef struct cmb_wire_reader {
    cmb_bench_run *runs;
    size_t n, cap;
    cmb_bench_run cur;
    int in_run;
    char pending[8192]; /* partial line between reads */
    size_t pending_len;
    char error[256];
} cmb_wire_reader;

void cmb_wire_reader_init(cmb_wire_reader *r);
void cmb_wire_reader_free(cmb_wire_reader *r);
/* Feeds raw bytes read from the pipe; 0, or -1 on a malformed record. */
int cmb_wire_feed(cmb_wire_reader *r, const char *data, size_t len);

#endif /* CMB_WIRE_H */
