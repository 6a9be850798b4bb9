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

#include "allocators/cmb_allocator.h"

typedef struct state {
    cmb_upstream *up;
    char mode[16];
    unsigned long at, n;
    void *last; /* the latest block from the upstream, while live */
    size_t last_size; /* its size at the upstream */
    unsigned long extra_refs; /* times `last` was handed out again */
    cmb_alloc_stats st;
} state;

static cmb_status create(const cmb_config *cfg, cmb_upstream *up, void **out)
{
    state *s = calloc(1, sizeof *s);
    if (!s)
        return CMB_ERR_HOST_NOMEM;
    s->up = up;
    strcpy(s->mode, "ok");
    s->at = 5;
    for (size_t i = 0; i < cfg->n_options; i++) {
        if (!strcmp(cfg->options[i].key, "mode"))
            strncpy(s->mode, cfg->options[i].value, sizeof s->mode - 1);
        else if (!strcmp(cfg->options[i].key, "at"))
            s->at = strtoul(cfg->options[i].value, NULL, 10);
        else {
            free(s);
            return CMB_ERR_INVALID;
        }
    }
    *out = s;
    return CMB_OK;
}

static int due(const state *s, const char *mode)
{
    return !strcmp(s->mode, mode) && s->n >= s->at;
}

static cmb_status allocate(void *p, size_t size, cmb_stream stream, void **ptr)
{
    state *s = p;
    s->n++;
    if (due(s, "duplicate") && s->last) {
        *ptr = s->last;
        s->extra_refs++;
    } else {
        size_t extra = due(s, "misalign") ? 256 : 0;
        cmb_status st = cmb_up_alloc(s->up, size + extra, stream, ptr);
        if (st != CMB_OK)
            return st;
        s->last = *ptr;
        s->last_size = size + extra;
        s->extra_refs = 0;
        if (extra)
            *ptr = (char *)*ptr + 16;
    }
    cmb_stat_increase(&s->st.requested, (int64_t)size);
    cmb_stat_increase(&s->st.blocks, 1);
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
    cmb_stat_decrease(&s->st.requested, (int64_t)size);
    cmb_stat_decrease(&s->st.blocks, 1);
    if (block != s->last)
        return cmb_up_free(s->up, block, size + extra, stream);
    if (s->extra_refs) {
        s->extra_refs--; /* a duplicate: the block is still live for its other owner */
        return CMB_OK;
    }
    s->last = NULL;
    return cmb_up_free(s->up, block, s->last_size, stream);
}

static cmb_status stats(void *p, cmb_alloc_stats *out)
{
    state *s = p;
    if (due(s, "badstats")) {
        memset(out, 0xff, sizeof *out);
        return CMB_OK;
    }
    *out = s->st;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_BLOCKS;
    return CMB_OK;
}

static cmb_status destroy(void *p)
{
    free(p);
    return CMB_OK;
}

static const cmb_allocator_methods methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = "hostile",
    .summary = "test plug-in that breaks the allocator contract on purpose",
    .flags = CMB_ALLOC_USES_UPSTREAM,
    .create = create,
    .allocate = allocate,
    .deallocate = deallocate,
    .stats = stats,
    .destroy = destroy,
};

const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version)
{
    return abi_version == CMB_ALLOCATOR_ABI_VERSION ? &methods : NULL;
}
