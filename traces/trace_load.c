/* trace_load.c - a whole trace in memory, packed, for the replays that run
 * it many times (the replay scenario, `cumembench tune`): the events, their
 * streams in order of first use (folded past CMB_TRACE_MAX_STREAMS), and
 * the peak of live requested bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

/* --- the events ------------------------------------------------------------------- */

static int push(cmb_trace_loaded *t, const cmb_trace_packed *e)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4096;
        cmb_trace_packed *grown = realloc(t->ev, cap * sizeof *grown);
        if (!grown)
            return -1;
        t->ev = grown;
        t->cap = cap;
    }
    t->ev[t->n++] = *e;
    return 0;
}

/* The index of a recorded stream: new ones in order of first use, then
 * folded onto the first CMB_TRACE_MAX_STREAMS. */
static int stream_index(cmb_trace_loaded *t, int64_t *seen, int64_t stream)
{
    if (stream < 0)
        return -1;
    for (int i = 0; i < t->streams; i++)
        if (seen[i] == stream)
            return i;
    if (t->streams < CMB_TRACE_MAX_STREAMS) {
        seen[t->streams] = stream;
        return t->streams++;
    }
    t->folded_streams = 1;
    return (int)(stream % CMB_TRACE_MAX_STREAMS);
}

static void count_live(cmb_trace_loaded *t, uint64_t *live, const cmb_trace_event *ev)
{
    if (ev->op == CMB_TRACE_ALLOC)
        *live += ev->size;
    else if (ev->op == CMB_TRACE_FREE)
        *live -= ev->size;
    if (*live > t->peak_requested)
        t->peak_requested = *live;
}

/* --- load / unload ------------------------------------------------------------------ */

int cmb_trace_load(cmb_trace_loaded *t, const char *path, char *err, size_t errlen)
{
    cmb_trace_reader r;
    cmb_trace_event ev;
    int64_t seen[CMB_TRACE_MAX_STREAMS];
    uint64_t live = 0;
    int rc;
    memset(t, 0, sizeof *t);
    if (cmb_trace_open(&r, path, err, errlen))
        return -1;
    while ((rc = cmb_trace_next(&r, &ev, err, errlen)) == 1) {
        cmb_trace_packed p = {(uint8_t)ev.op, 0, ev.slot, ev.size};
        p.stream = (int8_t)(ev.op == CMB_TRACE_SYNC && ev.stream < 0 ? -1 : stream_index(t, seen, ev.stream));
        count_live(t, &live, &ev);
        if (push(t, &p)) {
            snprintf(err, errlen, "%s: host out of memory", path);
            rc = -1;
            break;
        }
    }
    t->counts = r.counts;
    t->slots = r.n_slots;
    cmb_trace_close(&r);
    if (rc < 0)
        cmb_trace_unload(t);
    return rc < 0 ? -1 : 0;
}

void cmb_trace_unload(cmb_trace_loaded *t)
{
    free(t->ev);
    memset(t, 0, sizeof *t);
}
