/* stream_ordered.c - per-stream free lists in stream order (stream_ordered.h). */
#include "stream_ordered.h"

#include <stdlib.h>
#include <string.h>

#include "../common/cmb_assert.h"

void cmb_so_init(cmb_stream_ordered *so, cmb_upstream *up, const cmb_so_hooks *hooks, void *ctx)
{
    memset(so, 0, sizeof *so);
    so->up = up;
    so->hooks = hooks;
    so->ctx = ctx;
}

cmb_so_list *_cmb_so_list_new(cmb_stream_ordered *so, cmb_stream s)
{
    cmb_assert_internal(so->hooks->list_size >= sizeof(cmb_so_list));
    if (so->n == so->cap) {
        size_t cap = so->cap ? 2 * so->cap : 8;
        cmb_so_list **v = realloc(so->lists, cap * sizeof *v);
        if (!v)
            return NULL;
        so->lists = v;
        so->cap = cap;
    }
    cmb_so_list *l = calloc(1, so->hooks->list_size);
    if (!l)
        return NULL;
    l->stream = s;
    if (so->hooks->list_init)
        so->hooks->list_init(so->ctx, l);
    so->last = so->n;
    so->lists[so->n++] = l;
    return l;
}

/* cudaEventSynchronize: spin on the query until the event completed. */
static cmb_status event_wait(cmb_upstream *up, cmb_event ev)
{
    cmb_status st;
    while ((st = cmb_up_event_query(up, ev)) == CMB_ERR_STATE)
        ;
    return st;
}

cmb_status cmb_so_wait_for(cmb_stream_ordered *so, cmb_so_list *other)
{
    return other->event ? event_wait(so->up, other->event) : CMB_OK;
}

void cmb_so_record_free(cmb_stream_ordered *so, cmb_so_list *l)
{
    if (l->event && cmb_up_event_rerecord(so->up, l->stream, l->event) == CMB_OK)
        return;
    if (!l->event && cmb_up_event_record(so->up, l->stream, &l->event) == CMB_OK)
        return;
    /* no event: make the free complete now, so any stream may reuse it */
    cmb_up_stream_sync(so->up, l->stream);
    if (l->event)
        cmb_up_event_destroy(so->up, l->event);
    l->event = NULL;
}

/* Step 2: a block of another list, without merging. 1 when served. */
static int from_other_list(cmb_stream_ordered *so, cmb_so_list *own, uint64_t size, void **out, cmb_status *st)
{
    const cmb_so_hooks *h = so->hooks;
    for (size_t i = 0; i < so->n; i++) {
        cmb_so_list *o = so->lists[i];
        void *b;
        if (o == own || !(b = h->find(so->ctx, o, size)))
            continue;
        *st = cmb_so_wait_for(so, o);
        if (*st == CMB_OK)
            *out = h->take(so->ctx, o, b, size);
        return 1;
    }
    return 0;
}

/* Step 3: merge whole lists into own until a block fits. 1 when served. */
static int from_merged_lists(cmb_stream_ordered *so, cmb_so_list *own, uint64_t size, void **out, cmb_status *st)
{
    const cmb_so_hooks *h = so->hooks;
    for (size_t i = 0; i < so->n; i++) {
        cmb_so_list *o = so->lists[i];
        if (o == own || h->list_empty(o))
            continue;
        *st = cmb_so_wait_for(so, o);
        if (*st != CMB_OK)
            return 1;
        h->merge(so->ctx, own, o);
        cmb_assert_internal(h->list_empty(o));
        void *b = h->find(so->ctx, own, size);
        if (b) {
            *out = h->take(so->ctx, own, b, size);
            return 1;
        }
    }
    return 0;
}

cmb_status _cmb_so_get_block_slow(cmb_stream_ordered *so, cmb_so_list *own, uint64_t size, void **out)
{
    cmb_status st = CMB_OK;
    if (from_other_list(so, own, size, out, &st) || from_merged_lists(so, own, size, out, &st))
        return st;
    return so->hooks->expand(so->ctx, own, size, out);
}

void cmb_so_destroy(cmb_stream_ordered *so)
{
    for (size_t i = 0; i < so->n; i++) {
        cmb_so_list *l = so->lists[i];
        if (l->event) {
            /* RMM's release(): cudaEventSynchronize, then cudaEventDestroy */
            event_wait(so->up, l->event);
            cmb_up_event_destroy(so->up, l->event);
        }
        if (so->hooks->list_fini)
            so->hooks->list_fini(so->ctx, l);
        free(l);
    }
    free(so->lists);
    so->lists = NULL;
    so->n = so->cap = so->last = 0;
}
