/* alloc_spec.c - parsing of allocator specifications. */
#include "alloc_spec.h"

#include <stdio.h>
#include <string.h>

static int add_options(cmb_alloc_spec *s, const char *list, size_t *used, char *err, size_t errlen)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", list);
    char *save = NULL;
    for (char *kv = strtok_r(tmp, ":", &save); kv; kv = strtok_r(NULL, ":", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv || !eq[1]) {
            snprintf(err, errlen, "allocator option '%s' is not key=value", kv);
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
    } else {
        char *colon = strchr(buf, ':');
        if (colon) {
            *colon = '\0';
            opts = colon + 1;
        }
        s->entry = cmb_allocator_find(buf);
        if (!s->entry) {
            snprintf(err, errlen, "unknown allocator '%s' (cumembench --list shows them)", buf);
            return -1;
        }
        snprintf(s->name, sizeof s->name, "%s", buf);
        if (*s->entry->default_options && add_options(s, s->entry->default_options, &used, err, errlen))
            return -1;
    }
    if (opts && *opts && add_options(s, opts, &used, err, errlen))
        return -1;
    if (opts && !*opts) {
        snprintf(err, errlen, "empty option list in '%s'", text);
        return -1;
    }
    return 0;
}

void cmb_alloc_spec_label(const cmb_alloc_spec *s, char *out, size_t outlen)
{
    /* The name plus the user's own options (not the entry defaults). */
    const char *colon = NULL;
    if (!strncmp(s->text, "external:", 9))
        colon = strchr(s->text + 9, ':');
    else
        colon = strchr(s->text, ':');
    const char *at = strrchr(s->text, '@');
    size_t opt_len = 0;
    if (colon)
        opt_len = (size_t)((at && at > colon ? at : s->text + strlen(s->text)) - colon);
    snprintf(out, outlen, "%s%.*s%s%s", s->name, (int)opt_len, colon ? colon : "", s->has_upstream ? "@" : "",
             s->has_upstream ? cmb_upstream_kind_name(s->upstream) : "");
}
