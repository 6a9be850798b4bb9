/* test_real_torch.c - the real:torch-* plug-in (real/torch) where it was
 * built: its option mapping refuses what PyTorch would refuse, sim mode is
 * refused, and with no GPU (CI) creation fails with PyTorch's message
 * instead of an exception through the C ABI. Skipped where PyTorch was not
 * found at build time (ctest sets CMB_REAL_TORCH_LIB only where it was). */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/cmb_real_plugin.h"

static const cmb_allocator_methods *caching, *expandable;

static int load(void **state)
{
    (void)state;
    const char *path = getenv("CMB_REAL_TORCH_LIB");
    if (!path || !*path)
        return 0;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        print_error("%s\n", dlerror());
        return -1;
    }
    cmb_real_entry_fn entry = (cmb_real_entry_fn)dlsym(lib, CMB_REAL_ENTRY_SYMBOL);
    caching = entry ? entry(CMB_ALLOCATOR_ABI_VERSION, "real:torch-caching") : NULL;
    expandable = entry ? entry(CMB_ALLOCATOR_ABI_VERSION, "real:torch-expandable") : NULL;
    return caching && expandable && caching != expandable ? 0 : -1;
}

static cmb_status create(const cmb_allocator_methods *m, const char *opts, int sim, char *err, size_t len)
{
    cmb_option o[6];
    char buf[256];
    size_t n = 0;
    void *st = NULL;
    snprintf(buf, sizeof buf, "%s", opts);
    for (char *save = NULL, *kv = strtok_r(buf, ":", &save); kv && n < 6; kv = strtok_r(NULL, ":", &save)) {
        char *eq = strchr(kv, '=');
        *eq = '\0';
        o[n++] = (cmb_option){kv, eq + 1};
    }
    cmb_config cfg = {.options = o, .n_options = n, .sim = sim, .error = err, .error_len = len};
    err[0] = '\0';
    cmb_status s = m->create(&cfg, NULL, &st);
    if (s == CMB_OK)
        m->destroy(st);
    return s;
}

static void options_map_or_are_refused(void **state)
{
    (void)state;
    char err[320];
    if (!caching)
        skip();
    assert_int_equal(create(caching, "max_split=1", 1, err, sizeof err), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "unknown option 'max_split'"));
    assert_int_equal(create(caching, "max_split_size=100MiB:max_split_size_mb=100", 1, err, sizeof err),
                     CMB_ERR_INVALID);
    assert_non_null(strstr(err, "say the same thing"));
    assert_int_equal(create(caching, "max_split_size=1000000", 1, err, sizeof err), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "out of range [20MiB, max]"));
    assert_int_equal(create(caching, "max_split_size=20971521", 1, err, sizeof err), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "whole MiB"));
    assert_int_equal(create(caching, "roundup_power2_divisions=256=1/x", 1, err, sizeof err), CMB_ERR_INVALID);
    assert_int_equal(create(caching, "garbage_collection_threshold=1.5", 1, err, sizeof err), CMB_ERR_INVALID);
    assert_int_equal(create(caching, "per_process_memory_fraction=-1", 1, err, sizeof err), CMB_ERR_INVALID);
    /* well-formed: refused only for being sim */
    assert_int_equal(create(caching,
                            "max_split_size=256MiB:roundup_power2_divisions=256=1/512=2/>=4:"
                            "garbage_collection_threshold=0.6",
                            1, err, sizeof err),
                     CMB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "needs a GPU"));
    assert_int_equal(create(expandable, "expandable_segments=true", 1, err, sizeof err), CMB_ERR_UNSUPPORTED);
}

static void without_gpu_creation_fails_with_a_message(void **state)
{
    (void)state;
    char err[320];
    if (!caching)
        skip();
    cmb_status s = create(caching, "max_split_size_mb=256", 0, err, sizeof err);
    if (s == CMB_OK)
        return; /* a machine with a GPU */
    assert_int_equal(s, CMB_ERR_CUDA);
    assert_non_null(strstr(err, "PyTorch's allocator"));
    /* nothing was set up: trying again fails the same way, and does not crash */
    assert_int_equal(create(expandable, "expandable_segments=true", 0, err, sizeof err), CMB_ERR_CUDA);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(options_map_or_are_refused),
        cmocka_unit_test(without_gpu_creation_fails_with_a_message),
    };
    return cmocka_run_group_tests(tests, load, NULL);
}
