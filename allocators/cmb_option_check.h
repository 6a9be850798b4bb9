/* cmb_option_check.h - checking allocator options against their
 * declarations (cmb_option_decl, cmb_allocator.h).
 *
 * Header-only, so a plug-in that links nothing of the suite (docs/plugins.md)
 * checks its options exactly as the suite checks them before a run: the same
 * strict sizes, the same bounds, the same one-line messages:
 *
 *   allocator 'bfc': unknown option 'foo' (options: allow_growth, ...)
 *   allocator 'bfc': memory_fraction=1.5: out of range [0, 1]
 *   allocator 'rmm-pool': initial_pool_size=64mb: unknown unit 'mb' (...)
 *
 * The suite's own readers (allocators/options.h) are built on these.
 */
#ifndef CMB_OPTION_CHECK_H
#define CMB_OPTION_CHECK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../common/cmb_size_parse.h"
#include "../common/cmb_suggest.h"
#include "cmb_allocator.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- values ------------------------------------------------------------------ */

/* cmb_optck_unit and cmb_optck_size: common/cmb_size_parse.h */

/* A finite number, the whole string. */
static inline int cmb_optck_real(const char *s, double *out)
{
    char *end;
    if (!*s || strchr(" \t\n", *s) || !strcasecmp(s, "inf") || !strcasecmp(s, "nan"))
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || v != v || v - v != 0)
        return -1;
    *out = v;
    return 0;
}

/* A whole number, decimal or 0x hex, optional '-'. 0, -1 when malformed,
 * -2 when well formed but beyond 64 bits ("too large"). */
static inline int cmb_optck_int(const char *s, int64_t *out)
{
    char *end;
    const char *d = *s == '-' ? s + 1 : s;
    if (*d < '0' || *d > '9')
        return -1;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (*end)
        return -1;
    if (errno)
        return errno == ERANGE ? -2 : -1;
    *out = v;
    return 0;
}

static inline int cmb_optck_bool(const char *s, int *out)
{
    static const char *const yes[] = {"true", "1", "yes", "on"}, *const no[] = {"false", "0", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcmp(s, yes[i]) || !strcmp(s, no[i])) {
            *out = !strcmp(s, yes[i]);
            return 0;
        }
    }
    return -1;
}

/* `s` is one of the '|'-separated choices. */
static inline int cmb_optck_choice(const char *choices, const char *s)
{
    size_t n = strlen(s);
    for (const char *c = choices; c && *c;) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && !strncmp(c, s, n))
            return 0;
        c = bar ? bar + 1 : NULL;
    }
    return -1;
}

/* --- one value against its declaration ----------------------------------------------- */

/* The value as a double for the bound check (sizes and integers too). A
 * bound may be "max" where the value itself may not. */
static inline int cmb_optck_number(const cmb_option_decl *d, const char *v, int bound, double *out, char *why,
                                   size_t whylen)
{
    uint64_t u;
    int64_t i;
    int rc;
    switch (d->type) {
    case CMB_OPT_SIZE:
        if (cmb_optck_size(v, d->unit, bound || (d->flags & CMB_OPT_MAX_OK), &u, why, whylen))
            return -1;
        if (!bound && d->flags & CMB_OPT_POW2 && u != UINT64_MAX && u & (u - 1)) {
            snprintf(why, whylen, "not a power of two");
            return -1;
        }
        *out = (double)u;
        return 0;
    case CMB_OPT_INT:
        if ((rc = cmb_optck_int(v, &i))) { /* beyond 64 bits: said so, not "expected" */
            snprintf(why, whylen, "%s", rc == -2 ? (*v == '-' ? "too small" : "too large") : "expected a whole number");
            return -1;
        }
        if (!bound && d->flags & CMB_OPT_POW2 && (i < 0 || (i & (i - 1)))) {
            snprintf(why, whylen, "not a power of two");
            return -1;
        }
        *out = (double)i;
        return 0;
    case CMB_OPT_REAL:
        if (cmb_optck_real(v, out)) {
            snprintf(why, whylen, "expected a number");
            return -1;
        }
        return 0;
    default:
        return -1;
    }
}

/* A SIZE option that declares no maximum is still bounded: at most the
 * largest request any allocator serves (CMB_SIZE_MAX_REQUEST in
 * common/cmb_size.h), or "max" where the option takes it. */
#define CMB_OPT_SIZE_MAX_IMPLIED "256TiB"

/* The maximum an option is checked against and listed with, or NULL. */
static inline const char *cmb_optck_max(const cmb_option_decl *d)
{
    return d->max ? d->max : d->type == CMB_OPT_SIZE ? CMB_OPT_SIZE_MAX_IMPLIED : NULL;
}

/* Within [min, max], as declared; the bounds print as written. */
static inline int cmb_optck_bounds(const cmb_option_decl *d, double x, char *why, size_t whylen)
{
    double lo = 0, hi = 0;
    char ignore[8];
    const char *max = cmb_optck_max(d);
    int has_lo = d->min && !cmb_optck_number(d, d->min, 1, &lo, ignore, sizeof ignore);
    int has_hi = max && !cmb_optck_number(d, max, 1, &hi, ignore, sizeof ignore);
    if (!d->max && x == (double)UINT64_MAX)
        has_hi = 0; /* "max", where the option takes it */
    if ((!has_lo || x >= lo) && (!has_hi || x <= hi))
        return 0;
    if (has_lo && has_hi)
        snprintf(why, whylen, "out of range [%s, %s]", d->min, max);
    else if (has_lo)
        snprintf(why, whylen, "must be at least %s", d->min);
    else
        snprintf(why, whylen, "must be at most %s", max);
    return -1;
}

/* Checks `value` for option d of `allocator`: 0, or -1 with
 * "allocator 'A': NAME=VALUE: reason" in err. */
static inline int cmb_optck_value(const char *allocator, const cmb_option_decl *d, const char *value, char *err,
                                  size_t errlen)
{
    char why[200] = "";
    double x;
    int b;
    int bad = 0;
    switch (d->type) {
    case CMB_OPT_SIZE:
    case CMB_OPT_INT:
    case CMB_OPT_REAL:
        bad = cmb_optck_number(d, value, 0, &x, why, sizeof why) || cmb_optck_bounds(d, x, why, sizeof why);
        break;
    case CMB_OPT_BOOL:
        if ((bad = cmb_optck_bool(value, &b)))
            snprintf(why, sizeof why, "expected true or false");
        break;
    case CMB_OPT_ENUM:
        if ((bad = cmb_optck_choice(d->choices, value)))
            snprintf(why, sizeof why, "expected one of %s", d->choices);
        break;
    case CMB_OPT_STRING:
        if ((bad = !*value))
            snprintf(why, sizeof why, "empty");
        else if ((bad = (d->flags & CMB_OPT_FILE) && access(value, R_OK)))
            snprintf(why, sizeof why, "%s", strerror(errno));
        break;
    }
    if (bad)
        snprintf(err, errlen, "allocator '%s': %s=%s: %s", allocator, d->name, value, why);
    return bad ? -1 : 0;
}

/* --- a list of options ------------------------------------------------------------------ */

static inline const cmb_option_decl *cmb_optck_find(const cmb_option_decl *decls, const char *name)
{
    for (const cmb_option_decl *d = decls; d && d->name; d++)
        if (!strcmp(d->name, name))
            return d;
    return NULL;
}

/* "allocator 'A': unknown option 'K'[; did you mean 'k'?] (options: a, b,
 * c)". Returns -1. */
static inline int cmb_optck_unknown(const char *allocator, const cmb_option_decl *decls, const char *key, char *err,
                                    size_t errlen)
{
    cmb_suggest s;
    char mean[96];
    cmb_suggest_init(&s, key);
    for (const cmb_option_decl *d = decls; d && d->name; d++)
        cmb_suggest_try(&s, d->name);
    size_t used = (size_t)snprintf(err, errlen, "allocator '%s': unknown option '%s'%s (%s", allocator, key,
                                   cmb_suggest_text(&s, ";", mean, sizeof mean),
                                   decls && decls->name ? "options: " : "it takes none");
    for (const cmb_option_decl *d = decls; d && d->name && used < errlen; d++)
        used += (size_t)snprintf(err + used, errlen - used, "%s%s", d == decls ? "" : ", ", d->name);
    if (used < errlen)
        snprintf(err + used, errlen - used, ")");
    return -1;
}

/* Every option of opts[0..n-1] is declared and well-formed; two that
 * exclude each other are not both given; with no_repeats, no key twice
 * (the user's own list: defaults may be overridden, a repeat is a typo).
 * 0, or -1 with the first problem in err. */
static inline int cmb_optck_options(const char *allocator, const cmb_option_decl *decls, const cmb_option *opts,
                                    size_t n, int no_repeats, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const cmb_option_decl *d = cmb_optck_find(decls, opts[i].key);
        if (!d)
            return cmb_optck_unknown(allocator, decls, opts[i].key, err, errlen);
        if (cmb_optck_value(allocator, d, opts[i].value, err, errlen))
            return -1;
        for (size_t j = 0; j < i; j++) {
            if (no_repeats && !strcmp(opts[j].key, opts[i].key)) {
                snprintf(err, errlen, "allocator '%s': option '%s' given twice", allocator, opts[i].key);
                return -1;
            }
            if (d->excludes && !strcmp(opts[j].key, d->excludes)) {
                snprintf(err, errlen, "allocator '%s': options %s and %s say the same thing: give one", allocator,
                         d->excludes, d->name);
                return -1;
            }
        }
    }
    return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* CMB_OPTION_CHECK_H */
