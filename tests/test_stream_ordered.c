/* test_stream_ordered.c - the shared stream-ordered free lists
 * (allocators/stream_ordered.h): stream lookup, the four steps of get_block
 * and their waits, one event per stream, teardown.
 *
 * A toy policy fills the hooks: a list of (start, size) blocks kept in
 * address order, best fit, splits from the front, coalescing merge, and an
 * expand that bumps a counter. The upstream is a stand-in with only the
 * event and stream calls, whose events stay pending for a number of queries
 * the test chooses, or fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/stream_ordered.h"

#define S(i) ((cmb_stream)(uintptr_t)(i))
#define MAXB 16

/* --- the stand-in upstream ------------------------------------------------------------ */

static struct fake {
    int pending[8];         /* per stream: queries answered CMB_ERR_STATE before CMB_OK */
    cmb_status fail[8];     /* per stream: what a query answers instead, if not CMB_OK */
    int queries[8];
    int records, rerecords, destroys, syncs;
    int record_fails, rerecord_fails;
} fk;

static int ev_stream(cmb_event ev)
{
    return (int)((uintptr_t)ev - 1);
}

static cmb_status fake_record(cmb_upstream *u, cmb_stream s, cmb_event *ev)
{
    (void)u;
    if (fk.record_fails)
        return CMB_ERR_CUDA;
    fk.records++;
    *ev = (cmb_event)((uintptr_t)s + 1);
    return CMB_OK;
}

static cmb_status fake_rerecord(cmb_upstream *u, cmb_stream s, cmb_event ev)
{
    (void)u;
    (void)s;
    (void)ev;
    if (fk.rerecord_fails)
        return CMB_ERR_CUDA;
    fk.rerecords++;
    return CMB_OK;
}

static cmb_status fake_query(cmb_upstream *u, cmb_event ev)
{
    (void)u;
    int s = ev_stream(ev);
    fk.queries[s]++;
    if (fk.fail[s] != CMB_OK)
        return fk.fail[s];
    if (fk.pending[s] > 0) {
        fk.pending[s]--;
        return CMB_ERR_STATE;
    }
    return CMB_OK;
}

static cmb_status fake_destroy(cmb_upstream *u, cmb_event ev)
{
    (void)u;
    (void)ev;
    fk.destroys++;
    return CMB_OK;
}

static cmb_status fake_sync(cmb_upstream *u, cmb_stream s)
{
    (void)u;
    (void)s;
    fk.syncs++;
    return CMB_OK;
}

static const cmb_upstream_ops fake_ops = {
    .event_record = fake_record,
    .event_query = fake_query,
    .event_destroy = fake_destroy,
    .stream_sync = fake_sync,
    .event_rerecord = fake_rerecord,
};

static cmb_upstream fake_up = {.ops = &fake_ops, .name = "fake"};

/* --- the toy policy ------------------------------------------------------------------- */

typedef struct toy_list {
    cmb_so_list so;
    uint64_t start[MAXB], size[MAXB];
    int n;
} toy_list;

static struct toy {
    int inits, finis, expands, expand_fail;
    uint64_t brk;
} toy;

static void toy_init(void *ctx, cmb_so_list *l)
{
    (void)ctx;
    (void)l;
    toy.inits++;
}

static void toy_fini(void *ctx, cmb_so_list *l)
{
    (void)ctx;
    (void)l;
    toy.finis++;
}

static int toy_empty(const cmb_so_list *l)
{
    return ((const toy_list *)l)->n == 0;
}

/* Block i as the handle find returns (1-based, so 0 is "none"). */
static void *toy_find(void *ctx, cmb_so_list *l, uint64_t size)
{
    toy_list *t = (toy_list *)l;
    int best = -1;
    (void)ctx;
    for (int i = 0; i < t->n; i++)
        if (t->size[i] >= size && (best < 0 || t->size[i] < t->size[best]))
            best = i;
    return best < 0 ? NULL : (void *)(uintptr_t)(best + 1);
}

static void toy_remove(toy_list *t, int i)
{
    memmove(&t->start[i], &t->start[i + 1], (size_t)(t->n - i - 1) * sizeof t->start[0]);
    memmove(&t->size[i], &t->size[i + 1], (size_t)(t->n - i - 1) * sizeof t->size[0]);
    t->n--;
}

static void *toy_take(void *ctx, cmb_so_list *l, void *b, uint64_t size)
{
    toy_list *t = (toy_list *)l;
    int i = (int)(uintptr_t)b - 1;
    uint64_t p = t->start[i];
    (void)ctx;
    if (t->size[i] > size) {
        t->start[i] += size;
        t->size[i] -= size;
    } else {
        toy_remove(t, i);
    }
    return (void *)(uintptr_t)p;
}

/* Insert in address order, merging with touching neighbours. */
static void toy_insert(toy_list *t, uint64_t start, uint64_t size)
{
    int i = 0;
    while (i < t->n && t->start[i] < start)
        i++;
    if (i > 0 && t->start[i - 1] + t->size[i - 1] == start) {
        t->size[i - 1] += size;
        if (i < t->n && start + size == t->start[i]) {
            t->size[i - 1] += t->size[i];
            toy_remove(t, i);
        }
        return;
    }
    if (i < t->n && start + size == t->start[i]) {
        t->start[i] = start;
        t->size[i] += size;
        return;
    }
    assert_true(t->n < MAXB);
    memmove(&t->start[i + 1], &t->start[i], (size_t)(t->n - i) * sizeof t->start[0]);
    memmove(&t->size[i + 1], &t->size[i], (size_t)(t->n - i) * sizeof t->size[0]);
    t->start[i] = start;
    t->size[i] = size;
    t->n++;
}

static void toy_merge(void *ctx, cmb_so_list *dst, cmb_so_list *src)
{
    toy_list *d = (toy_list *)dst, *o = (toy_list *)src;
    (void)ctx;
    for (int i = 0; i < o->n; i++)
        toy_insert(d, o->start[i], o->size[i]);
    o->n = 0;
}

static cmb_status toy_expand(void *ctx, cmb_so_list *own, uint64_t size, void **out)
{
    (void)ctx;
    (void)own;
    if (toy.expand_fail)
        return CMB_ERR_OOM;
    toy.expands++;
    *out = (void *)(uintptr_t)toy.brk;
    toy.brk += size;
    return CMB_OK;
}

static const cmb_so_hooks toy_hooks = {
    .list_size = sizeof(toy_list),
    .list_init = toy_init,
    .list_fini = toy_fini,
    .list_empty = toy_empty,
    .find = toy_find,
    .take = toy_take,
    .merge = toy_merge,
    .expand = toy_expand,
};

static int setup(void **state)
{
    static cmb_stream_ordered so;
    memset(&fk, 0, sizeof fk);
    memset(&toy, 0, sizeof toy);
    toy.brk = 1u << 20;
    cmb_so_init(&so, &fake_up, &toy_hooks, NULL);
    *state = &so;
    return 0;
}

static int teardown(void **state)
{
    cmb_so_destroy(*state);
    return 0;
}

/* A free on stream s of [start, start+size): the helper's part, then the policy's. */
static toy_list *put(cmb_stream_ordered *so, int s, uint64_t start, uint64_t size)
{
    toy_list *l = (toy_list *)cmb_so_list_of(so, S(s));
    assert_non_null(l);
    cmb_so_record_free(so, &l->so);
    toy_insert(l, start, size);
    return l;
}

static uint64_t get(cmb_stream_ordered *so, int s, uint64_t size)
{
    void *p = NULL;
    assert_int_equal(cmb_so_get_block(so, cmb_so_list_of(so, S(s)), size, &p), CMB_OK);
    return (uint64_t)(uintptr_t)p;
}

static int total_queries(void)
{
    int n = 0;
    for (int i = 0; i < 8; i++)
        n += fk.queries[i];
    return n;
}

/* --- tests --------------------------------------------------------------------------- */

static void lookup_creates_each_stream_once_in_order(void **state)
{
    cmb_stream_ordered *so = *state;
    cmb_so_list *a = cmb_so_list_of(so, S(1)), *b = cmb_so_list_of(so, S(2));
    assert_ptr_equal(cmb_so_list_of(so, S(1)), a);
    assert_ptr_equal(cmb_so_list_of(so, S(2)), b);
    assert_ptr_not_equal(a, b);
    for (int i = 3; i < 20; i++) /* past the first growth of the table */
        assert_non_null(cmb_so_list_of(so, S(i)));
    assert_ptr_equal(cmb_so_list_of(so, S(2)), b);
    assert_int_equal(cmb_so_count(so), 19);
    assert_ptr_equal(cmb_so_at(so, 0), a);
    assert_ptr_equal(cmb_so_at(so, 1), b);
    assert_ptr_equal(a->stream, S(1));
    assert_null(a->event);
    assert_int_equal(toy.inits, 19);
}

static void own_list_first_without_a_wait(void **state)
{
    cmb_stream_ordered *so = *state;
    put(so, 1, 0x1000, 256);
    put(so, 2, 0x9000, 256);
    fk.pending[1] = fk.pending[2] = 5;
    assert_int_equal(get(so, 2, 256), 0x9000);
    assert_int_equal(total_queries(), 0);
    assert_int_equal(toy.expands, 0);
}

/* Step 2: another stream's block after its event completed; the rest stays there. */
static void other_list_after_its_event(void **state)
{
    cmb_stream_ordered *so = *state;
    toy_list *l1 = put(so, 1, 0x1000, 1000);
    toy_list *l2 = (toy_list *)cmb_so_list_of(so, S(2));
    fk.pending[1] = 3;
    assert_int_equal(get(so, 2, 400), 0x1000);
    assert_int_equal(fk.queries[1], 4); /* three pending answers, then done */
    assert_int_equal(l1->n, 1);
    assert_int_equal(l1->start[0], 0x1000 + 400);
    assert_int_equal(l1->size[0], 600);
    assert_int_equal(l2->n, 0);
}

/* Other lists are searched in the order their streams first appeared. */
static void other_lists_in_order_of_appearance(void **state)
{
    cmb_stream_ordered *so = *state;
    cmb_so_list_of(so, S(3));
    put(so, 2, 0x2000, 512);
    put(so, 1, 0x1000, 256); /* a better fit, in a later list */
    assert_int_equal(get(so, 3, 256), 0x2000);
    assert_int_equal(fk.queries[1], 0);
    assert_int_equal(fk.queries[2], 1);
}

/* Step 3: no list holds a fit alone; merging them in order does, and the
 * merging stops at the first list that makes one. */
static void merge_until_a_block_fits(void **state)
{
    cmb_stream_ordered *so = *state;
    cmb_so_list_of(so, S(3));
    toy_list *l1 = put(so, 1, 0x1000, 100);
    toy_list *l2 = put(so, 2, 0x1000 + 100, 100);
    toy_list *l4 = put(so, 4, 0x8000, 120);
    toy_list *l3 = (toy_list *)cmb_so_list_of(so, S(3));
    assert_int_equal(get(so, 3, 150), 0x1000);
    assert_int_equal(l1->n, 0);
    assert_int_equal(l2->n, 0);
    assert_int_equal(l4->n, 1); /* not merged: a fit came first */
    assert_int_equal(fk.queries[1], 1);
    assert_int_equal(fk.queries[2], 1);
    assert_int_equal(fk.queries[4], 0);
    assert_int_equal(l3->n, 1); /* the coalesced rest */
    assert_int_equal(l3->start[0], 0x1000 + 150);
    assert_int_equal(l3->size[0], 50);
    assert_int_equal(toy.expands, 0);
}

/* Step 4: nothing fits anywhere: the policy grows; when it cannot, OOM. */
static void expand_when_nothing_fits(void **state)
{
    cmb_stream_ordered *so = *state;
    put(so, 1, 0x1000, 100);
    uint64_t brk = toy.brk;
    assert_int_equal(get(so, 2, 4096), brk);
    assert_int_equal(toy.expands, 1);
    toy.expand_fail = 1;
    void *p = NULL;
    toy_list *l2 = (toy_list *)cmb_so_list_of(so, S(2));
    assert_int_equal(cmb_so_get_block(so, &l2->so, 1 << 20, &p), CMB_ERR_OOM);
    /* the merge moved S1's block into S2's list on the way */
    assert_int_equal(l2->n, 1);
    assert_int_equal(l2->start[0], 0x1000);
}

/* A failed wait is the caller's error, and nothing is taken. */
static void a_failed_wait_takes_nothing(void **state)
{
    cmb_stream_ordered *so = *state;
    toy_list *l1 = put(so, 1, 0x1000, 1000);
    fk.fail[1] = CMB_ERR_CUDA;
    void *p = NULL;
    assert_int_equal(cmb_so_get_block(so, cmb_so_list_of(so, S(2)), 100, &p), CMB_ERR_CUDA);
    assert_null(p);
    assert_int_equal(l1->n, 1);
    assert_int_equal(l1->size[0], 1000);
    assert_int_equal(toy.expands, 0);
    fk.fail[1] = CMB_OK; /* teardown waits for it */
}

/* One event per stream: made at the first free, re-recorded after. */
static void one_event_per_stream(void **state)
{
    cmb_stream_ordered *so = *state;
    toy_list *l1 = put(so, 1, 0x1000, 100);
    cmb_event ev = l1->so.event;
    assert_non_null(ev);
    put(so, 1, 0x2000, 100);
    put(so, 1, 0x3000, 100);
    assert_int_equal(fk.records, 1);
    assert_int_equal(fk.rerecords, 2);
    assert_ptr_equal(l1->so.event, ev);
    put(so, 2, 0x4000, 100);
    assert_int_equal(fk.records, 2);
}

/* No event can be recorded: the stream is synchronised and left without one,
 * so another stream takes its blocks with no wait. */
static void no_event_means_synchronised(void **state)
{
    cmb_stream_ordered *so = *state;
    fk.record_fails = 1;
    toy_list *l1 = put(so, 1, 0x1000, 100);
    assert_null(l1->so.event);
    assert_int_equal(fk.syncs, 1);
    assert_int_equal(cmb_so_wait_for(so, &l1->so), CMB_OK);
    assert_int_equal(get(so, 2, 100), 0x1000);
    assert_int_equal(total_queries(), 0);

    fk.record_fails = 0;
    put(so, 1, 0x2000, 100); /* an event again */
    assert_non_null(l1->so.event);
    fk.rerecord_fails = 1;
    put(so, 1, 0x3000, 100); /* re-recording fails: synchronised, event dropped */
    assert_null(l1->so.event);
    assert_int_equal(fk.syncs, 2);
    assert_int_equal(fk.destroys, 1);
}

/* Teardown waits for every pending event, destroys it and lets the policy
 * free its lists. */
static void destroy_waits_for_every_event(void **state)
{
    cmb_stream_ordered *so = *state;
    put(so, 1, 0x1000, 100);
    put(so, 2, 0x2000, 100);
    cmb_so_list_of(so, S(3)); /* no free: no event */
    fk.pending[1] = 2;
    fk.pending[2] = 7;
    cmb_so_destroy(so);
    assert_int_equal(fk.queries[1], 3);
    assert_int_equal(fk.queries[2], 8);
    assert_int_equal(fk.destroys, 2);
    assert_int_equal(toy.finis, 3);
    assert_int_equal(cmb_so_count(so), 0);
    assert_non_null(cmb_so_list_of(so, S(1))); /* usable again */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(lookup_creates_each_stream_once_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(own_list_first_without_a_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(other_list_after_its_event, setup, teardown),
        cmocka_unit_test_setup_teardown(other_lists_in_order_of_appearance, setup, teardown),
        cmocka_unit_test_setup_teardown(merge_until_a_block_fits, setup, teardown),
        cmocka_unit_test_setup_teardown(expand_when_nothing_fits, setup, teardown),
        cmocka_unit_test_setup_teardown(a_failed_wait_takes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(one_event_per_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(no_event_means_synchronised, setup, teardown),
        cmocka_unit_test_setup_teardown(destroy_waits_for_every_event, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
