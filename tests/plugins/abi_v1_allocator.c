/* abi_v1_allocator.c - a plug-in as it was built for allocator ABI version 1
 * (before cmb_allocator_methods gained `options`): its table has the
 * version-1 layout and exists only for version 1. The suite must still
 * load and run it (tests/test_options.c), reading nothing past its end. */
#include <stdlib.h>
#include <string.h>

#include "allocators/cmb_allocator.h"

/* cmb_allocator_methods of ABI version 1, field for field. */
typedef struct methods_v1 {
    uint32_t abi_version;
    const char *name;
    const char *summary;
    uint32_t flags;
    cmb_status (*create)(const cmb_config *cfg, cmb_upstream *up, void **state);
    cmb_status (*allocate)(void *state, size_t size, cmb_stream stream, void **ptr);
    cmb_status (*deallocate)(void *state, void *ptr, size_t size, cmb_stream stream);
    cmb_status (*trim)(void *state);
    cmb_status (*stats)(void *state, cmb_alloc_stats *out);
    cmb_status (*destroy)(void *state);
    const char *(*last_error)(void *state);
} methods_v1;

static cmb_status v1_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    if (!up || cfg->n_options)
        return CMB_ERR_INVALID; /* it takes no options: create says so, as v1 plug-ins did */
    *state = up;
    return CMB_OK;
}

static cmb_status v1_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    return cmb_up_alloc(state, size, stream, ptr);
}

static cmb_status v1_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    return cmb_up_free(state, ptr, size, stream);
}

static cmb_status v1_stats(void *state, cmb_alloc_stats *out)
{
    (void)state;
    memset(out, 0, sizeof *out);
    return CMB_OK;
}

static cmb_status v1_destroy(void *state)
{
    (void)state;
    return CMB_OK;
}

static const methods_v1 table = {1u, "abi-v1", "a plug-in built for allocator ABI version 1", CMB_ALLOC_USES_UPSTREAM,
                                 v1_create, v1_allocate, v1_deallocate, NULL, v1_stats, v1_destroy, NULL};

__attribute__((visibility("default"))) const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version)
{
    return abi_version == 1u ? (const cmb_allocator_methods *)(const void *)&table : NULL;
}
