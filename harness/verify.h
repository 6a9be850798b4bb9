/* verify.h - checking every block the allocator under test hands out.
 *
 * On in fault-injection runs (--fault) and whenever the environment has
 * CMB_VERIFY=1 (the soaks), off otherwise (it costs time in the measured
 * region). Each allocation that passes through the meters is checked:
 *   verify_misaligned  the pointer is not 256-byte aligned;
 *   verify_outside     the block does not lie inside memory the allocator
 *                      holds from its upstream (policies only);
 *   verify_overlaps    the block overlaps a block that is still live.
 * At the end of each repetition these counters are added to its results,
 * with the case process's host memory after the allocator was destroyed:
 *   host_heap_bytes    bytes held from malloc (glibc mallinfo2: in-use
 *                      chunks + mmapped chunks);
 *   host_heap_growth_bytes
 *                      host_heap_bytes minus the same when the repetition
 *                      began (before the upstream and the allocator were
 *                      created): 0 when the repetition returned all the
 *                      host memory it took (a first repetition may keep a
 *                      cache, e.g. replay's loaded trace);
 *   host_rss_bytes     resident memory (/proc/self/statm), for reference:
 *                      it follows malloc's trimming, not only leaks.
 */
#ifndef CMB_VERIFY_H
#define CMB_VERIFY_H

#include "../allocators/upstream.h"
#include "metered.h"
#include "../scenarios/scenario.h"

typedef struct cmb_verify cmb_verify;

/* 1 when this case's repetitions are checked. */
int cmb_verify_wanted(const cmb_fault_spec *fault);

/* At the very start of a repetition: notes the host heap. */
void cmb_verify_begin(const cmb_fault_spec *fault);

/* Starts checking the traffic through mt (up may be NULL); *v stays NULL
 * when host memory runs out (the case then runs unchecked, with a note). */
void cmb_verify_attach(cmb_verify **v, cmb_metered *mt, const cmb_upstream *up, cmb_case *c);

/* Adds the counters to the case's repetition and frees the checker. */
void cmb_verify_finish(cmb_verify **v, cmb_case *c);

#endif /* CMB_VERIFY_H */
