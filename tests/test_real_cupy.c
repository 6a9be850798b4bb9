/* test_real_cupy.c - the real:cupy plug-in's plumbing (real/cupy), without
 * a GPU and without CuPy: the plug-in, built against this machine's Python,
 * is driven against a stand-in cupy package (tests/fixtures/mock_cupy) that
 * has CuPy's names and error types. What is checked is the plug-in's own
 * work: starting Python, importing, references to the MemoryPointers (a
 * freed block goes back to the pool, none leaks), switching CuPy's current
 * stream only when the stream changes, turning Python exceptions into
 * statuses (CuPy's OutOfMemoryError -> CMB_ERR_OOM), options, trim and
 * destroy. CuPy's own behaviour is measured on a GPU.
 *
 * ctest sets CMB_REAL_CUPY_LIB (the plug-in), PYTHONPATH (the stand-in) and
 * MOCK_CUPY_FAKE_CHUNKS (free 1 MiB chunks the stand-in pool starts with). */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/cmb_real_plugin.h"

static const cmb_allocator_methods *m;
static cmb_real_probe_fn probe;

static int load(void **state)
{
    (void)state;
    const char *path = getenv("CMB_REAL_CUPY_LIB");
    if (!path || !*path)
        return 0; /* no Python to embed here: every test skips */
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        print_error("%s\n", dlerror());
        return -1;
    }
    cmb_real_entry_fn entry = (cmb_real_entry_fn)dlsym(lib, CMB_REAL_ENTRY_SYMBOL);
    probe = (cmb_real_probe_fn)dlsym(lib, CMB_REAL_PROBE_SYMBOL);
    m = entry ? entry(CMB_ALLOCATOR_ABI_VERSION, "real:cupy") : NULL;
    return m && probe && !entry(CMB_ALLOCATOR_ABI_VERSION + 1, "real:cupy") && !entry(CMB_ALLOCATOR_ABI_VERSION, "cupy")
               ? 0
               : -1;
}

static cmb_status create(const char *key, const char *value, int sim, char *err, size_t len, void **st)
{
    cmb_option o = {key, value};
    cmb_config cfg = {.options = &o, .n_options = key != NULL, .sim = sim, .error = err, .error_len = len};
    err[0] = '\0';
    return m->create(&cfg, NULL, st);
}

static void probe_finds_the_stand_in(void **state)
{
    (void)state;
    char why[256] = "";
    if (!m)
        skip();
    assert_int_equal(probe("real:cupy", why, sizeof why), 0);
}

static void options_and_sim_are_refused(void **state)
{
    (void)state;
    char err[320];
    void *st = NULL;
    if (!m)
        skip();
    assert_int_equal(create("nope", "1", 0, err, sizeof err, &st), CMB_ERR_INVALID);
    assert_non_null(strstr(err, "unknown option 'nope'"));
    assert_int_equal(create("limit_fraction", "2", 0, err, sizeof err, &st), CMB_ERR_INVALID);
    assert_int_equal(create("limit", "lots", 0, err, sizeof err, &st), CMB_ERR_INVALID);
    assert_int_equal(create(NULL, NULL, 1, err, sizeof err, &st), CMB_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "needs a GPU"));
    assert_null(st);
}

/* Served from the pool's free chunks: pointers come back, a freed block is
 * reused (its reference was dropped), a second stream makes CuPy switch. */
static void blocks_come_and_go_through_the_pool(void **state)
{
    (void)state;
    char err[320];
    void *st = NULL, *p[4];
    if (!m)
        skip();
    assert_int_equal(create("limit", "1GiB", 0, err, sizeof err, &st), CMB_OK);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(m->allocate(st, 1000 + (size_t)i, NULL, &p[i]), CMB_OK);
        assert_non_null(p[i]);
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(p[i], p[j]);
    }
    assert_int_equal(m->deallocate(st, p[2], 1002, NULL), CMB_OK);
    void *again;
    assert_int_equal(m->allocate(st, 1002, NULL, &again), CMB_OK);
    assert_ptr_equal(again, p[2]); /* the chunk went back to the pool */
    p[2] = again;
    /* a pointer it never gave out */
    assert_int_equal(m->deallocate(st, (void *)0x1234, 8, NULL), CMB_ERR_INVALID);
    /* another stream: the pool keeps free lists per stream, so this one
     * grows through the counted cudaMalloc, which fails without a GPU */
    void *q;
    cmb_status s = m->allocate(st, 4096, (cmb_stream)0x10, &q);
    assert_true(s == CMB_ERR_CUDA || s == CMB_ERR_OOM || s == CMB_OK);
    if (s != CMB_OK)
        assert_non_null(m->last_error(st));
    else
        assert_int_equal(m->deallocate(st, q, 4096, (cmb_stream)0x10), CMB_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(m->deallocate(st, p[i], 1000 + (size_t)i, NULL), CMB_OK);
    cmb_alloc_stats stats;
    assert_int_equal(m->stats(st, &stats), CMB_OK);
    assert_true(stats.valid & CMB_STAT_RESERVED);
    assert_false(stats.valid & CMB_STAT_REQUESTED); /* left out: CuPy does not keep it */
    assert_int_equal(m->trim(st), CMB_OK);
    assert_int_equal(m->destroy(st), CMB_OK);
}

/* Without a GPU the counted cudaMalloc fails: CuPy's pool frees its cache,
 * retries, and gives up; the status says which kind of failure it was. */
static void a_failed_upstream_is_a_status_not_a_crash(void **state)
{
    (void)state;
    char err[320];
    void *st = NULL, *p = NULL;
    if (!m)
        skip();
    assert_int_equal(create(NULL, NULL, 0, err, sizeof err, &st), CMB_OK);
    cmb_status s = m->allocate(st, 64u << 20, NULL, &p); /* larger than every fake chunk */
    assert_true(s == CMB_ERR_CUDA || s == CMB_ERR_OOM);
    const char *why = m->last_error(st);
    assert_non_null(why);
    assert_true(strstr(why, "CUDARuntimeError") || strstr(why, "OutOfMemoryError"));
    cmb_alloc_stats stats;
    assert_int_equal(m->stats(st, &stats), CMB_OK);
    assert_int_equal(stats.reserved.current, 0); /* nothing was taken from CUDA */
    assert_int_equal(stats.upstream_allocs, 0);
    assert_int_equal(m->destroy(st), CMB_OK);
}

/* null_call=true, the baseline of the CPython call alone: the pool is
 * called (a mock without used_bytes would fail the call) and the memory
 * comes from a per-size free list: a block freed at one size comes back at
 * that size without cudaMalloc; a miss needs cudaMalloc, which fails here. */
static void null_call_baseline(void **state)
{
    (void)state;
    char err[320];
    void *st = NULL, *p = NULL, *fake = (void *)0x7e0000000000;
    if (!m)
        skip();
    assert_int_equal(create("null_call", "maybe", 0, err, sizeof err, &st), CMB_ERR_INVALID);
    assert_int_equal(create("null_call", "true", 0, err, sizeof err, &st), CMB_OK);
    assert_int_equal(m->deallocate(st, fake, 4096, NULL), CMB_OK);
    assert_int_equal(m->allocate(st, 4096, NULL, &p), CMB_OK);
    assert_ptr_equal(p, fake);
    cmb_status s = m->allocate(st, 8192, NULL, &p);
    assert_int_equal(s, CMB_ERR_OOM);
    assert_non_null(strstr(m->last_error(st), "cudaMalloc"));
    cmb_alloc_stats stats;
    assert_int_equal(m->stats(st, &stats), CMB_OK);
    assert_int_equal(stats.upstream_allocs, 0);
    assert_int_equal(m->destroy(st), CMB_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(probe_finds_the_stand_in),
        cmocka_unit_test(options_and_sim_are_refused),
        cmocka_unit_test(blocks_come_and_go_through_the_pool),
        cmocka_unit_test(a_failed_upstream_is_a_status_not_a_crash),
        cmocka_unit_test(null_call_baseline),
    };
    return cmocka_run_group_tests(tests, load, NULL);
}
