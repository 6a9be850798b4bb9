/* options.c - reading allocator options through their declarations, and
 * checking and describing a whole spec. */
#include "options.h"

#include <stdio.h>
#include <string.h>

#include "../common/cmb_assert.h"
#include "cmb_option_check.h"
#include "external.h"
#include "real.h"
#include "registry.h"

/* --- through the declarations --------------------------------------------------- */

cmb_status cmb_options_read(cmb_options *o, const char *allocator, const cmb_option_decl *decls,
                            const cmb_config *cfg)
{
    memset(o, 0, sizeof *o);
    o->allocator = allocator;
    o->decls = decls;
    const cmb_option *opts = cfg ? cfg->options : NULL;
    size_t n = cfg ? cfg->n_options : 0;
    char *err = cfg ? cfg->error : NULL;
    size_t errlen = err ? cfg->error_len : 0;
    if (cmb_optck_options(allocator, decls, opts, n, 0, err, errlen))
        return CMB_ERR_INVALID;
    for (size_t i = 0; i < n; i++) {
        const cmb_option_decl *d = cmb_optck_find(decls, opts[i].key);
        cmb_assert_internal(d && d - decls < CMB_OPTIONS_MAX);
        o->value[d - decls] = opts[i].value; /* the last one wins */
    }
    return CMB_OK;
}

/* The text to parse: the value given, the declared default, or NULL for a
 * rule default ("(...)") or none. */
static const char *text_of(const cmb_options *o, const char *name, const cmb_option_decl **decl)
{
    const cmb_option_decl *d = cmb_optck_find(o->decls, name);
    cmb_assert_internal(d != NULL); /* a name the allocator did not declare: a bug */
    *decl = d;
    if (!d)
        return NULL;
    const char *v = o->value[d - o->decls];
    if (v)
        return v;
    return d->dflt && d->dflt[0] != '(' ? d->dflt : NULL;
}

int cmb_opt_given(const cmb_options *o, const char *name)
{
    const cmb_option_decl *d = cmb_optck_find(o->decls, name);
    cmb_assert_internal(d != NULL);
    return d && o->value[d - o->decls] != NULL;
}

uint64_t cmb_opt_size(const cmb_options *o, const char *name)
{
    const cmb_option_decl *d;
    const char *t = text_of(o, name, &d);
    uint64_t v = 0;
    char why[160];
    if (t && cmb_optck_size(t, d->unit, 1, &v, why, sizeof why))
        cmb_assert_internal(!"a declared default that does not parse");
    return v;
}

double cmb_opt_real(const cmb_options *o, const char *name)
{
    const cmb_option_decl *d;
    const char *t = text_of(o, name, &d);
    double v = 0;
    if (t && cmb_optck_real(t, &v))
        cmb_assert_internal(!"a declared default that does not parse");
    return v;
}

int64_t cmb_opt_int(const cmb_options *o, const char *name)
{
    const cmb_option_decl *d;
    const char *t = text_of(o, name, &d);
    int64_t v = 0;
    if (t && cmb_optck_int(t, &v))
        cmb_assert_internal(!"a declared default that does not parse");
    return v;
}

int cmb_opt_bool(const cmb_options *o, const char *name)
{
    const cmb_option_decl *d;
    const char *t = text_of(o, name, &d);
    int v = 0;
    if (t && cmb_optck_bool(t, &v))
        cmb_assert_internal(!"a declared default that does not parse");
    return v;
}

const char *cmb_opt_str(const cmb_options *o, const char *name)
{
    const cmb_option_decl *d;
    return text_of(o, name, &d);
}

/* --- the config ---------------------------------------------------------------------------- */

const char *cmb_config_get(const cmb_config *cfg, const char *key)
{
    /* Later options override earlier ones (defaults come first). */
    for (size_t i = cfg ? cfg->n_options : 0; i-- > 0;)
        if (!strcmp(cfg->options[i].key, key))
            return cfg->options[i].value;
    return NULL;
}

/* --- a whole spec, before anything runs ------------------------------------------------ */

/* The declarations of allocator `name`: 1 with *decls (NULL when it
 * declares none), 0 when no allocator has that name, -1 when an external
 * plug-in cannot be loaded (err says why). */
static int decls_of(const char *name, const cmb_option_decl **decls, char *err, size_t errlen)
{
    if (!strncmp(name, CMB_REAL_PREFIX, strlen(CMB_REAL_PREFIX))) {
        const cmb_real_info *ri = cmb_real_find(name);
        *decls = ri ? ri->options : NULL;
        return ri != NULL;
    }
    if (!strncmp(name, "external:", 9)) {
        const cmb_allocator_methods *m;
        if (cmb_external_load(name + 9, &m, err, errlen))
            return -1;
        *decls = m->options;
        return 1;
    }
    const cmb_allocator_entry *e = cmb_allocator_find(name);
    *decls = e ? e->methods->options : NULL;
    return e != NULL;
}

/* "k=v:k=v" into opts (pointing into buf). 0, or -1 with err. */
static int split_options(const char *name, const char *optstr, char *buf, size_t buflen, cmb_option *opts,
                         size_t *n, char *err, size_t errlen)
{
    *n = 0;
    if (!optstr || !*optstr)
        return 0;
    if (strlen(optstr) >= buflen) {
        snprintf(err, errlen, "allocator '%s': options too long", name);
        return -1;
    }
    snprintf(buf, buflen, "%s", optstr);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ":", &save); kv; kv = strtok_r(NULL, ":", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv || !eq[1] || *n == CMB_OPTIONS_MAX) {
            snprintf(err, errlen, "allocator '%s': option '%s' %s%s", name, kv,
                     eq && eq != kv && !eq[1] ? "has no value" : "is not key=value",
                     *n == CMB_OPTIONS_MAX ? " (too many options)" : "");
            return -1;
        }
        *eq = '\0';
        opts[*n].key = kv;
        opts[*n].value = eq + 1;
        (*n)++;
    }
    return 0;
}

int cmb_allocator_check_options(const char *name, const char *optstr, char *err, size_t errlen)
{
    const cmb_option_decl *decls;
    cmb_option opts[CMB_OPTIONS_MAX];
    char buf[1024];
    size_t n;
    int found = decls_of(name, &decls, err, errlen);
    if (found < 0)
        return -1;
    if (!found) {
        snprintf(err, errlen, "unknown allocator '%s' (cumembench --list shows them)", name);
        return -1;
    }
    if (split_options(name, optstr, buf, sizeof buf, opts, &n, err, errlen))
        return -1;
    if (!decls) /* a plug-in that declares nothing checks its options at create */
        return 0;
    return cmb_optck_options(name, decls, opts, n, 1, err, errlen);
}

static const char *type_word(const cmb_option_decl *d)
{
    switch (d->type) {
    case CMB_OPT_SIZE: return "SIZE";
    case CMB_OPT_REAL: return "X";
    case CMB_OPT_INT: return "N";
    case CMB_OPT_BOOL: return "BOOL";
    case CMB_OPT_ENUM: return d->choices;
    case CMB_OPT_STRING: return "TEXT";
    }
    return "?";
}

/* One option in two lines: how to write it, its default (the entry's own
 * when it sets one) and range; what it does. */
static void describe_one(FILE *f, const cmb_option_decl *d, const char *entry_default)
{
    char head[160];
    snprintf(head, sizeof head, ":%s=%s", d->name, type_word(d));
    fprintf(f, "      %-34s default %s", head, entry_default ? entry_default : d->dflt ? d->dflt : "(none)");
    const char *max = cmb_optck_max(d);
    if (d->min && max)
        fprintf(f, ", range [%s, %s]", d->min, max);
    else if (d->min)
        fprintf(f, ", at least %s", d->min);
    else if (max)
        fprintf(f, ", at most %s", max);
    if (d->type == CMB_OPT_SIZE)
        fprintf(f, d->unit ? ", a bare number is %s" : ", with a unit", d->unit);
    else if (d->unit)
        fprintf(f, " (%s)", d->unit);
    if (d->flags & CMB_OPT_POW2)
        fprintf(f, ", a power of two");
    fprintf(f, "\n          %s\n", d->help ? d->help : "");
}

int cmb_allocator_describe_options(const char *name, FILE *f)
{
    const cmb_option_decl *decls;
    char err[256], buf[1024];
    cmb_option dflt[CMB_OPTIONS_MAX];
    size_t n_dflt = 0;
    int found = decls_of(name, &decls, err, sizeof err);
    if (found <= 0)
        return -1;
    const cmb_allocator_entry *e = cmb_allocator_find(name);
    if (e && split_options(name, e->default_options, buf, sizeof buf, dflt, &n_dflt, err, sizeof err))
        n_dflt = 0;
    if (!decls)
        fprintf(f, "      (options not declared: the allocator checks them itself)\n");
    else if (!decls->name)
        fprintf(f, "      (no options)\n");
    for (const cmb_option_decl *d = decls; d && d->name; d++) {
        const char *own = NULL;
        for (size_t i = 0; i < n_dflt; i++)
            if (!strcmp(dflt[i].key, d->name))
                own = dflt[i].value;
        describe_one(f, d, own);
    }
    return 0;
}
