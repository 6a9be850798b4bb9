/* test_plan_sweep.c - an allocator option swept on the command line
 * (`torch-caching:max_split_size_mb=64|128|256`, harness/plan.c): one
 * allocator per value (per combination where several options are swept),
 * in the order written, the name and @UPSTREAM never split; an empty value,
 * a repeat of a listed allocator and a bad value are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness/plan.h"

/* Plans churn (one parameter set) under `allocators`; the allocator texts
 * in plan order into texts (';'-joined), or the error. 0 or -1. */
static int plan_texts(const char *allocators, char *texts, size_t len)
{
    char *argv[] = {"cumembench", "--mode", "sim", "--scenario", "churn", "--param", "n=10", "--param",
                    "dist=uniform", "--param", "checkerboard=false", "--param", "fill=0.5", "--allocator",
                    (char *)allocators, NULL};
    cmb_cli cli;
    cmb_plan p;
    char err[512];
    texts[0] = '\0';
    assert_int_equal(cmb_cli_parse(15, argv, &cli, err, sizeof err), 0);
    cmb_plan_setting set = {CMB_MODE_SIM, cmb_plan_capacity(&cli, CMB_MODE_SIM), cmb_plan_capacity(&cli, CMB_MODE_SIM),
                            NULL};
    if (cmb_plan_build(&cli, &set, &p, err, sizeof err)) {
        snprintf(texts, len, "%s", err);
        return -1;
    }
    /* the first parameter set's cases: one per allocator, in plan order,
     * until the first allocator comes again */
    for (size_t i = 0; i < p.n && (!i || strcmp(p.cases[i].spec.alloc.text, p.cases[0].spec.alloc.text)); i++)
        snprintf(texts + strlen(texts), len - strlen(texts), "%s%s", i ? ";" : "", p.cases[i].spec.alloc.text);
    cmb_plan_free(&p);
    return 0;
}

static void one_value_each(void **state)
{
    (void)state;
    char t[4096];
    assert_int_equal(plan_texts("torch-caching:max_split_size_mb=64|128|256,bfc", t, sizeof t), 0);
    assert_string_equal(t, "torch-caching:max_split_size_mb=64;torch-caching:max_split_size_mb=128;"
                           "torch-caching:max_split_size_mb=256;bfc");
}

static void combinations_and_upstream(void **state)
{
    (void)state;
    char t[4096];
    assert_int_equal(plan_texts("torch-caching:max_split_size_mb=64|128:roundup_power2_divisions=1|2@sim", t, sizeof t), 0);
    assert_string_equal(t, "torch-caching:max_split_size_mb=64:roundup_power2_divisions=1@sim;"
                           "torch-caching:max_split_size_mb=128:roundup_power2_divisions=1@sim;"
                           "torch-caching:max_split_size_mb=64:roundup_power2_divisions=2@sim;"
                           "torch-caching:max_split_size_mb=128:roundup_power2_divisions=2@sim");
    /* a value without '|' is kept as written */
    assert_int_equal(plan_texts("bfc:allow_growth=false", t, sizeof t), 0);
    assert_string_equal(t, "bfc:allow_growth=false");
}

static void refusals(void **state)
{
    (void)state;
    char t[4096];
    assert_int_equal(plan_texts("bfc:allow_growth=true|", t, sizeof t), -1);
    assert_non_null(strstr(t, "empty value in allocator sweep"));
    assert_int_equal(plan_texts("bfc:allow_growth=true|false,bfc:allow_growth=false", t, sizeof t), -1);
    assert_non_null(strstr(t, "'bfc:allow_growth=false' is listed twice"));
    assert_int_equal(plan_texts("torch-caching:max_split_size_mb=64|lots", t, sizeof t), -1);
    assert_non_null(strstr(t, "max_split_size_mb"));
    char many[1024];
    snprintf(many, sizeof many, "bfc:memory_limit=%s", "1GiB|2GiB|3GiB|4GiB|5GiB|6GiB|7GiB|8GiB");
    snprintf(many + strlen(many), sizeof many - strlen(many), ":fragmentation_fraction=%s",
             "0.1|0.2|0.3|0.4|0.5|0.6|0.7|0.8|0.9");
    assert_int_equal(plan_texts(many, t, sizeof t), -1);
    assert_non_null(strstr(t, "more than 64 allocators"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(one_value_each), cmocka_unit_test(combinations_and_upstream),
                                       cmocka_unit_test(refusals)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
