/* test_real.c - real:<name> resolution (allocators/real.c) and the RMM
 * plug-in's load, option and no-GPU paths (real/rmm), without a GPU.
 *
 * ctest sets CUMEMBENCH_REAL_DIR to <build>/real and CMB_REAL_RMM_BUILT to
 * ON where CMake found librmm and built the plug-in; where it did not, the
 * RMM checks assert the skip reason instead. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/real.h"

static int rmm_built(void)
{
    const char *v = getenv("CMB_REAL_RMM_BUILT");
    return v && !strcmp(v, "ON");
}

/* --- the table and its options ----------------------------------------------------------- */

static void every_emulation_has_its_real_original(void **state)
{
    (void)state;
    static const char *const names[] = {"torch-caching", "torch-expandable", "rmm-pool", "arena",
                                        "binning",       "cuda-async-retain", "cupy"};
    assert_int_equal(cmb_real_count(), sizeof names / sizeof names[0]);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char real[64];
        snprintf(real, sizeof real, "real:%s", names[i]);
        const cmb_real_info *ri = cmb_real_find(real);
        assert_non_null(ri);
        assert_string_equal(ri->emulation, names[i]);
        /* the emulation it stands beside exists in the registry */
        assert_non_null(cmb_allocator_find(names[i]));
        assert_non_null(strstr(ri->install, "install"));
    }
    assert_null(cmb_real_find("torch-caching")); /* the prefix is part of the name */
    assert_null(cmb_real_find("real:nope"));
}

static void options_are_checked_by_key_and_kind(void **state)
{
    (void)state;
    char err[512];
    const cmb_real_info *pool = cmb_real_find("real:rmm-pool");
    const cmb_real_info *torch = cmb_real_find("real:torch-caching");
    assert_int_equal(cmb_real_check_option(pool, "initial_pool_size", "1GiB", err, sizeof err), 0);
    assert_int_equal(cmb_real_check_option(pool, "maximum_pool_size", "max", err, sizeof err), 0);
    assert_int_equal(cmb_real_check_option(pool, "initial_pool_size", "lots", err, sizeof err), -1);
    assert_non_null(strstr(err, "expected a size"));
    assert_int_equal(cmb_real_check_option(pool, "arena_size", "1GiB", err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown option 'arena_size'"));
    assert_non_null(strstr(err, "initial_pool_size, maximum_pool_size"));
    assert_int_equal(cmb_real_check_option(torch, "max_split_size_mb", "256", err, sizeof err), 0);
    assert_int_equal(cmb_real_check_option(torch, "max_split_size_mb", "banana", err, sizeof err), -1);
    assert_int_equal(cmb_real_check_option(torch, "garbage_collection_threshold", "0.6", err, sizeof err), 0);
    assert_int_equal(cmb_real_check_option(torch, "roundup_power2_divisions", "256=1/>=4", err, sizeof err), 0);
    /* expandable_segments is what tells the two torch allocators apart: not an option */
    assert_int_equal(cmb_real_check_option(torch, "expandable_segments", "true", err, sizeof err), -1);
}

/* --- a missing plug-in ------------------------------------------------------------------------- */

static void a_missing_plugin_resolves_to_a_refusing_table(void **state)
{
    (void)state;
    /* torch: not built in CI; where it is, this checks the found path instead */
    const cmb_real_info *ri = cmb_real_find("real:torch-caching");
    char why[512], cfg_err[320] = "";
    const cmb_allocator_entry *e = cmb_real_resolve(ri, why, sizeof why);
    assert_non_null(e);
    assert_string_equal(e->name, "real:torch-caching");
    assert_null(e->emulates); /* real, not an emulation */
    assert_string_equal(cmb_allocator_impl(e), "real");
    assert_true(e->methods->flags & CMB_ALLOC_NEEDS_GPU);
    assert_false(e->methods->flags & CMB_ALLOC_USES_UPSTREAM);
    if (!why[0]) {
        assert_non_null(strstr(cmb_real_plugin_path(ri), "libcmb_real_torch.so"));
        return;
    }
    assert_non_null(strstr(why, "libcmb_real_torch.so"));
    assert_non_null(strstr(why, "pip install torch"));
    assert_string_equal(cmb_real_plugin_path(ri), "");
    cmb_config cfg = {.error = cfg_err, .error_len = sizeof cfg_err};
    void *st = NULL;
    assert_int_equal(e->methods->create(&cfg, NULL, &st), CMB_ERR_UNSUPPORTED);
    assert_non_null(strstr(cfg_err, "--list"));
    /* resolved once: the same entry and reason again */
    char again[512];
    assert_ptr_equal(cmb_real_resolve(ri, again, sizeof again), e);
    assert_string_equal(again, why);
}

/* --- the RMM plug-in ------------------------------------------------------------------------------ */

static const cmb_allocator_methods *rmm_table(const char *name)
{
    char why[512];
    const cmb_real_info *ri = cmb_real_find(name);
    const cmb_allocator_entry *e = cmb_real_resolve(ri, why, sizeof why);
    if (!rmm_built()) {
        assert_non_null(strstr(why, "libcmb_real_rmm.so"));
        assert_non_null(strstr(why, "librmm-cu13"));
        return NULL;
    }
    if (why[0])
        fail_msg("%s: %s", name, why);
    assert_non_null(strstr(cmb_real_plugin_path(ri), "libcmb_real_rmm.so"));
    assert_string_equal(e->methods->name, name);
    return e->methods;
}

static cmb_status create_with(const cmb_allocator_methods *m, const char *opts, int sim, char *err, size_t errlen,
                              void **st)
{
    cmb_option o[4];
    char buf[256];
    size_t n = 0;
    snprintf(buf, sizeof buf, "%s", opts);
    for (char *save = NULL, *kv = strtok_r(buf, ":", &save); kv && n < 4; kv = strtok_r(NULL, ":", &save)) {
        char *eq = strchr(kv, '=');
        *eq = '\0';
        o[n++] = (cmb_option){kv, eq + 1};
    }
    cmb_config cfg = {.options = o, .n_options = n, .sim = sim, .error = err, .error_len = errlen};
    err[0] = '\0';
    return m->create(&cfg, NULL, st);
}

static void rmm_plugin_loads_every_resource(void **state)
{
    (void)state;
    static const char *const names[] = {"real:rmm-pool", "real:arena", "real:binning", "real:cuda-async-retain"};
    for (size_t i = 0; i < 4; i++) {
        const cmb_allocator_methods *m = rmm_table(names[i]);
        if (!m)
            continue;
        assert_int_equal(m->abi_version, CMB_ALLOCATOR_ABI_VERSION);
        assert_true(m->flags & CMB_ALLOC_NEEDS_GPU);
        assert_false(m->flags & CMB_ALLOC_USES_UPSTREAM);
        assert_non_null(m->stats);
    }
    if (!rmm_built())
        skip();
}

static void rmm_plugin_refuses_bad_options(void **state)
{
    (void)state;
    const cmb_allocator_methods *pool = rmm_table("real:rmm-pool"), *binning = rmm_table("real:binning");
    if (!pool)
        skip();
    char err[320];
    void *st = NULL;
    assert_int_equal(create_with(pool, "nope=1", 0, err, sizeof err, &st), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "unknown option 'nope'"));
    assert_int_equal(create_with(pool, "initial_pool_size=lots", 0, err, sizeof err, &st), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "expected a size"));
    /* RMM itself would throw rmm::logic_error: refused before it is asked */
    assert_int_equal(create_with(pool, "initial_pool_size=1000", 0, err, sizeof err, &st), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "multiples of 256"));
    assert_int_equal(create_with(binning, "min_bin_exp=23:max_bin_exp=22", 0, err, sizeof err, &st),
                     CMB_ERR_INVALID);
    assert_non_null(strstr(err, "min_bin_exp"));
    assert_int_equal(create_with(binning, "max_bin_exp=90", 0, err, sizeof err, &st), CMB_ERR_INVALID);
    assert_null(st);
}

/* sim: refused with its reason; no GPU (CI): RMM's CUDA error comes back as
 * a status and a message, never an exception through the C ABI; a GPU: the
 * resource works. */
static void rmm_plugin_without_gpu_fails_cleanly(void **state)
{
    (void)state;
    static const char *const names[] = {"real:rmm-pool", "real:arena", "real:binning", "real:cuda-async-retain"};
    if (!rmm_built())
        skip();
    for (size_t i = 0; i < 4; i++) {
        const cmb_allocator_methods *m = rmm_table(names[i]);
        char err[320];
        void *st = NULL;
        assert_int_equal(create_with(m, "", 1, err, sizeof err, &st), CMB_ERR_UNSUPPORTED);
        assert_non_null(strstr(err, "needs a GPU"));
        cmb_status s = create_with(m, "", 0, err, sizeof err, &st);
        if (s == CMB_OK) { /* a machine with a GPU */
            void *p = NULL;
            cmb_alloc_stats stats;
            assert_int_equal(m->allocate(st, 4096, NULL, &p), CMB_OK);
            assert_non_null(p);
            assert_int_equal(m->stats(st, &stats), CMB_OK);
            assert_true(stats.valid & CMB_STAT_RESERVED);
            assert_true(stats.reserved.peak >= 4096);
            assert_int_equal(m->deallocate(st, p, 4096, NULL), CMB_OK);
            assert_int_equal(m->destroy(st), CMB_OK);
            continue;
        }
        assert_true(s == CMB_ERR_CUDA || s == CMB_ERR_OOM);
        assert_non_null(strstr(err, names[i]));
        assert_true(strlen(err) > strlen(names[i]) + 2); /* RMM's own message follows */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_emulation_has_its_real_original),
        cmocka_unit_test(options_are_checked_by_key_and_kind),
        cmocka_unit_test(a_missing_plugin_resolves_to_a_refusing_table),
        cmocka_unit_test(rmm_plugin_loads_every_resource),
        cmocka_unit_test(rmm_plugin_refuses_bad_options),
        cmocka_unit_test(rmm_plugin_without_gpu_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
