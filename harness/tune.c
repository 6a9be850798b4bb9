/* tune.c - `cumembench tune INPUT`: the arguments, the order of the search
 * and the exit status (0 a recommendation, 1 nothing fits the budget, 2 bad
 * input). docs/tune.md says what it does; tune.h maps the files. */
#include "tune.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "../common/cmb_units.h"

/* --- the arguments ------------------------------------------------------------------------------------ */

typedef struct tune_args {
    const char *input;
    uint64_t budget;
    cmb_tune_for fw;
    cmb_tune_objective obj;
    int json;
    uint64_t passes;
    const char *costs;
    const char *recorded; /* the setting the trace was recorded under, when its header does not say */
    const char *out;      /* --out DIR: DIR/tune.json as well, for the report */
    char **verify; /* the command after --verify -- */
    int n_verify;
} tune_args;

static const char *const fw_names[] = {"torch", "cupy", "rmm", "any"};
static const char *const obj_names[] = {"memory", "time", "balanced"};

static int pick(const char *v, const char *const *names, int n, int *out)
{
    for (int i = 0; v && i < n; i++)
        if (!strcmp(v, names[i]))
            return *out = i, 0;
    return -1;
}

static int bad(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "cumembench tune: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (usage: cumembench tune INPUT [--budget SIZE] [--for torch|cupy|rmm|any] "
                    "[--objective memory|time|balanced] [--json] [--passes N] [--recorded SPEC] [--costs FILE] "
                    "[--out DIR] [--verify -- CMD ...])\n");
    return -1;
}

/* The options (--json a flag, the others with a value), each given once at most. */
static const char *const opt_names[] = {"--budget", "--for",   "--objective", "--json",
                                        "--passes", "--costs", "--recorded",  "--out"};
#define N_OPTS (int)(sizeof opt_names / sizeof opt_names[0])

/* --budget: a size (cmb_parse_size) too large for 64 bits: a well-formed
 * number and unit whose product overflows. */
static int budget_too_large(const char *v)
{
    size_t digits = strspn(v, "0123456789.");
    char *end, unit[16];
    uint64_t mult;
    if (!digits || strchr(v + digits, '.') || strlen(v + digits) + 2 > sizeof unit)
        return 0;
    snprintf(unit, sizeof unit, "1%s", v + digits);
    if (cmb_parse_size(unit, &mult)) /* not a unit: the other message */
        return 0;
    errno = 0;
    long double n = strtold(v, &end);
    return end == v + digits && (errno == ERANGE || n * (long double)mult >= 18446744073709551616.0L);
}

/* One option with its value; 1 when it took the value, 0 a flag, -1 bad. */
static int parse_opt(tune_args *a, unsigned *given, const char *opt, const char *v)
{
    int k, o = 0;
    while (o < N_OPTS && strcmp(opt, opt_names[o]))
        o++;
    if (o == N_OPTS)
        return bad("unknown option %s%s", opt, "");
    if (*given & (1u << o))
        return bad("%s is given twice: give it once%s", opt, "");
    *given |= 1u << o;
    if (!strcmp(opt, "--json"))
        return a->json = 1, 0;
    if (!v)
        return bad("%s needs a value%s", opt, "");
    if (!strcmp(opt, "--budget")) {
        if (budget_too_large(v))
            return bad("--budget %s: too large (at most 16777215TiB)%s", v, "");
        if (cmb_parse_size(v, &a->budget))
            return bad("--budget %s: not a whole number of bytes with a unit, such as 16GiB or 2355MiB%s", v, "");
        if (!a->budget)
            return bad("--budget %s: must be above 0 (the GPU memory to fit, such as 16GiB)%s", v, "");
    } else if (!strcmp(opt, "--for")) {
        if (pick(v, fw_names, 4, &k))
            return bad("--for %s: expected torch, cupy, rmm or any%s", v, "");
        a->fw = (cmb_tune_for)k;
    } else if (!strcmp(opt, "--objective")) {
        if (pick(v, obj_names, 3, &k))
            return bad("--objective %s: expected memory, time or balanced%s", v, "");
        a->obj = (cmb_tune_objective)k;
    } else if (!strcmp(opt, "--passes")) {
        if (cmb_parse_u64(v, &a->passes) || a->passes < 1 || a->passes > 1000)
            return bad("--passes %s: expected 1 to 1000%s", v, "");
    } else if (!strcmp(opt, "--costs")) {
        a->costs = v;
    } else if (!strcmp(opt, "--recorded")) {
        a->recorded = v;
    } else { /* --out */
        if (!*v)
            return bad("--out needs a directory%s%s", "", "");
        a->out = v;
    }
    return 1;
}

static int parse_args(int argc, char **argv, tune_args *a)
{
    memset(a, 0, sizeof *a);
    a->fw = CMB_TUNE_TORCH;
    a->obj = CMB_TUNE_BALANCED;
    a->passes = 1;
    unsigned given = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--verify")) {
            if (i + 2 >= argc || strcmp(argv[i + 1], "--"))
                return bad("--verify needs -- CMD ...%s%s", "", "");
            a->verify = argv + i + 2;
            a->n_verify = argc - i - 2;
            break;
        }
        if (argv[i][0] != '-' || !argv[i][1]) {
            if (a->input)
                return bad("one INPUT only (%s and %s)", a->input, argv[i]);
            a->input = argv[i];
            continue;
        }
        int took = parse_opt(a, &given, argv[i], i + 1 < argc ? argv[i + 1] : NULL);
        if (took < 0)
            return -1;
        i += took;
    }
    if (!a->input)
        return bad("no INPUT (a trace, an RMM log or a PyTorch snapshot)%s%s", "", "");
    return 0;
}

/* --- progress ----------------------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void progress(const char *stage, int done, int total, const cmb_tune_ctx *x, double t0, int last)
{
    static double shown;
    double t = now_s();
    if (!last && t - shown < 0.5)
        return;
    shown = t;
    int tty = isatty(2);
    fprintf(stderr, "%stune: %s: %d/%d candidates, %llu replays, %.1f s%s", tty ? "\r" : "", stage, done, total,
            (unsigned long long)x->trials, t - t0, tty && !last ? "" : "\n");
}

/* --- the search ---------------------------------------------------------------------------------------- */

struct stage_progress {
    const char *stage;
    int n;
    cmb_tune_ctx *x;
    double t0;
};

static void fit_progress(void *arg, int done, uint64_t replays)
{
    struct stage_progress *sp = arg;
    cmb_tune_ctx shown = *sp->x;
    shown.trials += replays;
    progress(sp->stage, sp->n + done, 2 * sp->n, &shown, sp->t0, 0);
}

static const cmb_tune_set *time_set;

static int by_time(const void *a, const void *b)
{
    double x = time_set->c[*(const int *)a].time_s, y = time_set->c[*(const int *)b].time_s;
    x = isnan(x) ? 0 : x;
    y = isnan(y) ? 0 : y;
    return (x > y) - (x < y);
}

/* Evaluates candidates [from, s->n), then searches their smallest GPU fastest first. */
static void search_from(cmb_tune_ctx *x, cmb_tune_set *s, int from, const char *stage, double t0)
{
    int n = s->n - from, order[CMB_TUNE_MAX_CANDIDATES];
    for (int i = from; i < s->n; i++) {
        cmb_tune_evaluate(x, &s->c[i]);
        progress(stage, i - from + 1, n * 2, x, t0, 0);
    }
    for (int i = 0; i < n; i++)
        order[i] = from + i;
    time_set = s;
    qsort(order, (size_t)n, sizeof *order, by_time);
    struct stage_progress sp = {stage, n, x, t0};
    x->trials += cmb_tune_fit_all(x, s, order, n, fit_progress, &sp);
    progress(stage, 2 * n, 2 * n, x, t0, 1);
}

/* -1 when the recorded setting cannot be replayed (bad input: nothing else ran). */
static int search(cmb_tune_ctx *x, cmb_tune_set *s, cmb_tune_for fw, int *front, int *n_front, double t0)
{
    cmb_tune_space_start(s, x->t, fw);
    cmb_tune_evaluate(x, &s->c[0]); /* the recorded setting: searched in full, the savings are against it */
    if (!s->c[0].failed)
        cmb_tune_fit(x, &s->c[0], 0);
    if (s->c[0].failed)
        return -1;
    search_from(x, s, 1, "one knob at a time", t0);
    int from = s->n;
    cmb_tune_space_combine(s, x->t, fw);
    search_from(x, s, from, "combinations", t0);
    *n_front = cmb_tune_front(s, front, CMB_TUNE_MAX_CANDIDATES);
    from = s->n;
    cmb_tune_space_refine(s, front, *n_front);
    search_from(x, s, from, "around the front", t0);
    *n_front = cmb_tune_front(s, front, CMB_TUNE_MAX_CANDIDATES);
    for (int j = 0; j < *n_front; j++)
        cmb_tune_islands(x, &s->c[front[j]]);
    return 0;
}

/* --- the result for the report ------------------------------------------------------------------------ */

#define TUNE_FILE "tune.json"

/* --out DIR: a directory, or one that can be made in an existing one, without
 * a tune.json already (a result is never overwritten); checked before
 * anything runs, made only when there is a result to write. */
static int out_dir_ok(const char *dir)
{
    char path[PATH_MAX], parent[PATH_MAX];
    struct stat st;
    const char *why = NULL;
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash == parent)
        slash[1] = '\0'; /* "/x": its parent is "/" */
    else if (slash)
        *slash = '\0';
    if (!stat(dir, &st))
        why = S_ISDIR(st.st_mode) ? NULL : "not a directory";
    else if (access(slash ? parent : ".", W_OK | X_OK))
        why = "neither a directory nor one that can be made here";
    if (why) {
        fprintf(stderr, "cumembench tune: --out %s: %s\n", dir, why);
        return -1;
    }
    if (snprintf(path, sizeof path, "%s/%s", dir, TUNE_FILE) >= (int)sizeof path || !access(path, F_OK)) {
        fprintf(stderr, "cumembench tune: --out %s: %s exists (a tune result is kept): give another directory\n",
                dir, path);
        return -1;
    }
    return 0;
}

/* DIR/tune.json, whole or not at all (written aside, then renamed). */
static int write_out(const char *dir, const cmb_tune_report *r)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/%s", dir, TUNE_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (mkdir(dir, 0777) && errno != EEXIST) {
        fprintf(stderr, "cumembench tune: --out %s: %s\n", dir, strerror(errno));
        return 2;
    }
    FILE *f = fopen(tmp, "w");
    int bad_write = !f || cmb_tune_print_json(f, r);
    if (f)
        bad_write |= fclose(f) != 0;
    if (bad_write || rename(tmp, path)) {
        fprintf(stderr, "cumembench tune: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return 2;
    }
    fprintf(stderr, "cumembench tune: wrote %s (make report RUNS=%s shows the front)\n", path, dir);
    return 0;
}

/* --- the command ---------------------------------------------------------------------------------------- */

static int load_costs(const tune_args *a, cmb_costs *costs, char *path, size_t len)
{
    char err[700];
    const char *env = getenv(CMB_COSTS_ENV);
    if (a->costs)
        snprintf(path, len, "%s", a->costs);
    else if (env && *env)
        snprintf(path, len, "%s", env);
    else if (cmb_costs_default_path(getenv(CMB_COSTS_GPU_ENV), path, len))
        return 0; /* none: memory alone */
    if (cmb_costs_load(path, costs, err, sizeof err)) {
        fprintf(stderr, "cumembench tune: %s\n", err);
        return -1;
    }
    return 1;
}

static int gpu_present(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* The recommendation on a GPU of the budget, and the recorded setting on
 * the recommendation's GPU (where it fails: what it wasted memory on). */
static void explain(cmb_tune_ctx *x, cmb_tune_report *r)
{
    char err[200];
    if (r->recommended < 0)
        return;
    const cmb_tune_cand *rec = &r->s->c[r->recommended];
    uint64_t gpu = r->budget ? r->budget : rec->min_capacity;
    cmb_tune_replay again;
    cmb_tune_replay_at(x, rec, gpu, x->passes, 1, &r->rec_at_budget, err, sizeof err);
    if (rec->at_budget && !isnan(rec->budget_time_s)) /* priced there already: the same number everywhere */
        r->rec_at_budget.time_s = rec->budget_time_s * (double)x->passes;
    for (int i = 1; rec->pluggable && !rec->at_budget && i < 3; i++) /* the least of three, as cmb_tune_evaluate */
        if (!cmb_tune_replay_at(x, rec, gpu, x->passes, 1, &again, err, sizeof err) &&
            again.time_s < r->rec_at_budget.time_s)
            r->rec_at_budget.time_s = again.time_s;
    cmb_tune_replay_at(x, &r->s->c[0], rec->min_capacity, 1, 0, &r->recorded_at_fit, err, sizeof err);
}

/* The candidates that fit the budget priced on a GPU of the budget (a
 * garbage-collection threshold, a pool's limit, a release under pressure act
 * only there), and the recommendation among them by those times. */
static int recommend_at_budget(cmb_tune_ctx *x, cmb_tune_set *set, const tune_args *a, cmb_tune_report *r)
{
    static int budget_front[CMB_TUNE_MAX_CANDIDATES];
    if (!a->json)
        fprintf(stderr, "tune: pricing the candidates that fit %.3f GiB on a GPU of that size\n",
                (double)a->budget / (double)(1ull << 30));
    cmb_tune_price_at_budget(x, set, a->budget);
    int n, k = 0, rec = cmb_tune_recommend_at_budget(set, a->budget, a->obj, 0, budget_front, &n);
    for (int j = 0; j < n; j++) /* its members that fit: the others are the unlimited front's */
        if (set->c[budget_front[j]].min_capacity <= a->budget)
            budget_front[k++] = budget_front[j];
    r->budget_front = budget_front;
    r->n_budget_front = k;
    return rec;
}

static int run(const tune_args *a, cmb_tune_trace *t, const cmb_costs *costs, const char *costs_path)
{
    static cmb_tune_set set;
    static int front[CMB_TUNE_MAX_CANDIDATES];
    cmb_tune_ctx x = {.t = t, .costs = costs, .passes = a->passes,
                      .ptr = calloc(t->trace.slots ? t->trace.slots : 1, sizeof(void *))};
    cmb_tune_report r = {0};
    double t0 = now_s();
    if (!x.ptr)
        return fprintf(stderr, "cumembench tune: host out of memory\n"), 2;
    set.n = 0;
    if (search(&x, &set, a->fw, front, &r.n_front, t0)) {
        fprintf(stderr, "cumembench tune: the recorded setting %s cannot be replayed: %s\n", set.c[0].spec,
                set.c[0].why);
        free(x.ptr);
        return 2;
    }
    int n_front = r.n_front;
    r = (cmb_tune_report){.t = t, .s = &set, .front = front, .n_front = n_front, .recorded = 0, .recommended = -1,
                          .budget = a->budget, .obj = a->obj, .costs_path = costs ? costs_path : NULL};
    if (a->budget && costs) /* chosen by the time it takes where it will run */
        r.recommended = recommend_at_budget(&x, &set, a, &r);
    else
        r.recommended = cmb_tune_recommend(&set, front, r.n_front, a->budget, a->obj, 0);
    explain(&x, &r);
    r.seconds = now_s() - t0;
    r.trials = x.trials;
    r.passes = a->passes;
    int rc = a->json ? cmb_tune_print_json(stdout, &r) : (cmb_tune_print(stdout, &r), 0);
    if (!rc && a->out)
        rc = write_out(a->out, &r);
    if (!rc && a->n_verify)
        rc = cmb_tune_verify(&r, a->verify, a->n_verify, a->json);
    free(x.ptr);
    return rc ? rc : r.recommended < 0;
}

int cmb_tune_main(int argc, char **argv)
{
    tune_args a;
    static cmb_costs costs;
    char costs_path[1024] = "", err[1024];
    cmb_tune_trace t;
    if (parse_args(argc, argv, &a))
        return 2;
    if (a.n_verify && !gpu_present()) {
        fprintf(stderr, "cumembench tune: --verify runs the program on a GPU, and none is usable here\n");
        return 2;
    }
    if (a.out && out_dir_ok(a.out))
        return 2;
    int have = load_costs(&a, &costs, costs_path, sizeof costs_path);
    if (have < 0)
        return 2;
    if (cmb_tune_load(a.input, a.fw, &t, err, sizeof err)) {
        fprintf(stderr, "cumembench tune: %s\n", err);
        return 2;
    }
    if (a.recorded) {
        snprintf(t.recorded, sizeof t.recorded, "%s", a.recorded);
        snprintf(t.recorded_from, sizeof t.recorded_from, "--recorded");
    }
    int rc = run(&a, &t, have ? &costs : NULL, costs_path);
    cmb_tune_trace_free(&t);
    return rc;
}
