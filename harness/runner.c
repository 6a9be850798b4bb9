/* runner.c - the parent process of a run: plan the cases, run each in a
 * fresh child process, relay its results to the output files, show
 * progress, and keep going when a case fails, crashes or hangs.
 */
#define _GNU_SOURCE
#include "runner.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../allocators/external.h"
#include "../common/cmb_units.h"
#include "answer.h"
#include "case.h"
#include "clock.h"
#include "devcheck.h"
#include "env.h"
#include "output.h"
#include "resume.h"
#include "schema.h"
#include "spawn.h"
#include "timeline.h"
#include "wire.h"

typedef struct planned_case {
    cmb_case_spec spec;
    const cmb_allocator_methods *methods;
    int skip;       /* 1: skipped, reason says why */
    char reason[320];
} planned_case;

typedef struct plan {
    planned_case *cases;
    size_t n, cap;
    size_t n_skipped;
} plan;

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
            snprintf(err, errlen, "unknown scenario '%s' (cumembench --list shows them)", names[i]);
            return -1;
        }
        out[(*n)++] = s;
    }
    return 0;
}

static int select_allocators(const cmb_cli *cli, cmb_alloc_spec *out, size_t *n, char *err, size_t errlen)
{
    static char names[MAX_SELECTED][512];
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
    for (size_t i = 0; i < k; i++)
        if (cmb_alloc_spec_parse(names[i], &out[(*n)++], err, errlen))
            return -1;
    return 0;
}

/* Every --param must belong to at least one selected scenario. */
static int check_overrides(const cmb_cli *cli, const cmb_scenario *const *scn, size_t n_scn, char *err,
                           size_t errlen)
{
    for (size_t k = 0; k < cli->n_overrides; k++) {
        int known = 0;
        for (size_t i = 0; i < n_scn && !known; i++)
            known = cmb_param_spec_find(scn[i], cli->overrides[k].name) != NULL;
        if (!known) {
            snprintf(err, errlen, "no selected scenario has a parameter '%s' (cumembench --list shows them)",
                     cli->overrides[k].name);
            return -1;
        }
    }
    return 0;
}

static const cmb_allocator_methods *methods_of(const cmb_alloc_spec *a, char *err, size_t errlen)
{
    const cmb_allocator_methods *m = NULL;
    if (a->entry)
        return a->entry->methods;
    if (cmb_external_load(a->external_path, &m, err, errlen))
        return NULL;
    return m;
}

/* --- the plan --------------------------------------------------------------------------------- */

static planned_case *plan_add(plan *p)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        planned_case *grown = realloc(p->cases, cap * sizeof *grown);
        if (!grown)
            return NULL;
        p->cases = grown;
        p->cap = cap;
    }
    planned_case *pc = &p->cases[p->n++];
    memset(pc, 0, sizeof *pc);
    return pc;
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

static int build_plan(const cmb_cli *cli, cmb_mode mode, uint64_t check_capacity, plan *p, char *err,
                      size_t errlen)
{
    const cmb_scenario *scn[MAX_SELECTED];
    static cmb_alloc_spec allocs[MAX_SELECTED];
    const cmb_allocator_methods *methods[MAX_SELECTED];
    size_t n_scn, n_alloc;

    if (select_scenarios(cli, scn, &n_scn, err, errlen) || select_allocators(cli, allocs, &n_alloc, err, errlen) ||
        check_overrides(cli, scn, n_scn, err, errlen))
        return -1;
    for (size_t a = 0; a < n_alloc; a++)
        if (!(methods[a] = methods_of(&allocs[a], err, errlen)))
            return -1;

    for (size_t s = 0; s < n_scn; s++) {
        cmb_param_set *sets;
        size_t n_sets;
        if (cmb_params_expand(scn[s], cli->preset, cli->overrides, cli->n_overrides, &sets, &n_sets, err, errlen))
            return -1;
        for (size_t k = 0; k < n_sets; k++) {
            for (size_t a = 0; a < n_alloc; a++) {
                planned_case *pc = plan_add(p);
                if (!pc) {
                    free(sets);
                    snprintf(err, errlen, "host out of memory planning cases");
                    return -1;
                }
                cmb_case_spec *cs = &pc->spec;
                cs->scenario = scn[s];
                cmb_alloc_spec_copy(&cs->alloc, &allocs[a]);
                cs->params = sets[k];
                cs->mode = mode;
                cs->seed = cli->seed;
                cs->device = cli->device;
                cs->capacity = mode == CMB_MODE_SIM ? (cli->capacity ? cli->capacity : CMB_DEFAULT_SIM_CAPACITY)
                                                    : cli->capacity;
                cs->repetitions = cli->repetitions;
                cs->fault = cli->fault;
                if (cli->record_trace)
                    snprintf(cs->record_trace, sizeof cs->record_trace, "%s", cli->record_trace);
                if (cmb_case_spec_make_name(cs, err, errlen)) {
                    free(sets);
                    return -1;
                }
                pc->methods = methods[a];
                const char *why = skip_reason(cs, methods[a]);
                int chk = why ? 1 : cmb_case_check(cs, check_capacity, pc->reason, sizeof pc->reason);
                if (chk < 0) {
                    snprintf(err, errlen, "%s", pc->reason);
                    free(sets);
                    return -1;
                }
                if (why)
                    snprintf(pc->reason, sizeof pc->reason, "%s", why);
                pc->skip = chk != 0;
                p->n_skipped += pc->skip;
            }
        }
        free(sets);
    }
    return 0;
}

/* --- one case in a child ------------------------------------------------------------------------ */

typedef struct child_args {
    char *argv[160];
    char store[160][CMB_PARAM_VALUE_MAX + 64];
    int n;
} child_args;

static void arg(child_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(child_args *a, const char *fmt, ...)
{
    if (a->n + 1 >= (int)(sizeof a->argv / sizeof a->argv[0]))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->store[a->n], sizeof a->store[0], fmt, ap);
    va_end(ap);
    a->argv[a->n] = a->store[a->n];
    a->n++;
    a->argv[a->n] = NULL;
}

static void child_argv(child_args *a, const char *self, const cmb_case_spec *cs)
{
    a->n = 0;
    arg(a, "%s", self);
    arg(a, "--child");
    arg(a, "--result-fd");
    arg(a, "3");
    arg(a, "--scenario");
    arg(a, "%s", cs->scenario->name);
    arg(a, "--allocator");
    arg(a, "%s", cs->alloc.text);
    arg(a, "--mode");
    arg(a, "%s", cs->mode == CMB_MODE_GPU ? "gpu" : "sim");
    arg(a, "--seed");
    arg(a, "%llu", (unsigned long long)cs->seed);
    arg(a, "--repetitions");
    arg(a, "%d", cs->repetitions);
    arg(a, "--device");
    arg(a, "%d", cs->device);
    if (cs->capacity) {
        arg(a, "--capacity");
        arg(a, "%llu", (unsigned long long)cs->capacity);
    }
    if (cs->record_trace[0]) {
        arg(a, "--record-trace");
        arg(a, "%s", cs->record_trace);
    }
    if (cs->timeline_dir) {
        arg(a, "--timeline-dir");
        arg(a, "%s", cs->timeline_dir);
        arg(a, "--timeline-points");
        arg(a, "%u", cs->timeline_points);
    }
    if (cs->fault.fail_nth || cs->fault.fail_every || cs->fault.fail_prob > 0) {
        arg(a, "--fault");
        arg(a, "nth=%llu,every=%llu,prob=%.17g,seed=%llu", (unsigned long long)cs->fault.fail_nth,
            (unsigned long long)cs->fault.fail_every, cs->fault.fail_prob, (unsigned long long)cs->fault.seed);
    }
    for (size_t i = 0; i < cs->params.n; i++) {
        arg(a, "--param");
        arg(a, "%s=%s", cs->params.spec[i]->name, cs->params.value[i]);
    }
}

static void feed_results(void *ctx, const char *data, size_t len)
{
    cmb_wire_reader *r = ctx;
    if (!r->error[0])
        cmb_wire_feed(r, data, len);
}

/* --- progress ------------------------------------------------------------------------------------- */

static const cmb_bench_run *summary_run(const cmb_bench_run *runs, size_t n)
{
    const cmb_bench_run *first_ok = NULL;
    for (size_t i = 0; i < n; i++) {
        if (runs[i].is_aggregate && !strcmp(runs[i].aggregate_name, "median"))
            return &runs[i];
        if (!runs[i].is_aggregate && !runs[i].error_occurred && !first_ok)
            first_ok = &runs[i];
    }
    return first_ok;
}

/* The most allocations that did not fit in one repetition (0: it fit). */
static double oom_count(const cmb_bench_run *runs, size_t n)
{
    double most = 0;
    for (size_t i = 0; i < n; i++) {
        double k = runs[i].is_aggregate || runs[i].error_occurred ? 0 : cmb_output_oom_count(&runs[i]);
        most = k > most ? k : most;
    }
    return most;
}

static void progress_line(const cmb_scenario *s, const cmb_bench_run *runs, size_t n, char *out, size_t len)
{
    const cmb_bench_run *r = summary_run(runs, n);
    size_t failed = 0, reps = 0;
    char status[96];
    for (size_t i = 0; i < n; i++) {
        if (!runs[i].is_aggregate) {
            reps++;
            failed += runs[i].error_occurred != 0;
        }
    }
    if (!r) {
        snprintf(out, len, "FAILED: %s", n ? runs[0].error_message : "no results");
        return;
    }
    snprintf(status, sizeof status, "%s", failed ? "partly failed" : cmb_answer_ok_word(s));
    if (!failed && oom_count(runs, n) > 0)
        cmb_oom_message(oom_count(runs, n), status, sizeof status);
    double t = r->real_accumulated_time / (r->iterations > 0 ? (double)r->iterations : 1.0);
    int used = snprintf(out, len, "%s  ", status);
    cmb_answer_items(s, r, t, out + used, len - (size_t)used); /* the scenario's answer first */
    used = (int)strlen(out);
    if (failed)
        snprintf(out + used, len - (size_t)used, "  (%zu of %zu repetitions failed)", failed, reps);
}

/* --- the run --------------------------------------------------------------------------------------- */

typedef struct run_totals {
    size_t ok, oom, failed, skipped;
} run_totals;

/* What the CSV rows of a case say about it (harness/schema.def). */
typedef struct row_text {
    char params[1024];
    char options[1024];
} row_text;

static void case_row(const planned_case *pc, cmb_case_row *row, row_text *t)
{
    cmb_param_set_format(&pc->spec.params, '=', ';', t->params, sizeof t->params);
    cmb_alloc_spec_user_options(&pc->spec.alloc, t->options, sizeof t->options);
    row->name = pc->spec.name;
    row->scenario = pc->spec.scenario->name;
    row->allocator = pc->spec.alloc.name;
    row->options = t->options;
    row->impl = cmb_alloc_spec_impl(&pc->spec.alloc);
    row->upstream = (pc->methods->flags & CMB_ALLOC_USES_UPSTREAM)
                        ? cmb_upstream_kind_name(cmb_case_upstream_kind(&pc->spec, pc->methods))
                        : "none";
    row->params = t->params;
}

static int run_case(const planned_case *pc, const char *self, double timeout_s, cmb_output *out,
                    cmb_devcheck *dc, char *line, size_t line_len, run_totals *tot, char *err, size_t errlen)
{
    child_args *a = malloc(sizeof *a);
    cmb_wire_reader *reader = malloc(sizeof *reader);
    cmb_child_result res;
    char why[256];
    row_text text;
    cmb_case_row row;
    int rc = 0;
    if (!a || !reader) {
        free(a);
        free(reader);
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    case_row(pc, &row, &text);
    child_argv(a, self, &pc->spec);
    cmb_wire_reader_init(reader);
    fprintf(out->log, "=== %s\n", pc->spec.name);
    fflush(out->log);
    cmb_devcheck_before(dc);
    double t0 = cmb_now_s();
    int spawn_failed = cmb_spawn_run(a->argv, timeout_s, feed_results, reader, NULL, NULL, out->log, &res);
    double case_s = cmb_now_s() - t0;
    cmb_devcheck_after(dc);
    fprintf(out->log, "--- %s: %.2f s in its process\n", pc->spec.name, case_s);
    fflush(out->log);
    if (!spawn_failed && res.interrupted) {
        snprintf(line, line_len, "interrupted (not recorded)");
        goto out; /* not finished: not written, so --resume runs it again */
    }
    cmb_devcheck_annotate(dc, reader->runs, reader->n);
    if (spawn_failed) {
        snprintf(line, line_len, "FAILED: could not start the case process");
        rc = cmb_output_case_status(out, &row, "failed", "could not start the case process", err, errlen);
        tot->failed++;
        goto out;
    }
    if (!res.ok || reader->error[0] || reader->n == 0) {
        /* Keep the repetitions that finished; the case is failed with why. */
        cmb_child_result_describe(&res, why, sizeof why);
        char msg[1024];
        const char *tail = res.tail;
        size_t tl = strlen(tail);
        while (tl && (tail[tl - 1] == '\n' || tail[tl - 1] == ' '))
            tl--;
        const char *last = tail;
        for (size_t i = 0; i + 1 < tl; i++)
            if (tail[i] == '\n')
                last = tail + i + 1;
        snprintf(msg, sizeof msg, "case process %s%s%.*s%s", why, reader->error[0] ? "; " : "",
                 reader->error[0] ? (int)strlen(reader->error) : 0, reader->error, "");
        if (tl && (size_t)(tail + tl - last) > 0)
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg), ": %.*s", (int)(tail + tl - last), last);
        char note[320];
        if (cmb_devcheck_note(dc, note, sizeof note))
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "; %s", note);
        rc = cmb_output_case_failed(out, &row, reader->runs, reader->n, msg, err, errlen);
        snprintf(line, line_len, "FAILED: %s", msg);
        tot->failed++;
        goto out;
    }
    rc = cmb_output_case(out, &row, reader->runs, reader->n, err, errlen);
    progress_line(pc->spec.scenario, reader->runs, reader->n, line, line_len);
    snprintf(line + strlen(line), line_len - strlen(line), "  (%.1f s)", case_s);
    char note[320];
    if (cmb_devcheck_note(dc, note, sizeof note))
        snprintf(line + strlen(line), line_len - strlen(line), "  WARNING: %s", note);
    int any_error = 0;
    for (size_t i = 0; i < reader->n; i++)
        any_error |= reader->runs[i].error_occurred;
    if (any_error)
        tot->failed++;
    else if (oom_count(reader->runs, reader->n) > 0)
        tot->oom++; /* ran; its workload did not fit: an answer, not a failure */
    else
        tot->ok++;
out:
    cmb_wire_reader_free(reader);
    free(reader);
    free(a);
    return rc;
}

/* Which cases record a memory timeline, and where: DIR/timelines. */
static void plan_timelines(plan *p, const cmb_cli *cli, const char *dir)
{
    static char tl_dir[800];
    snprintf(tl_dir, sizeof tl_dir, "%s/timelines", dir);
    for (size_t i = 0; i < p->n; i++) {
        cmb_case_spec *cs = &p->cases[i].spec;
        int on = cli->timeline < 0 ? (cs->scenario->flags & CMB_SCN_TIMELINE) != 0 : cli->timeline;
        cs->timeline_dir = on ? tl_dir : NULL;
        cs->timeline_points = cli->timeline_points ? cli->timeline_points : CMB_TIMELINE_DEFAULT_POINTS;
    }
}

static void default_out_dir(const cmb_env *env, const cmb_cli *cli, char *out, size_t len)
{
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(out, len, "results/runs/%s-%s-%s", env->gpu_slug, cli->preset == CMB_PRESET_FULL ? "full" : "quick",
             stamp);
}

static void self_path(char *out, size_t len, const char *argv0)
{
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    if (n > 0)
        out[n] = '\0';
    else
        snprintf(out, len, "%s", argv0);
}

static void print_skipped_allocators(const plan *p, int quiet)
{
    if (quiet || !p->n_skipped)
        return;
    /* one line per distinct allocator skipped for a reason of its own */
    for (size_t i = 0; i < p->n; i++) {
        const planned_case *pc = &p->cases[i];
        if (!pc->skip)
            continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = p->cases[j].skip && !strcmp(p->cases[j].spec.alloc.text, pc->spec.alloc.text) &&
                   !strcmp(p->cases[j].reason, pc->reason);
        if (!seen && (pc->spec.alloc.unavailable[0] ||
                      (strstr(pc->reason, "needs a GPU") && !(pc->spec.scenario->flags & CMB_SCN_NEEDS_GPU))))
            fprintf(stderr, "cumembench: skipping allocator %s: %s\n", pc->spec.alloc.text, pc->reason);
    }
}

int cmb_run(const cmb_cli *cli, const char *argv0)
{
    char err[512], self[PATH_MAX], dir[768];
    cmb_env env;
    plan p = {0};
    cmb_output out;
    run_totals tot = {0};
    cmb_resume rs = {0};
    cmb_devcheck dc = {0};
    int rc = 2;

    self_path(self, sizeof self, argv0);
    cmb_spawn_install_signals();
    cmb_env_collect(&env, self, cli->device, 120);

    cmb_mode mode;
    if (cli->mode == CMB_CHOOSE_GPU) {
        if (env.gpu_count == 0) {
            fprintf(stderr, "cumembench: --mode gpu, but no CUDA GPU is usable: %s\n", env.no_gpu_reason);
            return 2;
        }
        mode = CMB_MODE_GPU;
    } else if (cli->mode == CMB_CHOOSE_SIM) {
        mode = CMB_MODE_SIM;
        snprintf(env.gpu_slug, sizeof env.gpu_slug, "sim");
    } else if (env.gpu_count > 0) {
        mode = CMB_MODE_GPU;
    } else {
        mode = CMB_MODE_SIM;
        fprintf(stderr,
                "cumembench: no CUDA GPU available (%s); running in sim mode: exact peaks and fragmentation over a "
                "simulated device, host-side timings only. GPU timings need a GPU.\n",
                env.no_gpu_reason);
    }

    uint64_t check_capacity = mode == CMB_MODE_SIM ? (cli->capacity ? cli->capacity : CMB_DEFAULT_SIM_CAPACITY)
                                                   : (cli->capacity && cli->capacity < env.gpu_memory_bytes
                                                          ? cli->capacity
                                                          : env.gpu_memory_bytes);
    if (mode == CMB_MODE_SIM) {
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)check_capacity);
        cmb_env_set(&env, "sim_capacity_bytes", buf);
    }
    if (build_plan(cli, mode, check_capacity, &p, err, sizeof err)) {
        fprintf(stderr, "cumembench: %s\n", err);
        goto out_free;
    }
    if (cli->record_trace && p.n - p.n_skipped != 1) {
        fprintf(stderr, "cumembench: --record-trace needs exactly one case to run (%zu selected): choose one "
                        "scenario, one allocator and one value per parameter\n", p.n - p.n_skipped);
        goto out_free;
    }
    if (cli->out)
        snprintf(dir, sizeof dir, "%s", cli->out);
    else
        default_out_dir(&env, cli, dir, sizeof dir);
    plan_timelines(&p, cli, dir);
    {
        char seed[32];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)cli->seed);
        cmb_env_set(&env, "seed", seed);
        cmb_env_set(&env, "preset", cli->preset == CMB_PRESET_FULL ? "full" : "quick");
    }
    cmb_devcheck_start(&dc, mode == CMB_MODE_GPU, &env, self, cli->device);
    if (cmb_resume_open_output(&out, &rs, cli, dir, &env, mode == CMB_MODE_GPU ? "gpu" : "sim", err, sizeof err)) {
        fprintf(stderr, "cumembench: %s\n", err);
        goto out_free;
    }

    size_t to_run = p.n - p.n_skipped;
    for (size_t i = 0; i < p.n; i++)
        to_run -= !p.cases[i].skip && cmb_resume_is_done(&rs, p.cases[i].spec.name);
    if (!cli->quiet) {
        fprintf(stderr, "cumembench: mode %s%s%s, %zu cases to run (%zu skipped), %d repetitions, seed %llu\n",
                mode == CMB_MODE_GPU ? "gpu on " : "sim", mode == CMB_MODE_GPU ? cmb_env_get(&env, "gpu_name") : "",
                "", to_run, p.n_skipped, cli->repetitions, (unsigned long long)cli->seed);
        fprintf(stderr, "cumembench: writing %s/results.json and results.csv\n", dir);
    }
    print_skipped_allocators(&p, cli->quiet);

    double t0 = cmb_now_s();
    size_t done = 0;
    rc = 0;
    for (size_t i = 0; i < p.n && !cmb_interrupted; i++) {
        planned_case *pc = &p.cases[i];
        char line[1024];
        row_text text;
        cmb_case_row row;
        if (cmb_resume_is_done(&rs, pc->spec.name))
            continue; /* finished before the run was interrupted */
        if (pc->skip) {
            case_row(pc, &row, &text);
            if (cmb_output_case_status(&out, &row, "skipped", pc->reason, err, sizeof err))
                goto out_write_error;
            tot.skipped++;
            continue;
        }
        done++;
        if (!cli->quiet) {
            fprintf(stderr, "[%*zu/%zu] %s ", (int)snprintf(NULL, 0, "%zu", to_run), done, to_run, pc->spec.name);
            fflush(stderr);
        }
        if (run_case(pc, self, cli->case_timeout_s, &out, &dc, line, sizeof line, &tot, err, sizeof err))
            goto out_write_error;
        if (!cli->quiet) {
            double elapsed = cmb_now_s() - t0;
            double eta = done < to_run ? elapsed / (double)done * (double)(to_run - done) : 0;
            fprintf(stderr, " %s  [%.0fs elapsed, ~%.0fs left]\n", line, elapsed, eta);
        }
    }
    if (cmb_interrupted) {
        fprintf(stderr, "\ncumembench: interrupted; %zu finished cases are kept in %s (continue with: cumembench "
                        "--resume %s)\n", tot.ok + tot.oom + tot.failed, dir, dir);
        rc = 130;
    } else if (tot.failed || rs.n_failed) {
        rc = 1;
    }
    if (cmb_output_close(&out, err, sizeof err)) {
        fprintf(stderr, "cumembench: %s\n", err);
        rc = rc ? rc : 1;
        goto out_free;
    }
    char oom[48] = "";
    if (tot.oom)
        snprintf(oom, sizeof oom, ", %zu did not fit", tot.oom);
    fprintf(stderr, "cumembench: %zu ok%s, %zu failed, %zu skipped in %.1f s; results in %s\n", tot.ok, oom,
            tot.failed, tot.skipped, cmb_now_s() - t0, dir);
    if (mode == CMB_MODE_SIM && !cli->quiet)
        fprintf(stderr, "cumembench: sim mode: times are host-side bookkeeping only; GPU timings need a GPU\n");
    if (!cli->quiet || !(tot.ok + tot.oom + tot.failed)) /* the answers, or why nothing ran */
        rc = cmb_answer_table(dir, stderr) > 0 && !rc ? 1 : rc;
    if (dc.n_dirty || dc.n_unreturned)
        fprintf(stderr, "cumembench: device check: %zu cases did not return device memory, %zu ran on a dirty "
                        "device (counters device_unreturned_bytes, device_dirty_bytes)\n", dc.n_unreturned,
                dc.n_dirty);
    goto out_free;

out_write_error:
    fprintf(stderr, "cumembench: %s\n", err);
    cmb_output_close(&out, err, sizeof err);
    rc = 1;
out_free:
    cmb_devcheck_stop(&dc);
    cmb_resume_free(&rs);
    free(p.cases);
    return rc;
}

/* --- the child's side of the command line ---------------------------------------------------------- */

int cmb_run_child(const cmb_cli *cli)
{
    char err[512];
    cmb_case_spec *cs = calloc(1, sizeof *cs);
    cmb_param_set *sets = NULL;
    size_t n_sets = 0;
    int rc = 2;
    if (!cs)
        return 2;
    cs->scenario = cli->scenarios ? cmb_scenario_find(cli->scenarios) : NULL;
    if (!cs->scenario) {
        fprintf(stderr, "cumembench: --child needs exactly one known --scenario\n");
        goto out;
    }
    if (!cli->allocators || cmb_alloc_spec_parse(cli->allocators, &cs->alloc, err, sizeof err)) {
        fprintf(stderr, "cumembench: --child needs one valid --allocator%s%s\n", cli->allocators ? ": " : "",
                cli->allocators ? err : "");
        goto out;
    }
    if (cmb_params_expand(cs->scenario, cli->preset, cli->overrides, cli->n_overrides, &sets, &n_sets, err,
                          sizeof err) ||
        n_sets != 1) {
        fprintf(stderr, "cumembench: --child needs one value per parameter%s%s\n", n_sets ? "" : ": ",
                n_sets ? "" : err);
        goto out;
    }
    cs->params = sets[0];
    cs->mode = cli->mode == CMB_CHOOSE_GPU ? CMB_MODE_GPU : CMB_MODE_SIM;
    cs->seed = cli->seed;
    cs->device = cli->device;
    cs->capacity = cs->mode == CMB_MODE_SIM ? (cli->capacity ? cli->capacity : CMB_DEFAULT_SIM_CAPACITY)
                                            : cli->capacity;
    cs->repetitions = cli->repetitions;
    cs->fault = cli->fault;
    if (cli->record_trace)
        snprintf(cs->record_trace, sizeof cs->record_trace, "%s", cli->record_trace);
    cs->timeline_dir = cli->timeline_dir;
    cs->timeline_points = cli->timeline_points;
    if (cmb_case_spec_make_name(cs, err, sizeof err)) {
        fprintf(stderr, "cumembench: %s\n", err);
        goto out;
    }
    rc = cmb_case_run_child(cs, cli->result_fd >= 0 ? cli->result_fd : 1);
out:
    free(sets);
    free(cs);
    return rc;
}
