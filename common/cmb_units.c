/* cmb_units.c - number and size parsing for the CLI and trace readers. */
#include "cmb_units.h"

#include "cmb_size_parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Decimal, or hexadecimal after 0x: never octal, so "010" is ten. */
static int base_of(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    return s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10;
}

int cmb_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base_of(s));
    if (*end)
        return -1;
    if (errno)
        return errno == ERANGE ? CMB_PARSE_TOO_LARGE : -1;
    *out = v;
    return 0;
}

int cmb_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, base_of(s));
    if (*end)
        return -1;
    if (errno)
        return errno == ERANGE ? CMB_PARSE_TOO_LARGE : -1;
    *out = v;
    return 0;
}

int cmb_parse_double(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* a subnormal reads back from its shortest decimal only inexactly (ERANGE),
     * so its canonical text would be refused: no parameter needs one */
    if (errno || *end || !isfinite(v) || fpclassify(v) == FP_SUBNORMAL)
        return -1;
    *out = v;
    return 0;
}

int cmb_parse_bool(const char *s, int *out)
{
    static const char *yes[] = {"1", "true", "yes", "on"};
    static const char *no[] = {"0", "false", "no", "off"};
    if (!s)
        return -1;
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) {
            *out = 1;
            return 0;
        }
        if (!strcasecmp(s, no[i])) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

static int unit_shift(const char *u, unsigned *shift)
{
    static const struct {
        const char *name;
        unsigned shift;
    } units[] = {
        {"", 0},    {"B", 0},    {"K", 10},   {"KB", 10}, {"KiB", 10}, {"M", 20}, {"MB", 20},
        {"MiB", 20}, {"G", 30},  {"GB", 30},  {"GiB", 30}, {"T", 40},  {"TB", 40}, {"TiB", 40},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (!strcasecmp(u, units[i].name)) {
            *shift = units[i].shift;
            return 0;
        }
    }
    return -1;
}

int cmb_parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s || !(isdigit((unsigned char)*s) || *s == '.'))
        return -1;
    const char *p = s;
    while (isdigit((unsigned char)*p) || *p == '.')
        p++;
    unsigned shift;
    if (unit_shift(p, &shift))
        return -1;
    char num[64];
    size_t n = (size_t)(p - s);
    if (n == 0 || n >= sizeof num)
        return -1;
    memcpy(num, s, n);
    num[n] = '\0';
    if (!strchr(num, '.')) {
        uint64_t v;
        if (cmb_parse_u64(num, &v))
            return -1;
        if (shift && v > (UINT64_MAX >> shift))
            return -1;
        *out = v << shift;
        return 0;
    }
    double v;
    if (cmb_parse_double(num, &v) || v < 0)
        return -1;
    double bytes = ldexp(v, (int)shift);
    if (bytes >= 18446744073709551616.0 || bytes != floor(bytes))
        return -1; /* fractions of a byte are nonsense */
    *out = (uint64_t)bytes;
    return 0;
}

const char *cmb_format_size(uint64_t bytes, char *buf, size_t buflen)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, buflen, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, buflen, "%.2f %s", v, units[u]);
    return buf;
}

int cmb_parse_size_strict(const char *s, const char *bare_unit, uint64_t *out, char *why, size_t whylen)
{
    char scratch[8];
    if (!why || !whylen) {
        why = scratch;
        whylen = sizeof scratch;
    }
    return s ? cmb_optck_size(s, bare_unit, 0, out, why, whylen) : -1;
}
