/* fuzz_units.c - libFuzzer target over the number and size parsers
 * (common/cmb_units.c) and the parameter canonicalizer (harness/params.c,
 * cmb_param_canonical) for every parameter type.
 *
 * The input is one value (cut at the first NUL). Oracles: a value accepted
 * as a size reads back to the same number of bytes from its canonical
 * spelling; canonical spellings are fixed points for every type; a
 * decimal string without a 0x prefix reads as decimal; formatting never
 * overflows its buffer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cmb_units.h"
#include "harness/params.h"

static void check(int ok, const char *what, const char *input)
{
    if (!ok) {
        fprintf(stderr, "fuzz_units: invariant broken: %s (input '%s')\n", what, input);
        abort();
    }
}

static const cmb_param_spec SPECS[] = {
    {"n", CMB_P_INT, "1", "1", 0, 1e12, NULL, ""},
    {"size", CMB_P_SIZE, "1", "1", 0, 1.8e19, NULL, ""},
    {"fill", CMB_P_REAL, "0", "0", -1e300, 1e300, NULL, ""},
    {"flag", CMB_P_BOOL, "true", "true", 0, 0, NULL, ""},
    {"dist", CMB_P_CHOICE, "uniform", "uniform", 0, 0, "uniform|loguniform|bimodal", ""},
    {"path", CMB_P_TEXT, "x", "x", 0, 0, NULL, ""},
};

static int plain_decimal(const char *s)
{
    if (!*s || (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')))
        return 0;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return strlen(s) < 19;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[512], canon[CMB_PARAM_VALUE_MAX], again[CMB_PARAM_VALUE_MAX], err[256], fmt[32];
    if (size >= sizeof s)
        size = sizeof s - 1;
    memcpy(s, data, size);
    s[size] = '\0';

    uint64_t u, v;
    int64_t i;
    double d;
    int b;
    if (cmb_parse_u64(s, &u) == 0 && plain_decimal(s))
        check(u == strtoull(s, NULL, 10), "a decimal string reads as decimal", s);
    if (cmb_parse_i64(s, &i) == 0 && plain_decimal(s))
        check((uint64_t)i == strtoull(s, NULL, 10), "a decimal string reads as decimal (i64)", s);
    (void)cmb_parse_double(s, &d);
    (void)cmb_parse_bool(s, &b);
    if (cmb_parse_size(s, &u) == 0) {
        cmb_format_size(u, fmt, sizeof fmt);
        check(strlen(fmt) < sizeof fmt - 1, "formatted size fits", s);
    }

    for (size_t k = 0; k < sizeof SPECS / sizeof SPECS[0]; k++) {
        const cmb_param_spec *spec = &SPECS[k];
        if (cmb_param_canonical(spec, s, canon, sizeof canon, err, sizeof err))
            continue;
        check(cmb_param_canonical(spec, canon, again, sizeof again, err, sizeof err) == 0,
              "a canonical value is accepted", s);
        check(strcmp(canon, again) == 0, "canonical spelling is a fixed point", s);
        if (spec->type == CMB_P_SIZE) {
            check(cmb_parse_size_strict(s, "B", &u, NULL, 0) == 0 &&
                      cmb_parse_size_strict(canon, "B", &v, NULL, 0) == 0 && u == v,
                  "a size reads back to the same bytes", s);
        }
    }
    return 0;
}
