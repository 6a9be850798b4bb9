/* real_options.h - option parsing for the real plug-ins.
 *
 * A plug-in links nothing of the suite (docs/plugins.md), so it reads its
 * options itself; these helpers keep the spelling the suite accepts
 * ("64MiB", "max", "true"). The suite checked keys and kinds before the
 * run (allocators/real.c); the plug-in checks them again, since it can also
 * be loaded as external:/path/libcmb_real_X.so.
 */
#ifndef CMB_REAL_OPTIONS_H
#define CMB_REAL_OPTIONS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../allocators/cmb_allocator.h"

/* "4096", "64KiB", "2MiB", "1GiB", "1TiB" (K/M/G/T read as binary too), or
 * "max"/"unlimited" (UINT64_MAX). 0 on success. */
static inline int cmb_real_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {{"", 1},           {"B", 1},           {"K", 1ull << 10}, {"KiB", 1ull << 10}, {"KB", 1ull << 10},
                 {"M", 1ull << 20}, {"MiB", 1ull << 20}, {"MB", 1ull << 20}, {"G", 1ull << 30},   {"GiB", 1ull << 30},
                 {"GB", 1ull << 30}, {"T", 1ull << 40},  {"TiB", 1ull << 40}, {"TB", 1ull << 40}};
    char *end;
    if (!strcmp(s, "max") || !strcmp(s, "unlimited")) {
        *out = UINT64_MAX;
        return 0;
    }
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix))
            continue;
        double bytes = v * (double)units[i].mult;
        if (bytes >= 18446744073709551615.0 || bytes != (double)(uint64_t)bytes)
            return -1;
        *out = (uint64_t)bytes;
        return 0;
    }
    return -1;
}

static inline int cmb_real_parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static inline int cmb_real_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v != v)
        return -1;
    *out = v;
    return 0;
}

static inline int cmb_real_parse_bool(const char *s, int *out)
{
    if (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "on"))
        *out = 1;
    else if (!strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "no") || !strcmp(s, "off"))
        *out = 0;
    else
        return -1;
    return 0;
}

/* The value of `key` (the last one given wins), or NULL. */
static inline const char *cmb_real_option(const cmb_config *cfg, const char *key)
{
    for (size_t i = cfg->n_options; i-- > 0;)
        if (!strcmp(cfg->options[i].key, key))
            return cfg->options[i].value;
    return NULL;
}

/* Every option's key must be one of `known` (NULL-terminated); 0, or -1
 * with the reason in cfg->error. */
static inline int cmb_real_only_known(const cmb_config *cfg, const char *allocator, const char *const *known)
{
    for (size_t i = 0; i < cfg->n_options; i++) {
        size_t k = 0;
        while (known[k] && strcmp(known[k], cfg->options[i].key))
            k++;
        if (!known[k]) {
            snprintf(cfg->error, cfg->error_len, "%s: unknown option '%s'", allocator, cfg->options[i].key);
            return -1;
        }
    }
    return 0;
}

/* A size option: 0 and *out = the value (*given = 1), or *given = 0 when
 * absent; -1 with the reason in cfg->error when malformed. */
static inline int cmb_real_size_option(const cmb_config *cfg, const char *allocator, const char *key, uint64_t *out,
                                       int *given)
{
    const char *v = cmb_real_option(cfg, key);
    *given = v != NULL;
    if (v && cmb_real_parse_size(v, out)) {
        snprintf(cfg->error, cfg->error_len, "%s: option %s=%s: expected a size such as 64MiB or max", allocator,
                 key, v);
        return -1;
    }
    return 0;
}

#endif /* CMB_REAL_OPTIONS_H */
