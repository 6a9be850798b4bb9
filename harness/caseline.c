/* caseline.c - a case's line on the console: a short name unambiguous
 * within the run, its result fitted to the line (caseline.h). */
#include "caseline.h"

#include <stdio.h>
#include <string.h>

#include "../allocators/policy.h"

/* --- columns ------------------------------------------------------------------------------------ */

/* Columns of UTF-8 text: one per character (a trace's path may hold any). */
static size_t columns(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n && s[i]; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* The bytes of the first `cols` characters of s. */
static size_t bytes_of(const char *s, size_t cols)
{
    size_t i = 0;
    for (size_t c = 0; s[i]; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80 && c++ == cols)
            break;
    }
    return i;
}

void cmb_caseline_elide(const char *text, size_t width, char *out, size_t len)
{
    size_t have = columns(text, strlen(text));
    if (have <= width || width < 5) {
        snprintf(out, len, "%s", text);
        return;
    }
    size_t head = (width - 3) / 2, tail = width - 3 - head; /* the end tells paths apart: it keeps as much */
    size_t tail_at = bytes_of(text, have - tail);
    snprintf(out, len, "%.*s...%s", (int)bytes_of(text, head), text, text + tail_at);
}

/* --- the short name ----------------------------------------------------------------------------- */

/* The run's distinct allocator specs, by their labels. */
static void scan_alloc(cmb_caseline_plan *out, const cmb_alloc_spec *a)
{
    char label[sizeof a->text + 16], other[sizeof a->text + 16];
    cmb_alloc_spec_label(a, label, sizeof label);
    for (size_t j = 0; j < out->n_alloc; j++) {
        cmb_alloc_spec_label(out->alloc[j], other, sizeof other);
        if (!strcmp(label, other))
            return;
    }
    if (out->n_alloc < CMB_CASELINE_MAX_ALLOCS)
        out->alloc[out->n_alloc++] = a;
    else
        out->alloc_overflow = 1;
}

void cmb_caseline_scan(const cmb_plan *p, cmb_caseline_plan *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < p->n; i++) {
        const cmb_param_set *ps = &p->cases[i].spec.params;
        scan_alloc(out, &p->cases[i].spec.alloc);
        for (size_t k = 0; k < ps->n; k++) {
            size_t j = 0;
            while (j < out->n && out->param[j].spec != ps->spec[k])
                j++;
            if (j == out->n && j < CMB_CASELINE_MAX_PARAMS) { /* its first value, from its first case */
                out->param[j].spec = ps->spec[k];
                out->param[j].first = ps->value[k];
                out->n++;
            } else if (j < out->n) {
                out->param[j].varies |= strcmp(out->param[j].first, ps->value[k]) != 0;
            }
        }
    }
}

/* The parameter takes more than one value in the plan (one not seen: shown). */
static int varies(const cmb_caseline_plan *cp, const void *spec)
{
    for (size_t j = 0; j < cp->n; j++)
        if (cp->param[j].spec == spec)
            return cp->param[j].varies;
    return 1;
}

/* Some spec of the allocator in the run gives the option item's key (k=)
 * another value. */
static int item_varies(const cmb_caseline_plan *cp, const cmb_alloc_spec *a, const char *item, size_t n)
{
    char opts[sizeof a->text];
    size_t key = strcspn(item, "=");
    key = key < n ? key + 1 : n; /* "k=" */
    for (size_t j = 0; j < cp->n_alloc; j++) {
        if (strcmp(cp->alloc[j]->name, a->name))
            continue;
        cmb_alloc_spec_user_options(cp->alloc[j], opts, sizeof opts);
        for (const char *p = opts; *p;) {
            size_t m = strcspn(p, ":");
            if (m >= key && !strncmp(p, item, key) && (m != n || strncmp(p, item, n)))
                return 1;
            p += m + (p[m] == ':');
        }
    }
    return 0;
}

/* "name[:k=v...][:...][@up]" with the options whose value varies among the
 * run's specs of the allocator ("..." for the rest). */
static void short_alloc(const cmb_caseline_plan *cp, const cmb_alloc_spec *a, char *out, size_t len)
{
    char opts[sizeof a->text];
    int left_out = 0;
    cmb_alloc_spec_user_options(a, opts, sizeof opts);
    size_t used = (size_t)snprintf(out, len, "%s", a->name);
    for (const char *p = opts; *p && used < len;) {
        size_t n = strcspn(p, ":");
        if (item_varies(cp, a, p, n))
            used += (size_t)snprintf(out + used, len - used, ":%.*s", (int)n, p);
        else
            left_out = 1;
        p += n + (p[n] == ':');
    }
    if (left_out && used < len)
        used += (size_t)snprintf(out + used, len - used, ":...");
    if (a->has_upstream && used < len)
        snprintf(out + used, len - used, "@%s", cmb_upstream_kind_name(a->upstream));
}

/* The spec's short label, or its whole label where the short one is
 * another spec's too (specs that differ only in which options they give).
 * 1 when it left anything out. */
static int alloc_name(const cmb_caseline_plan *cp, const cmb_alloc_spec *a, char *out, size_t len)
{
    char full[sizeof a->text + 16], other[sizeof a->text + 16], mine[sizeof a->text + 16];
    cmb_alloc_spec_label(a, full, sizeof full);
    short_alloc(cp, a, mine, sizeof mine);
    for (size_t j = 0; !cp->alloc_overflow && j < cp->n_alloc && strcmp(mine, full); j++) {
        cmb_alloc_spec_label(cp->alloc[j], other, sizeof other);
        if (strcmp(other, full)) {
            short_alloc(cp, cp->alloc[j], other, sizeof other);
            if (!strcmp(other, mine))
                break; /* told apart only by the whole label */
        }
        if (j + 1 == cp->n_alloc)
            return snprintf(out, len, "%s", mine), 1;
    }
    snprintf(out, len, "%s", full);
    return 0;
}

int cmb_caseline_name(const cmb_caseline_plan *cp, const cmb_case_spec *cs, char *out, size_t len)
{
    char alloc[sizeof cs->alloc.text + 16], full[CMB_BENCH_NAME_MAX + 64];
    int left_out = alloc_name(cp, &cs->alloc, alloc, sizeof alloc);
    size_t used = (size_t)snprintf(full, sizeof full, "%s %s", cs->scenario->name, alloc);
    for (size_t k = 0; k < cs->params.n && used < sizeof full; k++) {
        if (!varies(cp, cs->params.spec[k])) {
            left_out = 1;
            continue;
        }
        used += (size_t)snprintf(full + used, sizeof full - used, " %s:%s", cs->params.spec[k]->name,
                                 cs->params.value[k]);
    }
    cmb_caseline_elide(full, CMB_CASELINE_NAME_MAX, out, len);
    return left_out || strcmp(out, full) != 0;
}

/* --- the result --------------------------------------------------------------------------------- */

/* One piece onto the lines: on the current one when it fits, else on a
 * new line after the indent; a piece too long for any line is cut ("..."). */
static void put_piece(cmb_caseline_wrap *w, const char *p, size_t n)
{
    const size_t sep = strlen(CMB_CASELINE_ITEM_SEP), line_room = CMB_CASELINE_WIDTH - CMB_CASELINE_INDENT;
    size_t c = columns(p, n), len = w->len - (w->used < w->len ? w->used : w->len);
    if (w->cols && w->cols + sep + c > w->room) { /* a new line */
        w->used += (size_t)snprintf(w->out + w->used, len, "\n%*s", CMB_CASELINE_INDENT, "");
        w->cols = 0;
        w->room = line_room;
        len = w->len - (w->used < w->len ? w->used : w->len);
    }
    if (c > w->room - (w->cols ? w->cols + sep : 0)) { /* too long even alone: its start */
        size_t keep = w->room - (w->cols ? w->cols + sep : 0);
        keep = keep > 3 ? keep - 3 : 0;
        w->used += (size_t)snprintf(w->out + w->used, len, "%s%.*s...", w->cols ? CMB_CASELINE_ITEM_SEP : "",
                                    (int)bytes_of(p, keep), p);
        w->cols = w->room;
        return;
    }
    w->used += (size_t)snprintf(w->out + w->used, len, "%s%.*s", w->cols ? CMB_CASELINE_ITEM_SEP : "", (int)n, p);
    w->cols += (w->cols ? sep : 0) + c;
}

void cmb_caseline_fit(const char *result, const char *tail, size_t first_room, char *out, size_t len)
{
    const size_t sep = strlen(CMB_CASELINE_ITEM_SEP);
    cmb_caseline_wrap w = {out, len, 0, 0, first_room};
    out[0] = '\0';
    for (const char *p = result; *p && w.used < len;) {
        const char *end = strstr(p, CMB_CASELINE_ITEM_SEP);
        size_t n = end ? (size_t)(end - p) : strlen(p);
        put_piece(&w, p, n);
        p = end ? end + sep : p + n;
    }
    if (tail[0] && w.used < len)
        put_piece(&w, tail, strlen(tail));
}
