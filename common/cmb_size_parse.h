/* cmb_size_parse.h - byte sizes as the suite writes them: 512B, 64KiB, 2MiB,
 * 1.5GiB, 1TiB (powers of 1024; KB/MB/GB and lower-case units refused as
 * ambiguous). Header-only and libc-only, so the CLI and trace readers
 * (common/cmb_units.c) and a plug-in checking its options
 * (allocators/cmb_option_check.h) read sizes with the same code.
 */
#ifndef CMB_SIZE_PARSE_H
#define CMB_SIZE_PARSE_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The multiple of a unit name, or 0 when it is not one of ours. */
static inline uint64_t cmb_optck_unit(const char *u)
{
    static const struct {
        const char *name;
        uint64_t mult;
    } units[] = {{"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40}};
    for (size_t i = 0; u && i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(u, units[i].name))
            return units[i].mult;
    return 0;
}

/* A byte size: digits, an optional fraction, then a unit of cmb_optck_unit;
 * a bare number is read in `bare_unit` (refused when NULL, except 0);
 * "max"/"unlimited" (UINT64_MAX) when max_ok. 0, or -1 with a reason in why. */
static inline int cmb_optck_size(const char *s, const char *bare_unit, int max_ok, uint64_t *out, char *why,
                                 size_t whylen)
{
    const char *hint = "sizes are written 512B, 64KiB, 2MiB, 1.5GiB, 1TiB (powers of 1024)";
    if (max_ok && (!strcmp(s, "max") || !strcmp(s, "unlimited"))) {
        *out = UINT64_MAX;
        return 0;
    }
    const char *p = s;
    while (*p >= '0' && *p <= '9')
        p++;
    int has_frac = *p == '.' && p[1] >= '0' && p[1] <= '9';
    if (has_frac)
        for (p++; *p >= '0' && *p <= '9';)
            p++;
    if (p == s) {
        snprintf(why, whylen, "expected a size: %s", hint);
        return -1;
    }
    const char *unit = *p ? p : bare_unit;
    uint64_t mult = cmb_optck_unit(unit);
    if (!*p && !unit && strspn(s, "0") == strlen(s)) {
        *out = 0;
        return 0;
    }
    if (!mult) {
        static const char *const ambiguous[] = {"k", "m", "g", "t", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib"};
        int amb = 0;
        for (size_t i = 0; *p && i < sizeof ambiguous / sizeof ambiguous[0]; i++)
            amb |= !strcasecmp(p, ambiguous[i]);
        if (!*p)
            snprintf(why, whylen, "a unit is needed (%s)", hint);
        else
            snprintf(why, whylen, "unknown unit '%s' (%s%s)", p, hint,
                     amb ? "; KB, MB, GB and lower-case units are ambiguous" : "");
        return -1;
    }
    errno = 0;
    if (!has_frac) {
        unsigned long long v = strtoull(s, NULL, 10);
        if (errno || (v && mult > UINT64_MAX / v)) {
            snprintf(why, whylen, "too large");
            return -1;
        }
        *out = (uint64_t)v * mult;
        return 0;
    }
    double bytes = strtod(s, NULL) * (double)mult;
    if (errno || bytes >= 18446744073709551615.0 || bytes != (double)(uint64_t)bytes) {
        snprintf(why, whylen, "not a whole number of bytes");
        return -1;
    }
    *out = (uint64_t)bytes;
    return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* CMB_SIZE_PARSE_H */
