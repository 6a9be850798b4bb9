/* cmb_assert.h - invariants checked in debug builds.
 *
 * As mimalloc's mi_assert_internal: debug builds (cmake -DCMB_DEBUG=ON,
 * which CI's sanitizer build uses) check every invariant a function relies
 * on, release builds compile the checks away so no fast path pays for them.
 * A failed check prints the expression and its place, then aborts: a broken
 * invariant is a bug of the suite, never bad input (bad input gets a
 * cmb_status and a one-line reason).
 *
 *   cmb_assert_internal(expr)      checked in debug builds only
 *   CMB_DEBUG_ONLY(stmt)           statements that exist only to be checked,
 *                                  such as a walk that recounts a free list
 *
 * Walks. A policy's whole structure (its block lists cover its segments,
 * free lists are sorted and coalesced, its statistics match a recount) is
 * checked by one walk function per policy, present in every build:
 *
 *   static int walk(const state *a, cmb_walk *w)
 *   {
 *       CMB_WALK_CHECK(w, a->first->prev == NULL);   returns 1 on failure,
 *       ...                                           recording where
 *       return 0;
 *   }
 *
 * Tests call walks in any build (cmb_allocator_walk, allocators/registry.h)
 * and can break a structure on purpose to see one fail. Debug builds run
 * them at cheap points: every CMB_VALIDATE_EVERY operations
 * (CMB_VALIDATE_TICK) and at trim and teardown (CMB_VALIDATE_NOW), so a
 * sanitizer run of the whole test suite stays fast.
 */
#ifndef CMB_ASSERT_H
#define CMB_ASSERT_H

#ifdef __cplusplus
extern "C" {
#endif

void _cmb_assert_fail(const char *expr, const char *file, unsigned line, const char *func)
    __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

/* Where a walk found a broken invariant (the first one). */
typedef struct cmb_walk {
    const char *expr;
    const char *file;
    const char *func;
    unsigned line;
} cmb_walk;

/* Records the failure in w; returns 1 (what the walk returns). */
int _cmb_walk_fail(cmb_walk *w, const char *expr, const char *file, unsigned line, const char *func);

#define CMB_WALK_CHECK(w, cond)                                                   \
    do {                                                                          \
        if (!(cond))                                                              \
            return _cmb_walk_fail((w), #cond, __FILE__, __LINE__, __func__);       \
    } while (0)

/* Full walks run every this many allocate/deallocate calls in debug builds. */
#ifndef CMB_VALIDATE_EVERY
#define CMB_VALIDATE_EVERY 4096
#endif

#if defined(CMB_DEBUG) && CMB_DEBUG
#define cmb_assert_internal(expr) \
    ((expr) ? (void)0 : _cmb_assert_fail(#expr, __FILE__, __LINE__, __func__))
#define CMB_DEBUG_ONLY(stmt) stmt
#define CMB_DEBUG_ENABLED 1
/* Runs walk(state, &w) and aborts with its finding when it fails. */
#define CMB_VALIDATE_NOW(walk, state)                                             \
    do {                                                                          \
        cmb_walk _cmb_w = {0};                                                    \
        if ((walk)((state), &_cmb_w))                                             \
            _cmb_assert_fail(_cmb_w.expr, _cmb_w.file, _cmb_w.line, _cmb_w.func); \
    } while (0)
/* The same every CMB_VALIDATE_EVERY ticks of `counter` (a debug-only field). */
#define CMB_VALIDATE_TICK(counter, walk, state)                                   \
    do {                                                                          \
        if (++(counter) % CMB_VALIDATE_EVERY == 0)                                \
            CMB_VALIDATE_NOW(walk, state);                                        \
    } while (0)
#else
#define cmb_assert_internal(expr) ((void)0)
#define CMB_DEBUG_ONLY(stmt)
#define CMB_DEBUG_ENABLED 0
#define CMB_VALIDATE_NOW(walk, state) ((void)0)
#define CMB_VALIDATE_TICK(counter, walk, state) ((void)0)
#endif

#endif /* CMB_ASSERT_H */
