/* alloc_spec.h - an allocator as named on the command line:
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
#ifndef CMB_ALLOC_SPEC_H
#define CMB_ALLOC_SPEC_H

#include "../allocators/registry.h"
#include "../allocators/upstream.h"

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

#endif /* CMB_ALLOC_SPEC_H */
