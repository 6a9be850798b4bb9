/* test_tune_front.c - tune's front and its recommendation (harness/tune_front.c)
 * on sets made by hand: the choice under a budget is made by each
 * candidate's time on a GPU of the budget, not on an unlimited one. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness/tune.h"

#define GiB (1ull << 30)

static cmb_tune_set set;

static int add(const char *spec, uint64_t min_capacity, double time_s, double budget_time_s)
{
    cmb_tune_cand *c = &set.c[set.n];
    memset(c, 0, sizeof *c);
    snprintf(c->spec, sizeof c->spec, "%s", spec);
    c->evaluated = c->searched = 1;
    c->min_capacity = min_capacity;
    c->time_s = time_s;
    c->at_budget = 1; /* priced there; NAN: it did not run there */
    c->budget_time_s = budget_time_s;
    return set.n++;
}

/* The recorded setting needs 10 GiB; on a 9 GiB budget a garbage-collection
 * threshold looks fastest on an unlimited GPU but frees and mallocs again
 * near the budget; a policy a little slower unlimited keeps its time there. */
static void the_budget_time_decides(void **state)
{
    (void)state;
    int front[CMB_TUNE_MAX_CANDIDATES], n_front, budget_front[CMB_TUNE_MAX_CANDIDATES], n_budget;
    set.n = 0;
    int recorded = add("torch-caching", 10 * GiB, 1.00, NAN);
    set.c[recorded].at_budget = 0; /* does not fit the budget: not priced there */
    int gc = add("torch-caching:garbage_collection_threshold=0.60", 8 * GiB + GiB / 2, 0.90, 9.0);
    int pool = add("cmb@vmm", 8 * GiB, 1.40, 1.40);
    n_front = cmb_tune_front(&set, front, CMB_TUNE_MAX_CANDIDATES);
    assert_int_equal(n_front, 2); /* pool (smallest), gc (faster): the recorded one is dominated */
    /* unlimited times: gc is within 5% of the recorded setting's time, so balanced takes it */
    assert_int_equal(cmb_tune_recommend(&set, front, n_front, 9 * GiB, CMB_TUNE_BALANCED, recorded), gc);
    /* on the budget gc takes 9 s a pass: the fastest that fits there is pool */
    assert_int_equal(cmb_tune_recommend_at_budget(&set, 9 * GiB, CMB_TUNE_BALANCED, recorded, budget_front, &n_budget),
                     pool);
    assert_int_equal(cmb_tune_recommend_at_budget(&set, 9 * GiB, CMB_TUNE_TIME, recorded, budget_front, &n_budget),
                     pool);
    assert_int_equal(cmb_tune_recommend_at_budget(&set, 9 * GiB, CMB_TUNE_MEMORY, recorded, budget_front, &n_budget),
                     pool);
    /* the set itself is left as it was */
    assert_true(set.c[gc].time_s == 0.90 && !set.c[gc].failed);
}

/* A candidate that fits but did not run on the budget (NAN there) or was
 * not priced there is never chosen; none left: -1. */
static void unpriced_candidates_are_not_chosen(void **state)
{
    (void)state;
    int budget_front[CMB_TUNE_MAX_CANDIDATES], n_budget;
    set.n = 0;
    int recorded = add("torch-caching", 10 * GiB, 1.00, NAN);
    set.c[recorded].at_budget = 0;
    int a = add("rmm-pool@cuda", 8 * GiB, 0.50, NAN); /* ran out of memory there */
    int b = add("bfc@cuda", 7 * GiB, 0.60, 0.70);
    set.c[b].at_budget = 0; /* past CMB_TUNE_BUDGET_PRICED */
    (void)a;
    assert_int_equal(cmb_tune_recommend_at_budget(&set, 9 * GiB, CMB_TUNE_BALANCED, recorded, budget_front, &n_budget),
                     -1);
    set.c[b].at_budget = 1;
    assert_int_equal(cmb_tune_recommend_at_budget(&set, 9 * GiB, CMB_TUNE_BALANCED, recorded, budget_front, &n_budget),
                     b);
}

/* Balanced keeps "the smallest GPU at no time cost" on the budget's times:
 * of two that fit, the smaller one wins while within 5% of the recorded
 * setting's time there. */
static void balanced_takes_the_smallest_at_no_cost_there(void **state)
{
    (void)state;
    int budget_front[CMB_TUNE_MAX_CANDIDATES], n_budget;
    set.n = 0;
    int recorded = add("torch-caching", 8 * GiB, 1.00, 1.00);
    int small = add("torch-expandable", 6 * GiB, 1.20, 1.04);
    int big = add("rmm-pool@cuda", 7 * GiB, 0.80, 0.80);
    (void)big;
    assert_int_equal(cmb_tune_recommend_at_budget(&set, 9 * GiB, CMB_TUNE_BALANCED, recorded, budget_front, &n_budget),
                     small);
    set.c[small].budget_time_s = 1.30; /* over 5%: the fastest that fits */
    assert_int_equal(cmb_tune_recommend_at_budget(&set, 9 * GiB, CMB_TUNE_BALANCED, recorded, budget_front, &n_budget),
                     big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_budget_time_decides),
        cmocka_unit_test(unpriced_candidates_are_not_chosen),
        cmocka_unit_test(balanced_takes_the_smallest_at_no_cost_there),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
