/* verify.h - checking every block the allocator under test hands out.
 *
 * On in fault-injection runs (--fault) and whenever the environment has
 * CMB_VERIFY=1 (the soaks), off otherwise (it costs time in the measured
 * region). Each allocation that passes through the meters is checked:
 *   verify_misaligned  the pointer is not 256-byte aligned;
 *   verify_outside     the block does not lie inside memory the allocator
 *                      holds from its upstream (policies only);
 *   verify_overlaps    the block overlaps a block that is still live;
 * and the allocator's statistics are checked where the harness reads them
 * (harness/metered.c: a negative count, a peak below its current value).
 * Any of these breaks the allocator contract: the repetition fails with
 * the counts and the first impossible statistic as its reason.
 * Every instance of a repetition is checked, the case's own and each fresh
 * trial instance (harness/instance.h), each against its own live blocks
 * and upstream. At the end of the repetition the findings of all of them
 * are added to its results, with the case process's host memory after the
 * allocator was destroyed:
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

/* What the instances of a repetition showed, summed. */
typedef struct cmb_verify_counts {
    uint64_t instances;      /* instances checked (0: nothing to report) */
    uint64_t overlaps, misaligned, outside;
    uint64_t impossible_stats; /* statistics that cannot be true (metered.h) */
    char impossible_why[160];  /* the first one's reason                  */
    int out_of_memory;       /* some blocks went unchecked               */
} cmb_verify_counts;

/* 1 when this case's repetitions are checked. */
int cmb_verify_wanted(const cmb_fault_spec *fault);

/* At the very start of a repetition: notes the host heap. */
void cmb_verify_begin(const cmb_fault_spec *fault);

/* Starts checking the traffic through mt (up may be NULL); NULL when
 * host memory or an observer slot runs out (the instance then runs
 * unchecked, with a note on the case). */
cmb_verify *cmb_verify_attach(cmb_metered *mt, const cmb_upstream *up, cmb_case *c);

/* Adds v's findings to *sum and frees it (NULL: nothing). */
void cmb_verify_detach(cmb_verify *v, cmb_verify_counts *sum);

/* The repetition's counters and notes from *sum (nothing when no
 * instance was checked), and the host memory now. */
void cmb_verify_report(const cmb_verify_counts *sum, cmb_case *c);

#endif /* CMB_VERIFY_H */
