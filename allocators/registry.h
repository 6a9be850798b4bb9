/* registry.h - the allocators the suite knows by name.
 *
 * An entry is a method table plus default options, so a variant such as
 * "cub-1g" (CUB with bins up to 1 GiB) is the same table configured
 * differently. Users' own allocators come in as "external:/path/lib.so".
 */
#ifndef CMB_REGISTRY_H
#define CMB_REGISTRY_H

#include "cmb_allocator.h"

struct cmb_walk; /* common/cmb_assert.h */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmb_allocator_entry {
    const char *name;
    const cmb_allocator_methods *methods;
    const char *default_options; /* "key=value:key=value", or "" */
    const char *summary;         /* overrides methods->summary when set */
    /* The library this entry emulates ("PyTorch CUDACachingAllocator"), or
     * NULL when the entry is itself the real code (the CUDA driver's
     * allocators, CUB, the suite's own policies). An emulation reproduces
     * which memory the original holds, not what a call costs: its time is
     * the policy's bookkeeping, not what the original costs (usually
     * less, not always: docs/real.md), and is labelled so. */
    const char *emulates;
    /* The policy's consistency walk (block lists cover the segments, free
     * lists sorted and coalesced, statistics match a recount), run in any
     * build by cmb_allocator_walk; NULL for allocators without one. */
    int (*walk)(const void *state, struct cmb_walk *w);
} cmb_allocator_entry;

size_t cmb_allocator_count(void);
const cmb_allocator_entry *cmb_allocator_at(size_t i);
const cmb_allocator_entry *cmb_allocator_find(const char *name);

/* Why an allocator cannot run in sim mode, or NULL when it can. */
const char *cmb_allocator_sim_skip_reason(const cmb_allocator_methods *m);

/* "emulation" when the entry imitates another library (emulates != NULL),
 * "suite" for the suite's own policies over an upstream (buddy, cmb), else
 * "real" (the CUDA driver's allocators, CUB); external plug-ins (entry
 * NULL) are "real". */
const char *cmb_allocator_impl(const cmb_allocator_entry *e);

/* Walks the instance's whole structure (block lists cover the segments,
 * free lists sorted and coalesced, statistics match a recount;
 * common/cmb_assert.h) in any build: 0 when every invariant holds, 1 with
 * the first broken one in `why`, -1 when the allocator has no walk (the
 * CUDA allocators, plug-ins). */
int cmb_allocator_walk(const cmb_allocator_methods *m, const void *state, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif

#endif /* CMB_REGISTRY_H */
