/* test_plugin.h - what the test plug-ins that misbehave on purpose share
 * (hostile_allocator.c, misbehaving_allocator.c, hostile_loader.c): a state
 * that begins with the upstream, the mode options and the statistics; its
 * creation with mode= and at= read; the counting of what passes through;
 * stats(), destroy(); and the exported method table. Each plug-in includes
 * it once and keeps only what it does wrong. */
#ifndef CMB_TEST_PLUGIN_H
#define CMB_TEST_PLUGIN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/cmb_allocator.h"

/* The first member of every such plug-in's state. */
typedef struct tp_base {
    cmb_upstream *up;
    char mode[16];       /* option mode: the misbehaviour ("ok": none)       */
    unsigned long at, n; /* option at: from which allocation; allocations so far */
    cmb_alloc_stats st;
} tp_base;

/* A plug-in's own options: 0 when it took `o`. */
typedef int (*tp_option_fn)(void *state, const cmb_option *o);

/* A zeroed state of `size` bytes (a tp_base first) over `up`, mode "ok" from
 * allocation `at`; then mode=, at= and what `more` takes (NULL: nothing
 * else) from the options. Any other key: CMB_ERR_INVALID. */
static inline cmb_status tp_create(const cmb_config *cfg, cmb_upstream *up, size_t size, unsigned long at,
                                   tp_option_fn more, void **out)
{
    tp_base *b = calloc(1, size);
    if (!b)
        return CMB_ERR_HOST_NOMEM;
    b->up = up;
    strcpy(b->mode, "ok");
    b->at = at;
    for (size_t i = 0; i < cfg->n_options; i++) {
        const cmb_option *o = &cfg->options[i];
        if (!strcmp(o->key, "mode"))
            strncpy(b->mode, o->value, sizeof b->mode - 1);
        else if (!strcmp(o->key, "at"))
            b->at = strtoul(o->value, NULL, 10);
        else if (!more || more(b, o)) {
            free(b);
            return CMB_ERR_INVALID;
        }
    }
    *out = b;
    return CMB_OK;
}

/* Misbehaving as `mode`, from allocation `at` on. */
static inline int tp_due(const tp_base *b, const char *mode)
{
    return !strcmp(b->mode, mode) && b->n >= b->at;
}

static inline void tp_count_alloc(tp_base *b, size_t size)
{
    cmb_stat_increase(&b->st.requested, (int64_t)size);
    cmb_stat_increase(&b->st.blocks, 1);
}

static inline void tp_count_free(tp_base *b, size_t size)
{
    cmb_stat_decrease(&b->st.requested, (int64_t)size);
    cmb_stat_decrease(&b->st.blocks, 1);
}

static inline cmb_status tp_stats(void *p, cmb_alloc_stats *out)
{
    const tp_base *b = p;
    *out = b->st;
    out->valid = CMB_STAT_REQUESTED | CMB_STAT_BLOCKS;
    return CMB_OK;
}

static inline cmb_status tp_destroy(void *p)
{
    free(p);
    return CMB_OK;
}

/* The table, over the plug-in's create, allocate and deallocate, and its
 * export, for allocator ABI version `abi` only. */
#define TP_PLUGIN(abi, name_, summary_, stats_, options_)                                                           \
    static const cmb_allocator_methods tp_methods = {                                                               \
        .abi_version = (abi),                                                                                       \
        .name = (name_),                                                                                            \
        .summary = (summary_),                                                                                      \
        .flags = CMB_ALLOC_USES_UPSTREAM,                                                                           \
        .create = create,                                                                                           \
        .allocate = allocate,                                                                                       \
        .deallocate = deallocate,                                                                                   \
        .stats = (stats_),                                                                                          \
        .destroy = tp_destroy,                                                                                      \
        .options = (options_),                                                                                      \
    };                                                                                                              \
    const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version)                                         \
    {                                                                                                               \
        return abi_version == (abi) ? &tp_methods : NULL;                                                           \
    }

#endif /* CMB_TEST_PLUGIN_H */
