/* abi_v2_allocator.c - a plug-in as it was built for allocator ABI version 2
 * (before cmb_allocator_methods gained `free_account`): its table ends with
 * `options` and exists only for version 2. The suite must still load and
 * run it (tests/test_options.c), reading nothing past its end. */
#include <stdlib.h>
#include <string.h>

#include "allocators/cmb_allocator.h"

/* cmb_allocator_methods of ABI version 2, field for field. */
typedef struct methods_v2 {
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
    const cmb_option_decl *options;
} methods_v2;

static cmb_status v2_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    (void)cfg;
    if (!up)
        return CMB_ERR_INVALID;
    *state = up;
    return CMB_OK;
}

static cmb_status v2_allocate(void *state, size_t size, cmb_stream stream, void **ptr)
{
    return cmb_up_alloc(state, size, stream, ptr);
}

static cmb_status v2_deallocate(void *state, void *ptr, size_t size, cmb_stream stream)
{
    return cmb_up_free(state, ptr, size, stream);
}

static cmb_status v2_stats(void *state, cmb_alloc_stats *out)
{
    (void)state;
    memset(out, 0, sizeof *out);
    return CMB_OK;
}

static cmb_status v2_destroy(void *state)
{
    (void)state;
    return CMB_OK;
}

static const cmb_option_decl v2_options[] = {CMB_OPTION_END};

static const methods_v2 table = {2u,         "abi-v2",   "a plug-in built for allocator ABI version 2",
                                 CMB_ALLOC_USES_UPSTREAM, v2_create, v2_allocate,
                                 v2_deallocate, NULL,      v2_stats,
                                 v2_destroy, NULL,       v2_options};

__attribute__((visibility("default"))) const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version)
{
    return abi_version == 2u ? (const cmb_allocator_methods *)(const void *)&table : NULL;
}
