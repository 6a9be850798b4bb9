/* tune_out.c - what tune prints: the front as a table, the recommendation as
 * the exact thing to paste, what it saves against the recorded setting and
 * why (the recorded setting's free-but-unusable bytes where it fails on the
 * recommendation's GPU, by the policy's free_account); or --json. */
#include "tune.h"

#include <math.h>
#include <string.h>

#include <jansson.h>

static double gib(uint64_t b)
{
    return (double)b / (double)(1ull << 30);
}

static double frag(const cmb_tune_trace *t, const cmb_tune_cand *c)
{
    return c->peak_reserved ? 1.0 - (double)t->trace.peak_requested / (double)c->peak_reserved : NAN;
}

static void fmt_time(double s, char *out, size_t len)
{
    if (isnan(s))
        snprintf(out, len, "-");
    else
        snprintf(out, len, "%.3f ms", s * 1e3);
}

/* Why a request could not use free bytes, as cmb_free_reason orders them. */
static const char *const reason_text[CMB_FREE_N_REASONS] = {
    "in the other size pool (small vs large)", "cached for another stream", "waiting on other streams' events",
    "in blocks at or above max_split_size that a smaller request may not split",
    "in mapped pages not next to each other", "in free blocks smaller than the request (split segments)",
    "that would have served it"};

/* --- text ------------------------------------------------------------------------------------------- */

static void print_front(FILE *f, const cmb_tune_report *r)
{
    char tm[32];
    fprintf(f, "\nPareto front (sim replay; peak reserved and fragmentation on an unlimited GPU; allocator time "
               "per pass predicted from %s):\n", r->costs_path ? r->costs_path : "no cost file: memory alone");
    fprintf(f, "  %-12s %-13s %-6s %-9s %-14s %s\n", "smallest GPU", "peak reserved", "frag", "upstream",
            "alloc time", "setting");
    for (int j = 0; j < r->n_front; j++) {
        const cmb_tune_cand *c = &r->s->c[r->front[j]];
        fmt_time(c->time_s, tm, sizeof tm);
        fprintf(f, "  %8.3f GiB %9.3f GiB %6.3f %9llu %-14s %s%s%s\n", gib(c->min_capacity), gib(c->peak_reserved),
                frag(r->t, c), (unsigned long long)c->upstream_calls, tm, c->spec,
                r->front[j] == r->recorded ? "  (recorded)" : "", r->front[j] == r->recommended ? "  <- recommended" : "");
        if (c->island)
            fprintf(f, "  %12s (a smaller island fits from %.3f GiB)\n", "", gib(c->island));
    }
}

/* Where a budget was priced: the candidates that fit it, at their time on a
 * GPU of that size (what the recommendation was chosen by). */
static void print_budget_front(FILE *f, const cmb_tune_report *r)
{
    char tm[32], tu[32];
    if (!r->budget_front)
        return;
    fprintf(f, "\non a %.3f GiB GPU (the budget), the candidates that fit, priced there:\n", gib(r->budget));
    fprintf(f, "  %-12s %-14s %-14s %s\n", "smallest GPU", "alloc time", "(unlimited)", "setting");
    for (int j = 0; j < r->n_budget_front; j++) {
        const cmb_tune_cand *c = &r->s->c[r->budget_front[j]];
        fmt_time(c->budget_time_s, tm, sizeof tm);
        fmt_time(c->time_s, tu, sizeof tu);
        fprintf(f, "  %8.3f GiB %-14s %-14s %s%s\n", gib(c->min_capacity), tm, tu, c->spec,
                r->budget_front[j] == r->recommended ? "  <- recommended" : "");
    }
}

static void print_why(FILE *f, const cmb_tune_report *r)
{
    const cmb_tune_cand *rec = &r->s->c[r->recommended], *old = &r->s->c[r->recorded];
    const cmb_tune_replay *w = &r->recorded_at_fit;
    if (!w->ooms) {
        fprintf(f, "why: the recorded setting also fits a %.3f GiB GPU; ", gib(rec->min_capacity));
        fprintf(f, "%s\n", r->recommended == r->recorded ? "it is the recommendation" : "the recommendation is faster");
        return;
    }
    fprintf(f, "why: on a %.3f GiB GPU the recorded setting fails %llu allocations", gib(rec->min_capacity),
            (unsigned long long)w->ooms);
    if (!w->have_account) {
        fprintf(f, " (its peak reserved is %.3f GiB)\n", gib(old->peak_reserved));
        return;
    }
    uint64_t freeb = 0;
    for (int k = 0; k < CMB_FREE_N_REASONS; k++)
        freeb += w->account.bytes[k];
    fprintf(f, "; at the first, a %.1f MiB request, it held %.1f MiB free that the request could not use:\n",
            (double)w->fail_size / (1 << 20), (double)(freeb - w->account.bytes[CMB_FREE_USABLE]) / (1 << 20));
    for (int k = 0; k < CMB_FREE_N_REASONS; k++) {
        uint64_t b = w->account.bytes[k];
        if (b && k != CMB_FREE_USABLE) /* KiB where MiB would print 0.0 */
            fprintf(f, "  %10.1f %s %s\n", b < (1u << 20) / 10 ? (double)b / 1024 : (double)b / (1 << 20),
                    b < (1u << 20) / 10 ? "KiB" : "MiB", reason_text[k]);
    }
}

/* Upstream calls of the recommendation on that GPU against unlimited: near
 * its capacity a setting may give memory back and take it again every pass,
 * calls the cost file prices at their calibration, which real programs have
 * exceeded (docs/tune.md, Limits). */
static void print_churn(FILE *f, const cmb_tune_report *r)
{
    uint64_t at = r->rec_at_budget.upstream_calls, unl = r->s->c[r->recommended].upstream_calls;
    fprintf(f, "upstream calls over %llu pass%s: %llu on that GPU, %llu unlimited\n", (unsigned long long)r->passes,
            r->passes == 1 ? "" : "es", (unsigned long long)at, (unsigned long long)unl);
    if (at > unl)
        fprintf(f, "  %llu calls more on that GPU%s\n", (unsigned long long)(at - unl),
                r->costs_path ? ", each priced at the cost file's calibration, which real programs exceeded where a "
                                "setting gave memory back and took it again near the capacity (docs/tune.md, Limits)"
                              : "");
}

static void print_recommendation(FILE *f, const cmb_tune_report *r)
{
    char paste[512], t1[32], t2[32], t3[32];
    const cmb_tune_cand *rec = &r->s->c[r->recommended], *old = &r->s->c[r->recorded];
    cmb_tune_paste(rec, paste, sizeof paste);
    fprintf(f, "\nrecommended (objective %s, %s): %s\n  %s\n",
            r->obj == CMB_TUNE_MEMORY ? "memory" : r->obj == CMB_TUNE_TIME ? "time" : "balanced",
            r->budget ? "within the budget" : "no budget", rec->spec, paste);
    fmt_time(old->time_s, t1, sizeof t1);
    fmt_time(rec->time_s, t2, sizeof t2);
    fmt_time(r->rec_at_budget.time_s / (double)r->passes, t3, sizeof t3);
    fprintf(f, "saves: smallest GPU %.3f -> %.3f GiB (%.1f%%), peak reserved %.3f -> %.3f GiB\n",
            gib(old->min_capacity), gib(rec->min_capacity),
            100.0 * ((double)old->min_capacity - (double)rec->min_capacity) / (double)old->min_capacity,
            gib(old->peak_reserved), gib(rec->peak_reserved));
    fprintf(f, "time: predicted allocator time per pass %s (recorded) -> %s (recommended), %s on a %.3f GiB GPU%s\n",
            t1, t2, t3, gib(r->budget ? r->budget : rec->min_capacity), r->costs_path ? "" : " (no cost file)");
    print_churn(f, r);
    print_why(f, r);
}

void cmb_tune_print(FILE *f, const cmb_tune_report *r)
{
    const cmb_tune_cand *old = &r->s->c[r->recorded];
    fprintf(f, "cumembench tune: %s (%zu events, peak requested %.3f GiB)\n", r->t->input, r->t->trace.n,
            gib(r->t->trace.peak_requested));
    fprintf(f, "recorded setting: %s (from %s): smallest GPU %.3f GiB, peak reserved %.3f GiB\n", old->spec,
            r->t->recorded_from, gib(old->min_capacity), gib(old->peak_reserved));
    fprintf(f, "searched %d candidates in %.1f s (%llu replays)\n", r->s->n, r->seconds,
            (unsigned long long)r->trials);
    print_front(f, r);
    print_budget_front(f, r);
    if (r->recommended >= 0) {
        print_recommendation(f, r);
        return;
    }
    const cmb_tune_cand *best = r->n_front ? &r->s->c[r->front[0]] : NULL;
    fprintf(f, "\nnothing fits a budget of %.3f GiB", gib(r->budget));
    if (best)
        fprintf(f, ": the smallest budget any candidate fits is %.3f GiB (%s)", gib(best->min_capacity), best->spec);
    fprintf(f, "\n");
}

/* --- JSON ---------------------------------------------------------------------------------------------- */

static json_t *cand_json(const cmb_tune_report *r, const cmb_tune_cand *c)
{
    char paste[512], setting[320];
    cmb_tune_paste(c, paste, sizeof paste);
    cmb_tune_run_setting(c, setting, sizeof setting);
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "setting", c->spec, "paste", paste, "run_setting",
                          setting, "min_capacity_bytes", (json_int_t)c->min_capacity, "peak_reserved_bytes",
                          (json_int_t)c->peak_reserved, "peak_allocated_bytes", (json_int_t)c->peak_allocated,
                          "upstream_calls", (json_int_t)c->upstream_calls);
    json_object_set_new(o, "frag_ratio", isnan(frag(r->t, c)) ? json_null() : json_real(frag(r->t, c)));
    json_object_set_new(o, "predicted_alloc_time_per_pass_s", isnan(c->time_s) ? json_null() : json_real(c->time_s));
    json_object_set_new(o, "island_bytes", c->island ? json_integer((json_int_t)c->island) : json_null());
    if (c->at_budget)
        json_object_set_new(o, "predicted_alloc_time_per_pass_on_budget_s",
                            isnan(c->budget_time_s) ? json_null() : json_real(c->budget_time_s));
    return o;
}

static json_t *why_json(const cmb_tune_report *r)
{
    const cmb_tune_replay *w = &r->recorded_at_fit;
    static const char *const key[CMB_FREE_N_REASONS] = {"other_pool", "other_stream", "event_wait", "oversize",
                                                        "not_contiguous", "too_small", "usable"};
    json_t *o = json_pack("{s:I, s:I}", "gpu_bytes", (json_int_t)r->s->c[r->recommended].min_capacity,
                          "recorded_failed_allocs", (json_int_t)w->ooms);
    if (w->have_account) {
        json_t *b = json_object();
        for (int k = 0; k < CMB_FREE_N_REASONS; k++)
            json_object_set_new(b, key[k], json_integer((json_int_t)w->account.bytes[k]));
        json_object_set_new(o, "first_failure_bytes", json_integer((json_int_t)w->fail_size));
        json_object_set_new(o, "free_bytes_by_reason", b);
    }
    return o;
}

/* The recommendation replayed on a GPU of the budget (else of its smallest GPU):
 * what a run capped there should show. */
static json_t *at_budget_json(const cmb_tune_report *r)
{
    const cmb_tune_replay *b = &r->rec_at_budget;
    uint64_t gpu = r->budget ? r->budget : r->s->c[r->recommended].min_capacity;
    json_t *o = json_pack("{s:I, s:I, s:I, s:I}", "gpu_bytes", (json_int_t)gpu, "peak_reserved_bytes",
                          (json_int_t)b->peak_reserved, "peak_allocated_bytes", (json_int_t)b->peak_allocated,
                          "failed_allocs", (json_int_t)b->ooms);
    json_object_set_new(o, "predicted_alloc_time_per_pass_s",
                        isnan(b->time_s) ? json_null() : json_real(b->time_s / (double)r->passes));
    json_object_set_new(o, "upstream_calls", json_integer((json_int_t)b->upstream_calls)); /* over `passes` */
    return o;
}

int cmb_tune_print_json(FILE *f, const cmb_tune_report *r)
{
    json_t *front = json_array();
    for (int j = 0; j < r->n_front; j++)
        json_array_append_new(front, cand_json(r, &r->s->c[r->front[j]]));
    json_t *doc = json_pack("{s:s, s:I, s:I, s:s, s:o, s:o, s:I, s:I, s:f, s:s}", "input", r->t->input, "events",
                            (json_int_t)r->t->trace.n, "peak_requested_bytes", (json_int_t)r->t->trace.peak_requested,
                            "recorded_from", r->t->recorded_from, "recorded", cand_json(r, &r->s->c[r->recorded]),
                            "front", front, "candidates", (json_int_t)r->s->n, "replays", (json_int_t)r->trials,
                            "seconds", r->seconds, "objective",
                            r->obj == CMB_TUNE_MEMORY ? "memory" : r->obj == CMB_TUNE_TIME ? "time" : "balanced");
    json_object_set_new(doc, "costs_file", r->costs_path ? json_string(r->costs_path) : json_null());
    json_object_set_new(doc, "time_is", json_string("predicted from the cost file, per pass"));
    json_object_set_new(doc, "budget_bytes", r->budget ? json_integer((json_int_t)r->budget) : json_null());
    json_object_set_new(doc, "passes", json_integer((json_int_t)r->passes));
    if (r->budget_front) {
        json_t *bf = json_array();
        for (int j = 0; j < r->n_budget_front; j++)
            json_array_append_new(bf, cand_json(r, &r->s->c[r->budget_front[j]]));
        json_object_set_new(doc, "front_on_budget", bf);
    }
    if (r->recommended >= 0) {
        json_object_set_new(doc, "recommendation", cand_json(r, &r->s->c[r->recommended]));
        json_object_set_new(doc, "why", why_json(r));
        json_object_set_new(doc, "recommendation_on_budget", at_budget_json(r));
    } else {
        json_object_set_new(doc, "recommendation", json_null());
        if (r->n_front)
            json_object_set_new(doc, "smallest_budget", cand_json(r, &r->s->c[r->front[0]]));
    }
    int rc = json_dumpf(doc, f, JSON_INDENT(1)) || fputc('\n', f) == EOF;
    json_decref(doc);
    return rc ? 2 : 0;
}
