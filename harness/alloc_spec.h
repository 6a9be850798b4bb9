/* alloc_spec.h - an allocator as named on the command line:
 *
 *     NAME[:key=value[:key=value...]][@UPSTREAM]
 *
 * e.g. "torch-caching:max_split_size=128MiB@vmm", "cub-1g",
 * "external:/path/libmine.so:arena=4GiB", "real:rmm-pool" (allocators/real.h).
 * The registry entry's default
 * options come first, the user's after them (later wins).
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

/* The canonical spelling used in case names: NAME[:k=v...][@UP]. */
void cmb_alloc_spec_label(const cmb_alloc_spec *s, char *out, size_t outlen);

#endif /* CMB_ALLOC_SPEC_H */
