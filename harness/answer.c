/* answer.c - the answers a run leads with (answer.h).
 *
 * The table is computed from results.csv, as the report is, with the same
 * rules (plots/cmb_report/analysis.py): a case that did not fit (status
 * oom), failed or served less than the others is not compared; "best for
 * memory" is the lowest geometric mean over the scenario's parameter sets
 * of value / best value of the scenario's memory counter; "best for time"
 * only on a GPU and only among real allocators, since an emulation's time
 * is its policy's bookkeeping, not the original's cost.
 */
#define _GNU_SOURCE
#include "answer.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cmb_units.h"
#include "costs.h"
#include "rank.h"
#include "results.h"

#define ANS_MAX_REPS 64
#define ANS_SERVED_TOL 1e-3
#define ANS_TIE_TOL 1e-9

/* --- one case's line ------------------------------------------------------------------------ */

static int has_suffix(const char *name, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && !strncmp(name + len - n, suffix, n);
}

static double counter_value(const cmb_bench_run *r, const char *name, size_t len)
{
    for (size_t i = 0; i < r->n_counters; i++)
        if (strlen(r->counters[i].name) == len && !strncmp(r->counters[i].name, name, len))
            return r->counters[i].value;
    return NAN;
}

static void format_seconds(double s, char *out, size_t len)
{
    const char *unit = s < 1e-6 ? "ns" : s < 1e-3 ? "us" : s < 1.0 ? "ms" : "s";
    double scaled = s < 1e-6 ? s * 1e9 : s < 1e-3 ? s * 1e6 : s < 1.0 ? s * 1e3 : s;
    snprintf(out, len, "%.3g %s", scaled, unit);
}

/* A counter's value in the unit its name ends with. */
static void format_value(const char *name, size_t len, double v, char *out, size_t outlen)
{
    char sz[32];
    if (has_suffix(name, len, "_bytes"))
        snprintf(out, outlen, "%s", cmb_format_size(v > 0 ? (uint64_t)v : 0, sz, sizeof sz));
    else if (has_suffix(name, len, "_ns"))
        format_seconds(v * 1e-9, out, outlen);
    else if (has_suffix(name, len, "_us"))
        format_seconds(v * 1e-6, out, outlen);
    else if (has_suffix(name, len, "_ms"))
        format_seconds(v * 1e-3, out, outlen);
    else if (has_suffix(name, len, "_s") || (len == 4 && !strncmp(name, "time", 4)))
        format_seconds(v, out, outlen);
    else if (has_suffix(name, len, "_ratio") || !strncmp(name, "reuse_", 6) || !strncmp(name, "occ_", 4))
        snprintf(out, outlen, "%.3f", v);
    else if (v == floor(v) && fabs(v) < 1e15)
        snprintf(out, outlen, "%.0f", v);
    else
        snprintf(out, outlen, "%.3g", v);
}

/* One item with its {counter} placeholders filled; 0 when a counter is missing. */
static int fill_item(const char *item, const cmb_bench_run *r, double time_s, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (const char *p = item; *p && used + 1 < len;) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        if (!close) {
            out[used++] = *p++;
            out[used] = '\0';
            continue;
        }
        size_t n = (size_t)(close - p - 1);
        double v = n == 4 && !strncmp(p + 1, "time", 4) ? time_s : counter_value(r, p + 1, n);
        if (isnan(v))
            return 0;
        format_value(p + 1, n, v, out + used, len - used);
        used += strlen(out + used);
        p = close + 1;
    }
    return 1;
}

static const char *const standard_items[] = {"time {time}", "alloc p50 {alloc_p50_ns}", "reserved {peak_reserved_bytes}",
                                             "frag {frag_ratio}", "capacity {capacity_ratio}", NULL};

/* The item shows a time: {time}, or a counter in a unit of time. */
static int item_is_time(const char *item)
{
    for (const char *p = strchr(item, '{'); p; p = strchr(p + 1, '{')) {
        const char *close = strchr(p, '}');
        size_t n = close ? (size_t)(close - p - 1) : 0;
        if (n && ((n == 4 && !strncmp(p + 1, "time", 4)) || has_suffix(p + 1, n, "_ns") ||
                  has_suffix(p + 1, n, "_us") || has_suffix(p + 1, n, "_ms") || has_suffix(p + 1, n, "_s")))
            return 1;
    }
    return 0;
}

void cmb_answer_items(const cmb_scenario *s, const cmb_bench_run *r, double time_s, const char *time_label,
                      char *out, size_t len)
{
    const char *const *items = s && s->headline ? s->headline->items : standard_items;
    size_t used = 0;
    char item[256];
    out[0] = '\0';
    for (size_t i = 0; i < 8 && items[i] && used + 1 < len; i++) {
        if (!fill_item(items[i], r, time_s, item, sizeof item))
            continue;
        int label = time_label && item_is_time(items[i]);
        used += (size_t)snprintf(out + used, len - used, "%s%s%s%s%s", used ? "  " : "", item, label ? " (" : "",
                                 label ? time_label : "", label ? ")" : "");
    }
}

const char *cmb_answer_ok_word(const cmb_scenario *s)
{
    return s && s->headline && s->headline->ok_word ? s->headline->ok_word : "ok";
}

/* --- reading results.csv ---------------------------------------------------------------------- */

typedef struct ans_case {
    char *key, *scenario, *label, *params;
    char impl[16];
    char reason[320];                 /* skipped: why; failed: the first error */
    const char *mem_name, *req_name;  /* the scenario's memory counter and its requested peak */
    int mem_higher;                   /* the memory counter is better higher (+max_batch) */
    int skipped, case_failed;
    uint64_t value_reps, failed_reps, oom_reps;
    double oom_lo, oom_hi;            /* allocations that did not fit, over the repetitions */
    double time[ANS_MAX_REPS], mem[ANS_MAX_REPS], req[ANS_MAX_REPS];
    double min_cap[ANS_MAX_REPS], pred[ANS_MAX_REPS], failed_allocs[ANS_MAX_REPS]; /* rank.h's measures */
} ans_case;

typedef struct ans_run {
    ans_case *c;
    size_t n, cap;
    char mode[16];
} ans_run;

/* The columns the answers read, by schema.def's names (harness/results.h
 * gives every row by column, "" where an older run lacks one). */
enum { C_CASE = CMB_COL_CASE, C_SCENARIO = CMB_COL_SCENARIO, C_ALLOCATOR = CMB_COL_ALLOCATOR,
       C_OPTIONS = CMB_COL_OPTIONS, C_IMPL = CMB_COL_IMPL, C_UPSTREAM = CMB_COL_UPSTREAM, C_PARAMS = CMB_COL_PARAMS,
       C_REP = CMB_COL_REPETITION, C_STATUS = CMB_COL_STATUS, C_METRIC = CMB_COL_METRIC, C_VALUE = CMB_COL_VALUE,
       C_ERROR = CMB_COL_ERROR, C_MODE = CMB_COL_MODE };

static const char *field(const ans_run *run, const char *const *f, int nf, int col)
{
    (void)run;
    (void)nf;
    return f[col];
}

static void memory_counters(ans_case *c)
{
    const cmb_scenario *s = cmb_scenario_find(c->scenario);
    const cmb_headline *h = s ? s->headline : NULL;
    const char *mem = h && h->memory ? h->memory : "peak_reserved_bytes";
    c->mem_higher = mem[0] == '+';
    c->mem_name = mem + c->mem_higher;
    c->req_name = h && h->requested ? (strcmp(h->requested, "-") ? h->requested : NULL) : "peak_requested_bytes";
}

static ans_case *new_case(ans_run *run, const char *const *f, int nf)
{
    if (run->n == run->cap) {
        size_t cap = run->cap ? run->cap * 2 : 64;
        ans_case *grown = realloc(run->c, cap * sizeof *grown);
        if (!grown)
            return NULL;
        run->c = grown;
        run->cap = cap;
    }
    ans_case *c = &run->c[run->n];
    memset(c, 0, sizeof *c);
    const char *opts = field(run, f, nf, C_OPTIONS), *key = field(run, f, nf, C_CASE);
    const char *up = field(run, f, nf, C_UPSTREAM);
    char at[64] = "";
    snprintf(at, sizeof at, "@%s/", up);
    /* the label as the report shows it: name[:options][@upstream] (an old
     * results.csv holds it whole in the allocator column) */
    if (asprintf(&c->label, "%s%s%s%.*s", field(run, f, nf, C_ALLOCATOR), opts[0] ? ":" : "", opts,
                 up[0] && strstr(key, at) && !strchr(field(run, f, nf, C_ALLOCATOR), '@') ? (int)strlen(at) - 1 : 0,
                 at) < 0)
        return NULL;
    c->key = strdup(key);
    c->scenario = strdup(field(run, f, nf, C_SCENARIO));
    c->params = strdup(field(run, f, nf, C_PARAMS));
    snprintf(c->impl, sizeof c->impl, "%s", field(run, f, nf, C_IMPL));
    if (!c->key || !c->scenario || !c->params)
        return NULL;
    for (int i = 0; i < ANS_MAX_REPS; i++)
        c->time[i] = c->mem[i] = c->req[i] = c->min_cap[i] = c->pred[i] = c->failed_allocs[i] = NAN;
    c->oom_lo = INFINITY;
    memory_counters(c);
    run->n++;
    return c;
}

static ans_case *find_case(ans_run *run, const char *const *f, int nf)
{
    static size_t last;
    const char *key = field(run, f, nf, C_CASE);
    if (last < run->n && !strcmp(run->c[last].key, key))
        return &run->c[last];
    for (size_t i = 0; i < run->n; i++)
        if (!strcmp(run->c[i].key, key))
            return &run->c[last = i];
    ans_case *c = new_case(run, f, nf);
    last = run->n - 1;
    return c;
}

static void add_value(ans_case *c, int rep, const char *metric, double v)
{
    c->value_reps |= 1ull << rep;
    if (!strcmp(metric, "time_s"))
        c->time[rep] = v;
    if (!strcmp(metric, c->mem_name))
        c->mem[rep] = v;
    if (c->req_name && !strcmp(metric, c->req_name))
        c->req[rep] = v;
    if (!strcmp(metric, "min_capacity_bytes"))
        c->min_cap[rep] = v;
    if (!strcmp(metric, "predicted_alloc_time_s"))
        c->pred[rep] = v;
    if (!strcmp(metric, "failed_allocs"))
        c->failed_allocs[rep] = v;
}

static void add_row(ans_run *run, const char *const *f, int nf, ans_case *c)
{
    const char *status = field(run, f, nf, C_STATUS), *rep_s = field(run, f, nf, C_REP);
    const char *err = field(run, f, nf, C_ERROR), *metric = field(run, f, nf, C_METRIC);
    char *end;
    long rep = rep_s[0] ? strtol(rep_s, &end, 10) : -1;
    int has_rep = rep >= 0 && rep < ANS_MAX_REPS;
    if ((!strcmp(status, "skipped") || !strcmp(status, "failed")) && !c->reason[0])
        snprintf(c->reason, sizeof c->reason, "%s", err);
    if (!strcmp(status, "skipped")) {
        c->skipped = 1;
    } else if (!strcmp(status, "failed")) {
        if (has_rep)
            c->failed_reps |= 1ull << rep;
        else
            c->case_failed = 1;
    } else if (!strcmp(status, "ok") || !strcmp(status, "oom")) {
        if (!strcmp(status, "oom")) {
            double n = 0;
            c->oom_reps |= has_rep ? 1ull << rep : 1;
            if (sscanf(err, "did not fit: %lf", &n) == 1) {
                c->oom_lo = n < c->oom_lo ? n : c->oom_lo;
                c->oom_hi = n > c->oom_hi ? n : c->oom_hi;
            }
        }
        double v = strtod(field(run, f, nf, C_VALUE), &end);
        if (has_rep && metric[0] && end != field(run, f, nf, C_VALUE))
            add_value(c, (int)rep, metric, v);
    }
}

static int on_row(const char *const *f, size_t at, void *ctx)
{
    ans_run *run = ctx;
    (void)at;
    if (!run->mode[0])
        snprintf(run->mode, sizeof run->mode, "%s", field(run, f, CMB_N_COLS, C_MODE));
    ans_case *c = find_case(run, f, CMB_N_COLS);
    if (!c)
        return -2;
    add_row(run, f, CMB_N_COLS, c);
    return 0;
}

/* Every row of results.csv, through the results store; a torn last line
 * (a run killed mid-write) is left out, as --resume would drop it. */
static int read_results(const char *dir, ans_run *run, FILE *out)
{
    char err[512];
    size_t torn;
    int rc = cmb_results_read_csv(dir, CMB_RESULTS_TORN_OK, on_row, run, &torn, err, sizeof err);
    if (rc == -2)
        fprintf(out, "cumembench: no answers: host out of memory\n");
    else if (rc)
        fprintf(out, "cumembench: no answers: %s\n", err);
    return rc ? -1 : 0;
}

static void free_run(ans_run *run)
{
    for (size_t i = 0; i < run->n; i++) {
        free(run->c[i].key);
        free(run->c[i].scenario);
        free(run->c[i].label);
        free(run->c[i].params);
    }
    free(run->c);
}

/* --- what a case showed ---------------------------------------------------------------------------- */

/* As plots/cmb_report/results.py's Case.status. */
static const char *case_status(const ans_case *c)
{
    if (c->skipped && !c->value_reps && !c->oom_reps)
        return "skipped";
    if (c->oom_reps && !(c->case_failed || (c->failed_reps && !c->value_reps)))
        return "oom";
    if (!c->value_reps)
        return "failed";
    return c->failed_reps || c->case_failed ? "partial" : "ok";
}

static double median(const double *v);

/* An allocation failed in some phase of a case that finished (churn's
 * checkerboard under arena or buddy): it did not fit, whatever its status
 * says. Not where failing is the measure: a scenario whose memory measure
 * is how much it obtained (higher is better: contention, batch-sweep)
 * allocates until a request fails. */
static int failed_in_phase(const ans_case *c)
{
    return !c->mem_higher && median(c->failed_allocs) > 0;
}

/* Did not fit: out of memory, or an allocation failed in some phase. */
static int finished(const ans_case *c);

static int did_not_fit(const ans_case *c)
{
    return !strcmp(case_status(c), "oom") || (finished(c) && failed_in_phase(c));
}

/* Finished with numbers (ok or partial): plots/cmb_report's Case.ran. */
static int finished(const ans_case *c)
{
    const char *s = case_status(c);
    return !strcmp(s, "ok") || !strcmp(s, "partial");
}

/* Finished, and compared: every allocation fit. */
static int case_ran(const ans_case *c)
{
    return finished(c) && !failed_in_phase(c);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median over the repetitions that reported it, NAN when none did. */
static double median(const double *v)
{
    double tmp[ANS_MAX_REPS];
    int n = 0;
    for (int i = 0; i < ANS_MAX_REPS; i++)
        if (!isnan(v[i]))
            tmp[n++] = v[i];
    if (!n)
        return NAN;
    qsort(tmp, (size_t)n, sizeof tmp[0], cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* --- best for memory, best for time ------------------------------------------------------------------ */

enum { ANS_MEMORY, ANS_TIME, ANS_CAPACITY };

typedef struct ans_score {
    const char *label;
    double logsum;
    int n, zero, inf;
} ans_score;

static int served_less(const ans_run *run, const size_t *idx, size_t n, const ans_case *c)
{
    double mine = c->req_name ? median(c->req) : NAN, top = 0;
    if (isnan(mine))
        return 0;
    for (size_t i = 0; i < n; i++) {
        const ans_case *o = &run->c[idx[i]];
        double v = finished(o) && !strcmp(o->params, c->params) ? median(o->req) : NAN;
        top = !isnan(v) && v > top ? v : top;
    }
    return mine < (1 - ANS_SERVED_TOL) * top;
}

/* The case's value on `which`, NAN when it is not compared there. */
static double compared_value(const ans_run *run, const size_t *idx, size_t n, const ans_case *c, int which)
{
    if (!case_ran(c))
        return NAN;
    if (which == ANS_TIME)
        return strcmp(run->mode, "gpu") || strcmp(c->impl[0] ? c->impl : "real", "real") ? NAN : median(c->time);
    if (served_less(run, idx, n, c))
        return NAN;
    return which == ANS_CAPACITY ? median(c->min_cap) : median(c->mem);
}

static double score_of(const ans_score *s)
{
    return s->zero ? 0 : s->inf ? INFINITY : exp(s->logsum / s->n);
}

/* Per allocator: the geometric mean over the parameter sets of value / the
 * best value of that set. Returns how many allocators have a score. */
static size_t scores(const ans_run *run, const size_t *idx, size_t n, int which, int higher, ans_score *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const ans_case *c = &run->c[idx[i]];
        double v = compared_value(run, idx, n, c, which), best = v;
        if (isnan(v))
            continue;
        for (size_t j = 0; j < n; j++) {
            const ans_case *o = &run->c[idx[j]];
            double w = strcmp(o->params, c->params) ? NAN : compared_value(run, idx, n, o, which);
            best = isnan(w) ? best : higher ? fmax(best, w) : fmin(best, w);
        }
        size_t s = 0;
        while (s < k && strcmp(out[s].label, c->label))
            s++;
        if (s == k)
            out[k++] = (ans_score){c->label, 0, 0, 0, 0};
        double ratio = best == 0 ? (v == 0 ? 1 : INFINITY) : v / best;
        out[s].zero |= ratio == 0;
        out[s].inf |= isinf(ratio);
        out[s].logsum += ratio > 0 && !isinf(ratio) ? log(ratio) : 0;
        out[s].n++;
    }
    return k;
}

static int better(double a, double b, int higher)
{
    return higher ? a > b * (1 + ANS_TIE_TOL) : a < b * (1 - ANS_TIE_TOL);
}

/* "a = b (what; next c 1.10x)", or 0 when nobody was compared. */
static int best_text(const ans_score *s, size_t k, int higher, const char *what, char *out, size_t len)
{
    if (!k)
        return 0;
    double top = score_of(&s[0]);
    for (size_t i = 1; i < k; i++)
        top = better(score_of(&s[i]), top, higher) ? score_of(&s[i]) : top;
    size_t used = 0;
    const ans_score *next = NULL;
    for (size_t i = 0; i < k; i++) {
        double v = score_of(&s[i]);
        if (better(top, v, higher)) {
            next = !next || better(v, score_of(next), higher) ? &s[i] : next;
            continue;
        }
        used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s%s", used ? " = " : "", s[i].label);
    }
    if (used >= len)
        return 1;
    double ratio = next && top > 0 ? score_of(next) / top : NAN;
    if (next && isfinite(ratio))
        snprintf(out + used, len - used, " (%s; next %s %.2fx)", what, next->label, ratio);
    else if (next)
        snprintf(out + used, len - used, " (%s; next %s)", what, next->label);
    else
        snprintf(out + used, len - used, " (%s)", what);
    return 1;
}

/* --- the table ------------------------------------------------------------------------------------- */

/* 1 when every case that ran found its smallest GPU (replay's min
 * capacity): "best for memory" then ranks by it, not by the peak on the
 * simulated device (a pool sized by the device's free memory looks large
 * there and may still fit the smallest GPU). */
static int ranks_by_capacity(const ans_run *run, const size_t *idx, size_t n)
{
    size_t with = 0;
    for (size_t i = 0; i < n; i++) {
        const ans_case *c = &run->c[idx[i]];
        if (!case_ran(c))
            continue;
        if (isnan(median(c->min_cap)))
            return 0;
        with++;
    }
    return with > 0;
}

static void memory_line(const ans_run *run, const size_t *idx, size_t n, char *out, size_t len)
{
    const ans_case *c0 = &run->c[idx[0]];
    ans_score *s = calloc(n, sizeof *s);
    int by_cap = ranks_by_capacity(run, idx, n);
    char what[96];
    size_t len_name = strlen(c0->mem_name), tail = strlen("peak_reserved_bytes");
    if (has_suffix(c0->mem_name, len_name, "peak_reserved_bytes")) { /* "smallest churn peak reserved" */
        int used = snprintf(what, sizeof what, "smallest %.*s", (int)(len_name - tail), c0->mem_name);
        for (char *p = what + strlen("smallest "); *p; p++)
            *p = *p == '_' ? ' ' : *p;
        snprintf(what + used, sizeof what - (size_t)used, "peak reserved");
    } else {
        snprintf(what, sizeof what, "%s %s", c0->mem_higher ? "highest" : "lowest", c0->mem_name);
    }
    if (by_cap)
        snprintf(what, sizeof what, "smallest GPU it fits on");
    size_t k = s ? scores(run, idx, n, by_cap ? ANS_CAPACITY : ANS_MEMORY, by_cap ? 0 : c0->mem_higher, s) : 0;
    int oom = 0;
    for (size_t i = 0; i < n; i++)
        oom |= did_not_fit(&run->c[idx[i]]);
    if (!best_text(s, k, by_cap ? 0 : c0->mem_higher, what, out, len) && oom)
        snprintf(out, len, "none: no allocator that ran fit");
    else if (!k)
        snprintf(out, len, "no allocator finished with %s to compare", c0->mem_name);
    free(s);
}

static void time_line(const ans_run *run, const size_t *idx, size_t n, char *out, size_t len)
{
    ans_score *s = calloc(n, sizeof *s);
    size_t k = s ? scores(run, idx, n, ANS_TIME, 0, s) : 0, emulated = 0;
    for (size_t i = 0; i < n; i++)
        emulated += finished(&run->c[idx[i]]) && run->c[idx[i]].impl[0] && strcmp(run->c[idx[i]].impl, "real");
    if (!best_text(s, k, 0, "fastest real allocator", out, len))
        snprintf(out, len, "no real allocator was timed");
    if (emulated)
        snprintf(out + strlen(out), len - strlen(out), "; emulations' times: policy bookkeeping (not the original's cost), "
                                                       "not ranked");
    free(s);
}

/* The value of `key` in "k=v;k=v" into out ("" when absent). */
static void param_of(const char *params, const char *key, size_t klen, char *out, size_t len)
{
    out[0] = '\0';
    for (const char *p = params; *p;) {
        size_t n = strcspn(p, ";");
        if (n > klen && !strncmp(p, key, klen) && p[klen] == '=')
            snprintf(out, len, "%.*s", (int)(n - klen - 1), p + klen + 1);
        p += n + (p[n] == ';');
    }
}

/* " [k=v k=v]": the parameters that differ between the scenario's cases
 * (names the case when the scenario ran several parameter sets). */
static void varying(const ans_run *run, const size_t *idx, size_t n, const ans_case *c, char *out, size_t len)
{
    size_t used = 0;
    char mine[256], other[256];
    out[0] = '\0';
    for (const char *p = c->params; *p && used < len;) {
        size_t kn = strcspn(p, "=;"), n_all = strcspn(p, ";");
        param_of(c->params, p, kn, mine, sizeof mine);
        int differs = 0;
        for (size_t i = 0; i < n && !differs; i++) {
            param_of(run->c[idx[i]].params, p, kn, other, sizeof other);
            differs = strcmp(mine, other) != 0;
        }
        if (differs)
            used += (size_t)snprintf(out + used, len - used, "%s%.*s=%s", used ? " " : " [", (int)kn, p, mine);
        p += n_all + (p[n_all] == ';');
    }
    if (used && used < len)
        snprintf(out + used, len - used, "]");
}

/* Labels of the cases with `status`, with how many allocations failed for oom. */
static int status_list(const ans_run *run, const size_t *idx, size_t n, const char *status, char *out, size_t len)
{
    size_t used = 0;
    int found = 0;
    out[0] = '\0';
    int oom = !strcmp(status, "oom");
    for (size_t i = 0; i < n && used < len; i++) {
        const ans_case *c = &run->c[idx[i]];
        if (oom ? !did_not_fit(c) : strcmp(case_status(c), status))
            continue;
        char params[256];
        varying(run, idx, n, c, params, sizeof params);
        found++;
        used += (size_t)snprintf(out + used, len - used, "%s%s%s", used ? ", " : "", c->label, params);
        if (oom && isinf(c->oom_lo) && failed_in_phase(c) && used < len)
            used += (size_t)snprintf(out + used, len - used, " (%.0f allocations failed in a phase)",
                                     median(c->failed_allocs));
        else if (oom && !isinf(c->oom_lo) && used < len)
            used += (size_t)(c->oom_lo == c->oom_hi
                                 ? snprintf(out + used, len - used, " (%.0f allocations failed)", c->oom_hi)
                                 : snprintf(out + used, len - used, " (%.0f-%.0f allocations failed)", c->oom_lo,
                                            c->oom_hi));
    }
    return found;
}

/* "reason (N cases); ..." over the cases `idx` with `status`, most frequent first. */
static void reasons(const ans_run *run, const size_t *idx, size_t n, const char *status, char *out, size_t len)
{
    size_t used = 0;
    char *done = calloc(n, 1);
    out[0] = '\0';
    for (size_t round = 0; done && round < n && used < len; round++) {
        size_t pick = n, count = 0;
        for (size_t i = 0; i < n; i++) {
            if (done[i] || strcmp(case_status(&run->c[idx[i]]), status))
                continue;
            size_t same = 0;
            for (size_t j = i; j < n; j++)
                same += !done[j] && !strcmp(case_status(&run->c[idx[j]]), status) &&
                        !strcmp(run->c[idx[j]].reason, run->c[idx[i]].reason);
            if (same > count)
                pick = i, count = same;
        }
        if (pick == n)
            break;
        for (size_t j = pick; j < n; j++)
            done[j] |= !strcmp(run->c[idx[j]].reason, run->c[idx[pick]].reason);
        used += (size_t)snprintf(out + used, len - used, "%s%s (%zu case%s)", used ? "; " : "",
                                 run->c[idx[pick]].reason[0] ? run->c[idx[pick]].reason : "no reason given", count,
                                 count > 1 ? "s" : "");
    }
    free(done);
}

/* --- smallest GPU, time, recommendation (harness/rank.c) ------------------------------------------------ */

/* One entry per allocator over the scenario's parameter sets: it fits when
 * every case of it ran with no failed allocation; its smallest GPU is the
 * largest over the sets, its time and memory the sums. */
static size_t rank_entries(const ans_run *run, const size_t *idx, size_t n, int gpu, cmb_rank_entry *e)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const ans_case *c = &run->c[idx[i]];
        if (!strcmp(case_status(c), "skipped"))
            continue; /* not run here (a GPU-only allocator in sim): neither fit nor misfit */
        size_t j = 0;
        while (j < k && strcmp(e[j].label, c->label))
            j++;
        if (j == k)
            e[k++] = (cmb_rank_entry){c->label, 1, 0, 0, 0, 0};
        double fa = median(c->failed_allocs), cap = median(c->min_cap), m = median(c->mem);
        double t = gpu ? (strcmp(c->impl[0] ? c->impl : "real", "real") ? NAN : median(c->time)) : median(c->pred);
        e[j].fits &= !strcmp(case_status(c), "ok") && !(fa > 0 && !c->mem_higher); /* failed_in_phase */
        e[j].failed |= !strcmp(case_status(c), "failed") || !strcmp(case_status(c), "partial");
        e[j].min_capacity = isnan(cap) || isnan(e[j].min_capacity) ? NAN : fmax(e[j].min_capacity, cap);
        e[j].memory += c->mem_higher ? -m : m; /* lower is better */
        e[j].time_s += t;
    }
    return k;
}

static void format_bytes(double b, char *out, size_t len)
{
    snprintf(out, len, b >= 1024.0 * 1024 * 1024 ? "%.2f GiB" : "%.1f MiB",
             b >= 1024.0 * 1024 * 1024 ? b / (1024.0 * 1024 * 1024) : b / (1024.0 * 1024));
}

/* "cmb 2.15 GiB 1.2 ms, rmm-pool 2.38 GiB 0.8 ms, ...": each allocator's smallest GPU and time. */
static void decide_list(const cmb_rank_entry *e, size_t k, const cmb_rank_result *r, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < k && used < len; i++) {
        char cap[32] = "", t[32] = "";
        if (!isnan(e[i].min_capacity))
            format_bytes(e[i].min_capacity, cap, sizeof cap);
        if (!isnan(e[i].time_s))
            format_seconds(e[i].time_s, t, sizeof t);
        used += (size_t)snprintf(out + used, len - used, "%s%s%s%s%s%s%s%s", used ? ", " : "", e[i].label,
                                 cap[0] ? " " : "", cap, t[0] ? " " : "", t,
                                 i < 64 && r->far[i] ? " (far above the rest)" : "",
                                 e[i].fits ? "" : e[i].failed ? " (failed)" : " (did not fit)");
    }
}

static void cost_label(int gpu, char *out, size_t len)
{
    char path[1024];
    const char *given = getenv(CMB_COSTS_ENV);
    if (gpu)
        snprintf(out, len, "measured allocator time");
    else if (given && *given)
        snprintf(out, len, "predicted from %s", given);
    else if (!cmb_costs_default_path(getenv(CMB_COSTS_GPU_ENV), path, sizeof path))
        snprintf(out, len, "predicted from %s", path);
    else
        snprintf(out, len, "no cost file: time not predicted (cumembench calibrate on a GPU; docs/costs.md)");
}

static void decide_lines(const ans_run *run, const size_t *idx, size_t n, FILE *out)
{
    const char *name = run->c[idx[0]].scenario;
    if (!strcmp(name, "fastpath") || !strcmp(name, "multi-gpu"))
        return; /* time only; a rank's own finding: their own lines */
    int gpu = !strcmp(run->mode, "gpu");
    cmb_rank_entry *e = calloc(n, sizeof *e);
    char *line = malloc(4096), label[1200];
    if (!e || !line)
        goto out_free;
    size_t k = rank_entries(run, idx, n, gpu, e);
    cmb_rank_result r;
    cmb_rank_recommend(e, k, CMB_RANK_BUDGET, &r);
    cost_label(gpu, label, sizeof label);
    decide_list(e, k, &r, line, 4096);
    fprintf(out, "  %-14s smallest GPU, time  %s [%s]\n", "", line, label);
    if (r.recommended >= 0)
        fprintf(out, "  %-14s recommended      %s (%s%s)\n", "", e[r.recommended].label,
                r.by_capacity ? "smallest GPU" : "least memory",
                r.timed ? ", time within 5% of the fastest" : "; time unknown, cuda per request excluded");
    else
        fprintf(out, "  %-14s recommended      none: no allocator fit within the time budget\n", "");
out_free:
    free(e);
    free(line);
}

static void scenario_answer(const ans_run *run, const size_t *idx, size_t n, FILE *out)
{
    char line[2048];
    size_t ran = 0;
    const char *name = run->c[idx[0]].scenario;
    for (size_t i = 0; i < n; i++)
        ran += strcmp(case_status(&run->c[idx[i]]), "skipped") != 0;
    if (!ran) {
        reasons(run, idx, n, "skipped", line, sizeof line);
        fprintf(out, "  %-14s not run: %s\n", name, line);
        return;
    }
    if (!strcmp(run->c[idx[0]].mem_name, "-")) /* a time-only scenario */
        snprintf(line, sizeof line, "not ranked: %s measures time only", name);
    else
        memory_line(run, idx, n, line, sizeof line);
    fprintf(out, "  %-14s best for memory  %s\n", name, line);
    if (!strcmp(run->mode, "gpu")) { /* sim times are host bookkeeping: the header says so once */
        time_line(run, idx, n, line, sizeof line);
        fprintf(out, "  %-14s best for time    %s\n", "", line);
    }
    decide_lines(run, idx, n, out);
    if (!status_list(run, idx, n, "oom", line, sizeof line))
        snprintf(line, sizeof line, "everything that ran fit");
    fprintf(out, "  %-14s did not fit      %s\n", "", line);
    if (status_list(run, idx, n, "failed", line, sizeof line))
        fprintf(out, "  %-14s failed           %s (the reasons: results.csv, make report)\n", "", line);
}

/* The cases of each scenario in turn, in the order the run met them. */
static size_t scenario_cases(const ans_run *run, size_t first, size_t *idx)
{
    size_t n = 0;
    for (size_t i = first; i < run->n; i++)
        if (!strcmp(run->c[i].scenario, run->c[first].scenario))
            idx[n++] = i;
    return n;
}

static int first_of_scenario(const ans_run *run, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (!strcmp(run->c[j].scenario, run->c[i].scenario))
            return 0;
    return 1;
}

static void nothing_ran(const ans_run *run, size_t *idx, FILE *out)
{
    char line[4096];
    for (size_t i = 0; i < run->n; i++)
        idx[i] = i;
    reasons(run, idx, run->n, "skipped", line, sizeof line);
    fprintf(out, "cumembench: nothing ran: all %zu case%s skipped:\n", run->n, run->n == 1 ? " was" : "s were");
    for (char *save = NULL, *r = strtok_r(line, ";", &save); r; r = strtok_r(NULL, ";", &save))
        fprintf(out, "  %s\n", r + (*r == ' '));
}

/* Every case of the run, those of the runs it resumed included: the one
 * count the answers, the report and --resume all read from results.csv. */
static void print_totals(const ans_run *run, const char *dir, FILE *out)
{
    static const char *const kinds[] = {"ok", "partial", "oom", "failed", "skipped"};
    static const char *const words[] = {"ok", "partly failed", "did not fit", "failed", "skipped"};
    size_t n[5] = {0};
    char line[256];
    size_t used = 0;
    for (size_t i = 0; i < run->n; i++)
        for (size_t k = 0; k < 5; k++)
            n[k] += !strcmp(case_status(&run->c[i]), kinds[k]);
    for (size_t k = 0; k < 5 && used < sizeof line; k++)
        if (n[k] || k == 0)
            used += (size_t)snprintf(line + used, sizeof line - used, "%s%zu %s", used ? ", " : "", n[k], words[k]);
    fprintf(out, "cumembench: the whole run (with the part before --resume): %zu cases: %s\n", run->n, line);
}

int cmb_answer_table(const char *dir, int resumed, FILE *out)
{
    ans_run run = {0};
    int rc = read_results(dir, &run, out);
    size_t *idx = rc ? NULL : calloc(run.n ? run.n : 1, sizeof *idx), ran = 0;
    if (!rc && !idx) {
        fprintf(out, "cumembench: no answers: host out of memory\n");
        rc = -1;
    }
    for (size_t i = 0; !rc && i < run.n; i++)
        ran += strcmp(case_status(&run.c[i]), "skipped") != 0;
    if (!rc && !ran) {
        nothing_ran(&run, idx, out);
        rc = 1;
    } else if (!rc) {
        if (resumed) /* the session's counts above miss the cases run before --resume */
            print_totals(&run, dir, out);
        fprintf(out, "cumembench: answers%s\n", strcmp(run.mode, "gpu") ? " (sim: memory only; time is not ranked, "
                                                                          "sim times are host bookkeeping; 'recommended' "
                                                                          "weighs predicted allocator time: docs/costs.md)" : "");
        for (size_t i = 0; i < run.n; i++)
            if (first_of_scenario(&run, i))
                scenario_answer(&run, idx, scenario_cases(&run, i, idx), out);
        fprintf(out, "cumembench: where to look next: make report RUNS=%s (%s/report.html: these answers first, "
                     "then figures and every number); docs/reports.md reads it, docs/scenarios.md defines each "
                     "scenario's counters\n", dir, dir);
    }
    free(idx);
    free_run(&run);
    return rc;
}
