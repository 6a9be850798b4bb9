/* runner.c - the parent process of a run: plan the cases (plan.c), run
 * each in a fresh child process, relay its results to the output files,
 * show progress, and keep going when a case fails, crashes or hangs. And
 * the child's side: the one case its record describes.
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

#include "../common/cmb_units.h"
#include "answer.h"
#include "caseline.h"
#include "case.h"
#include "costs.h"
#include "../common/cmb_clock.h"
#include "devcheck.h"
#include "env.h"
#include "output.h"
#include "plan.h"
#include "progress.h"
#include "resume.h"
#include "schema.h"
#include "spawn.h"
#include "wire.h"

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

static void progress_line(const cmb_scenario *s, const cmb_bench_run *runs, size_t n, cmb_mode mode, char *out,
                          size_t len)
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
    cmb_answer_items(s, r, t, mode == CMB_MODE_SIM ? CMB_ANSWER_SIM_TIME : NULL, out + used,
                     len - (size_t)used); /* the scenario's answer first */
    used = (int)strlen(out);
    if (failed)
        snprintf(out + used, len - (size_t)used, "  (%zu of %zu repetitions failed)", failed, reps);
}

/* --- one case in a child ------------------------------------------------------------------------ */

typedef struct run_totals {
    size_t ok, oom, failed, skipped;
} run_totals;

/* What the CSV rows of a case say about it (harness/schema.def). */
typedef struct row_text {
    char params[1024];
    char options[1024];
} row_text;

static void case_row(const cmb_planned_case *pc, cmb_case_row *row, row_text *t)
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

/* Where a case is run and recorded. */
typedef struct run_ctx {
    char self[PATH_MAX];
    double timeout_s;
    cmb_output *out;
    cmb_devcheck *dc;
    run_totals tot;
    cmb_progress_view view; /* its out is NULL under --quiet */
    int verbose;            /* --verbose: full names and whole results */
    double case_s;          /* the last case: its process's wall time */
    char note[320];         /* the last case: the device check's warning, or "" */
} run_ctx;

/* A child's results, and its progress on the console as it comes. */
typedef struct case_watch {
    cmb_wire_reader *reader;
    cmb_progress_view *view;
} case_watch;

static void feed_results(void *ctx, const char *data, size_t len)
{
    case_watch *w = ctx;
    if (!w->reader->error[0])
        cmb_wire_feed(w->reader, data, len);
    cmb_progress_show(w->view, &w->reader->progress);
}

/* Runs the case's child: `self --child --result-fd 3 --case RECORD`. */
static int spawn_case(run_ctx *rc, const cmb_planned_case *pc, cmb_wire_reader *reader, cmb_child_result *res,
                      double *seconds)
{
    char err[320], fd[] = "3";
    char *record = cmb_wire_case_encode(&pc->spec, err, sizeof err);
    if (!record) {
        fprintf(rc->out->log, "%s\n", err);
        return -1;
    }
    char *argv[] = {rc->self, CMB_ARG_CHILD, CMB_ARG_RESULT_FD, fd, CMB_ARG_CASE, record, NULL};
    fprintf(rc->out->log, "=== %s\n", pc->spec.name);
    fflush(rc->out->log);
    cmb_devcheck_before(rc->dc);
    double t0 = cmb_now_s();
    case_watch watch = {reader, &rc->view};
    int failed = cmb_spawn_run(argv, rc->timeout_s, feed_results, &watch, NULL, NULL, rc->out->log, res);
    cmb_progress_case_end(&rc->view);
    *seconds = cmb_now_s() - t0;
    cmb_devcheck_after(rc->dc);
    fprintf(rc->out->log, "--- %s: %.2f s in its process\n", pc->spec.name, *seconds);
    fflush(rc->out->log);
    free(record);
    return failed;
}

/* Why a child failed: its fate, the reader's complaint, the last line it
 * printed, and what the device check saw. */
static void failure_message(const cmb_child_result *res, const cmb_wire_reader *reader, cmb_devcheck *dc,
                            char *msg, size_t len)
{
    char why[256], note[320];
    const char *tail = res->tail, *last = tail;
    size_t tl = strlen(tail);
    cmb_child_result_describe(res, why, sizeof why);
    while (tl && (tail[tl - 1] == '\n' || tail[tl - 1] == ' '))
        tl--;
    for (size_t i = 0; i + 1 < tl; i++)
        if (tail[i] == '\n')
            last = tail + i + 1;
    snprintf(msg, len, "case process %s%s%s", why, reader->error[0] ? "; " : "", reader->error);
    if (tl && tail + tl > last)
        snprintf(msg + strlen(msg), len - strlen(msg), ": %.*s", (int)(tail + tl - last), last);
    if (cmb_devcheck_note(dc, note, sizeof note))
        snprintf(msg + strlen(msg), len - strlen(msg), "; %s", note);
}

/* A child that ran: its runs recorded, the case counted as it went. */
static int record_runs(run_ctx *rc, const cmb_planned_case *pc, const cmb_case_row *row,
                       const cmb_wire_reader *reader, double case_s, char *line, size_t line_len, char *err,
                       size_t errlen)
{
    int any_error = 0;
    int st = cmb_output_case(rc->out, row, reader->runs, reader->n, err, errlen);
    progress_line(pc->spec.scenario, reader->runs, reader->n, pc->spec.mode, line, line_len);
    if (!cmb_devcheck_note(rc->dc, rc->note, sizeof rc->note))
        rc->note[0] = '\0';
    for (size_t i = 0; i < reader->n; i++)
        any_error |= reader->runs[i].error_occurred;
    if (any_error)
        rc->tot.failed++;
    else if (oom_count(reader->runs, reader->n) > 0)
        rc->tot.oom++; /* ran; its workload did not fit: an answer, not a failure */
    else
        rc->tot.ok++;
    return st;
}

static int run_case(run_ctx *rc, const cmb_planned_case *pc, char *line, size_t line_len, char *err, size_t errlen)
{
    cmb_wire_reader *reader = malloc(sizeof *reader);
    cmb_child_result res;
    row_text text;
    cmb_case_row row;
    double case_s = 0;
    int st = 0;
    if (!reader) {
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    case_row(pc, &row, &text);
    cmb_wire_reader_init(reader);
    int spawn_failed = spawn_case(rc, pc, reader, &res, &case_s);
    rc->case_s = case_s;
    rc->note[0] = '\0';
    if (!spawn_failed && res.interrupted) {
        snprintf(line, line_len, "interrupted (not recorded)");
        goto out; /* not finished: not written, so --resume runs it again */
    }
    cmb_devcheck_annotate(rc->dc, reader->runs, reader->n);
    if (spawn_failed) {
        snprintf(line, line_len, "FAILED: could not start the case process");
        st = cmb_output_case_status(rc->out, &row, CMB_STATUS_FAILED, "could not start the case process", err,
                                    errlen);
        rc->tot.failed++;
    } else if (!res.ok || reader->error[0] || reader->n == 0) {
        char msg[1024];
        failure_message(&res, reader, rc->dc, msg, sizeof msg); /* the finished repetitions are kept */
        st = cmb_output_case_failed(rc->out, &row, reader->runs, reader->n, msg, err, errlen);
        snprintf(line, line_len, "FAILED: %s", msg);
        rc->tot.failed++;
    } else {
        st = record_runs(rc, pc, &row, reader, case_s, line, line_len, err, errlen);
    }
out:
    cmb_wire_reader_free(reader);
    free(reader);
    return st;
}

/* --- the run --------------------------------------------------------------------------------------- */

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

/* gpu or sim, as asked, or as the machine allows. -1: --mode gpu without one. */
static int choose_mode(const cmb_cli *cli, cmb_env *env, cmb_mode *mode)
{
    if (cli->mode == CMB_CHOOSE_GPU) {
        if (env->gpu_count == 0) {
            fprintf(stderr, "cumembench: --mode gpu, but no CUDA GPU is usable: %s\n", env->no_gpu_reason);
            return -1;
        }
        *mode = CMB_MODE_GPU;
    } else if (cli->mode == CMB_CHOOSE_SIM) {
        *mode = CMB_MODE_SIM;
        snprintf(env->gpu_slug, sizeof env->gpu_slug, "sim");
    } else if (env->gpu_count > 0) {
        *mode = CMB_MODE_GPU;
    } else {
        *mode = CMB_MODE_SIM;
        fprintf(stderr,
                "cumembench: no CUDA GPU available (%s); running in sim mode: exact peaks and fragmentation over a "
                "simulated device, host-side timings only. GPU timings need a GPU.\n",
                env->no_gpu_reason);
    }
    return 0;
}

/* The cases' capacity, and the device the scenarios' checks assume: the
 * sim device, or the GPU's memory under any --capacity cap. */
static void plan_setting(const cmb_cli *cli, cmb_env *env, cmb_mode mode, const char *dir, cmb_plan_setting *set)
{
    set->mode = mode;
    set->capacity = cmb_plan_capacity(cli, mode);
    set->check_capacity = set->capacity;
    set->out_dir = dir;
    if (mode == CMB_MODE_GPU && (!cli->capacity || cli->capacity >= env->gpu_memory_bytes))
        set->check_capacity = env->gpu_memory_bytes;
    if (mode == CMB_MODE_SIM) {
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)set->capacity);
        cmb_env_set(env, "sim_capacity_bytes", buf);
    }
}

/* A resumed run's finished cases are all cases of its plan. */
static int check_plan(const cmb_plan *p, const cmb_resume *rs, const char *dir, char *err, size_t errlen)
{
    const char **names = malloc((p->n + 1) * sizeof *names);
    if (!names) {
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    for (size_t i = 0; i < p->n; i++)
        names[i] = p->cases[i].spec.name;
    int rc = cmb_resume_check_plan(rs, names, p->n, dir, err, errlen);
    free(names);
    return rc;
}

static size_t cases_to_run(const cmb_plan *p, const cmb_resume *rs)
{
    size_t n = p->n - p->n_skipped;
    for (size_t i = 0; i < p->n; i++)
        n -= !p->cases[i].skip && cmb_resume_is_done(rs, p->cases[i].spec.name);
    return n;
}

static void announce(const cmb_cli *cli, const cmb_plan *p, const cmb_env *env, cmb_mode mode, size_t to_run,
                     const char *dir)
{
    if (cli->quiet)
        return;
    fprintf(stderr, "cumembench: mode %s%s, %zu cases to run (%zu skipped), %d repetitions, seed %llu\n",
            mode == CMB_MODE_GPU ? "gpu on " : "sim", mode == CMB_MODE_GPU ? cmb_env_get(env, "gpu_name") : "",
            to_run, p->n_skipped, cli->repetitions, (unsigned long long)cli->seed);
    fprintf(stderr, "cumembench: writing %s/results.json and results.csv\n", dir);
    if (mode == CMB_MODE_SIM && cli->device_given)
        fprintf(stderr, "cumembench: sim mode: --device %d selects no GPU; it only numbers the run\n", cli->device);
    cmb_plan_print_skipped(p, stderr);
}

/* The cases this run will start, in order, for the time left (progress.h):
 * grouped by scenario, none finished yet. NULL when there is no memory
 * (the time left is then not shown). */
static cmb_eta_case *eta_cases(const cmb_plan *p, const cmb_resume *rs, size_t to_run)
{
    cmb_eta_case *e = calloc(to_run ? to_run : 1, sizeof *e);
    size_t k = 0;
    for (size_t i = 0; e && i < p->n && k < to_run; i++) {
        if (p->cases[i].skip || cmb_resume_is_done(rs, p->cases[i].spec.name))
            continue;
        e[k].group = p->cases[i].spec.scenario;
        e[k++].seconds = -1;
    }
    return e;
}

static int record_skipped(run_ctx *rc, const cmb_planned_case *pc, char *err, size_t errlen)
{
    row_text text;
    cmb_case_row row;
    case_row(pc, &row, &text);
    if (cmb_output_case_status(rc->out, &row, CMB_STATUS_SKIPPED, pc->reason, err, errlen))
        return -1;
    rc->tot.skipped++;
    return 0;
}

/* The line of a case that ended: its name (short, or full with
 * --verbose) was printed when it started; here its result, fitted to the
 * line (caseline.h), and the device check's warning under it. */
static void print_case_line(const run_ctx *rc, const char *prefix, const char *line, double left)
{
    char tail[96], fitted[CMB_CASELINE_WIDTH * 16];
    snprintf(tail, sizeof tail, "(%.1f s, ~%.0f s left)", rc->case_s, left);
    size_t taken = strlen(prefix) + 2;
    if (rc->verbose)
        fprintf(stderr, " %s  %s\n", line, tail);
    else {
        cmb_caseline_fit(line, tail, CMB_CASELINE_WIDTH > taken ? CMB_CASELINE_WIDTH - taken : 0, fitted,
                         sizeof fitted);
        fprintf(stderr, " %s\n", fitted);
    }
    if (rc->note[0] && rc->verbose)
        fprintf(stderr, "%*sWARNING: %s\n", CMB_CASELINE_INDENT, "", rc->note);
    else if (rc->note[0]) {
        cmb_caseline_elide(rc->note, CMB_CASELINE_WIDTH - CMB_CASELINE_INDENT - 9, fitted, sizeof fitted);
        fprintf(stderr, "%*sWARNING: %s\n", CMB_CASELINE_INDENT, "", fitted);
    }
}

/* "[k/N] name" as the case line starts (the full name with --verbose), and
 * the progress line's label (the short name). */
static void case_names(const run_ctx *rc, const cmb_caseline_plan *cp, const cmb_planned_case *pc, int width,
                       size_t done, size_t to_run, char *prefix, size_t plen, char *label, size_t llen)
{
    char name[CMB_CASELINE_NAME_MAX * 4 + 1];
    cmb_caseline_name(cp, &pc->spec, name, sizeof name);
    snprintf(prefix, plen, "[%*zu/%zu] %s", width, done, to_run, rc->verbose ? pc->spec.name : name);
    snprintf(label, llen, "[%*zu/%zu] %s", width, done, to_run, name);
}

/* Once, before the first case line: where the full names are. */
static void say_short_names(const run_ctx *rc, const cmb_caseline_plan *cp, const cmb_plan *p)
{
    char name[CMB_CASELINE_NAME_MAX * 4 + 1];
    for (size_t i = 0; rc->view.out && !rc->verbose && i < p->n; i++)
        if (!p->cases[i].skip && cmb_caseline_name(cp, &p->cases[i].spec, name, sizeof name)) {
            fprintf(stderr, "cumembench: case lines name the parameters that vary; the full names are in "
                            "results.csv (and with --verbose)\n");
            return;
        }
}

/* Runs (or records as skipped) every case the earlier part of the run did
 * not finish. 0, or -1 when the output cannot be written. */
static int run_cases(run_ctx *rc, const cmb_plan *p, const cmb_resume *rs, size_t to_run, char *err,
                     size_t errlen)
{
    size_t done = 0;
    int width = snprintf(NULL, 0, "%zu", to_run), st = 0;
    cmb_eta_case *eta = eta_cases(p, rs, to_run);
    cmb_caseline_plan *cp = calloc(1, sizeof *cp);
    if (!cp) {
        free(eta);
        return snprintf(err, errlen, "host out of memory"), -1;
    }
    cmb_caseline_scan(p, cp);
    say_short_names(rc, cp, p);
    rc->view.eta = eta;
    rc->view.eta_n = eta ? to_run : 0;
    for (size_t i = 0; i < p->n && !cmb_interrupted && !st; i++) {
        const cmb_planned_case *pc = &p->cases[i];
        char line[1024], prefix[CMB_BENCH_NAME_MAX + 48], label[160];
        if (cmb_resume_is_done(rs, pc->spec.name))
            continue; /* finished before the run was interrupted */
        if (pc->skip) {
            st = record_skipped(rc, pc, err, errlen);
            continue;
        }
        done++;
        case_names(rc, cp, pc, width, done, to_run, prefix, sizeof prefix, label, sizeof label);
        cmb_progress_case_start(&rc->view, prefix, label, done - 1);
        double case_t0 = cmb_now_s();
        st = run_case(rc, pc, line, sizeof line, err, errlen);
        if (eta && done <= to_run)
            eta[done - 1].seconds = cmb_now_s() - case_t0;
        if (!st && rc->view.out)
            print_case_line(rc, prefix, line, eta && done < to_run ? cmb_eta_left(eta, to_run, to_run, 0, -1) : 0);
    }
    rc->view.eta = NULL;
    free(eta);
    free(cp);
    return st;
}

/* The totals, then the answer table (or why nothing ran: then 1). */
static int summary(const run_ctx *rc, const cmb_cli *cli, cmb_mode mode, double seconds, const char *dir)
{
    char oom[48] = "";
    const run_totals *tot = &rc->tot;
    if (tot->oom)
        snprintf(oom, sizeof oom, ", %zu did not fit", tot->oom);
    fprintf(stderr, "cumembench: %zu ok%s, %zu failed, %zu skipped in %.1f s; results in %s\n", tot->ok, oom,
            tot->failed, tot->skipped, seconds, dir);
    if (mode == CMB_MODE_SIM && !cli->quiet)
        fprintf(stderr, "cumembench: sim mode: times are host-side bookkeeping only; GPU timings need a GPU\n");
    if (rc->dc->n_dirty || rc->dc->n_unreturned)
        fprintf(stderr, "cumembench: device check: %zu cases did not return device memory, %zu ran on a dirty "
                        "device (counters device_unreturned_bytes, device_dirty_bytes)\n", rc->dc->n_unreturned,
                rc->dc->n_dirty);
    if (!cli->quiet || !(tot->ok + tot->oom + tot->failed)) /* the answers, or why nothing ran */
        return cmb_answer_table(dir, cli->resume != NULL, stderr) > 0;
    return 0;
}

/* The cost file the cases price their allocator time with (as they find
 * it: costs.c), in the context, so that the report names it. */
static void costs_context(cmb_env *env)
{
    char path[1024];
    const char *given = getenv(CMB_COSTS_ENV);
    if (given && *given)
        cmb_env_set(env, "costs_file", given);
    else if (!cmb_costs_default_path(getenv(CMB_COSTS_GPU_ENV), path, sizeof path))
        cmb_env_set(env, "costs_file", path);
    else
        cmb_env_set(env, "costs_file", "none");
}

/* --record-trace never replaces a file, as --out never writes into a run
 * directory that holds results; a resumed run records its case again. */
static int record_trace_exists(const cmb_cli *cli)
{
    if (!cli->record_trace || cli->resume || access(cli->record_trace, F_OK))
        return 0;
    fprintf(stderr, "cumembench: --record-trace: %s already exists: remove it or record to another file\n",
            cli->record_trace);
    return 1;
}

/* The environment, the mode and the plan: 0, or 2 (bad input). */
static int prepare(const cmb_cli *cli, run_ctx *rc, cmb_env *env, cmb_mode *mode, cmb_plan *p, char *dir,
                   size_t dirlen)
{
    char err[512], seed[32];
    cmb_plan_setting set;
    if (record_trace_exists(cli))
        return 2;
    cmb_env_collect(env, rc->self, cli->device, 120);
    if (choose_mode(cli, env, mode))
        return 2;
    if (cli->out && cmb_results_check_dir(cli->out, err, sizeof err)) {
        fprintf(stderr, "cumembench: --out: %s\n", err);
        return 2;
    }
    if (cli->out)
        snprintf(dir, dirlen, "%s", cli->out);
    else
        default_out_dir(env, cli, dir, dirlen);
    plan_setting(cli, env, *mode, dir, &set);
    if (cmb_plan_build(cli, &set, p, err, sizeof err)) {
        fprintf(stderr, "cumembench: %s\n", err);
        return cmb_interrupted ? 130 : 2; /* a plug-in's probe was interrupted */
    }
    if (cli->record_trace && p->n - p->n_skipped != 1) {
        fprintf(stderr, "cumembench: --record-trace needs exactly one case to run (%zu selected): choose one "
                        "scenario, one allocator and one value per parameter\n", p->n - p->n_skipped);
        return 2;
    }
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)cli->seed);
    cmb_env_set(env, "seed", seed);
    cmb_env_set(env, "preset", cli->preset == CMB_PRESET_FULL ? "full" : "quick");
    costs_context(env);
    return 0;
}

int cmb_run(const cmb_cli *cli, const char *argv0)
{
    char err[512], dir[768];
    cmb_env env;
    cmb_mode mode;
    cmb_plan p = {0};
    cmb_output out;
    cmb_resume rs = {0};
    cmb_devcheck dc = {0};
    run_ctx rc = {.timeout_s = cli->case_timeout_s, .out = &out, .dc = &dc, .verbose = cli->verbose};
    self_path(rc.self, sizeof rc.self, argv0);
    cmb_spawn_install_signals();
    int status = prepare(cli, &rc, &env, &mode, &p, dir, sizeof dir);
    if (status)
        goto out_free;
    if (!cli->resume && p.n == p.n_skipped) { /* no run directory for a run that runs nothing */
        cmb_plan_print_nothing_runs(&p, stderr);
        status = 1;
        goto out_free;
    }
    status = 2;
    cmb_devcheck_start(&dc, mode == CMB_MODE_GPU, &env, rc.self, cli->device);
    if (cmb_resume_open_output(&out, &rs, cli, dir, &env, mode == CMB_MODE_GPU ? "gpu" : "sim", err, sizeof err)) {
        fprintf(stderr, "cumembench: %s\n", err);
        goto out_free;
    }
    if (cli->resume && check_plan(&p, &rs, dir, err, sizeof err)) {
        fprintf(stderr, "cumembench: %s\n", err);
        cmb_output_close(&out, NULL, 0);
        goto out_free;
    }
    size_t to_run = cases_to_run(&p, &rs);
    announce(cli, &p, &env, mode, to_run, dir);
    double t0 = cmb_now_s();
    cmb_progress_view_init(&rc.view, cli->quiet ? NULL : stderr);
    if (run_cases(&rc, &p, &rs, to_run, err, sizeof err)) {
        fprintf(stderr, "cumembench: %s\n", err);
        cmb_output_close(&out, err, sizeof err);
        status = 1;
        goto out_free;
    }
    status = cmb_interrupted ? 130 : rc.tot.failed || rs.n_failed ? 1 : 0;
    if (cmb_interrupted)
        fprintf(stderr, "\ncumembench: interrupted; %zu finished cases are kept in %s (continue with: cumembench "
                        "--resume %s)\n", rc.tot.ok + rc.tot.oom + rc.tot.failed, dir, dir);
    if (cmb_output_close(&out, err, sizeof err)) {
        fprintf(stderr, "cumembench: %s\n", err);
        status = status ? status : 1;
        goto out_free;
    }
    if (summary(&rc, cli, mode, cmb_now_s() - t0, dir) && !status)
        status = 1;
out_free:
    cmb_devcheck_stop(&dc);
    cmb_resume_free(&rs);
    cmb_plan_free(&p);
    return status;
}

/* --- the child's side ------------------------------------------------------------------------------ */

/* Without a record (a child started by hand, or by a scenario): the one
 * case its options select, planned as the parent would. */
static int plan_one(const cmb_cli *cli, cmb_case_spec *cs, char *err, size_t errlen)
{
    cmb_plan p;
    cmb_mode mode = cli->mode == CMB_CHOOSE_GPU ? CMB_MODE_GPU : CMB_MODE_SIM;
    cmb_plan_setting set = {mode, cmb_plan_capacity(cli, mode), cmb_plan_capacity(cli, mode), NULL};
    if (cmb_plan_build(cli, &set, &p, err, errlen))
        return -1;
    int rc = p.n == 1 ? 0 : -1;
    if (rc)
        snprintf(err, errlen, "--child runs exactly one case; the options select %zu", p.n);
    else
        cmb_case_spec_copy(cs, &p.cases[0].spec);
    cmb_plan_free(&p);
    return rc;
}

int cmb_run_child(const cmb_cli *cli)
{
    char err[512];
    cmb_case_spec *cs = calloc(1, sizeof *cs);
    int rc = 2;
    if (!cs)
        return 2;
    if (cli->case_record ? cmb_wire_case_decode(cli->case_record, cs, err, sizeof err)
                         : plan_one(cli, cs, err, sizeof err)) {
        fprintf(stderr, "cumembench: %s\n", err);
        goto out;
    }
    rc = cmb_case_run_child(cs, cli->result_fd >= 0 ? cli->result_fd : 1);
out:
    free(cs);
    return rc;
}
