/* conformance.c - the shared policy checks (see conformance.h). */
#include "conformance.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/registry.h"
#include "common/cmb_rbtree.h"
#include "common/cmb_rng.h"

/* --- opening ------------------------------------------------------------------ */

static size_t parse_options(const char *text, cmb_option *opt, char *buf, size_t buflen)
{
    size_t n = 0;
    if (!text || !*text)
        return 0;
    snprintf(buf, buflen, "%s", text);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ":", &save); kv && n < 32; kv = strtok_r(NULL, ":", &save)) {
        char *eq = strchr(kv, '=');
        assert_non_null(eq);
        *eq = '\0';
        opt[n].key = kv;
        opt[n].value = eq + 1;
        n++;
    }
    return n;
}

static void open_with(const cmb_allocator_methods *methods, const char *name, const char *defaults,
                      const char *options, uint64_t capacity, const cmb_fault_spec *fault, cmb_upstream **up,
                      void **state)
{
    static cmb_option opt[64];
    static char buf[1024];
    char err[256] = "";
    cmb_upstream_config ucfg;
    cmb_upstream_config_default(&ucfg);
    ucfg.sim_capacity = capacity ? capacity : (8ull << 30);
    if (fault)
        ucfg.fault = *fault;
    assert_int_equal(cmb_upstream_open(&ucfg, up, err, sizeof err), CMB_OK);
    /* entry defaults first, then the test's own options */
    size_t n = parse_options(defaults, opt, buf, sizeof buf / 2);
    n += parse_options(options, opt + n, buf + sizeof buf / 2, sizeof buf / 2);
    cmb_config cfg = {.options = opt, .n_options = n, .sim = 1, .error = err, .error_len = sizeof err};
    cmb_status st = methods->create(&cfg, *up, state);
    if (st != CMB_OK)
        fail_msg("creating %s: %s", name, err);
}

void cmb_test_open(const char *allocator, const char *options, uint64_t capacity, const cmb_fault_spec *fault,
                   cmb_upstream **up, const cmb_allocator_methods **m, void **state)
{
    const cmb_allocator_entry *e = cmb_allocator_find(allocator);
    if (!e)
        fail_msg("unknown allocator %s", allocator);
    open_with(e->methods, allocator, e->default_options, options, capacity, fault, up, state);
    *m = e->methods;
}

void cmb_test_open_methods(const cmb_allocator_methods *methods, const char *options, uint64_t capacity,
                           const cmb_fault_spec *fault, cmb_upstream **up, void **state)
{
    open_with(methods, methods->name, NULL, options, capacity, fault, up, state);
}

static void open_world(const cmb_conformance *c, const cmb_fault_spec *fault, cmb_upstream **up,
                       const cmb_allocator_methods **m, void **state)
{
    if (c->methods) {
        cmb_test_open_methods(c->methods, c->options, c->capacity, fault, up, state);
        *m = c->methods;
    } else {
        cmb_test_open(c->allocator, c->options, c->capacity, fault, up, m, state);
    }
}

/* --- live blocks, ordered by address for overlap checks ---------------------------- */

typedef struct live_block {
    cmb_rbnode node;
    uintptr_t start;
    size_t size;
    cmb_stream stream;
} live_block;

static int block_cmp(const cmb_rbnode *a, const cmb_rbnode *b)
{
    uintptr_t x = cmb_rb_entry(a, live_block, node)->start, y = cmb_rb_entry(b, live_block, node)->start;
    return (x > y) - (x < y);
}

typedef struct world {
    const cmb_allocator_methods *m;
    void *state;
    cmb_upstream *up;
    cmb_rbtree by_addr;
    live_block **live;
    size_t n_live, cap_live;
    int64_t requested;
    uint64_t oom;
} world;

static void check_placement(world *w, live_block *b)
{
    assert_int_equal(b->start % 256, 0);
    if (!cmb_upstream_contains(w->up, (void *)b->start, b->size))
        fail_msg("%s: block %#lx+%zu lies outside the memory it holds from the upstream", w->m->name,
                 (unsigned long)b->start, b->size);
    cmb_rbnode *prev = cmb_rb_prev(&b->node), *next = cmb_rb_next(&b->node);
    if (prev) {
        live_block *p = cmb_rb_entry(prev, live_block, node);
        if (p->start + p->size > b->start)
            fail_msg("%s: block %#lx+%zu overlaps %#lx+%zu", w->m->name, (unsigned long)b->start, b->size,
                     (unsigned long)p->start, p->size);
    }
    if (next) {
        live_block *q = cmb_rb_entry(next, live_block, node);
        if (b->start + b->size > q->start)
            fail_msg("%s: block %#lx+%zu overlaps %#lx+%zu", w->m->name, (unsigned long)b->start, b->size,
                     (unsigned long)q->start, q->size);
    }
}

static void check_stats(world *w)
{
    cmb_alloc_stats s;
    assert_int_equal(w->m->stats(w->state, &s), CMB_OK);
    if (s.valid & CMB_STAT_REQUESTED) {
        assert_int_equal(s.requested.current, w->requested);
        assert_true(s.requested.peak >= s.requested.current);
    }
    if (s.valid & CMB_STAT_BLOCKS)
        assert_int_equal(s.blocks.current, (int64_t)w->n_live);
    if (s.valid & CMB_STAT_RESERVED) {
        assert_int_equal(s.reserved.current, w->up->stats.held_current);
        assert_int_equal(s.reserved.peak, w->up->stats.held_peak);
    }
    if (s.valid & CMB_STAT_ALLOCATED) {
        assert_true(s.allocated.current >= w->requested);
        if (s.valid & CMB_STAT_RESERVED)
            assert_true(s.reserved.current >= s.allocated.current);
        if ((s.valid & CMB_STAT_LARGEST_FREE) && (s.valid & CMB_STAT_RESERVED))
            assert_true(s.largest_free <= (uint64_t)(s.reserved.current - s.allocated.current));
    }
    assert_int_equal(cmb_upstream_misuse_count(w->up), 0);
}

static uint64_t draw_size(cmb_rng *r, uint64_t max)
{
    double u = cmb_rng_uniform(r);
    if (u < 0.5)
        return cmb_rng_log_uniform(r, 1, max < 65536 ? max : 65536);
    if (u < 0.9)
        return cmb_rng_range(r, 1, max < (16u << 20) ? max : (16u << 20));
    return cmb_rng_range(r, 1, max);
}

static void do_alloc(world *w, cmb_rng *r, uint64_t max, int streams, int faults)
{
    uint64_t size = draw_size(r, max);
    cmb_stream s = (cmb_stream)(uintptr_t)cmb_rng_range(r, 1, (uint64_t)streams);
    void *p;
    cmb_status st = w->m->allocate(w->state, size, s, &p);
    if (st == CMB_ERR_OOM) {
        w->oom++;
        return;
    }
    if (st != CMB_OK)
        fail_msg("%s: allocate(%llu) returned %s%s", w->m->name, (unsigned long long)size, cmb_status_str(st),
                 faults ? " under fault injection" : "");
    live_block *b = malloc(sizeof *b);
    b->start = (uintptr_t)p;
    b->size = size;
    b->stream = s;
    cmb_rb_insert(&w->by_addr, &b->node, block_cmp);
    if (w->n_live == w->cap_live) {
        w->cap_live = w->cap_live ? w->cap_live * 2 : 1024;
        w->live = realloc(w->live, w->cap_live * sizeof *w->live);
    }
    w->live[w->n_live++] = b;
    w->requested += (int64_t)size;
    check_placement(w, b);
}

static void do_free(world *w, size_t i)
{
    live_block *b = w->live[i];
    w->live[i] = w->live[--w->n_live];
    cmb_rb_erase(&w->by_addr, &b->node);
    assert_int_equal(w->m->deallocate(w->state, (void *)b->start, b->size, b->stream), CMB_OK);
    w->requested -= (int64_t)b->size;
    free(b);
}

/* Runs `ops` random steps; live bytes stay under half the capacity so most
 * failures come from injected faults, not from a full device. */
static void run_traffic(world *w, const cmb_conformance *c, uint64_t ops, int faults, int check_every)
{
    cmb_rng r;
    uint64_t max = c->max_size ? c->max_size : (64u << 20);
    uint64_t cap = c->capacity ? c->capacity : (8ull << 30);
    int streams = c->streams > 0 ? c->streams : 1;
    cmb_rng_seed(&r, c->seed ? c->seed : 1);
    for (uint64_t step = 0; step < ops; step++) {
        int alloc = w->n_live == 0 || (cmb_rng_uniform(&r) < 0.55 && (uint64_t)w->requested < cap / 2);
        if (alloc)
            do_alloc(w, &r, max, streams, faults);
        else
            do_free(w, (size_t)cmb_rng_range(&r, 0, w->n_live - 1));
        if (check_every && step % (uint64_t)check_every == 0)
            check_stats(w);
    }
    check_stats(w);
}

static void finish(world *w, int trim_first)
{
    /* free half, keep half live: destroy must still return everything */
    while (w->n_live > w->n_live / 2 && w->n_live)
        do_free(w, w->n_live - 1);
    check_stats(w);
    if (trim_first && w->m->trim)
        assert_int_equal(w->m->trim(w->state), CMB_OK);
    check_stats(w);
    assert_int_equal(w->m->destroy(w->state), CMB_OK);
    assert_int_equal(cmb_upstream_misuse_count(w->up), 0);
    if (w->up->stats.held_current != 0)
        fail_msg("%s: destroy left %lld bytes held from the upstream", w->m->name,
                 (long long)w->up->stats.held_current);
    for (size_t i = 0; i < w->n_live; i++)
        free(w->live[i]);
    free(w->live);
    assert_int_equal(cmb_upstream_close(w->up), 0);
}

void cmb_conformance_random(const cmb_conformance *c)
{
    world w;
    memset(&w, 0, sizeof w);
    cmb_rb_init(&w.by_addr);
    open_world(c, NULL, &w.up, &w.m, &w.state);
    run_traffic(&w, c, c->ops ? c->ops : 200000, 0, 1);
    /* a full drain and trim must leave the stats consistent too */
    finish(&w, 1);
}

void cmb_conformance_faults(const cmb_conformance *c)
{
    static const uint64_t every[] = {2, 3, 5, 17};
    for (size_t k = 0; k < sizeof every / sizeof every[0] + 1; k++) {
        cmb_fault_spec f = {0};
        if (k < sizeof every / sizeof every[0])
            f.fail_every = every[k];
        else
            f.fail_prob = 0.2, f.seed = 3;
        world w;
        memset(&w, 0, sizeof w);
        cmb_rb_init(&w.by_addr);
        open_world(c, &f, &w.up, &w.m, &w.state);
        uint64_t ops = c->ops ? c->ops / 4 : 50000;
        run_traffic(&w, c, ops, 1, 64);
        /* a policy that calls its upstream rarely (BFC's doubling regions)
         * may never make the Kth request; one that made it must have met
         * the fault */
        uint64_t requests = w.up->stats.alloc_calls + w.up->stats.failed_calls;
        uint64_t needed = f.fail_every ? f.fail_every : 3;
        if (requests >= needed && w.up->stats.injected_faults == 0)
            fail_msg("%s: no injected fault was ever reached", w.m->name);
        finish(&w, k % 2);
    }
}
