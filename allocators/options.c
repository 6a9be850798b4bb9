/* options.c - allocator option reader. */
#include "options.h"

#include <stdio.h>
#include <string.h>

#include "../common/cmb_units.h"

const char *cmb_config_get(const cmb_config *cfg, const char *key)
{
    /* Later options override earlier ones (defaults come first). */
    for (size_t i = cfg ? cfg->n_options : 0; i-- > 0;)
        if (!strcmp(cfg->options[i].key, key))
            return cfg->options[i].value;
    return NULL;
}

void cmb_options_begin(cmb_option_reader *r, const cmb_config *cfg, char *err, size_t errlen)
{
    r->cfg = cfg;
    r->err = err;
    r->errlen = errlen;
    r->failed = 0;
    r->used = 0;
    if (err && errlen)
        err[0] = '\0';
}

static const char *lookup(cmb_option_reader *r, const char *key)
{
    const char *v = NULL;
    for (size_t i = 0; r->cfg && i < r->cfg->n_options; i++) {
        if (!strcmp(r->cfg->options[i].key, key)) {
            v = r->cfg->options[i].value;
            if (i < 64)
                r->used |= 1ull << i;
        }
    }
    return v;
}

static void bad(cmb_option_reader *r, const char *key, const char *value, const char *what)
{
    if (!r->failed && r->err)
        snprintf(r->err, r->errlen, "option %s=%s: expected %s", key, value, what);
    r->failed = 1;
}

uint64_t cmb_options_size(cmb_option_reader *r, const char *key, uint64_t dflt)
{
    const char *v = lookup(r, key);
    uint64_t out;
    if (!v)
        return dflt;
    if (!strcmp(v, "unlimited") || !strcmp(v, "max"))
        return UINT64_MAX;
    if (cmb_parse_size(v, &out)) {
        bad(r, key, v, "a size such as 512, 64KiB, 2MiB, 1GiB, or 'max'");
        return dflt;
    }
    return out;
}

uint64_t cmb_options_u64(cmb_option_reader *r, const char *key, uint64_t dflt)
{
    const char *v = lookup(r, key);
    uint64_t out;
    if (!v)
        return dflt;
    if (!strcmp(v, "max"))
        return UINT64_MAX;
    if (cmb_parse_u64(v, &out)) {
        bad(r, key, v, "a non-negative integer");
        return dflt;
    }
    return out;
}

double cmb_options_double(cmb_option_reader *r, const char *key, double dflt)
{
    const char *v = lookup(r, key);
    double out;
    if (!v)
        return dflt;
    if (cmb_parse_double(v, &out)) {
        bad(r, key, v, "a number");
        return dflt;
    }
    return out;
}

int cmb_options_bool(cmb_option_reader *r, const char *key, int dflt)
{
    const char *v = lookup(r, key);
    int out;
    if (!v)
        return dflt;
    if (cmb_parse_bool(v, &out)) {
        bad(r, key, v, "true or false");
        return dflt;
    }
    return out;
}

const char *cmb_options_str(cmb_option_reader *r, const char *key, const char *dflt)
{
    const char *v = lookup(r, key);
    return v ? v : dflt;
}

cmb_status cmb_options_end(cmb_option_reader *r, const char *allocator)
{
    if (r->failed)
        return CMB_ERR_INVALID;
    for (size_t i = 0; r->cfg && i < r->cfg->n_options && i < 64; i++) {
        if (!(r->used & (1ull << i))) {
            if (r->err)
                snprintf(r->err, r->errlen, "allocator %s has no option '%s'", allocator,
                         r->cfg->options[i].key);
            return CMB_ERR_INVALID;
        }
    }
    return CMB_OK;
}
