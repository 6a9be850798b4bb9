/* policy.c - one allocator policy: the spec a user writes, its methods, and an
 * instance opened over its upstream for a place (policy.h). */
#include "policy.h"

#include <stdio.h>
#include <string.h>

#include "../common/cmb_suggest.h"
#include "external.h"
#include "options.h"
#include "real.h"

static int add_options(cmb_alloc_spec *s, const char *list, size_t *used, char *err, size_t errlen)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", list);
    char *save = NULL;
    for (char *kv = strtok_r(tmp, ":", &save); kv; kv = strtok_r(NULL, ":", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv || !eq[1]) {
            snprintf(err, errlen, "allocator option '%s' %s", kv, eq && eq != kv ? "has no value" : "is not key=value");
            return -1;
        }
        if (s->n_options == CMB_MAX_ALLOC_OPTIONS) {
            snprintf(err, errlen, "too many allocator options");
            return -1;
        }
        size_t len = strlen(kv) + 1;
        if (*used + len > sizeof s->optbuf) {
            snprintf(err, errlen, "allocator options too long");
            return -1;
        }
        char *dst = s->optbuf + *used;
        memcpy(dst, kv, len);
        dst[eq - kv] = '\0';
        s->options[s->n_options].key = dst;
        s->options[s->n_options].value = dst + (eq - kv) + 1;
        s->n_options++;
        *used += len;
    }
    return 0;
}

/* real:NAME[:k=v...]: the plug-in's entry (or a refusing one, with why). */
static int real_spec(cmb_alloc_spec *s, char *buf, char **opts, size_t *used, char *err, size_t errlen)
{
    char *colon = strchr(buf + strlen(CMB_REAL_PREFIX), ':');
    if (colon) {
        *colon = '\0';
        *opts = colon + 1;
    }
    if (!(s->real = cmb_real_find(buf))) {
        cmb_suggest sg;
        char mean[160];
        cmb_suggest_init(&sg, buf);
        for (size_t i = 0; i < cmb_real_count(); i++)
            cmb_suggest_try(&sg, cmb_real_at(i)->name);
        snprintf(err, errlen, "unknown allocator '%s'%s (cumembench --list shows the real ones)", buf,
                 cmb_suggest_text(&sg, ";", mean, sizeof mean));
        return -1;
    }
    if (s->has_upstream) {
        snprintf(err, errlen, "%s takes its memory from the CUDA driver itself: no @upstream", buf);
        return -1;
    }
    s->entry = cmb_real_resolve(s->real, s->unavailable, sizeof s->unavailable);
    snprintf(s->name, sizeof s->name, "%s", buf);
    return *s->entry->default_options ? add_options(s, s->entry->default_options, used, err, errlen) : 0;
}

/* The user's options against the allocator's declarations, before anything
 * runs (allocators/options.h). An external library that does not load is
 * left to its case, which reports why. */
static int check_options(const cmb_alloc_spec *s, char *err, size_t errlen)
{
    char who[512], user[1024];
    const cmb_allocator_methods *m;
    if (s->external_path[0] && cmb_external_load(s->external_path, &m, err, errlen)) {
        err[0] = '\0';
        return 0;
    }
    snprintf(who, sizeof who, "%s%s", s->external_path[0] ? "external:" : "",
             s->external_path[0] ? s->external_path : s->name);
    cmb_alloc_spec_user_options(s, user, sizeof user);
    return cmb_allocator_check_options(who, user, err, errlen);
}

/* The spec before its @UPSTREAM: a name ("@vmm" has none), and no second
 * @UPSTREAM ("cmb@sim@vmm"; an '@' inside a path or an option stays allowed). */
static int check_name_part(const char *rest, const char *text, char *err, size_t errlen)
{
    cmb_upstream_kind kind;
    const char *at = strrchr(rest, '@');
    if (!*rest || *rest == ':') {
        snprintf(err, errlen, "empty allocator name in '%s'", text);
        return -1;
    }
    if (at && !cmb_upstream_kind_parse(at + 1, &kind)) {
        snprintf(err, errlen, "upstream given twice in '%s': give one of @cuda, @vmm or @sim", text);
        return -1;
    }
    return 0;
}

int cmb_alloc_spec_parse(const char *text, cmb_alloc_spec *s, char *err, size_t errlen)
{
    char buf[512], *opts = NULL;
    size_t used = 0;
    memset(s, 0, sizeof *s);
    if (!text || !*text || strlen(text) >= sizeof buf) {
        snprintf(err, errlen, "empty or too long allocator name");
        return -1;
    }
    snprintf(s->text, sizeof s->text, "%s", text);
    snprintf(buf, sizeof buf, "%s", text);

    char *at = strrchr(buf, '@');
    if (at) {
        *at = '\0';
        if (cmb_upstream_kind_parse(at + 1, &s->upstream)) {
            snprintf(err, errlen, "unknown upstream '%s' in '%s' (expected cuda, vmm or sim)", at + 1, text);
            return -1;
        }
        s->has_upstream = 1;
    }
    if (check_name_part(buf, text, err, errlen))
        return -1;
    if (!strncmp(buf, "external:", 9)) {
        char *path = buf + 9;
        char *colon = strchr(path, ':');
        if (colon) {
            *colon = '\0';
            opts = colon + 1;
        }
        if (!*path) {
            snprintf(err, errlen, "external allocator needs a path: external:/path/lib.so");
            return -1;
        }
        snprintf(s->external_path, sizeof s->external_path, "%s", path);
        const char *base = strrchr(path, '/');
        snprintf(s->name, sizeof s->name, "external:%s", base ? base + 1 : path);
    } else if (!strncmp(buf, CMB_REAL_PREFIX, strlen(CMB_REAL_PREFIX))) {
        if (real_spec(s, buf, &opts, &used, err, errlen))
            return -1;
    } else {
        char *colon = strchr(buf, ':');
        if (colon) {
            *colon = '\0';
            opts = colon + 1;
        }
        s->entry = cmb_allocator_find(buf);
        if (!s->entry) {
            cmb_suggest sg;
            char mean[160];
            cmb_suggest_init(&sg, buf);
            for (size_t i = 0; i < cmb_allocator_count(); i++)
                cmb_suggest_try(&sg, cmb_allocator_at(i)->name);
            snprintf(err, errlen, "unknown allocator '%s'%s (cumembench --list shows them)", buf,
                     cmb_suggest_text(&sg, ";", mean, sizeof mean));
            return -1;
        }
        snprintf(s->name, sizeof s->name, "%s", buf);
        if (*s->entry->default_options && add_options(s, s->entry->default_options, &used, err, errlen))
            return -1;
    }
    size_t first_user = s->n_options;
    if (opts && *opts && add_options(s, opts, &used, err, errlen))
        return -1;
    for (size_t i = first_user; s->real && i < s->n_options; i++)
        if (cmb_real_check_option(s->real, s->options[i].key, s->options[i].value, err, errlen))
            return -1;
    if (opts && !*opts) {
        snprintf(err, errlen, "empty option list in '%s'", text);
        return -1;
    }
    return check_options(s, err, errlen);
}

void cmb_alloc_spec_copy(cmb_alloc_spec *dst, const cmb_alloc_spec *src)
{
    if (dst == src)
        return;
    memcpy(dst, src, sizeof *dst);
    for (size_t i = 0; i < dst->n_options; i++) {
        dst->options[i].key = dst->optbuf + (src->options[i].key - src->optbuf);
        dst->options[i].value = dst->optbuf + (src->options[i].value - src->optbuf);
    }
}

int cmb_alloc_spec_owns_options(const cmb_alloc_spec *s)
{
    for (size_t i = 0; i < s->n_options; i++) {
        const char *k = s->options[i].key, *v = s->options[i].value;
        if (k < s->optbuf || k >= s->optbuf + sizeof s->optbuf || v < s->optbuf || v >= s->optbuf + sizeof s->optbuf)
            return 0;
    }
    return 1;
}

/* Where the user's options start in s->text (at their ':'), and how long
 * they are up to '@UPSTREAM'; NULL when there are none. */
static const char *user_options(const cmb_alloc_spec *s, size_t *len)
{
    const char *colon = NULL;
    if (!strncmp(s->text, "external:", 9))
        colon = strchr(s->text + 9, ':');
    else if (!strncmp(s->text, CMB_REAL_PREFIX, strlen(CMB_REAL_PREFIX)))
        colon = strchr(s->text + strlen(CMB_REAL_PREFIX), ':');
    else
        colon = strchr(s->text, ':');
    if (!colon)
        return NULL;
    const char *at = s->has_upstream ? strrchr(s->text, '@') : NULL;
    *len = (size_t)((at && at > colon ? at : s->text + strlen(s->text)) - colon);
    return colon;
}

void cmb_alloc_spec_label(const cmb_alloc_spec *s, char *out, size_t outlen)
{
    size_t opt_len = 0;
    const char *colon = user_options(s, &opt_len);
    snprintf(out, outlen, "%s%.*s%s%s", s->name, (int)opt_len, colon ? colon : "", s->has_upstream ? "@" : "",
             s->has_upstream ? cmb_upstream_kind_name(s->upstream) : "");
}

void cmb_alloc_spec_user_options(const cmb_alloc_spec *s, char *out, size_t outlen)
{
    size_t opt_len = 0;
    const char *colon = user_options(s, &opt_len);
    snprintf(out, outlen, "%.*s", colon ? (int)opt_len - 1 : 0, colon ? colon + 1 : "");
}

const char *cmb_alloc_spec_impl(const cmb_alloc_spec *s)
{
    if (s->real || !s->entry)
        return "real"; /* real:NAME, and a user's own library */
    return cmb_allocator_impl(s->entry);
}

/* --- the method table -------------------------------------------------------------------------- */

const cmb_allocator_methods *cmb_policy_methods(const cmb_alloc_spec *s, char *err, size_t errlen)
{
    const cmb_allocator_methods *m = NULL;
    if (s->entry)
        return s->entry->methods;
    if (cmb_external_load(s->external_path, &m, err, errlen))
        return NULL;
    return m;
}

cmb_upstream_kind cmb_policy_upstream_kind(const cmb_alloc_spec *s, const cmb_allocator_methods *m, int gpu)
{
    if (s->has_upstream)
        return s->upstream;
    if (!gpu)
        return CMB_UPSTREAM_SIM;
    return m && (m->flags & CMB_ALLOC_NEEDS_VMM) ? CMB_UPSTREAM_VMM : CMB_UPSTREAM_CUDA;
}

/* --- an instance for a place ------------------------------------------------------------------- */

static cmb_status open_upstream(const cmb_policy_place *pl, cmb_upstream **up, char *err, size_t errlen)
{
    char why[320] = "";
    cmb_upstream_config ucfg;
    cmb_upstream_config_default(&ucfg);
    ucfg.kind = pl->upstream;
    ucfg.device = pl->device;
    ucfg.fault = pl->fault;
    if (pl->upstream == CMB_UPSTREAM_SIM) {
        if (pl->capacity)
            ucfg.sim_capacity = pl->capacity;
    } else if (pl->capacity) {
        ucfg.fault.cap_bytes = pl->capacity; /* a smaller GPU: the upstream's cap */
    }
    cmb_status st = pl->parent ? cmb_upstream_open_child(pl->parent, up, why, sizeof why)
                               : cmb_upstream_open(&ucfg, up, why, sizeof why);
    if (st != CMB_OK)
        snprintf(err, errlen, "%s upstream on device %d: %s", cmb_upstream_kind_name(pl->upstream), pl->device, why);
    return st;
}

/* The spec's options for create() at a place; create's reason goes to why. */
static cmb_config spec_config(const cmb_alloc_spec *s, const cmb_policy_place *place, char *why, size_t whylen)
{
    cmb_config cfg = {
        .options = s->options,
        .n_options = s->n_options,
        .device = place->device,
        .sim = place->sim,
        .error = why,
        .error_len = whylen,
    };
    return cfg;
}

/* cmb_policy_open, with create's own reason also in why (empty where
 * create was not reached). */
static cmb_status policy_open(const cmb_alloc_spec *s, const cmb_allocator_methods *m, const cmb_policy_place *place,
                              cmb_policy *out, char *err, size_t errlen, char *why, size_t whylen)
{
    why[0] = '\0';
    memset(out, 0, sizeof *out);
    out->m = m;
    cmb_status st = CMB_OK;
    if ((m->flags & CMB_ALLOC_USES_UPSTREAM) && (st = open_upstream(place, &out->up, err, errlen)) != CMB_OK)
        return st;
    if (out->up && place->upstream_opened)
        place->upstream_opened(place->ctx, out->up);
    cmb_config cfg = spec_config(s, place, why, whylen);
    st = m->create(&cfg, out->up, &out->state);
    if (st != CMB_OK) {
        if (!why[0])
            snprintf(why, whylen, "%s", cmb_status_str(st));
        snprintf(err, errlen, "creating %s on device %d: %s", s->text, place->device, why);
        out->state = NULL;
        goto out_close_upstream;
    }
    return CMB_OK;

out_close_upstream:
    if (out->up)
        cmb_upstream_close(out->up);
    out->up = NULL;
    return st;
}

cmb_status cmb_policy_open(const cmb_alloc_spec *s, const cmb_allocator_methods *m, const cmb_policy_place *place,
                           cmb_policy *out, char *err, size_t errlen)
{
    char why[320];
    return policy_open(s, m, place, out, err, errlen, why, sizeof why);
}

void cmb_policy_close(cmb_policy *p, cmb_policy_end *end)
{
    cmb_policy_end ignored;
    end = end ? end : &ignored;
    memset(end, 0, sizeof *end);
    end->leaked = -1;
    if (p->state)
        end->destroyed = p->m->destroy(p->state);
    p->state = NULL;
    if (!p->up)
        return;
    end->had_upstream = 1;
    end->misuse = cmb_upstream_misuse_count(p->up);
    end->injected_faults = p->up->stats.injected_faults;
    if (end->misuse)
        snprintf(end->last_misuse, sizeof end->last_misuse, "%s", cmb_upstream_last_misuse(p->up));
    end->leaked = cmb_upstream_close(p->up); /* frees what the allocator kept */
    p->up = NULL;
}

/* --- a trial instance ---------------------------------------------------------------------- */

int cmb_policy_try(const cmb_alloc_spec *s, const cmb_allocator_methods *m, char *err, size_t errlen)
{
    const cmb_policy_place place = {.upstream = CMB_UPSTREAM_SIM, .sim = 1};
    cmb_policy p;
    char why[320], open_err[512];
    if (!s->entry || s->real || cmb_allocator_sim_skip_reason(m))
        return 0; /* plug-ins are probed apart; what needs a GPU is judged in its cases */
    cmb_status st = policy_open(s, m, &place, &p, open_err, sizeof open_err, why, sizeof why);
    if (st == CMB_OK)
        cmb_policy_close(&p, NULL);
    if (st != CMB_ERR_INVALID || !why[0])
        return 0; /* accepted, or short of host memory: the cases will say so */
    /* a long spec is cut so that create's reason, the point of the line, is never cut */
    int cut = strlen(s->text) > 120;
    snprintf(err, errlen, "allocator '%.*s%s': %s", cut ? 100 : 120, s->text, cut ? "..." : "", why);
    return -1;
}
