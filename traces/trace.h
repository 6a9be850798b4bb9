/* trace.h - reading and writing allocation traces.
 *
 * Two input formats, detected from the first line: the suite's own
 * (traces/FORMAT.md) and RMM's logging_resource_adaptor CSV. Reading is
 * streaming, with the line number of every error; block ids and pointers
 * are turned into dense slots (a slot is reused after its block is freed),
 * so a replay needs an array, not a hash map, per event.
 */
#ifndef CMB_TRACE_H
#define CMB_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "../common/cmb_hashmap.h"

typedef enum cmb_trace_format { CMB_TRACE_SUITE = 0, CMB_TRACE_RMM_CSV = 1 } cmb_trace_format;
typedef enum cmb_trace_op { CMB_TRACE_ALLOC = 0, CMB_TRACE_FREE = 1, CMB_TRACE_SYNC = 2 } cmb_trace_op;

#define CMB_TRACE_MAX_SIZE (1ull << 48)

typedef struct cmb_trace_event {
    cmb_trace_op op;
    uint32_t slot;   /* dense block slot (alloc, free)                   */
    uint64_t size;   /* alloc: requested bytes; free: the block's size   */
    int64_t stream;  /* as recorded (RMM: the stream handle value)       */
    int64_t t_ns;    /* -1 when unknown                                  */
} cmb_trace_event;

typedef struct cmb_trace_counts {
    uint64_t lines, events, allocs, frees, syncs;
    uint64_t skipped_failures;   /* RMM "allocate failure" lines         */
    uint64_t unknown_frees;      /* RMM frees of never-allocated pointers */
    uint64_t max_live_slots;
} cmb_trace_counts;

typedef struct cmb_trace_reader {
    FILE *f;
    char path[512];
    cmb_trace_format format;
    uint64_t line;
    char *buf;
    size_t cap;
    cmb_hashmap key_to_slot; /* id (suite) or pointer (RMM), +1, -> slot+1 */
    uint64_t *slot_size;     /* size of the block in each slot            */
    uint32_t *free_slots;    /* stack of reusable slots                   */
    uint32_t n_free_slots, n_slots, cap_slots;
    int64_t last_t;
    int64_t rmm_t0;          /* first RMM timestamp, for relative times    */
    int64_t rmm_day;         /* days added after midnight wrap-arounds    */
    int64_t rmm_prev;
    cmb_trace_counts counts;
} cmb_trace_reader;

/* Opens and checks the header; -1 with "FILE:LINE: reason" in err. */
int cmb_trace_open(cmb_trace_reader *r, const char *path, char *err, size_t errlen);
/* 1 with an event, 0 at the end, -1 with "FILE:LINE: reason". */
int cmb_trace_next(cmb_trace_reader *r, cmb_trace_event *ev, char *err, size_t errlen);
void cmb_trace_close(cmb_trace_reader *r);

/* --- a whole trace in memory (traces/trace_load.c) ------------------------------- */

/* A replay keeps this many streams; the others fold onto them
 * (stream % CMB_TRACE_MAX_STREAMS) and share their handles. */
#define CMB_TRACE_MAX_STREAMS 16

/* One event, packed: 16 bytes, so large traces stay in memory. */
typedef struct cmb_trace_packed {
    uint8_t op;     /* cmb_trace_op */
    int8_t stream;  /* stream index in order of first use, -1 = device */
    uint32_t slot;
    uint64_t size;
} cmb_trace_packed;

typedef struct cmb_trace_loaded {
    cmb_trace_packed *ev;
    size_t n, cap;
    uint32_t slots;           /* slots the events use (the reader's n_slots)         */
    int streams;              /* distinct streams kept, at most CMB_TRACE_MAX_STREAMS */
    int folded_streams;       /* more were recorded: the extra ones share handles   */
    uint64_t peak_requested;  /* the most requested bytes live at once             */
    cmb_trace_counts counts;
} cmb_trace_loaded;

/* Reads every event of PATH (either format); 0, or -1 with "FILE:LINE: reason"
 * in err and nothing held. */
int cmb_trace_load(cmb_trace_loaded *t, const char *path, char *err, size_t errlen);
void cmb_trace_unload(cmb_trace_loaded *t);

/* --- writing (the suite's format) -------------------------------------------- */

typedef struct cmb_trace_writer {
    FILE *f;
    char path[512];
    char tmp[520];
    uint64_t next_id;
    cmb_hashmap ptr_to_id;
    int failed;
} cmb_trace_writer;

int cmb_trace_writer_open(cmb_trace_writer *w, const char *path, const char *comment, char *err, size_t errlen);
void cmb_trace_write_alloc(cmb_trace_writer *w, const void *ptr, uint64_t size, int64_t stream, int64_t t_ns);
void cmb_trace_write_free(cmb_trace_writer *w, const void *ptr, int64_t stream, int64_t t_ns);
void cmb_trace_write_sync(cmb_trace_writer *w, int64_t stream, int64_t t_ns);
/* Writes the file into place (temporary name, then rename). 0 or -1. */
int cmb_trace_writer_close(cmb_trace_writer *w, char *err, size_t errlen);

#endif /* CMB_TRACE_H */
