/* test_suggest.c - "did you mean" (common/cmb_suggest.h): the distance, the
 * closeness rule and ties; the messages that use it: tests/test_cli.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/cmb_suggest.h"

static void distances(void **state)
{
    (void)state;
    assert_int_equal(cmb_suggest_distance("churn", "churn"), 0);
    assert_int_equal(cmb_suggest_distance("chrun", "churn"), 1); /* a swap of neighbours */
    assert_int_equal(cmb_suggest_distance("CHURN", "churn"), 0); /* case ignored */
    assert_int_equal(cmb_suggest_distance("rmm_pool", "rmm-pool"), 1);
    assert_int_equal(cmb_suggest_distance("", "abc"), 3);
    assert_int_equal(cmb_suggest_distance("kitten", "sitting"), 3);
    char longer[CMB_SUGGEST_MAX_LEN + 2];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_int_equal(cmb_suggest_distance(longer, "a"), (size_t)-1);
}

static const char *best_of(const char *word, const char *const *names)
{
    static cmb_suggest s;
    cmb_suggest_init(&s, word);
    for (size_t i = 0; names[i]; i++)
        cmb_suggest_try(&s, names[i]);
    return cmb_suggest_best(&s);
}

static void suggestions(void **state)
{
    (void)state;
    const char *allocs[] = {"cuda", "cuda-async", "torch-caching", "torch-expandable", "rmm-pool", "bfc", NULL};
    assert_string_equal(best_of("torch-cachng", allocs), "torch-caching");
    assert_string_equal(best_of("cdua", allocs), "cuda");
    assert_string_equal(best_of("bcf", allocs), "bfc");
    assert_null(best_of("torch", allocs));      /* 8 edits: nothing close */
    assert_null(best_of("cuda", allocs));       /* the word itself is no suggestion */
    assert_null(best_of("xyz", allocs));
    assert_null(best_of("", allocs));
    /* the closest wins, whatever the order; ties go to the first */
    const char *params[] = {"fill_max", "fill", "fill_min", NULL};
    assert_string_equal(best_of("fil", params), "fill");
    const char *tie[] = {"ab", "ba", NULL};
    assert_string_equal(best_of("aa", tie), "ab");
    char buf[64];
    cmb_suggest s;
    cmb_suggest_init(&s, "chrun");
    cmb_suggest_try(&s, "churn");
    assert_string_equal(cmb_suggest_text(&s, ";", buf, sizeof buf), "; did you mean 'churn'?");
    cmb_suggest_init(&s, "nothing");
    assert_string_equal(cmb_suggest_text(&s, ";", buf, sizeof buf), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(distances), cmocka_unit_test(suggestions)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
