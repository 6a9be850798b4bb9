/* cmb_layout.h - a layout planned ahead from a recorded trace: every
 * allocation of the recording at a fixed offset in one range, no two blocks
 * whose lifetimes overlap sharing a byte (STAlloc's offline planning, Huang
 * et al., EuroSys'26, arXiv:2507.16274; here a greedy first fit, below).
 * `cmb:layout=TRACE` serves a program's requests from it when they repeat
 * the recording (docs/cmb.md, "A layout planned from a recording").
 */
#ifndef CMB_LAYOUT_H
#define CMB_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "../traces/trace.h"

typedef struct cmb_layout {
    uint64_t *size;      /* per allocation of the recording, in its order: rounded bytes */
    uint64_t *off;       /* its offset in the range                                     */
    size_t n;            /* allocations                                                  */
    uint64_t top;        /* the range's end: the highest offset + size                    */
    uint64_t peak;       /* the recording's peak of live rounded bytes                    */
    const char *order;   /* the greedy order that gave the lowest top                     */
} cmb_layout;

/* Lays out the allocations of a loaded trace with requests rounded up to
 * `round` bytes (a power of two). Blocks still live at the trace's end are
 * taken to live to its end. 0, or -1 with the reason in err (host memory). */
int cmb_layout_plan(cmb_layout *l, const cmb_trace_loaded *t, uint64_t round, char *err, size_t errlen);
/* Loads the trace at path and lays it out; -1 with "PATH: reason" in err. */
int cmb_layout_from_trace(cmb_layout *l, const char *path, uint64_t round, char *err, size_t errlen);
void cmb_layout_free(cmb_layout *l);

/* The layout of the trace at path, shared by the instances of a process
 * that name the same file unchanged (the replay's capacity search creates
 * an instance per trial; a layout takes up to seconds). Release each with
 * cmb_layout_put. NULL with "PATH: reason" in err. Thread-safe. */
const cmb_layout *cmb_layout_get(const char *path, uint64_t round, char *err, size_t errlen);
void cmb_layout_put(const cmb_layout *l);

#endif /* CMB_LAYOUT_H */
