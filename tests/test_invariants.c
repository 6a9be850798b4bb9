/* test_invariants.c - the policies' invariant walks (cmb_allocator_walk,
 * common/cmb_assert.h).
 *
 *  - Every policy with a walk keeps its invariants through random traffic
 *    on several streams, trims, record_stream uses and injected upstream
 *    faults: the walk runs after every few hundred steps, in any build.
 *  - A caller that frees a block with a size larger than it asked for
 *    breaks the policies that trust that size (rmm-pool, arena, buddy, as
 *    their originals do): the walk finds the overlap it makes. The policies
 *    that look the size up (bfc, cupy, torch-*) refuse such a free or ignore
 *    the size, and their walk still holds.
 *  - In a debug build (-DCMB_DEBUG=ON) the same broken state aborts the
 *    process at the policy's next check point (a trim), naming the
 *    invariant; each break runs in a child process for that reason.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "allocators/cmb_torch.h"
#include "allocators/registry.h"
#include "common/cmb_assert.h"
#include "common/cmb_rng.h"
#include "support/conformance.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define S(i) ((cmb_stream)(uintptr_t)(i))

typedef struct inst {
    cmb_upstream *up;
    const cmb_allocator_methods *m;
    void *st;
} inst;

static inst open_inst(const char *name, const char *options, uint64_t capacity, const cmb_fault_spec *fault)
{
    inst i;
    cmb_test_open(name, options, capacity, fault, &i.up, &i.m, &i.st);
    return i;
}

static void close_inst(inst *i)
{
    i->m->destroy(i->st);
    cmb_upstream_close(i->up);
}

static void *get(inst *i, size_t size, cmb_stream s)
{
    void *p = NULL;
    assert_int_equal(i->m->allocate(i->st, size, s, &p), CMB_OK);
    return p;
}

static void put(inst *i, void *p, size_t size, cmb_stream s)
{
    assert_int_equal(i->m->deallocate(i->st, p, size, s), CMB_OK);
}

static void expect_walk_holds(const inst *i, const char *what, uint64_t step)
{
    char why[512];
    int r = cmb_allocator_walk(i->m, i->st, why, sizeof why);
    if (r != 0)
        fail_msg("%s, step %llu: walk %s: %s", what, (unsigned long long)step, r < 0 ? "missing" : "failed", why);
}

/* --- random traffic ------------------------------------------------------------------ */

#define SLOTS 256

typedef struct slot {
    void *p;
    size_t size;
    cmb_stream stream;
} slot;

/* One step: allocate into an empty slot, else free it (on its own stream
 * or, one time in eight, on another), with a record_stream use now and
 * then and a trim every 2000 steps. */
static void step(inst *i, slot *sl, cmb_rng *rng, uint64_t n)
{
    slot *x = &sl[cmb_rng_range(rng, 0, SLOTS - 1)];
    if (!x->p) {
        size_t size = (size_t)cmb_rng_log_uniform(rng, 1, 64 * MiB);
        cmb_stream s = S(cmb_rng_range(rng, 0, 2));
        cmb_status st = i->m->allocate(i->st, size, s, &x->p);
        assert_true(st == CMB_OK || st == CMB_ERR_OOM);
        if (st != CMB_OK) {
            x->p = NULL;
            return;
        }
        x->size = size;
        x->stream = s;
        if (cmb_rng_range(rng, 0, 15) == 0)
            cmb_torch_record_stream(i->m, i->st, x->p, S(3));
    } else {
        cmb_stream s = cmb_rng_range(rng, 0, 7) ? x->stream : S(cmb_rng_range(rng, 0, 2));
        put(i, x->p, x->size, s);
        x->p = NULL;
    }
    if (n % 2000 == 1999)
        assert_int_equal(i->m->trim(i->st), CMB_OK);
}

static const char *const policies[] = {"rmm-pool", "binning", "arena", "bfc",
                                       "buddy",    "cupy",    "torch-caching", "torch-expandable"};

static void run_traffic(const char *name, const char *options, const cmb_fault_spec *fault, uint64_t seed)
{
    inst i = open_inst(name, options, 2 * GiB, fault);
    slot sl[SLOTS] = {{0}};
    cmb_rng rng;
    cmb_rng_seed(&rng, seed);
    expect_walk_holds(&i, name, 0);
    for (uint64_t n = 0; n < 12000; n++) {
        step(&i, sl, &rng, n);
        if (n % 300 == 0)
            expect_walk_holds(&i, name, n);
    }
    for (size_t k = 0; k < SLOTS; k += 2) /* half stay live into destroy */
        if (sl[k].p)
            put(&i, sl[k].p, sl[k].size, sl[k].stream);
    expect_walk_holds(&i, name, 12000);
    close_inst(&i);
}

static void walks_hold_under_random_traffic(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++)
        run_traffic(policies[k], NULL, NULL, 7 + k);
    /* the size-class and small-superblock paths of the arena, and binning's
     * bins with an empty pool that grows */
    run_traffic("arena", "size_classes=true:superblock_size=64KiB", NULL, 99);
    run_traffic("binning", "initial_pool_size=0:min_bin_exp=10:max_bin_exp=16", NULL, 98);
}

static void walks_hold_under_upstream_faults(void **state)
{
    (void)state;
    cmb_fault_spec fault = {.fail_every = 7, .seed = 3};
    for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++)
        run_traffic(policies[k], NULL, &fault, 21 + k);
}

static void allocators_without_a_walk_say_so(void **state)
{
    (void)state;
    char why[64] = "untouched";
    assert_int_equal(cmb_allocator_walk(cmb_allocator_find("cuda")->methods, NULL, why, sizeof why), -1);
    assert_string_equal(why, "untouched");
}

/* --- a caller's wrong size breaks what trusts it --------------------------------------- */

typedef void (*breaker)(inst *i);

/* Two neighbours from the pool; the first freed with half a block too much
 * overlaps the second, already free, in the same list. */
static void break_rmm_pool(inst *i)
{
    void *a = get(i, 1 * MiB, S(1)), *b = get(i, 1 * MiB, S(1));
    assert_ptr_equal((char *)a + MiB, b);
    put(i, b, 1 * MiB, S(1));
    put(i, a, 1 * MiB + 512 * KiB, S(1));
}

/* The same inside one superblock of a stream's arena. */
static void break_arena(inst *i)
{
    void *a = get(i, 64 * KiB, S(1)), *b = get(i, 64 * KiB, S(1));
    assert_ptr_equal((char *)a + 64 * KiB, b);
    put(i, b, 64 * KiB, S(1));
    put(i, a, 96 * KiB, S(1));
}

/* A 1 KiB block freed as 2 KiB frees its live buddy with it. */
static void break_buddy(inst *i)
{
    void *a = get(i, 1 * KiB, S(1)), *b = get(i, 1 * KiB, S(1));
    assert_ptr_equal((char *)a + KiB, b);
    put(i, a, 2 * KiB, S(1));
}

static const struct {
    const char *name, *options;
    breaker fn;
    const char *invariant; /* a piece of the expression the walk reports */
} broken[] = {
    {"rmm-pool", "initial_pool_size=16MiB", break_rmm_pool, "prev->ptr + prev->size <= b->ptr"},
    {"arena", "arena_size=64MiB", break_arena, "b->key >= end"},
    {"buddy", "pool_size=1GiB", break_buddy, "atoms_clear"},
};

/* bfc and cupy find the block's size themselves; the torch allocators
 * refuse a size that is not the one allocated. Either way nothing breaks. */
static void a_wrong_size_breaks_nothing_that_looks_it_up(void **state)
{
    (void)state;
    static const char *const names[] = {"bfc", "cupy", "torch-caching", "torch-expandable"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        inst i = open_inst(names[k], NULL, 2 * GiB, NULL);
        void *a = get(&i, 1 * MiB, S(1)), *b = get(&i, 1 * MiB, S(1));
        cmb_status st = i.m->deallocate(i.st, a, 3 * MiB, S(1));
        assert_true(st == CMB_OK || st == CMB_ERR_INVALID);
        if (st == CMB_ERR_INVALID)
            put(&i, a, 1 * MiB, S(1));
        put(&i, b, 1 * MiB, S(1));
        expect_walk_holds(&i, names[k], 1);
        close_inst(&i);
    }
}

/* In a child (so the broken instance is never torn down here): break the
 * structure, report what the walk says on stderr, then trim, a check point
 * of every policy. The walk must name the invariant; a debug build must die
 * of SIGABRT at the trim, naming it too; a release build goes on. */
static void child_breaks(size_t k)
{
    char why[512];
    inst i = open_inst(broken[k].name, broken[k].options, 2 * GiB, NULL);
    expect_walk_holds(&i, broken[k].name, 0);
    broken[k].fn(&i);
    int r = cmb_allocator_walk(i.m, i.st, why, sizeof why);
    fprintf(stderr, "walk %d: %s\n", r, why);
    fflush(stderr);
    i.m->trim(i.st);
    _exit(r == 1 ? 0 : 3);
}

static void a_wrong_size_breaks_what_trusts_it(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof broken / sizeof broken[0]; k++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            dup2(fds[1], 2);
            close(fds[0]);
            child_breaks(k);
        }
        close(fds[1]);
        char out[4096] = {0};
        size_t len = 0;
        ssize_t r;
        while (len < sizeof out - 1 && (r = read(fds[0], out + len, sizeof out - 1 - len)) > 0)
            len += (size_t)r;
        close(fds[0]);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!strstr(out, "walk 1: ") || !strstr(out, broken[k].invariant))
            fail_msg("%s: expected the walk to report '%s'; the child said: %s", broken[k].name,
                     broken[k].invariant, out);
        if (CMB_DEBUG_ENABLED) {
            if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
                fail_msg("%s: a debug build must abort at the trim (status %d): %s", broken[k].name, status, out);
            assert_non_null(strstr(out, "internal invariant broken"));
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fail_msg("%s: the child failed (status %d): %s", broken[k].name, status, out);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(walks_hold_under_random_traffic),
        cmocka_unit_test(walks_hold_under_upstream_faults),
        cmocka_unit_test(allocators_without_a_walk_say_so),
        cmocka_unit_test(a_wrong_size_breaks_what_trusts_it),
        cmocka_unit_test(a_wrong_size_breaks_nothing_that_looks_it_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
