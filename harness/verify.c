/* verify.c - checks of every block handed out (see verify.h). */
#include "verify.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/cmb_objpool.h"
#include "../common/cmb_rbtree.h"

#define VERIFY_ALIGNMENT 256

typedef struct live_block {
    cmb_rbnode node;
    uintptr_t start;
    size_t size;
} live_block;

struct cmb_verify {
    cmb_rbtree by_addr;
    const cmb_metered *mt; /* its impossible statistics, read at detach */
    cmb_case *c;           /* failed at the first broken block          */
    cmb_objpool nodes;
    const cmb_upstream *up;
    uint64_t overlaps, misaligned, outside, untracked_frees;
    int out_of_memory;
};

static double heap_bytes(void);

/* heap held when the current repetition began (a process runs one case) */
static double heap_at_begin = -1;

int cmb_verify_wanted(const cmb_fault_spec *fault)
{
    const char *env = getenv("CMB_VERIFY");
    if (env && !strcmp(env, "1"))
        return 1;
    return fault->fail_nth || fault->fail_every || fault->fail_prob > 0;
}

void cmb_verify_begin(const cmb_fault_spec *fault)
{
    heap_at_begin = cmb_verify_wanted(fault) ? heap_bytes() : -1;
}

/* --- the live blocks, by address ---------------------------------------------------- */

static int block_cmp(const cmb_rbnode *a, const cmb_rbnode *b)
{
    uintptr_t x = cmb_rb_entry(a, live_block, node)->start, y = cmb_rb_entry(b, live_block, node)->start;
    return (x > y) - (x < y);
}

static int key_cmp(const void *key, const cmb_rbnode *n)
{
    uintptr_t k = *(const uintptr_t *)key, y = cmb_rb_entry(n, live_block, node)->start;
    return (k > y) - (k < y);
}

static int overlaps_neighbour(const cmb_verify *v, uintptr_t start, size_t size)
{
    cmb_rbnode *below = cmb_rb_floor(&v->by_addr, &start, key_cmp);
    if (below) {
        const live_block *b = cmb_rb_entry(below, live_block, node);
        if (b->start + b->size > start)
            return 1;
    }
    cmb_rbnode *above = cmb_rb_lower_bound(&v->by_addr, &start, key_cmp);
    if (above) {
        const live_block *b = cmb_rb_entry(above, live_block, node);
        if (b->start < start + size)
            return 1;
    }
    return 0;
}

/* The case fails at the first block that breaks the contract, with that
 * block as the reason: what the scenario does with the block afterwards
 * (a free that fails) is a consequence, not the cause. */
static void broken(cmb_verify *v, const char *what, uintptr_t start, size_t size)
{
    cmb_case_fail(v->c, CMB_ERR_STATE, "allocator contract broken: block %#llx+%zu %s",
                  (unsigned long long)start, size, what);
}

static void on_alloc(cmb_verify *v, uintptr_t start, size_t size)
{
    int overlap = overlaps_neighbour(v, start, size), misaligned = start % VERIFY_ALIGNMENT != 0;
    int outside = v->up && !cmb_upstream_contains(v->up, (const void *)start, size);
    v->overlaps += overlap;
    v->misaligned += misaligned;
    v->outside += outside;
    if (overlap || misaligned || outside)
        broken(v, overlap ? "is overlapping a block still live"
                  : misaligned ? "is misaligned (not 256-byte aligned)" : "lies outside the upstream's memory",
               start, size);
    if (overlap)
        return; /* keep the tree a set of disjoint ranges */
    live_block *b = cmb_objpool_get(&v->nodes);
    if (!b) {
        v->out_of_memory = 1;
        return;
    }
    b->start = start;
    b->size = size;
    cmb_rb_insert(&v->by_addr, &b->node, block_cmp);
}

static void on_free(cmb_verify *v, uintptr_t start)
{
    cmb_rbnode *n = cmb_rb_lower_bound(&v->by_addr, &start, key_cmp);
    live_block *b = n ? cmb_rb_entry(n, live_block, node) : NULL;
    if (!b || b->start != start) {
        v->untracked_frees++; /* its allocation overlapped, or the checker ran out of memory */
        return;
    }
    cmb_rb_erase(&v->by_addr, n);
    cmb_objpool_put(&v->nodes, b);
}

static void observe(void *ctx, cmb_op_kind kind, void *ptr, size_t size, cmb_stream s, const cmb_metered *mt)
{
    (void)s;
    (void)mt;
    if (kind == CMB_OP_ALLOC)
        on_alloc(ctx, (uintptr_t)ptr, size);
    else if (kind == CMB_OP_FREE)
        on_free(ctx, (uintptr_t)ptr);
}

/* --- attach / finish ------------------------------------------------------------------------ */

cmb_verify *cmb_verify_attach(cmb_metered *mt, const cmb_upstream *up, cmb_case *c)
{
    cmb_verify *v = calloc(1, sizeof *v);
    if (!v) {
        cmb_case_note(c, "verify: host out of memory, not checked");
        return NULL;
    }
    cmb_rb_init(&v->by_addr);
    cmb_objpool_init(&v->nodes, sizeof(live_block));
    v->up = up;
    v->mt = mt;
    v->c = c;
    if (cmb_metered_add_observer(mt, observe, v)) {
        cmb_case_note(c, "verify: no observer slot left, not checked");
        cmb_objpool_destroy(&v->nodes);
        free(v);
        return NULL;
    }
    return v;
}

void cmb_verify_detach(cmb_verify *v, cmb_verify_counts *sum)
{
    if (!v)
        return;
    sum->instances++;
    sum->overlaps += v->overlaps;
    sum->misaligned += v->misaligned;
    sum->outside += v->outside;
    if (v->mt->impossible_stats && !sum->impossible_stats)
        snprintf(sum->impossible_why, sizeof sum->impossible_why, "%s", v->mt->impossible_why);
    sum->impossible_stats += v->mt->impossible_stats;
    sum->out_of_memory |= v->out_of_memory;
    cmb_objpool_destroy(&v->nodes);
    free(v);
}

/* Bytes the program holds from malloc (small chunks and mmapped ones):
 * exact, unlike the resident size, which follows malloc's trimming. */
static double heap_bytes(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return (double)mi.uordblks + (double)mi.hblkhd;
#else
    return -1;
#endif
}

static double resident_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    int n = fscanf(f, "%lu %lu", &size, &resident);
    fclose(f);
    return n == 2 ? (double)resident * (double)sysconf(_SC_PAGESIZE) : -1;
}

void cmb_verify_report(const cmb_verify_counts *v, cmb_case *c)
{
    if (!v->instances)
        return;
    cmb_case_counter(c, "verify_overlaps", (double)v->overlaps);
    cmb_case_counter(c, "verify_misaligned", (double)v->misaligned);
    cmb_case_counter(c, "verify_outside", (double)v->outside);
    if (v->overlaps || v->misaligned || v->outside || v->impossible_stats)
        cmb_case_fail(c, CMB_ERR_STATE,
                      "allocator contract broken: %llu overlapping, %llu misaligned, %llu outside the upstream's "
                      "memory, %llu impossible statistics%s%s",
                      (unsigned long long)v->overlaps, (unsigned long long)v->misaligned,
                      (unsigned long long)v->outside, (unsigned long long)v->impossible_stats,
                      v->impossible_stats ? ": " : "", v->impossible_why);
    if (v->out_of_memory)
        cmb_case_note(c, "verify: host out of memory, some blocks not checked");
    double heap = heap_bytes(), rss = resident_bytes();
    if (heap >= 0)
        cmb_case_counter(c, "host_heap_bytes", heap);
    if (heap >= 0 && heap_at_begin >= 0)
        cmb_case_counter(c, "host_heap_growth_bytes", heap - heap_at_begin);
    if (rss >= 0)
        cmb_case_counter(c, "host_rss_bytes", rss);
}
