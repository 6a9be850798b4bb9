/* params.c - parameter validation, canonical values and preset expansion. */
#include "params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_units.h"

/* --- one value ------------------------------------------------------------- */

static void size_canonical(uint64_t v, char *out, size_t outlen)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && v && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    snprintf(out, outlen, "%llu%s", (unsigned long long)v, units[u]);
}

static int choice_ok(const char *choices, const char *v)
{
    size_t n = strlen(v);
    const char *p = choices;
    while (p && *p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n))
            return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

static void bounds_text(const cmb_param_spec *spec, char *lo, char *hi, size_t len)
{
    if (spec->type == CMB_P_SIZE) {
        cmb_format_size((uint64_t)spec->min, lo, len);
        cmb_format_size((uint64_t)spec->max, hi, len);
    } else { /* 0.95, not 0.94999999999999996 */
        snprintf(lo, len, "%.15g", spec->min);
        snprintf(hi, len, "%.15g", spec->max);
    }
}

void cmb_param_range(const cmb_param_spec *spec, char *out, size_t outlen)
{
    char lo[32], hi[32];
    out[0] = '\0';
    if (spec->type != CMB_P_SIZE && spec->type != CMB_P_INT && spec->type != CMB_P_REAL)
        return;
    bounds_text(spec, lo, hi, sizeof lo);
    snprintf(out, outlen, "range [%s, %s]", lo, hi);
}

static int check_bounds(const cmb_param_spec *spec, double v, const char *value, char *err, size_t errlen)
{
    if (v < spec->min || v > spec->max) {
        char lo[32], hi[32];
        bounds_text(spec, lo, hi, sizeof lo);
        snprintf(err, errlen, "parameter %s=%s is out of range [%s, %s]", spec->name, value, lo, hi);
        return -1;
    }
    return 0;
}

int cmb_param_canonical(const cmb_param_spec *spec, const char *value, char *out, size_t outlen,
                        char *err, size_t errlen)
{
    uint64_t u;
    double d;
    int b, rc;
    char why[160];
    switch (spec->type) {
    case CMB_P_INT:
        if ((rc = cmb_parse_u64(value, &u))) { /* "too large", as a size parameter says it */
            snprintf(err, errlen, "parameter %s=%s: %s", spec->name, value,
                     rc == CMB_PARSE_TOO_LARGE ? "too large" : "expected a non-negative integer");
            return -1;
        }
        if (check_bounds(spec, (double)u, value, err, errlen))
            return -1;
        snprintf(out, outlen, "%llu", (unsigned long long)u);
        return 0;
    case CMB_P_SIZE:
        if (cmb_parse_size_strict(value, "B", &u, why, sizeof why)) { /* bare numbers are bytes */
            snprintf(err, errlen, "parameter %s=%s: %s", spec->name, value, why);
            return -1;
        }
        if (check_bounds(spec, (double)u, value, err, errlen))
            return -1;
        size_canonical(u, out, outlen);
        return 0;
    case CMB_P_REAL:
        if (cmb_parse_double(value, &d)) {
            snprintf(err, errlen, "parameter %s=%s: expected a number", spec->name, value);
            return -1;
        }
        if (check_bounds(spec, d, value, err, errlen))
            return -1;
        snprintf(out, outlen, "%.17g", d);
        /* shortest spelling that reads back the same */
        for (int prec = 1; prec <= 17; prec++) {
            char buf[64];
            snprintf(buf, sizeof buf, "%.*g", prec, d);
            if (strtod(buf, NULL) == d) {
                snprintf(out, outlen, "%s", buf);
                break;
            }
        }
        return 0;
    case CMB_P_BOOL:
        if (cmb_parse_bool(value, &b)) {
            snprintf(err, errlen, "parameter %s=%s: expected true or false", spec->name, value);
            return -1;
        }
        snprintf(out, outlen, "%s", b ? "true" : "false");
        return 0;
    case CMB_P_CHOICE:
        if (!choice_ok(spec->choices, value)) {
            snprintf(err, errlen, "parameter %s=%s: expected one of %s", spec->name, value, spec->choices);
            return -1;
        }
        snprintf(out, outlen, "%s", value);
        return 0;
    case CMB_P_TEXT:
        if (strpbrk(value, ",;\t\n\r\"")) {
            snprintf(err, errlen, "parameter %s: text may not contain , ; tabs, quotes or newlines", spec->name);
            return -1;
        }
        if (strlen(value) >= outlen) {
            snprintf(err, errlen, "parameter %s: value too long", spec->name);
            return -1;
        }
        snprintf(out, outlen, "%s", value);
        return 0;
    }
    snprintf(err, errlen, "parameter %s has an unknown type", spec->name);
    return -1;
}

const cmb_param_spec *cmb_param_spec_find(const cmb_scenario *s, const char *name)
{
    for (size_t i = 0; i < s->n_params; i++)
        if (!strcmp(s->params[i].name, name))
            return &s->params[i];
    return NULL;
}

/* --- value lists and grids ------------------------------------------------------- */

#define MAX_VALUES 64

typedef struct value_list {
    size_t n;
    char v[MAX_VALUES][CMB_PARAM_VALUE_MAX];
} value_list;

/* Splits a comma list and canonicalizes each value. */
static int parse_list(const cmb_param_spec *spec, const char *list, value_list *out, char *err, size_t errlen)
{
    char buf[2048];
    if (!list || !*list) {
        snprintf(err, errlen, "parameter %s: empty value", spec->name);
        return -1;
    }
    if (strlen(list) >= sizeof buf) {
        snprintf(err, errlen, "parameter %s: value list too long", spec->name);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", list);
    out->n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (out->n == MAX_VALUES) {
            snprintf(err, errlen, "parameter %s: more than %d values", spec->name, MAX_VALUES);
            return -1;
        }
        if (cmb_param_canonical(spec, tok, out->v[out->n], CMB_PARAM_VALUE_MAX, err, errlen))
            return -1;
        out->n++;
    }
    if (!out->n || list[strlen(list) - 1] == ',' || list[0] == ',' || strstr(list, ",,")) {
        snprintf(err, errlen, "parameter %s: empty value in list '%s'", spec->name, list);
        return -1;
    }
    return 0;
}

/* A --param list naming one value twice ("iterations=10,10", or 1MiB and
 * 1048576): two cases under one name, refused as a duplicated --param is. */
static int repeated_value(const cmb_param_spec *spec, const value_list *l, char *err, size_t errlen)
{
    for (size_t i = 0; i < l->n; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(l->v[i], l->v[j])) {
                snprintf(err, errlen, "--param %s lists %s twice", spec->name, l->v[i]);
                return -1;
            }
    return 0;
}

/* Appends the cartesian product of lists[] to the result array. */
static int append_grid(const cmb_scenario *s, value_list *lists, cmb_param_set **out, size_t *n_out,
                       size_t *cap, char *err, size_t errlen)
{
    size_t idx[CMB_MAX_PARAMS] = {0};
    for (;;) {
        if (*n_out == *cap) {
            size_t ncap = *cap ? *cap * 2 : 16;
            cmb_param_set *grown = realloc(*out, ncap * sizeof *grown);
            if (!grown) {
                snprintf(err, errlen, "host out of memory expanding parameters");
                return -1;
            }
            *out = grown;
            *cap = ncap;
        }
        cmb_param_set *ps = &(*out)[(*n_out)++];
        ps->n = s->n_params;
        for (size_t i = 0; i < s->n_params; i++) {
            ps->spec[i] = &s->params[i];
            snprintf(ps->value[i], CMB_PARAM_VALUE_MAX, "%s", lists[i].v[idx[i]]);
        }
        /* odometer, last parameter fastest */
        size_t k = s->n_params;
        while (k > 0) {
            k--;
            if (++idx[k] < lists[k].n)
                break;
            idx[k] = 0;
            if (k == 0)
                return 0;
        }
        if (s->n_params == 0)
            return 0;
    }
}

static int same_set(const cmb_param_set *a, const cmb_param_set *b)
{
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->value[i], b->value[i]))
            return 0;
    return 1;
}

/* Applies one "k=v,v;k=v" grid string onto lists. */
static int apply_grid_string(const cmb_scenario *s, const char *grid, value_list *lists, char *err, size_t errlen)
{
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", grid);
    char *save = NULL;
    for (char *item = strtok_r(buf, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) {
            snprintf(err, errlen, "scenario %s: bad preset grid item '%s'", s->name, item);
            return -1;
        }
        *eq = '\0';
        const cmb_param_spec *spec = cmb_param_spec_find(s, item);
        if (!spec) {
            snprintf(err, errlen, "scenario %s: preset names unknown parameter '%s'", s->name, item);
            return -1;
        }
        if (parse_list(spec, eq + 1, &lists[spec - s->params], err, errlen))
            return -1;
    }
    return 0;
}

int cmb_params_expand(const cmb_scenario *s, cmb_preset preset, const cmb_param_override *ov,
                      size_t n_ov, cmb_param_set **out, size_t *n_out, char *err, size_t errlen)
{
    static const char *const one_default_grid[] = {"", NULL};
    const char *const *grids = preset == CMB_PRESET_FULL ? s->full_grids : s->quick_grids;
    value_list *lists = calloc(CMB_MAX_PARAMS, sizeof *lists);
    size_t cap = 0;
    *out = NULL;
    *n_out = 0;
    if (!lists) {
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    if (s->n_params > CMB_MAX_PARAMS) {
        snprintf(err, errlen, "scenario %s has too many parameters", s->name);
        goto out_fail;
    }
    if (!grids)
        grids = one_default_grid;
    for (size_t g = 0; grids[g]; g++) {
        for (size_t i = 0; i < s->n_params; i++) {
            const cmb_param_spec *spec = &s->params[i];
            if (parse_list(spec, preset == CMB_PRESET_FULL ? spec->full : spec->quick, &lists[i], err, errlen))
                goto out_fail;
        }
        if (*grids[g] && apply_grid_string(s, grids[g], lists, err, errlen))
            goto out_fail;
        /* command-line overrides win over every preset grid */
        for (size_t k = 0; k < n_ov; k++) {
            const cmb_param_spec *spec = cmb_param_spec_find(s, ov[k].name);
            if (spec && (parse_list(spec, ov[k].values, &lists[spec - s->params], err, errlen) ||
                         repeated_value(spec, &lists[spec - s->params], err, errlen)))
                goto out_fail;
        }
        size_t combos = 1;
        for (size_t i = 0; i < s->n_params && combos <= CMB_MAX_PARAM_SETS; i++)
            combos *= lists[i].n;
        if (combos + *n_out > CMB_MAX_PARAM_SETS) {
            snprintf(err, errlen, "scenario %s: the parameter lists make more than %d cases; sweep fewer values",
                     s->name, CMB_MAX_PARAM_SETS);
            goto out_fail;
        }
        size_t before = *n_out;
        if (append_grid(s, lists, out, n_out, &cap, err, errlen))
            goto out_fail;
        /* drop sets an earlier grid already produced */
        size_t w = before;
        for (size_t r = before; r < *n_out; r++) {
            int dup = 0;
            for (size_t q = 0; q < before && !dup; q++)
                dup = same_set(&(*out)[q], &(*out)[r]);
            for (size_t q = before; q < w && !dup; q++)
                dup = same_set(&(*out)[q], &(*out)[r]);
            if (!dup)
                (*out)[w++] = (*out)[r];
        }
        *n_out = w;
    }
    free(lists);
    return 0;

out_fail:
    free(lists);
    free(*out);
    *out = NULL;
    *n_out = 0;
    return -1;
}

const char *cmb_param_set_get(const cmb_param_set *ps, const char *name)
{
    for (size_t i = 0; i < ps->n; i++)
        if (!strcmp(ps->spec[i]->name, name))
            return ps->value[i];
    return NULL;
}

void cmb_param_set_format(const cmb_param_set *ps, char sep_kv, char sep_item, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < ps->n && used < outlen; i++) {
        int w = snprintf(out + used, outlen - used, "%s%s%c%s", i ? (char[]){sep_item, 0} : "",
                         ps->spec[i]->name, sep_kv, ps->value[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}
