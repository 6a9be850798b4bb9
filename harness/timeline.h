/* timeline.h - memory over time for one repetition of a case: requested,
 * allocated and reserved bytes (and on a GPU the device's used bytes),
 * sampled at a bounded rate. The picture that explains fragmentation:
 * reserved pulling away from requested.
 *
 * The timeline is an observer of the metered allocator (metered.h). Every
 * operation is counted; every `every`-th one is sampled. When the buffer
 * of max_points samples is full, every other sample is dropped and `every`
 * doubles, so a run of any length keeps between max_points/2 and
 * max_points evenly spaced samples. Apart from them the timeline keeps the
 * points where requested bytes and reserved bytes peaked, and one last
 * point taken at the end, so the peaks and the end state are exact
 * whatever the sampling step. A sample reads the allocator's stats()
 * (cheap by contract); between samples an operation costs a few compares.
 *
 * Reserved bytes between samples are followed exactly for allocators over
 * an upstream (its held bytes); for the others the reserved peak is the
 * highest value seen at a sample. The device's used bytes (GPU) are read
 * at the samples and the end only.
 */
#ifndef CMB_TIMELINE_H
#define CMB_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "metered.h"

#define CMB_TIMELINE_DEFAULT_POINTS 512
#define CMB_TIMELINE_MIN_POINTS 16
#define CMB_TIMELINE_MAX_POINTS (1u << 20)

typedef enum cmb_timeline_kind {
    CMB_TL_SAMPLE = 0,
    CMB_TL_PEAK_REQUESTED,
    CMB_TL_PEAK_RESERVED,
    CMB_TL_END
} cmb_timeline_kind;

/* One point; -1 in a field means the value is unknown (written empty). */
typedef struct cmb_timeline_point {
    uint64_t op;        /* operations (allocs, frees, failed allocs) so far */
    uint64_t t_ns;      /* since the timeline started                        */
    int64_t requested;  /* sum of live request sizes (the meters' count)     */
    int64_t allocated;  /* bytes in live blocks after rounding               */
    int64_t reserved;   /* bytes the allocator holds from its upstream       */
    int64_t largest_free;
    int64_t device_used;
    cmb_timeline_kind kind;
} cmb_timeline_point;

/* --- the segments at moments (timeline_segments.c) ---------------------------------------- *
 * At most CMB_TIMELINE_MOMENTS moments (never more than the samples' bound),
 * evenly spaced by operation and thinned as the samples are, plus the
 * reserved peak and the end: the ranges the allocator holds from its
 * upstream then (cmb_upstream_segments), each with the live blocks inside
 * it (count, bytes asked for, largest free gap), and the largest
 * CMB_TIMELINE_MOMENT_BLOCKS blocks placed in them (offsets). Sizes are the
 * requested sizes the meters keep: rounding shows up as free bytes. A new
 * reserved peak is taken again only after as many operations as the last
 * one cost (segments + blocks), so a run that climbs at every operation
 * stays linear: its moment at the peak may then lie before the peak. */
#define CMB_TIMELINE_MOMENTS 512
#define CMB_TIMELINE_MOMENT_BLOCKS 128
/* The file of a case stays under CMB_TIMELINE_SEGMENTS_FILE_MAX per 512
 * timeline points (--timeline-points asks for detail), at most
 * CMB_TIMELINE_SEGMENTS_FILE_CAP: every k-th sampled moment is written (the
 * peak and the end always), k the smallest power of two that fits. A
 * sweep of hundreds of cases over many segments would otherwise write
 * gigabytes at the default 512 points. */
#define CMB_TIMELINE_SEGMENTS_FILE_MAX ((size_t)1 << 20)
#define CMB_TIMELINE_SEGMENTS_FILE_CAP ((size_t)64 << 20)

typedef struct cmb_timeline_segment {
    uint64_t start, size;
    uint64_t reserved_at; /* the reservation a mapped range lies in; 0: an alloc() */
    uint64_t blocks, covered, largest_free;
} cmb_timeline_segment;

typedef struct cmb_timeline_block {
    uint64_t offset, size;
    uint32_t seg; /* index into the moment's segments */
} cmb_timeline_block;

typedef struct cmb_timeline_moment {
    uint64_t op;
    int64_t requested, reserved;
    uint64_t blocks, outside; /* live blocks; of them, in no segment */
    size_t n_seg, n_kept;
    cmb_timeline_segment *seg;
    cmb_timeline_block *kept; /* the largest, by (segment, offset) */
} cmb_timeline_moment;

typedef struct cmb_timeline_moments {
    cmb_timeline_moment *at;
    size_t n, max;
    size_t file_max; /* bytes of the .segments file (see CMB_TIMELINE_SEGMENTS_FILE_MAX) */
    uint64_t every;
    cmb_timeline_moment peak, end;
    uint64_t peak_cost;
    int have_peak, have_end, failed; /* failed: out of host memory, no more taken */
    /* the walk's buffers, reused from moment to moment */
    struct cmb_upstream_segment *segs;
    size_t segs_cap;
    struct cmb_live_block *live;
    size_t live_cap;
    uint64_t *sizes;
    size_t sizes_cap;
} cmb_timeline_moments;

typedef struct cmb_timeline {
    cmb_timeline_point *samples;
    size_t n, max_points;
    uint64_t every; /* sample each op whose index is a multiple of this */
    uint64_t ops;
    uint64_t t0_ns;
    cmb_timeline_point peak_requested, peak_reserved, end;
    int have_peak_requested, have_peak_reserved, have_end;
    cmb_timeline_moments mo; /* only over an upstream */
} cmb_timeline;

/* 0, or -1 when out of host memory. max_points is clamped to
 * [CMB_TIMELINE_MIN_POINTS, CMB_TIMELINE_MAX_POINTS]. */
int cmb_timeline_init(cmb_timeline *tl, size_t max_points);
void cmb_timeline_free(cmb_timeline *tl);

/* The observer (cmb_observer_fn): pass the timeline as its context. */
void cmb_timeline_observe(void *ctx, cmb_op_kind kind, void *ptr, size_t size, cmb_stream s,
                          const cmb_metered *mt);

/* Takes the end point: call when the measured operations are over. */
void cmb_timeline_finish(cmb_timeline *tl, const cmb_metered *mt);

/* All points (samples, peaks, end) in operation order; returns how many
 * were written to out (at most max_points + 3). */
size_t cmb_timeline_points(const cmb_timeline *tl, cmb_timeline_point *out, size_t cap);

/* Writes dir/<safe case name>.csv (creating dir; through a temporary name
 * and a rename). 0, or -1 with a one-line reason. */
int cmb_timeline_write(const cmb_timeline *tl, const char *dir, const char *case_name, int repetition,
                       char *err, size_t errlen);

/* A case name as a file name: [A-Za-z0-9._-] kept, the rest '_'; a name
 * with a character replaced, or too long for one path component (then cut),
 * ends in '-' and a hash of the whole name, so two cases never share a file. */
void cmb_timeline_file_name(const char *case_name, char *out, size_t len);

const char *cmb_timeline_kind_name(cmb_timeline_kind kind);

/* The segments at moments (timeline_segments.c): set up by
 * cmb_timeline_init, fed by the observer and cmb_timeline_finish, written
 * by cmb_timeline_write as dir/<safe case name>.segments (none without an
 * upstream). */
void cmb_timeline_moments_init(cmb_timeline_moments *mo, size_t max_points);
void cmb_timeline_moments_free(cmb_timeline_moments *mo);
void cmb_timeline_moments_observe(cmb_timeline_moments *mo, uint64_t op, int new_reserved_peak,
                                  const cmb_metered *mt);
void cmb_timeline_moments_finish(cmb_timeline_moments *mo, uint64_t op, const cmb_metered *mt);
/* All moments in operation order (the peak among them, marked by its op
 * equal to peak_op); 0, or -1 with a one-line reason. */
int cmb_timeline_moments_write(const cmb_timeline_moments *mo, const char *path, const char *case_name,
                               uint64_t peak_op, char *err, size_t errlen);

#endif /* CMB_TIMELINE_H */
