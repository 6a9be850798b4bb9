/* cmb_suggest.h - "did you mean": the known name closest to a misspelt one.
 *
 * One helper for every place a name is refused (allocators, scenarios,
 * command-line options, scenario parameters, allocator options). Header
 * only, the C library alone, so plug-ins that check their options with
 * allocators/cmb_option_check.h get it too.
 *
 *     cmb_suggest s;
 *     cmb_suggest_init(&s, word);
 *     for (each known name) cmb_suggest_try(&s, name);
 *     const char *best = cmb_suggest_best(&s);   (NULL: nothing close)
 *
 * Closeness is the optimal string alignment distance (insertions,
 * deletions, substitutions and swaps of two neighbours each count 1),
 * ignoring case; a name is suggested when its distance is at most a third
 * of the longer word's length (at least 1, at most 3): "rmm_pool" is one
 * edit from "rmm-pool", "torch" eight from "torch-caching" (no
 * suggestion). Ties go to the first name tried.
 */
#ifndef CMB_SUGGEST_H
#define CMB_SUGGEST_H

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define CMB_SUGGEST_MAX_LEN 64 /* longer words are never matched */

typedef struct cmb_suggest {
    const char *word;
    const char *best;
    size_t best_dist;
} cmb_suggest;

static inline void cmb_suggest_init(cmb_suggest *s, const char *word)
{
    s->word = word;
    s->best = NULL;
    s->best_dist = (size_t)-1;
}

/* Optimal string alignment distance, case-insensitive; (size_t)-1 when a
 * word is longer than CMB_SUGGEST_MAX_LEN. */
static inline size_t cmb_suggest_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > CMB_SUGGEST_MAX_LEN || m > CMB_SUGGEST_MAX_LEN)
        return (size_t)-1;
    size_t d[CMB_SUGGEST_MAX_LEN + 1][CMB_SUGGEST_MAX_LEN + 1];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            size_t best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

static inline void cmb_suggest_try(cmb_suggest *s, const char *candidate)
{
    if (!candidate || !s->word || !*s->word)
        return;
    size_t dist = cmb_suggest_distance(s->word, candidate);
    size_t longer = strlen(s->word) > strlen(candidate) ? strlen(s->word) : strlen(candidate);
    size_t limit = longer / 3 < 1 ? 1 : longer / 3 > 3 ? 3 : longer / 3;
    if (dist == 0 || dist > limit || dist >= s->best_dist)
        return; /* the word itself is not a suggestion */
    s->best = candidate;
    s->best_dist = dist;
}

static inline const char *cmb_suggest_best(const cmb_suggest *s)
{
    return s->best;
}

/* " did you mean 'X'?" (with `lead` before it, e.g. ";") or "" where
 * nothing is close: for messages built with snprintf. */
static inline const char *cmb_suggest_text(const cmb_suggest *s, const char *lead, char *buf, size_t len)
{
    if (!s->best || !len)
        return "";
    snprintf(buf, len, "%s did you mean '%s'?", lead, s->best);
    return buf;
}

#endif /* CMB_SUGGEST_H */
