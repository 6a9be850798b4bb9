/* hostile_allocator.c - a plug-in that breaks the allocator contract
 * (cmb_allocator.h) without crashing, to test that such breaks fail a case
 * with the reason and never reach a program through libcmb_pluggable.
 * Option mode, from the Nth allocation on (option at=N, default 5):
 *   misalign   hands out the upstream's block + 16 (not 256-byte aligned);
 *   duplicate  hands out the previous block again while it is live;
 *   badstats   stats() fills every byte with 0xff (peaks of -1);
 *   ok         passes requests to the upstream.
 * Frees of the pointers it made up are taken back without the upstream. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_plugin.h"

typedef struct state {
    tp_base b;
    void *last; /* the latest block from the upstream, while live */
    size_t last_size; /* its size at the upstream */
    unsigned long extra_refs; /* times `last` was handed out again */
} state;

static cmb_status create(const cmb_config *cfg, cmb_upstream *up, void **out)
{
    return tp_create(cfg, up, sizeof(state), 5, NULL, out);
}

static cmb_status allocate(void *p, size_t size, cmb_stream stream, void **ptr)
{
    state *s = p;
    s->b.n++;
    if (tp_due(&s->b, "duplicate") && s->last) {
        *ptr = s->last;
        s->extra_refs++;
    } else {
        size_t extra = tp_due(&s->b, "misalign") ? 256 : 0;
        cmb_status st = cmb_up_alloc(s->b.up, size + extra, stream, ptr);
        if (st != CMB_OK)
            return st;
        s->last = *ptr;
        s->last_size = size + extra;
        s->extra_refs = 0;
        if (extra)
            *ptr = (char *)*ptr + 16;
    }
    tp_count_alloc(&s->b, size);
    return CMB_OK;
}

/* The upstream's block behind a pointer this plug-in made. */
static void *upstream_block(void *ptr)
{
    return (void *)((uintptr_t)ptr & ~(uintptr_t)255);
}

static cmb_status deallocate(void *p, void *ptr, size_t size, cmb_stream stream)
{
    state *s = p;
    void *block = upstream_block(ptr);
    size_t extra = block != ptr ? 256 : 0;
    tp_count_free(&s->b, size);
    if (block != s->last)
        return cmb_up_free(s->b.up, block, size + extra, stream);
    if (s->extra_refs) {
        s->extra_refs--; /* a duplicate: the block is still live for its other owner */
        return CMB_OK;
    }
    s->last = NULL;
    return cmb_up_free(s->b.up, block, s->last_size, stream);
}

static cmb_status stats(void *p, cmb_alloc_stats *out)
{
    if (tp_due(p, "badstats")) {
        memset(out, 0xff, sizeof *out);
        return CMB_OK;
    }
    return tp_stats(p, out);
}

TP_PLUGIN(CMB_ALLOCATOR_ABI_VERSION, "hostile", "test plug-in that breaks the allocator contract on purpose", stats,
          NULL)
