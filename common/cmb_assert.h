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

#if defined(CMB_DEBUG) && CMB_DEBUG
#define cmb_assert_internal(expr) \
    ((expr) ? (void)0 : _cmb_assert_fail(#expr, __FILE__, __LINE__, __func__))
#define CMB_DEBUG_ONLY(stmt) stmt
#define CMB_DEBUG_ENABLED 1
#else
#define cmb_assert_internal(expr) ((void)0)
#define CMB_DEBUG_ONLY(stmt)
#define CMB_DEBUG_ENABLED 0
#endif

#endif /* CMB_ASSERT_H */
