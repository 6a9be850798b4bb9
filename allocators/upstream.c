/* upstream.c - the accounting layer every upstream goes through.
 *
 * It keeps held-byte statistics, validates every call (a free of a pointer
 * the upstream never gave out, a size that does not match, a map over a
 * mapped page: each is refused and counted as misuse, so a policy bug shows
 * up in tests instead of corrupting the run), injects faults, and on close
 * returns whatever is still held, reporting it as leaked.
 */
#include "upstream.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_clock.h"
#include "../common/cmb_hashmap.h"
#include "../common/cmb_rbtree.h"
#include "../common/cmb_rng.h"
#include "../common/cmb_size.h"

/* --- private state --------------------------------------------------------- */

/* distinct handle sizes kept by park() at once */
#define CMB_PARKED_SIZES 32

typedef struct reservation {
    uintptr_t va;
    size_t size;
    uint8_t *mapped; /* one bit per granularity page */
    uint8_t *starts; /* one bit per page that begins a handle (a map call); in mapped's allocation */
    size_t mapped_pages;
} reservation;

/* An index of live alloc() results by address, for containment checks. */
typedef struct live_range {
    cmb_rbnode node;
    uintptr_t start;
    size_t size;
} live_range;

typedef struct upstream_impl {
    const _cmb_backend *be;
    void *be_state;
    cmb_upstream_config cfg;
    cmb_rng fault_rng;
    uint64_t requests;
    cmb_hashmap live;   /* ptr -> live_range* of alloc() results */
    cmb_rbtree ranges;  /* the same ranges, ordered by address */
    reservation *res;
    size_t n_res, cap_res;
    uint64_t misuse;
    char last_misuse[192];
    /* A child (cmb_upstream_open_child) shares its parent's backend and
     * cap: the parent counts what its children hold. */
    cmb_upstream *parent;
    int64_t children_held;
    int (*hold)(void *ctx); /* non-zero: stream operations are held back */
    void *hold_ctx;
    /* handles park() kept, still held, by size (a few sizes at once) */
    struct { size_t size; uint64_t n; } parked[CMB_PARKED_SIZES];
    /* defer_access: on, and the ranges mapped since without access */
    int deferring;
    struct pending_range { uintptr_t va; size_t size; } *pending;
    size_t n_pending, cap_pending;
    /* cmb_upstream_time_ops: calls and host time per op */
    uint64_t op_calls[CMB_OP_KINDS], op_ns[CMB_OP_KINDS];
} upstream_impl;

static int range_cmp(const cmb_rbnode *a, const cmb_rbnode *b)
{
    uintptr_t x = cmb_rb_entry(a, live_range, node)->start, y = cmb_rb_entry(b, live_range, node)->start;
    return (x > y) - (x < y);
}

static int range_key_cmp(const void *key, const cmb_rbnode *n)
{
    uintptr_t k = *(const uintptr_t *)key, y = cmb_rb_entry(n, live_range, node)->start;
    return (k > y) - (k < y);
}

static inline upstream_impl *impl_of(const cmb_upstream *u)
{
    return (upstream_impl *)u->impl;
}

static cmb_status misuse(cmb_upstream *u, const char *fmt, ...)
{
    upstream_impl *im = impl_of(u);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(im->last_misuse, sizeof im->last_misuse, fmt, ap);
    va_end(ap);
    im->misuse++;
    return CMB_ERR_INVALID;
}

/* --- configuration ----------------------------------------------------------- */

void cmb_upstream_config_default(cmb_upstream_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = CMB_UPSTREAM_SIM;
    cfg->sim_capacity = 80ull << 30;
    cfg->sim_alignment = 512;
    cfg->sim_granularity = 2ull << 20;
    cfg->fault.seed = 1;
}

const char *cmb_upstream_kind_name(cmb_upstream_kind kind)
{
    switch (kind) {
    case CMB_UPSTREAM_SIM: return "sim";
    case CMB_UPSTREAM_CUDA: return "cuda";
    case CMB_UPSTREAM_VMM: return "vmm";
    }
    return "?";
}

int cmb_upstream_kind_parse(const char *name, cmb_upstream_kind *kind)
{
    for (int k = CMB_UPSTREAM_SIM; k <= CMB_UPSTREAM_VMM; k++) {
        if (!strcmp(name, cmb_upstream_kind_name((cmb_upstream_kind)k))) {
            *kind = (cmb_upstream_kind)k;
            return 0;
        }
    }
    return -1;
}

/* A request above CMB_SIZE_MAX_REQUEST (common/cmb_size.h) is refused
 * before any backend rounds it (a round-up of SIZE_MAX wraps to 0) and
 * before its page bitmap is sized from it. */
static cmb_status too_large(cmb_upstream *u, size_t size)
{
    (void)size;
    u->stats.failed_calls++;
    return CMB_ERR_OOM;
}

/* --- fault injection --------------------------------------------------------- */

/* The upstream whose cap covers u (its parent for a child), and the bytes
 * held under that cap by it and its children. */
static cmb_upstream *cap_root(cmb_upstream *u)
{
    cmb_upstream *p = impl_of(u)->parent;
    return p ? p : u;
}

static uint64_t group_held(cmb_upstream *u)
{
    cmb_upstream *r = cap_root(u);
    return (uint64_t)(r->stats.held_current + impl_of(r)->children_held);
}

/* Called for every request that takes memory; returns non-zero to fail it. */
static int inject_fault(cmb_upstream *u, size_t size)
{
    upstream_impl *im = impl_of(u);
    const cmb_fault_spec *f = &im->cfg.fault;
    uint64_t cap = impl_of(cap_root(u))->cfg.fault.cap_bytes;
    uint64_t n = ++im->requests;
    int fail = 0;
    if (f->fail_nth && n == f->fail_nth)
        fail = 1;
    if (f->fail_every && n % f->fail_every == 0)
        fail = 1;
    if (f->fail_prob > 0 && cmb_rng_uniform(&im->fault_rng) < f->fail_prob)
        fail = 1;
    if (cap && group_held(u) + size > cap)
        fail = 1;
    if (fail) {
        u->stats.failed_calls++;
        u->stats.injected_faults++;
    }
    return fail;
}

static void held_add(cmb_upstream *u, size_t size)
{
    u->stats.held_current += (int64_t)size;
    u->stats.held_total += (int64_t)size;
    if (u->stats.held_current > u->stats.held_peak)
        u->stats.held_peak = u->stats.held_current;
    u->stats.alloc_calls++;
    if (impl_of(u)->parent)
        impl_of(impl_of(u)->parent)->children_held += (int64_t)size;
}

static void held_sub(cmb_upstream *u, size_t size)
{
    u->stats.held_current -= (int64_t)size;
    u->stats.free_calls++;
    if (impl_of(u)->parent)
        impl_of(impl_of(u)->parent)->children_held -= (int64_t)size;
}

/* --- driver calls by kind (cmb_upstream_driver_stats) ---------------------------- */

static void driver_count(cmb_upstream *u, uint64_t *kind, uint64_t n)
{
    *kind += n;
    u->driver.total += n;
}

static int is_vmm(const cmb_upstream *u)
{
    return impl_of(u)->be == &_cmb_backend_vmm;
}

/* alloc: cudaMalloc, or on vmm a reservation and one handle mapped */
static void driver_alloc(cmb_upstream *u)
{
    if (!is_vmm(u)) {
        driver_count(u, &u->driver.malloc_calls, 1);
        return;
    }
    driver_count(u, &u->driver.va_reserve, 1);
    driver_count(u, &u->driver.mem_create, 1);
    driver_count(u, &u->driver.mem_map, 1);
    driver_count(u, &u->driver.set_access, 1);
}

static void driver_free(cmb_upstream *u)
{
    if (!is_vmm(u)) {
        driver_count(u, &u->driver.free_calls, 1);
        return;
    }
    driver_count(u, &u->driver.mem_unmap, 1);
    driver_count(u, &u->driver.mem_release, 1);
    driver_count(u, &u->driver.va_free, 1);
}

/* the handles (earlier map calls) that begin in pages [first, first + count),
 * forgotten; at least one, as an unmap covers at least one */
static uint64_t take_handles(reservation *r, size_t first, size_t count)
{
    uint64_t n = 0;
    for (size_t p = first; p < first + count; p++) {
        if ((r->starts[p / 8] >> (p % 8)) & 1)
            n++;
        r->starts[p / 8] &= (uint8_t)~(1u << (p % 8));
    }
    return n ? n : 1;
}

/* --- plain allocations ---------------------------------------------------------- */

static cmb_status acct_alloc(cmb_upstream *u, size_t size, cmb_stream s, void **ptr)
{
    upstream_impl *im = impl_of(u);
    if (size == 0 || !ptr)
        return CMB_ERR_INVALID;
    if (!cmb_size_request_ok(size))
        return too_large(u, size);
    if (inject_fault(u, size))
        return CMB_ERR_OOM;
    cmb_status st = im->be->alloc(im->be_state, size, s, ptr);
    if (st != CMB_OK) {
        u->stats.failed_calls++;
        return st;
    }
    live_range *r = malloc(sizeof *r);
    if (!r || cmb_hashmap_put(&im->live, (uint64_t)(uintptr_t)*ptr, (uint64_t)(uintptr_t)r)) {
        free(r);
        im->be->free(im->be_state, *ptr, size, s);
        return CMB_ERR_HOST_NOMEM;
    }
    r->start = (uintptr_t)*ptr;
    r->size = size;
    cmb_rb_insert(&im->ranges, &r->node, range_cmp);
    held_add(u, size);
    driver_alloc(u);
    return CMB_OK;
}

static cmb_status acct_free(cmb_upstream *u, void *ptr, size_t size, cmb_stream s)
{
    upstream_impl *im = impl_of(u);
    uint64_t v;
    if (!cmb_hashmap_get(&im->live, (uint64_t)(uintptr_t)ptr, &v))
        return misuse(u, "free of %p, which this upstream did not allocate", ptr);
    live_range *r = (live_range *)(uintptr_t)v;
    if (r->size != size)
        return misuse(u, "free of %p with size %zu; it was allocated with %zu", ptr, size, r->size);
    cmb_status st = im->be->free(im->be_state, ptr, size, s);
    if (st != CMB_OK)
        return st;
    cmb_hashmap_remove(&im->live, (uint64_t)(uintptr_t)ptr, NULL);
    cmb_rb_erase(&im->ranges, &r->node);
    free(r);
    held_sub(u, size);
    driver_free(u);
    return CMB_OK;
}

/* --- virtual memory --------------------------------------------------------------- */

static reservation *find_reservation(upstream_impl *im, uintptr_t va, size_t size)
{
    for (size_t i = 0; i < im->n_res; i++) {
        reservation *r = &im->res[i];
        if (va >= r->va && va - r->va <= r->size && size <= r->size - (va - r->va))
            return r;
    }
    return NULL;
}

static cmb_status acct_va_reserve(cmb_upstream *u, size_t size, void **va)
{
    upstream_impl *im = impl_of(u);
    if (!im->be->va_reserve)
        return CMB_ERR_UNSUPPORTED;
    if (!cmb_size_request_ok(size))
        return too_large(u, size);
    if (size == 0 || size % u->granularity)
        return misuse(u, "va_reserve of %zu bytes, not a multiple of the granularity %zu", size,
                      u->granularity);
    if (im->n_res == im->cap_res) {
        size_t cap = im->cap_res ? im->cap_res * 2 : 8;
        reservation *grown = realloc(im->res, cap * sizeof *grown);
        if (!grown)
            return CMB_ERR_HOST_NOMEM;
        im->res = grown;
        im->cap_res = cap;
    }
    size_t pages = size / u->granularity;
    uint8_t *bits = calloc((pages + 7) / 8, 2);
    if (!bits)
        return CMB_ERR_HOST_NOMEM;
    cmb_status st = im->be->va_reserve(im->be_state, size, va);
    if (st != CMB_OK) {
        free(bits);
        return st;
    }
    im->res[im->n_res++] = (reservation){(uintptr_t)*va, size, bits, bits + (pages + 7) / 8, 0};
    driver_count(u, &u->driver.va_reserve, 1);
    return CMB_OK;
}

/* Checks a page range against the mapped bits: want=1 all mapped, 0 none. */
static int pages_all(const reservation *r, size_t first, size_t count, int want)
{
    for (size_t p = first; p < first + count; p++)
        if (((r->mapped[p / 8] >> (p % 8)) & 1) != want)
            return 0;
    return 1;
}

static void pages_set(reservation *r, size_t first, size_t count, int on)
{
    for (size_t p = first; p < first + count; p++) {
        if (on)
            r->mapped[p / 8] |= (uint8_t)(1u << (p % 8));
        else
            r->mapped[p / 8] &= (uint8_t)~(1u << (p % 8));
    }
    if (on)
        r->mapped_pages += count;
    else
        r->mapped_pages -= count;
}

static cmb_status check_page_range(cmb_upstream *u, void *va, size_t size, reservation **out,
                                   size_t *first)
{
    upstream_impl *im = impl_of(u);
    uintptr_t a = (uintptr_t)va;
    if (size == 0 || size % u->granularity || a % u->granularity)
        return misuse(u, "page range %p+%zu is not aligned to %zu", va, size, u->granularity);
    reservation *r = find_reservation(im, a, size);
    if (!r)
        return misuse(u, "page range %p+%zu lies outside every reservation", va, size);
    *out = r;
    *first = (a - r->va) / u->granularity;
    return CMB_OK;
}

static cmb_status pending_room(upstream_impl *im);
static void pending_add(upstream_impl *im, void *va, size_t size);
static void pending_drop(upstream_impl *im, void *va, size_t size);

static cmb_status acct_map(cmb_upstream *u, void *va, size_t size)
{
    upstream_impl *im = impl_of(u);
    reservation *r;
    size_t first;
    if (!im->be->map)
        return CMB_ERR_UNSUPPORTED;
    cmb_status st = check_page_range(u, va, size, &r, &first);
    if (st != CMB_OK)
        return st;
    if (!pages_all(r, first, size / u->granularity, 0))
        return misuse(u, "map of %p+%zu over pages already mapped", va, size);
    if (inject_fault(u, size))
        return CMB_ERR_OOM;
    int defer = im->deferring;
    if (defer && (st = pending_room(im)) != CMB_OK)
        return st;
    st = defer && im->be->map_noaccess ? im->be->map_noaccess(im->be_state, va, size)
                                       : im->be->map(im->be_state, va, size);
    if (st != CMB_OK) {
        u->stats.failed_calls++;
        return st;
    }
    pages_set(r, first, size / u->granularity, 1);
    r->starts[first / 8] |= (uint8_t)(1u << (first % 8));
    held_add(u, size);
    driver_count(u, &u->driver.mem_create, 1);
    driver_count(u, &u->driver.mem_map, 1);
    if (defer)
        pending_add(im, va, size);
    else
        driver_count(u, &u->driver.set_access, 1);
    return CMB_OK;
}

static cmb_status acct_unmap(cmb_upstream *u, void *va, size_t size)
{
    upstream_impl *im = impl_of(u);
    reservation *r;
    size_t first;
    if (!im->be->unmap)
        return CMB_ERR_UNSUPPORTED;
    cmb_status st = check_page_range(u, va, size, &r, &first);
    if (st != CMB_OK)
        return st;
    if (!pages_all(r, first, size / u->granularity, 1))
        return misuse(u, "unmap of %p+%zu over pages not mapped", va, size);
    st = im->be->unmap(im->be_state, va, size);
    if (st != CMB_OK)
        return st;
    pages_set(r, first, size / u->granularity, 0);
    held_sub(u, size);
    uint64_t handles = take_handles(r, first, size / u->granularity);
    driver_count(u, &u->driver.mem_unmap, handles);
    driver_count(u, &u->driver.mem_release, handles);
    pending_drop(im, va, size);
    return CMB_OK;
}

/* --- moving handles: park, unpark, drop_parked ----------------------------------- */

static uint64_t *parked_slot(upstream_impl *im, size_t size, int make)
{
    for (size_t i = 0; i < CMB_PARKED_SIZES; i++)
        if (im->parked[i].size == size && (im->parked[i].n || make))
            return &im->parked[i].n;
    if (make)
        for (size_t i = 0; i < CMB_PARKED_SIZES; i++)
            if (!im->parked[i].n) {
                im->parked[i].size = size;
                return &im->parked[i].n;
            }
    return NULL;
}

static int page_starts(const reservation *r, size_t p)
{
    return (r->starts[p / 8] >> (p % 8)) & 1;
}

/* park, or park_after(stream) where `after`: the same accounting (the
 * backend unmaps later, the handles are kept at once either way) */
static cmb_status park_range(cmb_upstream *u, void *va, size_t size, int after, cmb_stream stream)
{
    upstream_impl *im = impl_of(u);
    reservation *r;
    size_t first, pages = size / u->granularity;
    if (after ? !im->be->park_after : !im->be->park)
        return CMB_ERR_UNSUPPORTED;
    cmb_status st = check_page_range(u, va, size, &r, &first);
    if (st != CMB_OK)
        return st;
    size_t end = first + pages, total = r->size / u->granularity;
    if (!pages_all(r, first, pages, 1) || !page_starts(r, first) ||
        (end < total && pages_all(r, end, 1, 1) && !page_starts(r, end)))
        return misuse(u, "park of %p+%zu: not whole mapped handles", va, size);
    size_t fresh[CMB_PARKED_SIZES], n_fresh = 0, room = 0; /* room for every size first */
    for (size_t i = 0; i < CMB_PARKED_SIZES; i++)
        room += !im->parked[i].n;
    for (size_t p = first, q; p < end; p = q) {
        for (q = p + 1; q < end && !page_starts(r, q); q++)
            ;
        size_t sz = (q - p) * u->granularity, k = 0;
        while (k < n_fresh && fresh[k] != sz)
            k++;
        if (k == n_fresh && !parked_slot(im, sz, 0)) {
            if (n_fresh == room)
                return CMB_ERR_HOST_NOMEM; /* too many sizes kept at once */
            fresh[n_fresh++] = sz;
        }
    }
    st = after ? im->be->park_after(im->be_state, va, size, stream) : im->be->park(im->be_state, va, size);
    if (st != CMB_OK)
        return st;
    for (size_t p = first, q; p < end; p = q) {
        for (q = p + 1; q < end && !page_starts(r, q); q++)
            ;
        (*parked_slot(im, (q - p) * u->granularity, 1))++;
    }
    pages_set(r, first, pages, 0);
    uint64_t handles = take_handles(r, first, pages);
    u->stats.free_calls++;
    driver_count(u, &u->driver.mem_unmap, handles);
    pending_drop(im, va, size);
    return CMB_OK;
}

static cmb_status acct_park(cmb_upstream *u, void *va, size_t size)
{
    return park_range(u, va, size, 0, NULL);
}

static cmb_status acct_park_after(cmb_upstream *u, void *va, size_t size, cmb_stream stream)
{
    return park_range(u, va, size, 1, stream);
}

static cmb_status acct_unpark(cmb_upstream *u, void *va, size_t size)
{
    upstream_impl *im = impl_of(u);
    reservation *r;
    size_t first;
    if (!im->be->unpark)
        return CMB_ERR_UNSUPPORTED;
    cmb_status st = check_page_range(u, va, size, &r, &first);
    if (st != CMB_OK)
        return st;
    if (!pages_all(r, first, size / u->granularity, 0))
        return misuse(u, "unpark at %p+%zu over pages already mapped", va, size);
    uint64_t *n = parked_slot(im, size, 0);
    if (!n)
        return CMB_ERR_NOT_FOUND;
    int defer = im->deferring;
    if (defer && (st = pending_room(im)) != CMB_OK)
        return st;
    st = defer && im->be->unpark_noaccess ? im->be->unpark_noaccess(im->be_state, va, size)
                                          : im->be->unpark(im->be_state, va, size);
    if (st != CMB_OK) {
        u->stats.failed_calls++;
        return st;
    }
    (*n)--;
    pages_set(r, first, size / u->granularity, 1);
    r->starts[first / 8] |= (uint8_t)(1u << (first % 8));
    u->stats.alloc_calls++;
    driver_count(u, &u->driver.mem_map, 1);
    if (defer)
        pending_add(im, va, size);
    else
        driver_count(u, &u->driver.set_access, 1);
    return CMB_OK;
}

/* --- defer_access: one access call per contiguous range mapped ------------------- */

static cmb_status pending_room(upstream_impl *im)
{
    if (im->n_pending < im->cap_pending)
        return CMB_OK;
    size_t cap = im->cap_pending ? im->cap_pending * 2 : 16;
    void *grown = realloc(im->pending, cap * sizeof *im->pending);
    if (!grown)
        return CMB_ERR_HOST_NOMEM;
    im->pending = grown;
    im->cap_pending = cap;
    return CMB_OK;
}

static void pending_add(upstream_impl *im, void *va, size_t size)
{
    im->pending[im->n_pending++] = (struct pending_range){(uintptr_t)va, size};
}

/* Unmapped or parked while deferring (a growth undone): no access to set
 * there. Whole handles only, so an entry lies inside the range or outside. */
static void pending_drop(upstream_impl *im, void *va, size_t size)
{
    uintptr_t lo = (uintptr_t)va, hi = lo + size;
    size_t k = 0;
    for (size_t i = 0; i < im->n_pending; i++)
        if (im->pending[i].va < lo || im->pending[i].va >= hi)
            im->pending[k++] = im->pending[i];
    im->n_pending = k;
}

static int by_va(const void *a, const void *b)
{
    uintptr_t x = ((const struct pending_range *)a)->va, y = ((const struct pending_range *)b)->va;
    return (x > y) - (x < y);
}

/* Off: access over each contiguous run of what was mapped since on, in
 * address order (a growth maps its handles in any order); every run is
 * tried, the first error returned (its memory stays mapped, unusable, for
 * the policy to unmap). */
static cmb_status acct_defer_access(cmb_upstream *u, int on)
{
    upstream_impl *im = impl_of(u);
    if (on) {
        if (im->deferring)
            return misuse(u, "defer_access(1) while deferring");
        im->deferring = 1;
        im->n_pending = 0;
        return CMB_OK;
    }
    if (!im->deferring)
        return misuse(u, "defer_access(0) without defer_access(1)");
    im->deferring = 0;
    if (im->n_pending > 1) /* none may have been allocated: qsort takes no NULL */
        qsort(im->pending, im->n_pending, sizeof *im->pending, by_va);
    cmb_status first_error = CMB_OK;
    for (size_t i = 0, j; i < im->n_pending; i = j) {
        uintptr_t end = im->pending[i].va + im->pending[i].size;
        for (j = i + 1; j < im->n_pending && im->pending[j].va == end; j++)
            end += im->pending[j].size;
        cmb_status st = im->be->set_access
                            ? im->be->set_access(im->be_state, (void *)im->pending[i].va, end - im->pending[i].va)
                            : CMB_OK;
        if (st == CMB_OK)
            driver_count(u, &u->driver.set_access, 1);
        else if (first_error == CMB_OK)
            first_error = st;
    }
    im->n_pending = 0;
    return first_error;
}

/* The backend's drop_parked releases one kept handle of exactly `size`. */
static cmb_status acct_drop_parked(cmb_upstream *u, size_t size)
{
    upstream_impl *im = impl_of(u);
    cmb_status first = CMB_OK;
    if (!im->be->drop_parked)
        return CMB_ERR_UNSUPPORTED;
    for (size_t i = 0; i < CMB_PARKED_SIZES; i++) {
        while (im->parked[i].n && im->parked[i].size <= size) {
            cmb_status st = im->be->drop_parked(im->be_state, im->parked[i].size);
            if (st != CMB_OK && first == CMB_OK)
                first = st;
            im->parked[i].n--;
            held_sub(u, im->parked[i].size);
            u->stats.free_calls--; /* one call for them all, below */
            driver_count(u, &u->driver.mem_release, 1);
        }
    }
    u->stats.free_calls++;
    return first;
}

static void unmap_all_pages(cmb_upstream *u, reservation *r)
{
    upstream_impl *im = impl_of(u);
    size_t pages = r->size / u->granularity;
    for (size_t p = 0; p < pages && r->mapped_pages; p++) {
        if (!pages_all(r, p, 1, 1))
            continue;
        void *va = (void *)(r->va + p * u->granularity);
        if (im->be->unmap(im->be_state, va, u->granularity) == CMB_OK) {
            pages_set(r, p, 1, 0);
            held_sub(u, u->granularity);
        } else {
            break;
        }
    }
}

static cmb_status acct_va_release(cmb_upstream *u, void *va, size_t size)
{
    upstream_impl *im = impl_of(u);
    if (!im->be->va_release)
        return CMB_ERR_UNSUPPORTED;
    for (size_t i = 0; i < im->n_res; i++) {
        reservation *r = &im->res[i];
        if (r->va != (uintptr_t)va)
            continue;
        if (r->size != size)
            return misuse(u, "va_release of %p with size %zu; reserved %zu", va, size, r->size);
        if (r->mapped_pages) {
            misuse(u, "va_release of %p with %zu pages still mapped", va, r->mapped_pages);
            unmap_all_pages(u, r);
        }
        cmb_status st = im->be->va_release(im->be_state, va, size);
        if (st != CMB_OK)
            return st;
        free(r->mapped);
        im->res[i] = im->res[--im->n_res];
        driver_count(u, &u->driver.va_free, 1);
        return CMB_OK;
    }
    return misuse(u, "va_release of %p, which is not a reservation", va);
}

/* --- events, streams and device information --------------------------------------- */

/* The FORWARDED ops of CMB_UPSTREAM_OPS: nothing to check or count. */
#define FORWARD_ACCOUNTED(name, params, args) /* written above and below */
/* cmb_upstream_hold_stream_ops: every event and stream operation but a
 * destroy is held back (answered "not yet") while the holder says so. */
static int held_back(const upstream_impl *im, const char *op)
{
    return im->hold && strcmp(op, "event_destroy") && im->hold(im->hold_ctx);
}

#define FORWARD_FORWARDED(name, params, args)                                  \
    static cmb_status acct_##name(cmb_upstream *u, CMB_UNPAREN params)         \
    {                                                                          \
        upstream_impl *im = impl_of(u);                                        \
        if (!im->be->name)                                                     \
            return CMB_ERR_UNSUPPORTED;                                        \
        if (held_back(im, #name))                                              \
            return CMB_ERR_STATE;                                              \
        return im->be->name(im->be_state, CMB_UNPAREN args);                   \
    }
#define FORWARD(name, params, args, how) FORWARD_##how(name, params, args)
CMB_UPSTREAM_OPS(FORWARD)
#undef FORWARD

static cmb_status acct_mem_info(cmb_upstream *u, size_t *free_bytes, size_t *total_bytes)
{
    upstream_impl *im = impl_of(u);
    size_t f, t;
    cmb_status st = im->be->mem_info(im->be_state, &f, &t);
    if (st != CMB_OK)
        return st;
    uint64_t cap = impl_of(cap_root(u))->cfg.fault.cap_bytes, held = group_held(u);
    if (cap) {
        uint64_t room = cap > held ? cap - held : 0;
        if (t > cap)
            t = (size_t)cap;
        if (f > room)
            f = (size_t)room;
    }
    *free_bytes = f;
    *total_bytes = t;
    return CMB_OK;
}

#define OP_ENTRY(name, params, args, how) .name = acct_##name,
static const cmb_upstream_ops accounting_ops = {CMB_UPSTREAM_OPS(OP_ENTRY)};
#undef OP_ENTRY

/* --- timed ops (cmb_upstream_time_ops) ------------------------------------------------ */

#define TIMED(name, params, args, how)                                          \
    static cmb_status timed_##name(cmb_upstream *u, CMB_UNPAREN params)         \
    {                                                                           \
        uint64_t t0 = cmb_now_ns();                                             \
        cmb_status st = acct_##name(u, CMB_UNPAREN args);                       \
        upstream_impl *im = impl_of(u);                                         \
        im->op_calls[CMB_OP_##name]++;                                          \
        im->op_ns[CMB_OP_##name] += cmb_now_ns() - t0;                          \
        return st;                                                              \
    }
CMB_UPSTREAM_OPS(TIMED)
#undef TIMED

#define OP_ENTRY(name, params, args, how) .name = timed_##name,
static const cmb_upstream_ops timed_ops = {CMB_UPSTREAM_OPS(OP_ENTRY)};
#undef OP_ENTRY

#define OP_NAME(name, params, args, how) #name,
const char *const cmb_op_names[CMB_OP_KINDS] = {CMB_UPSTREAM_OPS(OP_NAME)};
#undef OP_NAME

void cmb_upstream_time_ops(cmb_upstream *u, int on)
{
    u->ops = on ? &timed_ops : &accounting_ops;
}

void cmb_upstream_op_time(const cmb_upstream *u, uint64_t calls[CMB_OP_KINDS], uint64_t ns[CMB_OP_KINDS])
{
    upstream_impl *im = impl_of(u);
    memcpy(calls, im->op_calls, sizeof im->op_calls);
    memcpy(ns, im->op_ns, sizeof im->op_ns);
}

/* --- open and close ------------------------------------------------------------------ */

static const _cmb_backend *backend_for(cmb_upstream_kind kind)
{
    switch (kind) {
    case CMB_UPSTREAM_SIM: return &_cmb_backend_sim;
    case CMB_UPSTREAM_CUDA: return &_cmb_backend_cuda;
    case CMB_UPSTREAM_VMM: return &_cmb_backend_vmm;
    }
    return NULL;
}

cmb_status cmb_upstream_open(const cmb_upstream_config *cfg, cmb_upstream **out, char *err, size_t errlen)
{
    const _cmb_backend *be = backend_for(cfg->kind);
    cmb_upstream *u = calloc(1, sizeof *u);
    upstream_impl *im = calloc(1, sizeof *im);
    cmb_status st = CMB_ERR_HOST_NOMEM;

    if (!be) {
        snprintf(err, errlen, "unknown upstream kind %d", (int)cfg->kind);
        st = CMB_ERR_INVALID;
        goto out_free;
    }
    if (!u || !im || cmb_hashmap_init(&im->live, 1024)) {
        snprintf(err, errlen, "host out of memory opening the %s upstream", be->name);
        goto out_free;
    }
    im->be = be;
    im->cfg = *cfg;
    cmb_rb_init(&im->ranges);
    cmb_rng_seed(&im->fault_rng, cfg->fault.seed);
    st = be->open(cfg, &im->be_state, &u->granularity, &u->alignment, err, errlen);
    if (st != CMB_OK)
        goto out_free_map;
    u->ops = &accounting_ops;
    u->name = be->name;
    u->impl = im;
    *out = u;
    return CMB_OK;

out_free_map:
    cmb_hashmap_free(&im->live);
out_free:
    free(im);
    free(u);
    return st;
}

cmb_status cmb_upstream_open_child(cmb_upstream *parent, cmb_upstream **out, char *err, size_t errlen)
{
    upstream_impl *pim = impl_of(parent);
    cmb_upstream *u = calloc(1, sizeof *u);
    upstream_impl *im = calloc(1, sizeof *im);
    if (!u || !im || cmb_hashmap_init(&im->live, 1024)) {
        snprintf(err, errlen, "host out of memory opening a child of the %s upstream", parent->name);
        free(im);
        free(u);
        return CMB_ERR_HOST_NOMEM;
    }
    im->be = pim->be;
    im->be_state = pim->be_state; /* the parent's: one memory, one address space */
    im->cfg = pim->cfg;
    memset(&im->cfg.fault, 0, sizeof im->cfg.fault); /* the parent's cap covers it */
    im->parent = parent;
    cmb_rb_init(&im->ranges);
    *u = (cmb_upstream){.ops = &accounting_ops, .name = parent->name, .granularity = parent->granularity,
                        .alignment = parent->alignment, .impl = im};
    *out = u;
    return CMB_OK;
}

void cmb_upstream_hold_stream_ops(cmb_upstream *u, int (*hold)(void *ctx), void *ctx)
{
    impl_of(u)->hold = hold;
    impl_of(u)->hold_ctx = ctx;
}

uint64_t cmb_upstream_set_cap(cmb_upstream *u, uint64_t cap_bytes)
{
    upstream_impl *im = impl_of(u);
    uint64_t old = im->cfg.fault.cap_bytes;
    im->cfg.fault.cap_bytes = cap_bytes;
    return old;
}

int64_t cmb_upstream_close(cmb_upstream *u)
{
    if (!u)
        return 0;
    upstream_impl *im = impl_of(u);
    int64_t leaked = u->stats.held_current;
    uint64_t key, val;
    for (size_t it = 0; cmb_hashmap_next(&im->live, &it, &key, &val);) {
        live_range *r = (live_range *)(uintptr_t)val;
        im->be->free(im->be_state, (void *)(uintptr_t)key, r->size, NULL);
        free(r);
    }
    for (size_t i = 0; i < im->n_res; i++) {
        unmap_all_pages(u, &im->res[i]);
        im->be->va_release(im->be_state, (void *)im->res[i].va, im->res[i].size);
        free(im->res[i].mapped);
    }
    if (im->be->drop_parked)
        for (size_t i = 0; i < CMB_PARKED_SIZES; i++)
            for (; im->parked[i].n; im->parked[i].n--)
                im->be->drop_parked(im->be_state, im->parked[i].size);
    if (im->parent) /* what the unmaps above did not take off already */
        impl_of(im->parent)->children_held -= u->stats.held_current;
    else
        im->be->close(im->be_state);
    cmb_hashmap_free(&im->live);
    free(im->res);
    free(im->pending);
    free(im);
    free(u);
    return leaked;
}

const char *const cmb_dt_names[CMB_DT_KINDS] = {"cuMemCreate", "cuMemMap",     "cuMemSetAccess",
                                                 "cuMemUnmap",  "cuMemRelease", "events"};

void cmb_upstream_driver_time(const cmb_upstream *u, uint64_t calls[CMB_DT_KINDS], uint64_t ns[CMB_DT_KINDS])
{
    upstream_impl *im = impl_of(u);
    memset(calls, 0, CMB_DT_KINDS * sizeof *calls);
    memset(ns, 0, CMB_DT_KINDS * sizeof *ns);
    if (im->be->driver_time)
        im->be->driver_time(im->be_state, calls, ns);
}

uint64_t cmb_upstream_device_used(const cmb_upstream *u)
{
    upstream_impl *im = impl_of(u);
    if (im->be->device_used)
        return im->be->device_used(im->be_state);
    return (uint64_t)u->stats.held_current;
}

uint64_t cmb_upstream_device_peak(const cmb_upstream *u)
{
    upstream_impl *im = impl_of(u);
    if (im->be->device_peak)
        return im->be->device_peak(im->be_state);
    return (uint64_t)u->stats.held_peak;
}

int cmb_upstream_contains(const cmb_upstream *u, const void *ptr, size_t size)
{
    upstream_impl *im = impl_of(u);
    uintptr_t a = (uintptr_t)ptr;
    cmb_rbnode *n = cmb_rb_floor(&im->ranges, &a, range_key_cmp);
    if (n) {
        live_range *r = cmb_rb_entry(n, live_range, node);
        if (a - r->start <= r->size && size <= r->size - (a - r->start))
            return 1;
    }
    reservation *r = find_reservation(im, a, size);
    if (!r || !size)
        return 0;
    size_t first = (a - r->va) / u->granularity;
    size_t last = (a + size - 1 - r->va) / u->granularity;
    return pages_all(r, first, last - first + 1, 1);
}

/* --- what is held, range by range ----------------------------------------------------- */

static size_t put_segment(cmb_upstream_segment *out, size_t cap, size_t n, uintptr_t start, size_t size,
                          uintptr_t reserved_at)
{
    if (n < cap)
        out[n] = (cmb_upstream_segment){start, size, reserved_at};
    return n + 1;
}

static int segment_cmp(const void *a, const void *b)
{
    uintptr_t x = ((const cmb_upstream_segment *)a)->start, y = ((const cmb_upstream_segment *)b)->start;
    return (x > y) - (x < y);
}

/* The runs of mapped pages of one reservation, a byte of the page map at a
 * time where it is all mapped or all not (a reservation can span the device). */
static size_t mapped_runs(const cmb_upstream *u, const reservation *r, cmb_upstream_segment *out, size_t cap,
                          size_t n)
{
    size_t pages = r->size / u->granularity, run = 0, p = 0;
    while (r->mapped_pages && p <= pages) { /* a run ends at an unmapped page or the end */
        uint8_t byte = p < pages ? r->mapped[p / 8] : 0;
        if (p % 8 == 0 && p + 8 <= pages && byte == 0xff) {
            run += 8;
            p += 8;
            continue;
        }
        if (p < pages && ((byte >> (p % 8)) & 1)) {
            run++;
            p++;
            continue;
        }
        if (run)
            n = put_segment(out, cap, n, r->va + (p - run) * u->granularity, run * u->granularity, r->va);
        run = 0;
        p += p % 8 == 0 && byte == 0 && p < pages ? 8 : 1; /* bits past the last page are never set */
    }
    return n;
}

size_t cmb_upstream_segments(const cmb_upstream *u, cmb_upstream_segment *out, size_t cap)
{
    upstream_impl *im = impl_of(u);
    size_t n = 0;
    for (cmb_rbnode *nd = cmb_rb_first(&im->ranges); nd; nd = cmb_rb_next(nd)) {
        live_range *r = cmb_rb_entry(nd, live_range, node);
        n = put_segment(out, cap, n, r->start, r->size, 0);
    }
    for (size_t i = 0; i < im->n_res; i++)
        n = mapped_runs(u, &im->res[i], out, cap, n);
    if (im->n_res && (n < cap ? n : cap) > 1)
        qsort(out, n < cap ? n : cap, sizeof *out, segment_cmp);
    return n;
}

uint64_t cmb_upstream_misuse_count(const cmb_upstream *u)
{
    return impl_of(u)->misuse;
}

const char *cmb_upstream_last_misuse(const cmb_upstream *u)
{
    upstream_impl *im = impl_of(u);
    return im->misuse ? im->last_misuse : NULL;
}
