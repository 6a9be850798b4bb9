/* policy.h - one allocator policy, from the name a user writes to an open
 * instance, for every host that runs one: the runner's case process
 * (harness/instance.c), a multi-GPU rank (scenarios/multi_gpu_rank.c) and a
 * real program (pluggable/pluggable.c). Three steps:
 *
 *   cmb_alloc_spec_parse   the spec as written, resolved once (below);
 *   cmb_policy_methods     its method table (the registry's, or an external
 *                          library's, loaded once and kept);
 *   cmb_policy_open/close  the upstream and the instance for a place (kind,
 *                          device, capacity, faults), and at the end what the
 *                          instance did wrong and left behind.
 *
 * An allocator as named on the command line:
 *
 *     NAME[:key=value[:key=value...]][@UPSTREAM]
 *
 * e.g. "torch-caching:max_split_size=128MiB@vmm", "cub-1g",
 * "external:/path/libmine.so:arena=4GiB", "real:rmm-pool" (allocators/real.h).
 * The registry entry's default
 * options come first, the user's after them (later wins).
 *
 * options[] points into the spec's own optbuf: a copy made by assignment
 * would point into the original. Copy with cmb_alloc_spec_copy.
 */
#ifndef CMB_POLICY_H
#define CMB_POLICY_H

#include "registry.h"
#include "upstream.h"

#define CMB_MAX_ALLOC_OPTIONS 32

typedef struct cmb_alloc_spec {
    char text[512];                      /* as written by the user           */
    char name[128];                      /* registry name or external:FILE    */
    const cmb_allocator_entry *entry;    /* NULL for external                 */
    char external_path[384];             /* for external                      */
    const struct cmb_real_info *real;    /* for real:NAME (allocators/real.h) */
    char unavailable[512];               /* real:NAME that cannot run here: why */
    int has_upstream;                    /* @UPSTREAM was given               */
    cmb_upstream_kind upstream;
    size_t n_options;
    cmb_option options[CMB_MAX_ALLOC_OPTIONS];
    char optbuf[1024];                   /* storage behind options[]          */
} cmb_alloc_spec;

/* Parses and resolves the name (not the options, which the allocator
 * itself checks at create). 0, or -1 with a one-line reason. */
int cmb_alloc_spec_parse(const char *text, cmb_alloc_spec *out, char *err, size_t errlen);

/* dst = src, with dst's options[] pointing into dst's own optbuf. */
void cmb_alloc_spec_copy(cmb_alloc_spec *dst, const cmb_alloc_spec *src);

/* 1 when options[] points into the spec's own optbuf (never a copy's). */
int cmb_alloc_spec_owns_options(const cmb_alloc_spec *s);

/* The canonical spelling used in case names: NAME[:k=v...][@UP]. */
void cmb_alloc_spec_label(const cmb_alloc_spec *s, char *out, size_t outlen);

/* The user's own options as written, "k=v:k=v" without the entry's
 * defaults ("" for none): the results' options column. */
void cmb_alloc_spec_user_options(const cmb_alloc_spec *s, char *out, size_t outlen);

/* "real" (the original library: real:*, the CUDA driver's allocators,
 * CUB, external plug-ins), "emulation" (a policy imitating another
 * library) or "suite" (the suite's own policies): the impl column. */
const char *cmb_alloc_spec_impl(const cmb_alloc_spec *s);

/* --- the method table -------------------------------------------------------------------- */

/* The spec's methods: its registry entry's, or its external library's
 * (dlopened once per path and kept open for the process). NULL with a
 * one-line reason. */
const cmb_allocator_methods *cmb_policy_methods(const cmb_alloc_spec *s, char *err, size_t errlen);

/* The upstream the policy runs over: the spec's @UPSTREAM; else sim where
 * there is no GPU; vmm for policies that need it; cuda. */
cmb_upstream_kind cmb_policy_upstream_kind(const cmb_alloc_spec *s, const cmb_allocator_methods *m, int gpu);

/* --- an instance for a place ----------------------------------------------------------------- */

/* Where an instance runs. `capacity` is the one capacity a user gives, under
 * one name from the command line down: over sim, the simulated device's
 * bytes (0: the default); over cuda or vmm, a cap on what the upstream may
 * hold, a smaller GPU (0: none). */
typedef struct cmb_policy_place {
    cmb_upstream_kind upstream;
    int device;
    int sim;           /* the case runs in sim mode (cmb_config.sim) */
    uint64_t capacity;
    cmb_fault_spec fault;
    /* Called with the open upstream before the allocator is created (the
     * library reads the memory free at creation there); may be NULL. */
    void (*upstream_opened)(void *ctx, cmb_upstream *up);
    void *ctx;
    /* When set, the upstream is a child of this open one (cmb_upstream_
     * open_child: the same memory under its cap) instead of a new one; kind,
     * capacity and fault are the parent's. A second instance beside the
     * first, as a graph's private pool in pluggable/pl_hooks.c. */
    cmb_upstream *parent;
} cmb_policy_place;

typedef struct cmb_policy {
    const cmb_allocator_methods *m;
    cmb_upstream *up; /* NULL for allocators that take no upstream */
    void *state;      /* NULL until created */
} cmb_policy;

/* What closing found. */
typedef struct cmb_policy_end {
    cmb_status destroyed;    /* what the allocator's destroy returned   */
    int had_upstream;
    uint64_t misuse;         /* upstream calls the allocator got wrong  */
    char last_misuse[256];
    uint64_t injected_faults;
    int64_t leaked;          /* bytes the upstream still held; -1: none */
} cmb_policy_end;

/* Opens the upstream (when the allocator takes one) and creates the
 * allocator with the spec's options. On failure nothing stays open and
 * err says why ("creating NAME: ..."); the status says what kind. */
cmb_status cmb_policy_open(const cmb_alloc_spec *s, const cmb_allocator_methods *m, const cmb_policy_place *place,
                           cmb_policy *out, char *err, size_t errlen);

/* Destroys the instance, then closes its upstream, reporting into *end
 * (may be NULL). Safe on a policy that failed to open or was closed. */
void cmb_policy_close(cmb_policy *p, cmb_policy_end *end);

/* Creates and destroys an instance of a built-in policy over a fresh sim
 * upstream: what only create() can judge (a layout trace's contents,
 * options that fit together only there) refused once, before any case
 * runs, instead of failing every case. 0 when create() accepts the spec or
 * the spec cannot be tried here (a plug-in, a real library, a policy that
 * needs a GPU, a create that fails for want of memory); -1 with one line in
 * err ("allocator 'SPEC': reason") when it refuses the options. */
int cmb_policy_try(const cmb_alloc_spec *s, const cmb_allocator_methods *m, char *err, size_t errlen);

#endif /* CMB_POLICY_H */
