/* test_structures.c - the red-black tree and the hash map under long
 * random operation sequences, checked against a reference after each step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/cmb_hashmap.h"
#include "common/cmb_rbtree.h"
#include "common/cmb_rng.h"

typedef struct item {
    cmb_rbnode node;
    uint64_t key;
    int in_tree;
} item;

static int item_cmp(const cmb_rbnode *a, const cmb_rbnode *b)
{
    uint64_t x = cmb_rb_entry(a, item, node)->key, y = cmb_rb_entry(b, item, node)->key;
    return (x > y) - (x < y);
}

static int key_cmp(const void *key, const cmb_rbnode *n)
{
    uint64_t k = *(const uint64_t *)key, y = cmb_rb_entry(n, item, node)->key;
    return (k > y) - (k < y);
}

static void rbtree_random(void **state)
{
    (void)state;
    enum { N = 2000 };
    item *items = calloc(N, sizeof *items);
    cmb_rbtree t;
    cmb_rng r;
    cmb_rb_init(&t);
    cmb_rng_seed(&r, 11);
    size_t live = 0;
    for (int step = 0; step < 60000; step++) {
        item *it = &items[cmb_rng_range(&r, 0, N - 1)];
        if (it->in_tree) {
            cmb_rb_erase(&t, &it->node);
            it->in_tree = 0;
            live--;
        } else {
            it->key = cmb_rng_range(&r, 0, 500); /* many duplicates */
            cmb_rb_insert(&t, &it->node, item_cmp);
            it->in_tree = 1;
            live++;
        }
        if (step % 97 == 0)
            assert_true(cmb_rb_validate(&t, item_cmp) >= 0);
        assert_int_equal(t.count, live);
    }
    assert_true(cmb_rb_validate(&t, item_cmp) >= 0);
    /* lower_bound and floor against a linear scan */
    for (uint64_t k = 0; k <= 501; k += 7) {
        uint64_t best_lb = UINT64_MAX, best_fl = UINT64_MAX;
        int have_fl = 0;
        for (int i = 0; i < N; i++) {
            if (!items[i].in_tree)
                continue;
            if (items[i].key >= k && items[i].key < best_lb)
                best_lb = items[i].key;
            if (items[i].key <= k && (!have_fl || items[i].key > best_fl))
                best_fl = items[i].key, have_fl = 1;
        }
        cmb_rbnode *lb = cmb_rb_lower_bound(&t, &k, key_cmp);
        cmb_rbnode *fl = cmb_rb_floor(&t, &k, key_cmp);
        if (best_lb == UINT64_MAX)
            assert_null(lb);
        else
            assert_int_equal(cmb_rb_entry(lb, item, node)->key, best_lb);
        if (!have_fl)
            assert_null(fl);
        else
            assert_int_equal(cmb_rb_entry(fl, item, node)->key, best_fl);
    }
    /* in-order walk forwards and backwards sees every node */
    size_t fwd = 0, back = 0;
    for (cmb_rbnode *n = cmb_rb_first(&t); n; n = cmb_rb_next(n))
        fwd++;
    for (cmb_rbnode *n = cmb_rb_last(&t); n; n = cmb_rb_prev(n))
        back++;
    assert_int_equal(fwd, live);
    assert_int_equal(back, live);
    free(items);
}

static void hashmap_random(void **state)
{
    (void)state;
    enum { KEYS = 5000 };
    uint64_t *ref = calloc(KEYS, sizeof *ref); /* 0 = absent */
    cmb_hashmap m;
    cmb_rng r;
    assert_int_equal(cmb_hashmap_init(&m, 4), 0);
    cmb_rng_seed(&r, 5);
    size_t live = 0;
    for (int step = 0; step < 200000; step++) {
        uint64_t k = cmb_rng_range(&r, 1, KEYS - 1);
        uint64_t key = k * 4096; /* pointer-like keys */
        uint64_t v;
        switch (cmb_rng_range(&r, 0, 2)) {
        case 0:
            if (!ref[k])
                live++;
            ref[k] = step + 1;
            assert_int_equal(cmb_hashmap_put(&m, key, ref[k]), 0);
            break;
        case 1:
            assert_int_equal(cmb_hashmap_remove(&m, key, &v), ref[k] != 0);
            if (ref[k]) {
                assert_int_equal(v, ref[k]);
                ref[k] = 0;
                live--;
            }
            break;
        default:
            assert_int_equal(cmb_hashmap_get(&m, key, &v), ref[k] != 0);
            if (ref[k])
                assert_int_equal(v, ref[k]);
        }
        assert_int_equal(m.count, live);
    }
    size_t seen = 0, it = 0;
    uint64_t key, val;
    while (cmb_hashmap_next(&m, &it, &key, &val)) {
        assert_int_equal(ref[key / 4096], val);
        seen++;
    }
    assert_int_equal(seen, live);
    assert_int_equal(cmb_hashmap_put(&m, 0, 1), -1); /* key 0 is reserved */
    cmb_hashmap_free(&m);
    free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rbtree_random),
        cmocka_unit_test(hashmap_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
