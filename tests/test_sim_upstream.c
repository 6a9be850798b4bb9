/* test_sim_upstream.c - the sim upstream and the accounting layer:
 * byte accounting, capacity, alignment, misuse detection, VMM pages,
 * fault injection (Nth, every Kth, random, capacity cap), leak on close. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "allocators/upstream.h"

static cmb_upstream *open_sim(uint64_t capacity, cmb_fault_spec fault)
{
    cmb_upstream_config cfg;
    cmb_upstream *u = NULL;
    char err[256];
    cmb_upstream_config_default(&cfg);
    cfg.sim_capacity = capacity;
    cfg.fault = fault;
    assert_int_equal(cmb_upstream_open(&cfg, &u, err, sizeof err), CMB_OK);
    return u;
}

static void accounting_and_alignment(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(1ull << 30, (cmb_fault_spec){0});
    void *a, *b;
    assert_int_equal(cmb_up_alloc(u, 1000, NULL, &a), CMB_OK);
    assert_int_equal(cmb_up_alloc(u, 3u << 20, NULL, &b), CMB_OK);
    assert_int_equal((uintptr_t)a % 512, 0);
    assert_int_equal((uintptr_t)b % (2u << 20), 0); /* large blocks: page aligned */
    assert_int_equal(u->stats.held_current, 1000 + (3 << 20));
    /* device bytes round each allocation up to 512 */
    assert_int_equal(cmb_upstream_device_used(u), 1024 + (3u << 20));
    assert_int_equal(cmb_up_free(u, a, 1000, NULL), CMB_OK);
    assert_int_equal(u->stats.held_current, 3 << 20);
    assert_int_equal(u->stats.held_peak, 1000 + (3 << 20));
    assert_int_equal(u->stats.alloc_calls, 2);
    assert_int_equal(u->stats.free_calls, 1);
    assert_int_equal(cmb_upstream_close(u), 3 << 20); /* b leaked */
}

static void capacity_is_enforced(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(10u << 20, (cmb_fault_spec){0});
    void *a, *b;
    size_t f, t;
    assert_int_equal(cmb_up_alloc(u, 8u << 20, NULL, &a), CMB_OK);
    assert_int_equal(cmb_up_alloc(u, 3u << 20, NULL, &b), CMB_ERR_OOM);
    assert_int_equal(cmb_up_mem_info(u, &f, &t), CMB_OK);
    assert_int_equal(t, 10u << 20);
    assert_int_equal(f, 2u << 20);
    assert_int_equal(cmb_up_alloc(u, 2u << 20, NULL, &b), CMB_OK);
    assert_int_equal(u->stats.failed_calls, 1);
    assert_int_equal(cmb_upstream_close(u), 10 << 20);
}

static void misuse_is_refused_and_counted(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(1ull << 30, (cmb_fault_spec){0});
    void *a;
    assert_int_equal(cmb_up_alloc(u, 4096, NULL, &a), CMB_OK);
    assert_int_equal(cmb_up_free(u, (char *)a + 512, 4096, NULL), CMB_ERR_INVALID);
    assert_int_equal(cmb_up_free(u, a, 4095, NULL), CMB_ERR_INVALID);
    assert_int_equal(cmb_upstream_misuse_count(u), 2);
    assert_non_null(cmb_upstream_last_misuse(u));
    assert_int_equal(cmb_up_free(u, a, 4096, NULL), CMB_OK);
    assert_int_equal(cmb_up_free(u, a, 4096, NULL), CMB_ERR_INVALID); /* double free */
    assert_int_equal(cmb_upstream_misuse_count(u), 3);
    assert_int_equal(cmb_upstream_close(u), 0);
}

static void vmm_pages(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(64u << 20, (cmb_fault_spec){0});
    const size_t g = u->granularity;
    void *va;
    assert_int_equal(g, 2u << 20);
    assert_int_equal(cmb_up_va_reserve(u, 16 * g, &va), CMB_OK);
    assert_int_equal(u->stats.held_current, 0); /* address space is free */
    assert_int_equal(cmb_up_map(u, va, 4 * g), CMB_OK);
    assert_int_equal(cmb_up_map(u, (char *)va + 2 * g, 2 * g), CMB_ERR_INVALID); /* already mapped */
    assert_int_equal(cmb_up_map(u, (char *)va + 1, g), CMB_ERR_INVALID);         /* unaligned */
    assert_int_equal(cmb_up_map(u, (char *)va + 15 * g, 2 * g), CMB_ERR_INVALID); /* past the end */
    assert_int_equal(u->stats.held_current, 4 * g);
    assert_int_equal(cmb_up_unmap(u, (char *)va + g, g), CMB_OK); /* a hole */
    assert_int_equal(cmb_up_unmap(u, (char *)va + g, g), CMB_ERR_INVALID);
    assert_int_equal(u->stats.held_current, 3 * g);
    /* the device has 64 MiB: 29 more pages do not fit, 29 - 0 = ... */
    assert_int_equal(cmb_up_map(u, (char *)va + 4 * g, 12 * g), CMB_OK);
    assert_int_equal(cmb_upstream_device_used(u), 15 * g);
    assert_int_equal(cmb_up_va_release(u, va, 16 * g), CMB_OK); /* unmaps what is left (misuse) */
    assert_int_equal(cmb_upstream_misuse_count(u), 5);
    assert_int_equal(u->stats.held_current, 0);
    assert_int_equal(cmb_upstream_close(u), 0);
}

/* Driver calls by kind: a map is one handle (create, map, set access), an
 * unmap releases each handle it covers, an alloc/free is one cudaMalloc /
 * cudaFree; a failed request is no call counted. */
static void driver_calls_by_kind(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(64u << 20, (cmb_fault_spec){0});
    const size_t g = u->granularity;
    void *va, *p;
    assert_int_equal(cmb_up_va_reserve(u, 16 * g, &va), CMB_OK);
    assert_int_equal(cmb_up_map(u, va, g), CMB_OK);
    assert_int_equal(cmb_up_map(u, (char *)va + g, 2 * g), CMB_OK);
    assert_int_equal(cmb_up_map(u, (char *)va + 3 * g, g), CMB_OK);
    assert_int_equal(cmb_up_map(u, (char *)va + 3 * g, g), CMB_ERR_INVALID); /* misuse: no call */
    assert_int_equal(u->driver.mem_create, 3);
    assert_int_equal(u->driver.mem_map, 3);
    assert_int_equal(u->driver.set_access, 3);
    /* one range over the first two handles: two unmaps, two releases */
    assert_int_equal(cmb_up_unmap(u, va, 3 * g), CMB_OK);
    assert_int_equal(u->driver.mem_unmap, 2);
    assert_int_equal(u->driver.mem_release, 2);
    assert_int_equal(cmb_up_unmap(u, (char *)va + 3 * g, g), CMB_OK);
    assert_int_equal(u->driver.mem_unmap, 3);
    assert_int_equal(cmb_up_alloc(u, 4096, NULL, &p), CMB_OK);
    assert_int_equal(cmb_up_alloc(u, 1ull << 40, NULL, &p) == CMB_OK, 0); /* refused: no call */
    assert_int_equal(cmb_up_free(u, p, 4096, NULL), CMB_OK);
    assert_int_equal(cmb_up_va_release(u, va, 16 * g), CMB_OK);
    assert_int_equal(u->driver.malloc_calls, 1);
    assert_int_equal(u->driver.free_calls, 1);
    assert_int_equal(u->driver.va_reserve, 1);
    assert_int_equal(u->driver.va_free, 1);
    assert_int_equal(u->driver.total, 3 * 3 + 3 * 2 + 2 + 2);
    assert_int_equal(cmb_upstream_misuse_count(u), 1);
    assert_int_equal(cmb_upstream_close(u), 0);
}

/* Moving handles: park unmaps whole handles and keeps them held (one
 * cuMemUnmap each), unpark maps a kept one of exactly that size elsewhere
 * (cuMemMap + cuMemSetAccess), drop_parked releases what is left (one
 * cuMemRelease each); no create, no release for a handle that moves. */
static void handles_move(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(64u << 20, (cmb_fault_spec){0});
    const size_t g = u->granularity;
    void *va;
    assert_int_equal(cmb_up_va_reserve(u, 16 * g, &va), CMB_OK);
    char *b = va;
    assert_int_equal(cmb_up_map(u, b, 2 * g), CMB_OK);
    assert_int_equal(cmb_up_map(u, b + 2 * g, g), CMB_OK);
    assert_int_equal(cmb_up_map(u, b + 3 * g, g), CMB_OK);
    assert_int_equal(cmb_up_park(u, b, g), CMB_ERR_INVALID);          /* half a handle: misuse */
    assert_int_equal(cmb_up_park(u, b + 8 * g, g), CMB_ERR_INVALID);  /* not mapped: misuse */
    uint64_t total = u->driver.total;
    assert_int_equal(cmb_up_park(u, b, 3 * g), CMB_OK);               /* two handles */
    assert_int_equal(u->driver.mem_unmap, 2);
    assert_int_equal(u->driver.mem_release, 0);
    assert_int_equal(u->stats.held_current, (int64_t)(4 * g));        /* still held */
    assert_false(cmb_upstream_contains(u, b, g));
    assert_int_equal(cmb_up_unpark(u, b + 8 * g, 4 * g), CMB_ERR_NOT_FOUND); /* no such size kept */
    assert_int_equal(cmb_up_unpark(u, b + 8 * g, 2 * g), CMB_OK);
    assert_int_equal(cmb_up_unpark(u, b + 8 * g, 2 * g), CMB_ERR_INVALID);   /* mapped there now */
    assert_true(cmb_upstream_contains(u, b + 8 * g, 2 * g));
    assert_int_equal(u->driver.mem_create, 3);
    assert_int_equal(u->driver.mem_map, 4);
    assert_int_equal(u->driver.set_access, 4);
    assert_int_equal(cmb_up_drop_parked(u, SIZE_MAX), CMB_OK);          /* the 1-page handle */
    assert_int_equal(u->driver.mem_release, 1);
    assert_int_equal(u->driver.total - total, 2 + 2 + 1);
    assert_int_equal(u->stats.held_current, (int64_t)(3 * g));
    assert_int_equal(cmb_upstream_device_used(u), 3 * g);
    assert_int_equal(cmb_up_unpark(u, b, g), CMB_ERR_NOT_FOUND);
    /* the moved handle is an ordinary one: unmapped whole, then released */
    assert_int_equal(cmb_up_unmap(u, b + 8 * g, 2 * g), CMB_OK);
    assert_int_equal(u->driver.mem_release, 2);
    assert_int_equal(cmb_up_unmap(u, b + 3 * g, g), CMB_OK);
    assert_int_equal(u->stats.held_current, 0);
    /* what is kept at close is held: a leak */
    assert_int_equal(cmb_up_map(u, b, g), CMB_OK);
    assert_int_equal(cmb_up_park(u, b, g), CMB_OK);
    assert_int_equal(cmb_up_va_release(u, va, 16 * g), CMB_OK);
    assert_int_equal(cmb_upstream_misuse_count(u), 3);
    assert_int_equal(cmb_upstream_close(u), (int64_t)g);
}

/* park_after: park's accounting at once (the handles kept, the range free
 * to map again, its cuMemUnmap counted), the checks of park. */
static void park_after_is_park(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(64u << 20, (cmb_fault_spec){0});
    const size_t g = u->granularity;
    cmb_stream s1 = (cmb_stream)(uintptr_t)1;
    void *va;
    assert_int_equal(cmb_up_va_reserve(u, 16 * g, &va), CMB_OK);
    char *b = va;
    assert_int_equal(cmb_up_map(u, b, 2 * g), CMB_OK);
    assert_int_equal(cmb_up_map(u, b + 2 * g, g), CMB_OK);
    assert_int_equal(cmb_up_park_after(u, b, g, s1), CMB_ERR_INVALID); /* half a handle: misuse */
    assert_int_equal(cmb_up_park_after(u, b, 3 * g, s1), CMB_OK);
    assert_int_equal(u->driver.mem_unmap, 2);
    assert_int_equal(u->stats.held_current, (int64_t)(3 * g)); /* still held */
    assert_false(cmb_upstream_contains(u, b, g));
    assert_int_equal(cmb_up_unpark(u, b + 8 * g, 2 * g), CMB_OK); /* elsewhere */
    assert_int_equal(cmb_up_map(u, b, g), CMB_OK);                  /* and the old range again */
    assert_int_equal(cmb_up_drop_parked(u, SIZE_MAX), CMB_OK);
    assert_int_equal(u->stats.held_current, (int64_t)(3 * g));
    assert_int_equal(cmb_up_unmap(u, b, g), CMB_OK);
    assert_int_equal(cmb_up_unmap(u, b + 8 * g, 2 * g), CMB_OK);
    assert_int_equal(cmb_up_va_release(u, va, 16 * g), CMB_OK);
    assert_int_equal(cmb_upstream_misuse_count(u), 1);
    assert_int_equal(cmb_upstream_close(u), 0);
}

/* cmb_upstream_time_ops counts each op while on and nothing while off; the
 * ops still do what they do (the accounting layer under the timing). */
static void ops_timed_while_on(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(64u << 20, (cmb_fault_spec){0});
    const size_t g = u->granularity;
    uint64_t calls[CMB_OP_KINDS], ns[CMB_OP_KINDS];
    void *va;
    assert_int_equal(cmb_up_va_reserve(u, 4 * g, &va), CMB_OK); /* not timed: off */
    cmb_upstream_time_ops(u, 1);
    assert_int_equal(cmb_up_map(u, va, g), CMB_OK);
    assert_int_equal(cmb_up_map(u, va, g), CMB_ERR_INVALID); /* a misuse is still refused, and timed */
    assert_int_equal(cmb_up_park_after(u, va, g, (cmb_stream)(uintptr_t)1), CMB_OK);
    cmb_upstream_time_ops(u, 0);
    assert_int_equal(cmb_up_drop_parked(u, SIZE_MAX), CMB_OK); /* off again */
    cmb_upstream_op_time(u, calls, ns);
    assert_int_equal(calls[CMB_OP_va_reserve], 0);
    assert_int_equal(calls[CMB_OP_map], 2);
    assert_int_equal(calls[CMB_OP_park_after], 1);
    assert_int_equal(calls[CMB_OP_drop_parked], 0);
    assert_string_equal(cmb_op_names[CMB_OP_park_after], "park_after");
    assert_string_equal(cmb_op_names[CMB_OP_map], "map");
    assert_int_equal(u->stats.held_current, 0);
    assert_int_equal(cmb_up_va_release(u, va, 4 * g), CMB_OK);
    assert_int_equal(cmb_upstream_misuse_count(u), 1);
    assert_int_equal(cmb_upstream_close(u), 0);
}

static int count_failures(cmb_upstream *u, int requests)
{
    int failed = 0;
    for (int i = 0; i < requests; i++) {
        void *p;
        cmb_status st = cmb_up_alloc(u, 4096, NULL, &p);
        if (st == CMB_ERR_OOM)
            failed++;
        else
            assert_int_equal(cmb_up_free(u, p, 4096, NULL), CMB_OK);
    }
    return failed;
}

static void fault_nth_and_every(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(1ull << 30, (cmb_fault_spec){.fail_nth = 3});
    void *p;
    assert_int_equal(cmb_up_alloc(u, 512, NULL, &p), CMB_OK);
    assert_int_equal(cmb_up_free(u, p, 512, NULL), CMB_OK);
    assert_int_equal(cmb_up_alloc(u, 512, NULL, &p), CMB_OK);
    assert_int_equal(cmb_up_free(u, p, 512, NULL), CMB_OK);
    assert_int_equal(cmb_up_alloc(u, 512, NULL, &p), CMB_ERR_OOM); /* the 3rd */
    assert_int_equal(count_failures(u, 100), 0);
    assert_int_equal(u->stats.injected_faults, 1);
    assert_int_equal(cmb_upstream_close(u), 0);

    u = open_sim(1ull << 30, (cmb_fault_spec){.fail_every = 7});
    assert_int_equal(count_failures(u, 70), 10);
    assert_int_equal(cmb_upstream_close(u), 0);
}

static void fault_random_is_seeded(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(1ull << 30, (cmb_fault_spec){.fail_prob = 0.25, .seed = 7});
    int a = count_failures(u, 4000);
    cmb_upstream_close(u);
    u = open_sim(1ull << 30, (cmb_fault_spec){.fail_prob = 0.25, .seed = 7});
    int b = count_failures(u, 4000);
    cmb_upstream_close(u);
    assert_int_equal(a, b);       /* same seed, same failures */
    assert_in_range(a, 850, 1150); /* about a quarter */
}

static void fault_capacity_cap(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(1ull << 30, (cmb_fault_spec){.cap_bytes = 5u << 20});
    void *a, *b;
    size_t f, t;
    assert_int_equal(cmb_up_alloc(u, 4u << 20, NULL, &a), CMB_OK);
    assert_int_equal(cmb_up_alloc(u, 2u << 20, NULL, &b), CMB_ERR_OOM);
    assert_int_equal(cmb_up_mem_info(u, &f, &t), CMB_OK);
    assert_int_equal(t, 5u << 20);
    assert_int_equal(f, 1u << 20);
    assert_int_equal(cmb_up_free(u, a, 4u << 20, NULL), CMB_OK);
    assert_int_equal(cmb_up_alloc(u, 5u << 20, NULL, &b), CMB_OK);
    assert_int_equal(cmb_upstream_close(u), 5 << 20);
}

static void events_complete_at_once(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(1u << 20, (cmb_fault_spec){0});
    cmb_event ev;
    assert_int_equal(cmb_up_event_record(u, (cmb_stream)(uintptr_t)2, &ev), CMB_OK);
    assert_int_equal(cmb_up_event_query(u, ev), CMB_OK);
    assert_int_equal(cmb_up_event_rerecord(u, (cmb_stream)(uintptr_t)3, ev), CMB_OK);
    assert_int_equal(cmb_up_event_query(u, ev), CMB_OK);
    assert_int_equal(cmb_up_event_destroy(u, ev), CMB_OK);
    assert_int_equal(cmb_up_stream_sync(u, NULL), CMB_OK);
    cmb_upstream_close(u);
}

/* A child shares its parent's memory, addresses and cap, keeps its own
 * held bytes, and gives back what it holds when closed. */
static void child_shares_the_cap(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(1ull << 30, (cmb_fault_spec){.cap_bytes = 8u << 20}), *c = NULL;
    char err[256];
    void *a, *b, *x;
    size_t f, t;
    assert_int_equal(cmb_upstream_open_child(u, &c, err, sizeof err), CMB_OK);
    assert_int_equal(cmb_up_alloc(u, 6u << 20, NULL, &a), CMB_OK);
    assert_int_equal(cmb_up_alloc(c, 4u << 20, NULL, &x), CMB_ERR_OOM); /* 10 MiB > the parent's 8 */
    assert_int_equal(cmb_up_alloc(c, 2u << 20, NULL, &b), CMB_OK);
    assert_ptr_not_equal(a, b); /* one address space */
    assert_int_equal(u->stats.held_current, 6 << 20);
    assert_int_equal(c->stats.held_current, 2 << 20);
    assert_int_equal(cmb_up_mem_info(u, &f, &t), CMB_OK);
    assert_int_equal(f, 0);
    assert_int_equal(cmb_up_alloc(u, 1u << 20, NULL, &x), CMB_ERR_OOM); /* the child's bytes count */
    assert_int_equal(cmb_upstream_close(c), 2 << 20);                   /* its 2 MiB back */
    assert_int_equal(cmb_up_alloc(u, 2u << 20, NULL, &x), CMB_OK);
    assert_int_equal(cmb_upstream_close(u), 8 << 20);
}

static int hold_flag;
static int hold_now(void *ctx)
{
    return *(int *)ctx;
}

/* While held, events and synchronizations answer "not yet" (a capture
 * forbids them); a destroy still goes through. */
static void stream_ops_held_back(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(1u << 20, (cmb_fault_spec){0});
    cmb_event ev;
    cmb_upstream_hold_stream_ops(u, hold_now, &hold_flag);
    hold_flag = 1;
    assert_int_equal(cmb_up_event_record(u, (cmb_stream)(uintptr_t)2, &ev), CMB_ERR_STATE);
    assert_int_equal(cmb_up_stream_sync(u, NULL), CMB_ERR_STATE);
    hold_flag = 0;
    assert_int_equal(cmb_up_event_record(u, (cmb_stream)(uintptr_t)2, &ev), CMB_OK);
    hold_flag = 1;
    assert_int_equal(cmb_up_event_query(u, ev), CMB_ERR_STATE);
    assert_int_equal(cmb_up_event_rerecord(u, (cmb_stream)(uintptr_t)3, ev), CMB_ERR_STATE);
    assert_int_equal(cmb_up_event_destroy(u, ev), CMB_OK);
    cmb_upstream_close(u);
}

/* defer_access: maps and unparks between on and off make no access call;
 * off makes one per contiguous range they mapped (in any order), none for
 * what was unmapped again meanwhile; off without on, or on twice, is misuse. */
static void access_deferred(void **state)
{
    (void)state;
    cmb_upstream *u = open_sim(64u << 20, (cmb_fault_spec){0});
    const size_t g = u->granularity;
    void *va;
    assert_int_equal(cmb_up_va_reserve(u, 16 * g, &va), CMB_OK);
    char *b = va;
    assert_int_equal(cmb_up_defer_access(u, 1), CMB_OK);              /* nothing mapped: nothing set */
    assert_int_equal(cmb_up_defer_access(u, 0), CMB_OK);
    assert_int_equal(u->driver.set_access, 0);
    assert_int_equal(cmb_up_map(u, b + 9 * g, g), CMB_OK);
    assert_int_equal(cmb_up_park(u, b + 9 * g, g), CMB_OK);
    assert_int_equal(u->driver.set_access, 1);
    assert_int_equal(cmb_up_defer_access(u, 1), CMB_OK);
    assert_int_equal(cmb_up_defer_access(u, 1), CMB_ERR_INVALID);     /* already deferring */
    assert_int_equal(cmb_up_map(u, b + 2 * g, g), CMB_OK);            /* 2..5: one range, */
    assert_int_equal(cmb_up_map(u, b, 2 * g), CMB_OK);                /* mapped out of order */
    assert_int_equal(cmb_up_unpark(u, b + 3 * g, g), CMB_OK);
    assert_int_equal(cmb_up_map(u, b + 4 * g, 2 * g), CMB_OK);
    assert_int_equal(cmb_up_map(u, b + 8 * g, g), CMB_OK);            /* 8: a range of its own */
    assert_int_equal(cmb_up_map(u, b + 12 * g, g), CMB_OK);           /* 12: unmapped again below */
    assert_int_equal(cmb_up_unmap(u, b + 12 * g, g), CMB_OK);
    assert_int_equal(u->driver.set_access, 1);                        /* none yet */
    assert_int_equal(u->driver.mem_map, 1 + 6);
    assert_int_equal(cmb_up_defer_access(u, 0), CMB_OK);
    assert_int_equal(u->driver.set_access, 1 + 2);                    /* [0, 6) and [8, 9) */
    assert_int_equal(cmb_up_defer_access(u, 0), CMB_ERR_INVALID);     /* not deferring */
    assert_int_equal(cmb_up_map(u, b + 14 * g, g), CMB_OK);           /* not deferring: its own */
    assert_int_equal(u->driver.set_access, 1 + 2 + 1);
    assert_int_equal(cmb_upstream_misuse_count(u), 2);
    for (size_t p = 0; p < 6; p++)
        assert_true(cmb_upstream_contains(u, b + p * g, g));
    cmb_upstream_close(u);
}

/* cmb_upstream_ops is generated from CMB_UPSTREAM_OPS and is part of the
 * plug-in ABI: its fields keep the places plug-ins were built with. */
static void ops_table_keeps_the_abi_order(void **state)
{
    (void)state;
    static const size_t at[] = {
        offsetof(cmb_upstream_ops, alloc),        offsetof(cmb_upstream_ops, free),
        offsetof(cmb_upstream_ops, va_reserve),   offsetof(cmb_upstream_ops, va_release),
        offsetof(cmb_upstream_ops, map),          offsetof(cmb_upstream_ops, unmap),
        offsetof(cmb_upstream_ops, event_record), offsetof(cmb_upstream_ops, event_query),
        offsetof(cmb_upstream_ops, event_destroy), offsetof(cmb_upstream_ops, stream_sync),
        offsetof(cmb_upstream_ops, mem_info),     offsetof(cmb_upstream_ops, event_rerecord),
        offsetof(cmb_upstream_ops, park),         offsetof(cmb_upstream_ops, unpark),
        offsetof(cmb_upstream_ops, drop_parked),  offsetof(cmb_upstream_ops, defer_access),
        offsetof(cmb_upstream_ops, park_after),
    };
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
        assert_int_equal(at[i], i * sizeof(void (*)(void)));
    assert_int_equal(sizeof(cmb_upstream_ops), sizeof at / sizeof at[0] * sizeof(void (*)(void)));
    /* every op is filled in by the accounting layer */
    cmb_upstream_config cfg;
    cmb_upstream *u;
    char err[128];
    cmb_upstream_config_default(&cfg);
    assert_int_equal(cmb_upstream_open(&cfg, &u, err, sizeof err), CMB_OK);
#define FILLED(name, params, args, how) assert_non_null(u->ops->name);
    CMB_UPSTREAM_OPS(FILLED)
#undef FILLED
    cmb_upstream_close(u);
}

static void bad_configuration(void **state)
{
    (void)state;
    cmb_upstream_config cfg;
    cmb_upstream *u = NULL;
    char err[256] = "";
    cmb_upstream_config_default(&cfg);
    cfg.sim_alignment = 300; /* not a power of two */
    assert_int_equal(cmb_upstream_open(&cfg, &u, err, sizeof err), CMB_ERR_INVALID);
    assert_null(u);
    assert_true(err[0] != '\0');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accounting_and_alignment),
        cmocka_unit_test(capacity_is_enforced),
        cmocka_unit_test(misuse_is_refused_and_counted),
        cmocka_unit_test(vmm_pages),
        cmocka_unit_test(driver_calls_by_kind),
        cmocka_unit_test(handles_move),
        cmocka_unit_test(park_after_is_park),
        cmocka_unit_test(ops_timed_while_on),
        cmocka_unit_test(access_deferred),
        cmocka_unit_test(fault_nth_and_every),
        cmocka_unit_test(fault_random_is_seeded),
        cmocka_unit_test(fault_capacity_cap),
        cmocka_unit_test(events_complete_at_once),
        cmocka_unit_test(child_shares_the_cap),
        cmocka_unit_test(stream_ops_held_back),
        cmocka_unit_test(bad_configuration),
        cmocka_unit_test(ops_table_keeps_the_abi_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
