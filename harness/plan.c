/* plan.c - which cases a command line selects (see plan.h). */
#define _GNU_SOURCE
#include "plan.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../allocators/external.h"
#include "../common/cmb_suggest.h"
#include "timeline.h"

/* --- selecting scenarios and allocators ------------------------------------------------- */

static int split_list(const char *list, char items[][512], size_t max, size_t *n, const char *what, char *err,
                      size_t errlen)
{
    char buf[8192];
    if (strlen(list) >= sizeof buf) {
        snprintf(err, errlen, "%s list too long", what);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", list);
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == max || strlen(tok) >= 512) {
            snprintf(err, errlen, "too many or too long %s names", what);
            return -1;
        }
        for (size_t j = 0; j < *n; j++)
            if (!strcmp(items[j], tok)) { /* two cases under one name: refused */
                snprintf(err, errlen, "%s '%s' is listed twice", what, tok);
                return -1;
            }
        snprintf(items[(*n)++], 512, "%s", tok);
    }
    if (!*n || strstr(list, ",,") || list[0] == ',' || list[strlen(list) - 1] == ',') {
        snprintf(err, errlen, "empty %s name in '%s'", what, list);
        return -1;
    }
    return 0;
}

#define MAX_SELECTED 64

static int select_scenarios(const cmb_cli *cli, const cmb_scenario **out, size_t *n, char *err, size_t errlen)
{
    static char names[MAX_SELECTED][512];
    size_t k;
    *n = 0;
    if (!cli->scenarios || !strcmp(cli->scenarios, "all")) {
        for (size_t i = 0; i < cmb_scenario_count(); i++)
            out[(*n)++] = cmb_scenario_at(i);
        return 0;
    }
    if (split_list(cli->scenarios, names, MAX_SELECTED, &k, "scenario", err, errlen))
        return -1;
    for (size_t i = 0; i < k; i++) {
        const cmb_scenario *s = cmb_scenario_find(names[i]);
        if (!s) {
            cmb_suggest sg;
            char mean[160];
            cmb_suggest_init(&sg, names[i]);
            for (size_t j = 0; j < cmb_scenario_count(); j++)
                cmb_suggest_try(&sg, cmb_scenario_at(j)->name);
            snprintf(err, errlen, "unknown scenario '%s'%s (cumembench --list shows them)", names[i],
                     cmb_suggest_text(&sg, ";", mean, sizeof mean));
            return -1;
        }
        out[(*n)++] = s;
    }
    return 0;
}

/* --- an allocator option swept: NAME:key=v1|v2|v3 ------------------------------------------ */

/* Appends `piece` (len bytes) to each of the first `have` specs in out,
 * once per '|'-separated alternative of it: the product grows. */
static int sweep_product(char out[][512], size_t *have, size_t max, const char *piece, size_t len, char *err,
                         size_t errlen)
{
    char alt[512];
    const char *eq = memchr(piece, '=', len);
    size_t key_len = eq ? (size_t)(eq - piece) + 1 : 0, n_alt = 1, prev = *have;
    for (size_t i = key_len; i < len; i++)
        n_alt += piece[i] == '|' && eq;
    if (prev * n_alt > max) {
        snprintf(err, errlen, "more than %d allocators (each value of an allocator option swept counts)", MAX_SELECTED);
        return -1;
    }
    for (size_t a = n_alt; a-- > 0;) { /* the last alternative first: out[i] is read until a == 0 */
        const char *v = piece + key_len, *end = piece + len;
        for (size_t skip = 0; skip < a; skip++)
            v = memchr(v, '|', (size_t)(end - v)) + 1;
        const char *bar = n_alt > 1 ? memchr(v, '|', (size_t)(end - v)) : NULL;
        size_t vlen = (size_t)((bar ? bar : end) - v);
        if (!vlen && n_alt > 1) {
            snprintf(err, errlen, "empty value in allocator sweep '%.*s'", (int)len, piece);
            return -1;
        }
        for (size_t i = 0; i < prev; i++) {
            snprintf(alt, sizeof alt, "%s%.*s%.*s", out[i], (int)key_len, piece, (int)vlen, v);
            snprintf(out[a * prev + i], 512, "%s", alt);
        }
    }
    *have = prev * n_alt;
    return 0;
}

/* `spec` with every option value "v1|v2|..." expanded: one spec per
 * combination, in the order written ("torch-caching:max_split_size_mb=
 * 64|128@vmm": two). The name and @UPSTREAM are never split. */
static int expand_sweep(const char *spec, char out[][512], size_t max, size_t *n, char *err, size_t errlen)
{
    const char *at = strrchr(spec, '@'), *end = at ? at : spec + strlen(spec);
    const char *colon = strchr(spec, ':');
    if (!strncmp(spec, "external:", 9) || !strncmp(spec, "real:", 5))
        colon = colon ? strchr(colon + 1, ':') : NULL; /* past the path or real:NAME */
    *n = 1;
    snprintf(out[0], 512, "%.*s", (int)((colon && colon < end ? colon : end) - spec), spec);
    for (const char *p = colon; p && p < end;) {
        const char *next = memchr(p + 1, ':', (size_t)(end - p - 1));
        size_t len = (size_t)((next ? next : end) - p);
        if (sweep_product(out, n, max, p, len, err, errlen))
            return -1;
        p = next;
    }
    for (size_t i = 0; at && i < *n; i++)
        snprintf(out[i] + strlen(out[i]), 512 - strlen(out[i]), "%s", at);
    return 0;
}

/* Two specs that name one allocator with one option list (a sweep that
 * repeats a listed one): two cases under one name, refused. */
static int duplicate_allocator(const cmb_alloc_spec *a, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(a[i].text, a[j].text)) {
                snprintf(err, errlen, "allocator '%s' is listed twice", a[i].text);
                return -1;
            }
    return 0;
}

/* The specs are the caller's (out[]), each parsed in place. */
static int select_allocators(const cmb_cli *cli, cmb_alloc_spec *out, size_t *n, char *err, size_t errlen)
{
    static char names[MAX_SELECTED][512], swept[MAX_SELECTED][512];
    size_t k;
    *n = 0;
    if (!cli->allocators || !strcmp(cli->allocators, "all")) {
        for (size_t i = 0; i < cmb_allocator_count() && *n < MAX_SELECTED; i++)
            if (cmb_alloc_spec_parse(cmb_allocator_at(i)->name, &out[(*n)++], err, errlen))
                return -1;
        return 0;
    }
    if (split_list(cli->allocators, names, MAX_SELECTED, &k, "allocator", err, errlen))
        return -1;
    for (size_t i = 0; i < k; i++) {
        size_t m;
        if (expand_sweep(names[i], swept, MAX_SELECTED - *n, &m, err, errlen))
            return -1;
        for (size_t j = 0; j < m; j++)
            if (cmb_alloc_spec_parse(swept[j], &out[(*n)++], err, errlen))
                return -1;
    }
    return duplicate_allocator(out, *n, err, errlen);
}

/* Every --param must belong to at least one selected scenario. */
static int check_overrides(const cmb_cli *cli, const cmb_scenario *const *scn, size_t n_scn, char *err,
                           size_t errlen)
{
    for (size_t k = 0; k < cli->n_overrides; k++) {
        int known = 0;
        cmb_suggest sg;
        char mean[160];
        cmb_suggest_init(&sg, cli->overrides[k].name);
        for (size_t i = 0; i < n_scn && !known; i++) {
            known = cmb_param_spec_find(scn[i], cli->overrides[k].name) != NULL;
            for (size_t j = 0; j < scn[i]->n_params; j++)
                cmb_suggest_try(&sg, scn[i]->params[j].name);
        }
        if (!known) {
            snprintf(err, errlen, "no selected scenario has a parameter '%s'%s (cumembench --list shows them)",
                     cli->overrides[k].name, cmb_suggest_text(&sg, ";", mean, sizeof mean));
            return -1;
        }
    }
    return 0;
}

/* --- a PyTorch snapshot given as a trace ------------------------------------------------------ */

/* Where the converter is: beside the build (the source tree holding it),
 * else its place in the sources. */
static void converter_path(char *out, size_t len)
{
    char self[PATH_MAX], cand[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    const char *rel[] = {"/../traces/torch_snapshot_to_trace.py", "/traces/torch_snapshot_to_trace.py"};
    for (size_t i = 0; n > 0 && i < 2; i++) {
        snprintf(cand, sizeof cand, "%s%s", self, rel[i]);
        if (realpath(cand, out) && len >= PATH_MAX)
            return;
    }
    snprintf(out, len, "traces/torch_snapshot_to_trace.py");
}

/* 1 when the file begins as a pickle does (protocol 2 or later, as
 * torch.cuda.memory._dump_snapshot writes it). */
static int is_pickle(const char *path)
{
    unsigned char head[2] = {0, 0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(head, 1, 2, f);
    fclose(f);
    return got == 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5;
}

/* A --param trace= that names a PyTorch snapshot: refused with the exact
 * command that converts it (the replay reads the suite's trace format). */
static int check_snapshot_traces(const cmb_cli *cli, char *err, size_t errlen)
{
    char list[4096], conv[PATH_MAX], out[PATH_MAX];
    for (size_t k = 0; k < cli->n_overrides; k++) {
        if (strcmp(cli->overrides[k].name, "trace") || strlen(cli->overrides[k].values) >= sizeof list)
            continue;
        snprintf(list, sizeof list, "%s", cli->overrides[k].values);
        for (char *save = NULL, *v = strtok_r(list, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
            if (!is_pickle(v))
                continue;
            const char *dot = strrchr(v, '.');
            int ext = dot && (!strcmp(dot, ".pickle") || !strcmp(dot, ".pkl"));
            snprintf(out, sizeof out, "%.*s.trace", (int)(ext ? dot - v : (int)strlen(v)), v);
            converter_path(conv, sizeof conv);
            snprintf(err, errlen, "--param trace=%s is a PyTorch memory snapshot (a pickle): convert it first with "
                     "'python3 %s %s %s', then give --param trace=%s", v, conv, v, out, out);
            return -1;
        }
    }
    return 0;
}

/* --- the plan --------------------------------------------------------------------------------- */

uint64_t cmb_plan_capacity(const cmb_cli *cli, cmb_mode mode)
{
    if (mode == CMB_MODE_SIM && !cli->capacity)
        return CMB_DEFAULT_SIM_CAPACITY;
    return cli->capacity;
}

static cmb_planned_case *plan_add(cmb_plan *p)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        cmb_planned_case *grown = realloc(p->cases, cap * sizeof *grown);
        if (!grown)
            return NULL;
        p->cases = grown;
        p->cap = cap;
    }
    cmb_planned_case *pc = &p->cases[p->n++];
    memset(pc, 0, sizeof *pc);
    return pc;
}

void cmb_plan_free(cmb_plan *p)
{
    free(p->cases);
    memset(p, 0, sizeof *p);
}

static const char *skip_reason(const cmb_case_spec *cs, const cmb_allocator_methods *m)
{
    if (cs->alloc.unavailable[0])
        return cs->alloc.unavailable; /* a real: allocator whose plug-in or library is missing */
    if (cs->mode == CMB_MODE_SIM) {
        if (cs->scenario->flags & CMB_SCN_NEEDS_GPU)
            return "needs a GPU: this scenario measures GPU work with nothing to simulate";
        const char *why = cmb_allocator_sim_skip_reason(m);
        if (why)
            return why;
        if (cs->alloc.has_upstream && cs->alloc.upstream != CMB_UPSTREAM_SIM)
            return "needs a GPU: its upstream is a real device";
    } else if (cs->alloc.has_upstream && cs->alloc.upstream == CMB_UPSTREAM_SIM) {
        return NULL; /* a sim upstream on a GPU machine is allowed */
    }
    if ((m->flags & CMB_ALLOC_NEEDS_VMM) && cs->alloc.has_upstream && cs->alloc.upstream == CMB_UPSTREAM_CUDA)
        return "needs virtual memory management (@vmm or @sim), not plain cudaMalloc";
    return NULL;
}

/* A case's memory timeline: where the scenario asks for one (or --timeline
 * on), into OUT/timelines. */
static void plan_timeline(cmb_case_spec *cs, const cmb_cli *cli, const cmb_plan_setting *set)
{
    int on = cli->timeline < 0 ? (cs->scenario->flags & CMB_SCN_TIMELINE) != 0 : cli->timeline;
    if (on && set->out_dir)
        snprintf(cs->timeline_dir, sizeof cs->timeline_dir, "%s/timelines", set->out_dir);
    cs->timeline_points = cli->timeline_points ? cli->timeline_points : CMB_TIMELINE_DEFAULT_POINTS;
}

/* The case of one scenario, parameter set and allocator: its spec, and
 * whether and why it is skipped. -1: the combination is invalid. */
static int plan_case(cmb_planned_case *pc, const cmb_cli *cli, const cmb_plan_setting *set,
                     const cmb_case_spec *proto, const cmb_allocator_methods *m, char *err, size_t errlen)
{
    cmb_case_spec *cs = &pc->spec;
    cmb_case_spec_copy(cs, proto);
    cs->mode = set->mode;
    cs->seed = cli->seed;
    cs->device = cli->device;
    cs->capacity = set->capacity;
    cs->repetitions = cli->repetitions;
    cs->fault = cli->fault;
    if (cli->record_trace)
        snprintf(cs->record_trace, sizeof cs->record_trace, "%s", cli->record_trace);
    plan_timeline(cs, cli, set);
    if (cmb_case_spec_make_name(cs, err, errlen))
        return -1;
    pc->methods = m;
    const char *why = skip_reason(cs, m);
    int chk = why ? 1 : cmb_case_check(cs, set->check_capacity, pc->reason, sizeof pc->reason);
    if (chk < 0) {
        snprintf(err, errlen, "%s", pc->reason);
        return -1;
    }
    if (why)
        snprintf(pc->reason, sizeof pc->reason, "%s", why);
    pc->skip = chk != 0;
    return 0;
}

/* The cases of one scenario: every parameter set under every allocator. */
static int plan_scenario(cmb_plan *p, const cmb_cli *cli, const cmb_plan_setting *set, const cmb_scenario *scn,
                         const cmb_alloc_spec *allocs, const cmb_allocator_methods *const *methods, size_t n_alloc,
                         char *err, size_t errlen)
{
    cmb_param_set *sets;
    size_t n_sets;
    cmb_case_spec *proto = calloc(1, sizeof *proto);
    int rc = -1;
    if (!proto || cmb_params_expand(scn, cli->preset, cli->overrides, cli->n_overrides, &sets, &n_sets, err, errlen)) {
        free(proto);
        return -1;
    }
    proto->scenario = scn;
    for (size_t k = 0; k < n_sets; k++) {
        proto->params = sets[k];
        for (size_t a = 0; a < n_alloc; a++) {
            cmb_planned_case *pc = plan_add(p);
            if (!pc) {
                snprintf(err, errlen, "host out of memory planning cases");
                goto out;
            }
            cmb_alloc_spec_copy(&proto->alloc, &allocs[a]);
            if (plan_case(pc, cli, set, proto, methods[a], err, errlen))
                goto out;
            p->n_skipped += pc->skip;
        }
    }
    rc = 0;
out:
    free(sets);
    free(proto);
    return rc;
}

int cmb_plan_check_names(const cmb_cli *cli, char *err, size_t errlen)
{
    const cmb_scenario *scn[MAX_SELECTED];
    size_t n_scn, n_alloc;
    cmb_alloc_spec *allocs = calloc(MAX_SELECTED, sizeof *allocs);
    if (!allocs) {
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    int rc = select_scenarios(cli, scn, &n_scn, err, errlen) || select_allocators(cli, allocs, &n_alloc, err, errlen);
    free(allocs);
    return rc ? -1 : 0;
}

int cmb_plan_build(const cmb_cli *cli, const cmb_plan_setting *set, cmb_plan *p, char *err, size_t errlen)
{
    const cmb_scenario *scn[MAX_SELECTED];
    const cmb_allocator_methods *methods[MAX_SELECTED];
    size_t n_scn, n_alloc;
    int rc = -1;
    cmb_alloc_spec *allocs = calloc(MAX_SELECTED, sizeof *allocs); /* owned here: the cases copy them */
    memset(p, 0, sizeof *p);
    if (!allocs) {
        snprintf(err, errlen, "host out of memory planning cases");
        return -1;
    }
    if (select_scenarios(cli, scn, &n_scn, err, errlen) || select_allocators(cli, allocs, &n_alloc, err, errlen) ||
        check_overrides(cli, scn, n_scn, err, errlen) || check_snapshot_traces(cli, err, errlen))
        goto out;
    for (size_t a = 0; a < n_alloc; a++)
        if (!(methods[a] = cmb_policy_methods(&allocs[a], err, errlen)) ||
            cmb_policy_try(&allocs[a], methods[a], err, errlen))
            goto out;
    for (size_t s = 0; s < n_scn; s++)
        if (plan_scenario(p, cli, set, scn[s], allocs, methods, n_alloc, err, errlen))
            goto out;
    rc = 0;
out:
    free(allocs);
    return rc;
}

/* --- what the user is told ---------------------------------------------------------------------- */

/* How many cases share case i's reason; 0 when an earlier case has it. */
static size_t same_reason(const cmb_plan *p, size_t i)
{
    size_t same = 0;
    for (size_t j = 0; j < p->n; j++) {
        if (strcmp(p->cases[j].reason, p->cases[i].reason))
            continue;
        if (j < i)
            return 0;
        same++;
    }
    return same;
}

void cmb_plan_print_nothing_runs(const cmb_plan *p, FILE *f)
{
    fprintf(f, "cumembench: nothing ran: all %zu case%s skipped (no run directory written):\n", p->n,
            p->n == 1 ? " was" : "s were");
    /* most frequent reason first */
    for (size_t most = p->n; most > 0; most--)
        for (size_t i = 0; i < p->n; i++)
            if (same_reason(p, i) == most)
                fprintf(f, "  %s (%zu case%s)\n", p->cases[i].reason, most, most == 1 ? "" : "s");
}

void cmb_plan_print_skipped(const cmb_plan *p, FILE *f)
{
    if (!p->n_skipped)
        return;
    /* one line per distinct allocator skipped for a reason of its own */
    for (size_t i = 0; i < p->n; i++) {
        const cmb_planned_case *pc = &p->cases[i];
        if (!pc->skip)
            continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = p->cases[j].skip && !strcmp(p->cases[j].spec.alloc.text, pc->spec.alloc.text) &&
                   !strcmp(p->cases[j].reason, pc->reason);
        if (!seen && (pc->spec.alloc.unavailable[0] ||
                      (strstr(pc->reason, "needs a GPU") && !(pc->spec.scenario->flags & CMB_SCN_NEEDS_GPU))))
            fprintf(f, "cumembench: skipping allocator %s: %s\n", pc->spec.alloc.text, pc->reason);
    }
}

