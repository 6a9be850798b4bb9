/* instance.h - one instance of the allocator under test, with everything
 * the harness attaches to it.
 *
 * A case's repetition runs on one instance, and a scenario may run trials
 * on fresh ones (cmb_case_with_fresh_allocator: batch-sweep's batches,
 * stream-async's trials, replay's capacity search). Each is opened here,
 * in one place, with the same attachments:
 *   upstream    its own, with the case's fault injection (--fault) and
 *               capacity (sim: the device's size; GPU: a cap);
 *   meters      statistics and latencies of every call (metered.h);
 *   verifier    overlap, alignment and containment of every block, when
 *               the case is checked (--fault, CMB_VERIFY=1; verify.h);
 *   timeline    memory over time, when the config asks (the case's own
 *               instance, first repetition; timeline.h);
 *   recorder    the traffic as a trace, when the config asks (--record-trace).
 * cmb_instance_close takes them apart in reverse order, so no path builds
 * an instance without its checks or forgets one at the end.
 */
#ifndef CMB_INSTANCE_H
#define CMB_INSTANCE_H

#include "../allocators/upstream.h"
#include "../traces/trace.h"
#include "case.h"
#include "metered.h"
#include "timeline.h"
#include "verify.h"

#define CMB_MAX_STREAMS 16

typedef struct cmb_instance_config {
    const cmb_case_spec *spec;      /* allocator, mode, device, fault, seed, name */
    const cmb_allocator_methods *m;
    cmb_upstream_kind up_kind;
    uint64_t capacity;              /* device bytes for the scenario and a sim
                                       upstream; 0 on a GPU: the free memory,
                                       at most cap_bytes                        */
    uint64_t cap_bytes;             /* cap of a real upstream (0: none)          */
    size_t latency_samples;
    int timeline;                   /* record spec's timeline                    */
    int record_trace;               /* write spec's --record-trace file          */
    const cmb_stream *streams;      /* the case's streams, for the trace's
                                       stream numbers (CMB_MAX_STREAMS)          */
} cmb_instance_config;

typedef struct cmb_instance {
    const cmb_allocator_methods *m;
    cmb_upstream *up;               /* NULL for allocators without an upstream  */
    void *state;
    int have_state;
    cmb_metered mt;
    int have_mt;
    uint64_t capacity;              /* as cmb_case_capacity reports it          */
    uint64_t free_at_start;         /* GPU: free device memory before opening   */
    uint64_t t0_ns;                 /* opened at (trace times count from here)  */
    cmb_verify *verify;
    cmb_timeline *timeline;
    cmb_trace_writer *recorder;
    const cmb_instance_config *cfg;
} cmb_instance;

/* What closing found. */
typedef struct cmb_instance_end {
    uint64_t unfreed;               /* live blocks that could not be freed      */
    cmb_status destroyed;           /* what the allocator's destroy returned    */
    int had_upstream;
    uint64_t misuse;                /* upstream calls the allocator got wrong   */
    uint64_t injected_faults;
    char last_misuse[256];
    int64_t leaked;                 /* bytes the upstream still held; -1: none  */
} cmb_instance_end;

/* Opens the upstream, creates the allocator and attaches the rest. On
 * failure the instance is closed again and the reason is in err (the
 * status says what kind). */
cmb_status cmb_instance_open(cmb_instance *in, const cmb_instance_config *cfg, cmb_case *c, char *err,
                             size_t errlen);

/* The traffic is over: writes the timeline and closes the trace (what
 * the harness frees afterwards is not the program's traffic). Idempotent;
 * cmb_instance_close does it too. */
void cmb_instance_stop_observing(cmb_instance *in, cmb_case *c);

/* Frees the blocks still live (unless keep_live) on stream s, destroys
 * the allocator, closes the upstream (*end says what it found), frees the
 * meters and adds the verifier's findings to *verified. */
void cmb_instance_close(cmb_instance *in, cmb_case *c, int keep_live, cmb_stream s, cmb_verify_counts *verified,
                        cmb_instance_end *end);

/* Index of a stream among the case's (0 when it is not one of them). */
int64_t cmb_instance_stream_index(const cmb_instance *in, cmb_stream s);

#endif /* CMB_INSTANCE_H */
