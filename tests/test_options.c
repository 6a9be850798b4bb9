/* test_options.c - allocator option declarations (cmb_option_decl), the
 * strict size parser, the checks the harness runs before anything starts
 * (cmb_allocator_check_options), --list's descriptions, the readers
 * allocators use, and plug-ins of ABI version 1 and 2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/cmb_option_check.h"
#include "allocators/external.h"
#include "allocators/options.h"
#include "allocators/real.h"
#include "allocators/registry.h"
#include "common/cmb_units.h"
#include "support/conformance.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* --- strict sizes ------------------------------------------------------------------------ */

static uint64_t size_ok(const char *s, const char *bare)
{
    uint64_t v = 0;
    char why[200] = "";
    if (cmb_parse_size_strict(s, bare, &v, why, sizeof why))
        fail_msg("'%s' refused: %s", s, why);
    return v;
}

static void size_refused(const char *s, const char *bare, const char *because)
{
    uint64_t v = 0;
    char why[200] = "";
    assert_int_equal(cmb_parse_size_strict(s, bare, &v, why, sizeof why), -1);
    if (because && !strstr(why, because))
        fail_msg("'%s': reason '%s' lacks '%s'", s, why, because);
}

static void sizes_are_strict(void **state)
{
    (void)state;
    assert_int_equal(size_ok("64MiB", NULL), 64 * MiB);
    assert_int_equal(size_ok("512B", NULL), 512);
    assert_int_equal(size_ok("1.5GiB", NULL), 3 * GiB / 2);
    assert_int_equal(size_ok("2TiB", NULL), 2ull << 40);
    assert_int_equal(size_ok("0", NULL), 0);
    assert_int_equal(size_ok("4096", "B"), 4096);
    assert_int_equal(size_ok("64", "MiB"), 64 * MiB); /* read in the declared unit */
    size_refused("64", NULL, "a unit is needed");
    size_refused("64mb", NULL, "unknown unit 'mb'");
    size_refused("64MB", NULL, "ambiguous");
    size_refused("64M", NULL, "ambiguous");
    size_refused("64 MiB", NULL, "unknown unit");
    size_refused("-1MiB", NULL, "expected a size");
    size_refused("1e3B", NULL, "unknown unit");
    size_refused("lots", NULL, "expected a size");
    size_refused("0.3B", NULL, "whole number of bytes");
    size_refused("20000000TiB", NULL, "too large");
    size_refused("max", NULL, NULL); /* only where an option says max is allowed */
}

/* --- whole specs, before a run ------------------------------------------------------------- */

static void spec_refused(const char *name, const char *opts, const char *expect)
{
    char err[512] = "";
    assert_int_equal(cmb_allocator_check_options(name, opts, err, sizeof err), -1);
    if (!strstr(err, expect))
        fail_msg("%s:%s: '%s' lacks '%s'", name, opts, err, expect);
}

static void spec_ok(const char *name, const char *opts)
{
    char err[512] = "";
    if (cmb_allocator_check_options(name, opts, err, sizeof err))
        fail_msg("%s:%s refused: %s", name, opts, err);
}

static void specs_are_checked_before_a_run(void **state)
{
    (void)state;
    spec_refused("bfc", "foo=bar",
                 "allocator 'bfc': unknown option 'foo' (options: allow_growth, garbage_collection, memory_limit");
    spec_refused("torch-caching", "max_split_size=banana", "max_split_size=banana: expected a size");
    spec_refused("torch-caching", "max_split_size=1MiB", "out of range [20MiB, max]");
    spec_refused("torch-caching", "max_split_size=100MiB:max_split_size_mb=100", "say the same thing");
    spec_refused("cupy", "limit_fraction=1.5", "allocator 'cupy': limit_fraction=1.5: out of range [0, 1]");
    spec_refused("cupy", "limit=1GiB:limit_fraction=0.5", "say the same thing");
    spec_refused("rmm-pool", "initial_pool_size=64mb", "unknown unit 'mb'");
    spec_refused("bfc", "allow_growth=true:allow_growth=false", "given twice");
    spec_refused("bfc", "allow_growth=maybe", "expected true or false");
    spec_refused("buddy", "pool_size=3GiB", "not a power of two");
    spec_refused("cuda", "x=1", "it takes none");
    spec_refused("cuda-async", "pool=mine", "expected one of default|own");
    spec_refused("arena", "size_classes", "is not key=value");
    spec_refused("nope", NULL, "unknown allocator 'nope'");
    spec_refused("real:torch-caching", "expandable_segments=true", "unknown option 'expandable_segments'");
    spec_refused("real:rmm-pool", "initial_pool_size=64mb", "unknown unit");
    spec_ok("bfc", NULL);
    spec_ok("bfc", "");
    spec_ok("bfc-prealloc", "allow_growth=true"); /* overriding an entry's default is no repeat */
    spec_ok("rmm-pool", "initial_pool_size=1GiB:maximum_pool_size=max");
    spec_ok("torch-caching", "max_split_size_mb=128:roundup_power2_divisions=256=1/512=2/>=4");
    spec_ok("cub-1g", "max_cached_bytes=unlimited");
    spec_ok("real:rmm-pool", "initial_pool_size=0");
}

/* Every registry entry: names unique, a help line, defaults that parse
 * and lie in their own bounds, and the entry's default options pass. */
static void every_declaration_is_consistent(void **state)
{
    (void)state;
    char err[512];
    for (size_t i = 0; i < cmb_allocator_count(); i++) {
        const cmb_allocator_entry *e = cmb_allocator_at(i);
        const cmb_option_decl *decls = e->methods->options;
        if (!decls)
            fail_msg("%s declares no options", e->name);
        for (const cmb_option_decl *d = decls; d->name; d++) {
            if (!d->help || !*d->help)
                fail_msg("%s: option %s has no help line", e->name, d->name);
            assert_ptr_equal(cmb_optck_find(decls, d->name), d);
            if (d->dflt && d->dflt[0] != '(' && cmb_optck_value(e->name, d, d->dflt, err, sizeof err))
                fail_msg("%s: default of %s: %s", e->name, d->name, err);
            if (d->excludes && !cmb_optck_find(decls, d->excludes))
                fail_msg("%s: %s excludes an undeclared %s", e->name, d->name, d->excludes);
        }
        if (cmb_allocator_check_options(e->name, e->default_options, err, sizeof err))
            fail_msg("%s: its own default options: %s", e->name, err);
    }
    for (size_t i = 0; i < cmb_real_count(); i++)
        for (const cmb_option_decl *d = cmb_real_at(i)->options; d->name; d++)
            if (d->dflt && d->dflt[0] != '(' && cmb_optck_value(cmb_real_at(i)->name, d, d->dflt, err, sizeof err))
                fail_msg("%s", err);
}

static void list_describes_every_option(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(cmb_allocator_describe_options("bfc", f), 0);
    assert_int_equal(cmb_allocator_describe_options("cupy", f), 0);
    assert_int_equal(cmb_allocator_describe_options("nope", f), -1);
    fclose(f);
    assert_non_null(strstr(text, ":allow_growth=BOOL"));
    assert_non_null(strstr(text, "default true"));
    assert_non_null(strstr(text, ":limit_fraction=X"));
    assert_non_null(strstr(text, "range [0, 1]")); /* bounds as written, never 0.99999... */
    assert_non_null(strstr(text, "a bare number is B"));
    free(text);
}

/* --- the readers ------------------------------------------------------------------------------ */

static const cmb_option_decl demo[] = {
    CMB_OPTION("size", CMB_OPT_SIZE, "1MiB", "0", "1GiB", "B", "a size"),
    CMB_OPTION("mb", CMB_OPT_SIZE, "2", "0", NULL, "MiB", "a size in MiB"),
    CMB_OPTION("fill", CMB_OPT_REAL, "0.5", "0", "0.95", "fraction", "a share"),
    CMB_OPTION("n", CMB_OPT_INT, "-3", NULL, NULL, NULL, "a number"),
    CMB_OPTION("on", CMB_OPT_BOOL, "true", NULL, NULL, NULL, "a switch"),
    CMB_OPTION_EX("mode", CMB_OPT_ENUM, "once", NULL, NULL, NULL, "a choice", "once|always", 0, NULL),
    CMB_OPTION("rule", CMB_OPT_SIZE, "(half the free memory)", NULL, NULL, "B", "a default by rule"),
    CMB_OPTION_END};

static void readers_give_values_then_defaults(void **state)
{
    (void)state;
    char err[256] = "";
    cmb_option opts[] = {{"size", "4KiB"}, {"fill", "0.25"}, {"mode", "always"}, {"fill", "0.75"}};
    cmb_config cfg = {.options = opts, .n_options = 4, .error = err, .error_len = sizeof err};
    cmb_options o;
    assert_int_equal(cmb_options_read(&o, "demo", demo, &cfg), CMB_OK);
    assert_int_equal(cmb_opt_size(&o, "size"), 4 * KiB);
    assert_int_equal(cmb_opt_size(&o, "mb"), 2 * MiB);
    assert_true(cmb_opt_real(&o, "fill") == 0.75); /* the last one given */
    assert_int_equal(cmb_opt_int(&o, "n"), -3);
    assert_true(cmb_opt_bool(&o, "on"));
    assert_string_equal(cmb_opt_str(&o, "mode"), "always");
    assert_false(cmb_opt_given(&o, "rule"));
    assert_int_equal(cmb_opt_size(&o, "rule"), 0);
    assert_true(cmb_opt_given(&o, "size"));

    cmb_option bad[] = {{"fill", "0.96"}};
    cfg.options = bad;
    cfg.n_options = 1;
    assert_int_equal(cmb_options_read(&o, "demo", demo, &cfg), CMB_ERR_INVALID);
    assert_string_equal(err, "allocator 'demo': fill=0.96: out of range [0, 0.95]");
}

/* A real allocator's create reads its options through the same checks. */
static void create_refuses_what_the_check_refuses(void **state)
{
    (void)state;
    cmb_upstream_config ucfg;
    cmb_upstream *up;
    char err[256] = "";
    cmb_upstream_config_default(&ucfg);
    assert_int_equal(cmb_upstream_open(&ucfg, &up, err, sizeof err), CMB_OK);
    cmb_option opts[] = {{"limit_fraction", "2"}};
    cmb_config cfg = {.options = opts, .n_options = 1, .sim = 1, .error = err, .error_len = sizeof err};
    void *st = NULL;
    assert_int_equal(cmb_allocator_find("cupy")->methods->create(&cfg, up, &st), CMB_ERR_INVALID);
    assert_string_equal(err, "allocator 'cupy': limit_fraction=2: out of range [0, 1]");
    assert_null(st);
    cmb_upstream_close(up);
}

/* --- plug-ins: version 2 declares, version 1 still loads ------------------------------------------ */

static void plugins_of_both_abi_versions_load(void **state)
{
    (void)state;
    const char *v2 = getenv("CMB_SAMPLE_PLUGIN"), *v1 = getenv("CMB_ABI_V1_PLUGIN");
    if (!v2 || !v1)
        fail_msg("CMB_SAMPLE_PLUGIN and CMB_ABI_V1_PLUGIN must be set (ctest sets them)");
    char err[512], name[600];
    const cmb_allocator_methods *m;
    assert_int_equal(cmb_external_load(v2, &m, err, sizeof err), 0);
    assert_non_null(m->options);
    snprintf(name, sizeof name, "external:%s", v2);
    spec_refused(name, "round=3KiB", "not a power of two");
    spec_refused(name, "rounding=4KiB", "unknown option 'rounding' (options: round, segment)");
    spec_ok(name, "round=4KiB:segment=4MiB");

    assert_int_equal(cmb_external_load(v1, &m, err, sizeof err), 0);
    assert_int_equal(m->abi_version, 1);
    assert_string_equal(m->name, "abi-v1");
    assert_null(m->options); /* read as a version-2 table without declarations */
    snprintf(name, sizeof name, "external:%s", v1);
    spec_ok(name, "anything=1"); /* undeclared: its create decides */
    cmb_upstream *up;
    void *st = NULL, *p = NULL;
    cmb_test_open_methods(m, NULL, 1 * GiB, NULL, &up, &st);
    assert_int_equal(m->allocate(st, 1 * MiB, NULL, &p), CMB_OK);
    assert_int_equal(m->deallocate(st, p, 1 * MiB, NULL), CMB_OK);
    assert_int_equal(m->destroy(st), CMB_OK);
    assert_int_equal(cmb_upstream_close(up), 0);
}

/* A version-2 table (options, no free account) reads as today's without one. */
static void plugins_of_abi_version_2_load(void **state)
{
    (void)state;
    const char *v2 = getenv("CMB_ABI_V2_PLUGIN");
    if (!v2)
        fail_msg("CMB_ABI_V2_PLUGIN must be set (ctest sets it)");
    char err[512];
    const cmb_allocator_methods *m;
    assert_int_equal(cmb_external_load(v2, &m, err, sizeof err), 0);
    assert_int_equal(m->abi_version, 2);
    assert_string_equal(m->name, "abi-v2");
    assert_non_null(m->options);
    assert_null(m->free_account); /* not read past the version-2 table's end */
    cmb_upstream *up;
    void *st = NULL, *p = NULL;
    cmb_test_open_methods(m, NULL, 1 * GiB, NULL, &up, &st);
    assert_int_equal(m->allocate(st, 1 * MiB, NULL, &p), CMB_OK);
    assert_int_equal(m->deallocate(st, p, 1 * MiB, NULL), CMB_OK);
    assert_int_equal(m->destroy(st), CMB_OK);
    assert_int_equal(cmb_upstream_close(up), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sizes_are_strict),
        cmocka_unit_test(specs_are_checked_before_a_run),
        cmocka_unit_test(every_declaration_is_consistent),
        cmocka_unit_test(list_describes_every_option),
        cmocka_unit_test(readers_give_values_then_defaults),
        cmocka_unit_test(create_refuses_what_the_check_refuses),
        cmocka_unit_test(plugins_of_both_abi_versions_load),
        cmocka_unit_test(plugins_of_abi_version_2_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
