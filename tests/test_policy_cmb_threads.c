/* test_policy_cmb_threads.c - "cmb" under concurrent allocation and free
 * from several threads over the sim upstream, as autograd's backward
 * threads use it: each thread allocates on its own stream and a shared one,
 * and hands a share of its blocks to the next thread to free (a free on
 * another thread than the allocation). Every live block is checked against
 * every other for overlap, and the byte counts must come back to zero. A
 * race inside the policy shows as an overlap, a wrong count, an upstream
 * misuse, or, built with -DCMB_TSAN=ON (.ci/run), a ThreadSanitizer report. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "allocators/upstream.h"
#include "support/conformance.h"
#include "support/trace_file.h"

#define MiB ((size_t)1 << 20)
#define THREADS 4
#define ROUNDS 3000
#define SLOTS 48

typedef struct live {
    uintptr_t p;
    size_t size;
    cmb_stream stream;
} live;

/* the test's own record of live blocks and the hand-over queue, under one mutex */
static pthread_mutex_t book_lock = PTHREAD_MUTEX_INITIALIZER;
static live book[THREADS * SLOTS * 6]; /* the slots and the hand-over queues */
static size_t n_book;
static live handed[THREADS][SLOTS * 4];
static size_t n_handed[THREADS];
static int errors;

static const cmb_allocator_methods *m;
static void *st;

static void book_add(uintptr_t p, size_t size, cmb_stream s)
{
    pthread_mutex_lock(&book_lock);
    for (size_t i = 0; i < n_book; i++)
        if (p < book[i].p + book[i].size && book[i].p < p + size) {
            fprintf(stderr, "[%#lx, +%zu) overlaps the live [%#lx, +%zu)\n", (unsigned long)p, size,
                    (unsigned long)book[i].p, book[i].size);
            errors++;
        }
    if (n_book < sizeof book / sizeof *book)
        book[n_book++] = (live){p, size, s};
    else {
        fprintf(stderr, "the test's book of live blocks is full\n");
        errors++;
    }
    pthread_mutex_unlock(&book_lock);
}

static void book_remove(uintptr_t p)
{
    pthread_mutex_lock(&book_lock);
    size_t i = 0;
    while (i < n_book && book[i].p != p)
        i++;
    if (i == n_book) {
        fprintf(stderr, "%#lx freed but not live\n", (unsigned long)p);
        errors++;
    }
    else
        book[i] = book[--n_book];
    pthread_mutex_unlock(&book_lock);
}

static void release(live b, cmb_stream on)
{
    book_remove(b.p);
    if (m->deallocate(st, (void *)b.p, b.size, on) != CMB_OK)
        __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
}

/* frees what the previous thread handed to thread t, on t's own stream */
static void drain(int t, cmb_stream on)
{
    live mine[SLOTS * 4];
    pthread_mutex_lock(&book_lock);
    size_t n = n_handed[t];
    memcpy(mine, handed[t], n * sizeof *mine);
    n_handed[t] = 0;
    pthread_mutex_unlock(&book_lock);
    for (size_t i = 0; i < n; i++)
        release(mine[i], on);
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
    cmb_stream own = (cmb_stream)(uintptr_t)(10 + t), shared = (cmb_stream)(uintptr_t)1;
    live slot[SLOTS] = {{0}};
    for (int r = 0; r < ROUNDS; r++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        live *b = &slot[x % SLOTS];
        if (b->p) {
            if ((x >> 8) % 4 == 0) { /* hand it to the next thread */
                pthread_mutex_lock(&book_lock);
                int to = (t + 1) % THREADS;
                if (n_handed[to] < SLOTS * 4) {
                    handed[to][n_handed[to]++] = *b;
                    b->p = 0;
                }
                pthread_mutex_unlock(&book_lock);
            }
            if (b->p)
                release(*b, b->stream);
            b->p = 0;
            continue;
        }
        /* small blocks mostly, some of several pages */
        size_t size = (x >> 16) % 8 ? 512 + (x >> 20) % (256 * 1024) : 1 * MiB + (x >> 20) % (9 * MiB);
        cmb_stream s = (x >> 40) % 3 ? own : shared;
        void *p = NULL;
        cmb_status as = m->allocate(st, size, s, &p);
        if (as != CMB_OK) {
            fprintf(stderr, "thread %d: allocate(%zu) returned %s\n", t, size, cmb_status_str(as));
            __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
            continue;
        }
        book_add((uintptr_t)p, size, s);
        *b = (live){(uintptr_t)p, size, s};
        if (r % 64 == 0) {
            drain(t, own);
            cmb_alloc_stats sts;
            if (m->stats(st, &sts) != CMB_OK)
                __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
        }
        if (t == 0 && r % 500 == 0 && m->trim(st) != CMB_OK)
            __atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
    }
    for (int i = 0; i < SLOTS; i++)
        if (slot[i].p)
            release(slot[i], slot[i].stream);
    return NULL;
}

/* THREADS threads allocate and free at once over one instance; `layout`
 * names a layout trace (or NULL), whose range stays mapped after trim. */
static void run_threads(const char *options, int layout)
{
    cmb_upstream *up;
    errors = 0;
    cmb_test_open("cmb", options, (uint64_t)4 << 30, NULL, &up, &m, &st);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t), 0);
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < THREADS; t++)
        drain(t, (cmb_stream)(uintptr_t)(10 + t));
    assert_int_equal(errors, 0);
    assert_int_equal(n_book, 0);
    cmb_alloc_stats s;
    assert_int_equal(m->stats(st, &s), CMB_OK);
    assert_int_equal(s.requested.current, 0);
    assert_int_equal(s.blocks.current, 0);
    assert_true(s.requested.peak > 0);
    assert_int_equal(m->trim(st), CMB_OK);
    if (!layout)
        assert_int_equal(up->stats.held_current, 0);
    else /* the range was mapped, so requests took planned places, and it outlives trim */
        assert_true(up->stats.held_current > 0);
    assert_int_equal(m->destroy(st), CMB_OK);
    assert_int_equal(up->stats.held_current, 0);
    assert_int_equal(cmb_upstream_misuse_count(up), 0);
    assert_int_equal(cmb_upstream_close(up), 0);
}

static void concurrent_alloc_and_free(void **unused)
{
    (void)unused;
    run_threads(NULL, 0);
}

/* The same with a layout whose sizes the threads draw from (cmb:layout):
 * requests take planned places, are refused them and miss them while
 * other threads do the same. */
static void concurrent_with_a_layout(void **unused)
{
    (void)unused;
    char opts[600];
    cmb_test_trace t;
    cmb_test_trace_open(&t);
    uint64_t x = 7;
    for (int i = 0; i < 4000; i++) { /* the workers' small sizes, each freed two allocations later */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        cmb_test_trace_alloc(&t, (uint64_t)i, 512 + (x >> 20) % (256 * 1024), 0);
        if (i >= 2)
            cmb_test_trace_free(&t, (uint64_t)i - 2, 0);
    }
    const char *path = cmb_test_trace_close(&t);
    snprintf(opts, sizeof opts, "layout=%s", path);
    run_threads(opts, 1);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(concurrent_alloc_and_free),
        cmocka_unit_test(concurrent_with_a_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
