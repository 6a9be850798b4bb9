/* cli.c - the command line of cumembench, as one table: each option's
 * name, whether it takes a value, whether it is the user's or internal,
 * whether it may be given beside --resume, and its help. --help, the
 * parsing, the child's command line (runner.c) and --resume's re-parse
 * (resume.c) all read the table. Every malformed option is one clear
 * error. */
#include "cli.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/cmb_size.h"
#include "../common/cmb_suggest.h"
#include "../common/cmb_units.h"
#include "costs.h"
#include "plugin_probe.h"
#include "timeline.h"

/* --- setters ------------------------------------------------------------------------ */

#define FIELD(cli, o, type) ((type *)((char *)(cli) + (o)->offset))

static int set_flag(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    *FIELD(cli, o, int) = 1;
    return 0;
}

/* --explain-oom: CMB_EXPLAIN_OOM=1 in the environment, which the scenarios
 * read and every case's child inherits (docs/explain.md); a resumed run
 * re-parses its saved arguments, so it keeps the setting. */
static int set_explain_oom(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    if (setenv("CMB_EXPLAIN_OOM", "1", 1)) {
        snprintf(err, errlen, "%s: cannot set CMB_EXPLAIN_OOM: %s", o->name, strerror(errno));
        return -1;
    }
    return set_flag(cli, o, v, err, errlen);
}

/* A non-empty string (it stays in argv, which lives as long as the run). */
/* A string (it stays in argv, which lives as long as the run). */
static int set_text(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    if (!*v && (o->flags & CMB_OPT_NONEMPTY)) {
        snprintf(err, errlen, "%s needs %s", o->name, o->what);
        return -1;
    }
    *FIELD(cli, o, const char *) = v;
    return 0;
}

static int parse_int(const cmb_cli_option *o, const char *v, int *out, char *err, size_t errlen)
{
    int64_t x;
    if (cmb_parse_i64(v, &x) || x < (int64_t)o->lo || x > (int64_t)o->hi) {
        snprintf(err, errlen, "%s expects an integer in [%.0f, %.0f], got '%s'", o->name, o->lo, o->hi, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int set_int(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    return parse_int(o, v, FIELD(cli, o, int), err, errlen);
}

static int set_unsigned(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    int x;
    if (parse_int(o, v, &x, err, errlen))
        return -1;
    *FIELD(cli, o, unsigned) = (unsigned)x;
    return 0;
}

static int set_u64(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    int rc = cmb_parse_u64(v, FIELD(cli, o, uint64_t));
    if (rc == CMB_PARSE_TOO_LARGE) {
        snprintf(err, errlen, "%s %s: too large (at most %llu)", o->name, v, (unsigned long long)UINT64_MAX);
        return -1;
    }
    if (rc) {
        snprintf(err, errlen, "%s expects %s, got '%s'", o->name, o->what, v);
        return -1;
    }
    return 0;
}

/* A size of at least o->lo bytes. */
static int set_size(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    uint64_t *out = FIELD(cli, o, uint64_t);
    char why[160];
    if (cmb_parse_size_strict(v, "B", out, why, sizeof why)) { /* "64mb" is refused, never read as MiB */
        snprintf(err, errlen, "%s expects %s, got '%s': %s", o->name, o->what, v, why);
        return -1;
    }
    if ((double)*out < o->lo || (o->hi > 0 && (double)*out > o->hi)) {
        snprintf(err, errlen, "%s expects %s, got '%s'", o->name, o->what, v);
        return -1;
    }
    return 0;
}

/* A directory name: no tab, newline or carriage return (run.log, run.args
 * and the CSV are line-based; every case used to fail with one). */
static int set_dir(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    if (v[strcspn(v, "\t\n\r")]) {
        snprintf(err, errlen, "%s: a tab or newline in the directory name is refused", o->name);
        return -1;
    }
    return set_text(cli, o, v, err, errlen);
}

static int set_seconds(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    double *out = FIELD(cli, o, double);
    if (cmb_parse_double(v, out) || *out <= 0) {
        snprintf(err, errlen, "%s expects a positive number of seconds, got '%s'", o->name, v);
        return -1;
    }
    return 0;
}

/* One of o->choices (the int takes its value). */
static int set_choice(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    size_t n = 0, used;
    for (; o->choices[n].word; n++) {
        if (!strcmp(v, o->choices[n].word)) {
            *FIELD(cli, o, int) = o->choices[n].value;
            return 0;
        }
    }
    used = (size_t)snprintf(err, errlen, "%s expects ", o->name);
    for (size_t i = 0; i < n && used < errlen; i++)
        used += (size_t)snprintf(err + used, errlen - used, "%s%s", o->choices[i].word,
                                 i + 2 < n ? ", " : i + 2 == n ? " or " : "");
    if (used < errlen)
        snprintf(err + used, errlen - used, ", got '%s'", v);
    return -1;
}

#define FAULT_FORM "nth=N,every=K,prob=P (0..1),seed=S"

/* One --fault item's value into f; 0, or -1 with why. A value that makes
 * its fault never fire (nth=0, every=0, prob=0) is refused: the run would
 * look like a fault run and inject nothing. */
static int fault_value(cmb_fault_spec *f, const char *key, const char *val, const char **why)
{
    uint64_t *u = !strcmp(key, "nth") ? &f->fail_nth : !strcmp(key, "every") ? &f->fail_every
                : !strcmp(key, "seed") ? &f->seed : NULL;
    int rc = u ? cmb_parse_u64(val, u) : cmb_parse_double(val, &f->fail_prob);
    *why = rc == CMB_PARSE_TOO_LARGE ? "too large" : NULL;
    if (rc || (!u && (f->fail_prob < 0 || f->fail_prob > 1)))
        return -1;
    if (u != &f->seed && (u ? !*u : f->fail_prob == 0)) {
        *why = "never fires (nth and every count from 1; prob must be above 0)";
        return -1;
    }
    return 0;
}

/* The index of key in keys[] (nth, every, prob, seed), or -1. */
static int fault_key(const char *key)
{
    static const char *const keys[] = {"nth", "every", "prob", "seed"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(key, keys[i]))
            return i;
    return -1;
}

static int set_fault(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    char buf[256];
    int seen[4] = {0};
    cmb_fault_spec *f = FIELD(cli, o, cmb_fault_spec);
    if (strlen(v) >= sizeof buf) { /* cut, every=3000000 read as every=3 */
        snprintf(err, errlen, "--fault: longer than %zu characters", sizeof buf - 1);
        return -1;
    }
    if (!*v || v[0] == ',' || v[strlen(v) - 1] == ',' || strstr(v, ",,")) { /* as --param n=10,,20 */
        snprintf(err, errlen, "--fault: %s '%s'; expected " FAULT_FORM, *v ? "empty item in" : "empty value", v);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        const char *why = NULL;
        int k = eq ? (*eq = '\0', fault_key(kv)) : -1;
        if (k >= 0 && seen[k]++) {
            snprintf(err, errlen, "--fault: %s is given twice in '%s'", kv, v);
            return -1;
        }
        if (k < 0 || fault_value(f, kv, eq + 1, &why)) {
            if (why)
                snprintf(err, errlen, "--fault: %s=%s: %s", kv, eq + 1, why);
            else
                snprintf(err, errlen, "--fault: expected " FAULT_FORM "; got '%s'", v);
            return -1;
        }
    }
    if (!seen[0] && !seen[1] && !seen[2]) {
        snprintf(err, errlen, "--fault: '%s' never fires: give nth=N, every=K or prob=P", v);
        return -1;
    }
    return 0;
}

/* --param NAME=V[,V...]: the name is copied into the cli (argv is not
 * modified), the values stay in argv. */
static int set_param(cmb_cli *cli, const cmb_cli_option *o, const char *v, char *err, size_t errlen)
{
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1]) {
        snprintf(err, errlen, "--param expects NAME=VALUE[,VALUE...], got '%s'", v);
        return -1;
    }
    if (cli->n_overrides == CMB_MAX_OVERRIDES) {
        snprintf(err, errlen, "too many --param options");
        return -1;
    }
    char *name = cli->override_names[cli->n_overrides];
    size_t n = (size_t)(eq - v);
    if (n >= sizeof cli->override_names[0]) {
        snprintf(err, errlen, "--param name too long");
        return -1;
    }
    memcpy(name, v, n);
    name[n] = '\0';
    for (size_t i = 0; i < cli->n_overrides; i++) {
        if (!strcmp(cli->overrides[i].name, name)) {
            snprintf(err, errlen, "--param %s given twice", name);
            return -1;
        }
    }
    cli->overrides[cli->n_overrides].name = name;
    cli->overrides[cli->n_overrides].values = eq + 1;
    cli->n_overrides++;
    return 0;
}

/* --- the table ------------------------------------------------------------------------------ */

#define OFF(field) .offset = offsetof(cmb_cli, field)

static const cmb_choice preset_choices[] = {{"quick", CMB_PRESET_QUICK}, {"full", CMB_PRESET_FULL}, {NULL, 0}};
static const cmb_choice mode_choices[] = {
    {"auto", CMB_CHOOSE_AUTO}, {"gpu", CMB_CHOOSE_GPU}, {"sim", CMB_CHOOSE_SIM}, {NULL, 0}};
static const cmb_choice timeline_choices[] = {{"auto", -1}, {"on", 1}, {"off", 0}, {NULL, 0}};

/* In the order --help lists them; the internal ones after the user's. */
static const cmb_cli_option options[] = {
    {.name = "--list", .set = set_flag, OFF(list), .help = "scenarios, allocators and parameters, then exit"},
    {.name = "--scenario", .metavar = "NAME[,NAME]", .set = set_text, OFF(scenarios),
     .help = "scenarios to run, or 'all' (default all)"},
    {.name = "--allocator", .metavar = "SPEC[,SPEC]", .set = set_text, OFF(allocators),
     .help = "allocators, or 'all' (default all);\nSPEC = NAME[:key=value...][@cuda|@vmm|@sim],\n"
             "or external:/path/lib.so[:key=value...] (loaded and checked\nin a probe process first, 10 s at most);\n"
             "key=V1|V2|... sweeps an option (one allocator per value)"},
    {.name = "--preset", .metavar = "quick|full", .set = set_choice, OFF(preset), .choices = preset_choices,
     .help = "parameter presets (default quick)"},
    {.name = "--param", .metavar = "NAME=V[,V...]", .set = set_param,
     .help = "set a scenario parameter; a list is a sweep (repeatable)"},
    {.name = "--seed", .metavar = "N", .set = set_u64, OFF(seed), .what = "a non-negative integer",
     .help = "seed of every random choice (default 42)"},
    {.name = "--mode", .metavar = "auto|gpu|sim", .set = set_choice, OFF(mode), .choices = mode_choices,
     .help = "gpu needs a CUDA GPU; sim simulates one (default auto)"},
    {.name = "--capacity", .metavar = "SIZE", .set = set_size, OFF(capacity), .lo = 1u << 20,
     .hi = (double)CMB_SIZE_MAX_CAPACITY,
     .what = "a size of at least 1MiB and at most " CMB_SIZE_MAX_CAPACITY_TEXT " such as 16GiB",
     .help = "sim: device size (default 80GiB, at most " CMB_SIZE_MAX_CAPACITY_TEXT ");\ngpu: cap for the policies"},
    {.name = "--repetitions", .metavar = "N", .set = set_int, OFF(repetitions), .lo = 1, .hi = 1000,
     .help = "repetitions per case (default 3)"},
    {.name = "--device", .metavar = "N", .set = set_int, OFF(device), .lo = 0, .hi = 1023,
     .help = "CUDA device ordinal (default 0)"},
    {.name = "--out", .metavar = "DIR", .flags = CMB_OPT_NONEMPTY, .set = set_dir, OFF(out), .what = "a directory",
     .help = "output directory (default results/runs/<gpu>-<time>)"},
    {.name = "--resume", .metavar = "DIR", .flags = CMB_OPT_NONEMPTY | CMB_OPT_RESUMABLE, .set = set_text,
     OFF(resume), .what = "the directory of the run to continue",
     .help = "continue an interrupted run in DIR with its options,\nskipping the cases it finished"},
    {.name = "--quiet", .alias = "-q", .flags = CMB_OPT_RESUMABLE, .set = set_flag, OFF(quiet),
     .help = "only errors and the summary"},
    {.name = "--verbose", .alias = "-v", .flags = CMB_OPT_RESUMABLE, .set = set_flag, OFF(verbose),
     .help = "case lines with the full case name and every result item\n(default: the parameters that vary, "
             "fitted to 120 columns)"},
    {.name = "--case-timeout", .metavar = "SECONDS", .flags = CMB_OPT_RESUMABLE, .set = set_seconds,
     OFF(case_timeout_s), .help = "kill a case that runs longer (default 900)"},
    {.name = "--fault", .metavar = "nth=N,every=K,prob=P,seed=S", .set = set_fault, OFF(fault),
     .help = "inject upstream failures (fault-injection runs)"},
    {.name = "--costs", .metavar = "FILE", .flags = CMB_OPT_NONEMPTY, .set = set_text, OFF(costs),
     .what = "a cost file", .help = "price sim cases' allocator time with this cost file\n(cumembench calibrate; "
                                    "docs/costs.md; default: H100's)"},
    {.name = "--gpu-model", .metavar = "NAME", .flags = CMB_OPT_NONEMPTY, .set = set_text, OFF(gpu_model),
     .what = "a GPU model", .help = "... with the committed cost file closest to this GPU\n(nvidia-h200, \"NVIDIA H200\")"},
    {.name = "--record-trace", .metavar = "FILE", .flags = CMB_OPT_NONEMPTY, .set = set_text, OFF(record_trace),
     .what = "a file name",
     .help = "write the allocation traffic of the one selected case\n(first repetition) as a trace "
             "(traces/FORMAT.md)"},
    {.name = "--timeline", .metavar = "auto|on|off", .set = set_choice, OFF(timeline), .choices = timeline_choices,
     .help = "memory-over-time CSVs in DIR/timelines/ (default auto:\nthe scenarios that ask for one, such as "
             "churn and replay)"},
    {.name = "--timeline-points", .metavar = "N", .set = set_unsigned, OFF(timeline_points),
     .lo = CMB_TIMELINE_MIN_POINTS, .hi = CMB_TIMELINE_MAX_POINTS,
     .help = "at most N samples per timeline (default 512); a case's\nsegments file stays under max(1, N/512) "
             "MiB, at most 64"},
    {.name = "--explain-oom", .set = set_explain_oom, OFF(explain_oom),
     .help = "explain the first failed allocation of a case that does\nnot fit (the same as CMB_EXPLAIN_OOM=1; "
             "docs/explain.md)"},
    {.name = "--version", .set = set_flag, OFF(version), .help = "the version and the build, then exit"},
    {.name = "--help", .alias = "-h", .set = set_flag, OFF(help), .help = "this help"},

    {.name = CMB_ARG_CHILD, .flags = CMB_OPT_INTERNAL, .set = set_flag, OFF(child),
     .help = "run one case: the --case record, or the one case the options select"},
    {.name = CMB_ARG_CASE, .metavar = "RECORD", .flags = CMB_OPT_INTERNAL | CMB_OPT_NONEMPTY, .set = set_text,
     OFF(case_record), .what = "a case record", .help = "the case a --child runs (harness/wire.h)"},
    {.name = CMB_ARG_RESULT_FD, .metavar = "FD", .flags = CMB_OPT_INTERNAL, .set = set_int, OFF(result_fd), .lo = 0,
     .hi = 1023, .help = "where a --child writes its results"},
    {.name = "--probe-env", .flags = CMB_OPT_INTERNAL, .set = set_flag, OFF(probe_env),
     .help = "print the GPU's environment"},
    {.name = "--probe-mem", .flags = CMB_OPT_INTERNAL, .set = set_flag, OFF(probe_mem),
     .help = "print the device's memory use"},
    {.name = CMB_ARG_PROBE_PLUGIN, .metavar = "PATH", .flags = CMB_OPT_INTERNAL | CMB_OPT_NONEMPTY, .set = set_text,
     OFF(probe_plugin), .what = "a plug-in's path", .help = "load and check a plug-in, reporting on fd 3 (plugin_probe.h)"},
    {.name = CMB_ARG_PROBE_REAL, .metavar = "NAME", .flags = CMB_OPT_INTERNAL | CMB_OPT_NONEMPTY, .set = set_text,
     OFF(probe_real), .what = "a real: allocator", .help = "the real: allocator a --probe-plugin loads"},
    {.name = "--multi-gpu-rank", .flags = CMB_OPT_INTERNAL, .set = set_flag, OFF(multi_gpu_rank),
     .help = "be a rank of the multi-gpu scenario (scenarios/multi_gpu.h)"},
    {.name = "--hold-memory", .metavar = "BYTES", .flags = CMB_OPT_INTERNAL, .set = set_size, OFF(hold_memory),
     .lo = 1, .what = "a size in bytes", .help = "be the contention scenario's memory holder"},
};

#define N_OPTIONS (sizeof options / sizeof options[0])

const cmb_cli_option *cmb_cli_option_at(size_t i)
{
    return i < N_OPTIONS ? &options[i] : NULL;
}

const cmb_cli_option *cmb_cli_find(const char *name)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (!strcmp(options[i].name, name))
            return &options[i];
    return NULL;
}

/* The option `arg` names ("--opt", "--opt=value" or its alias), or NULL. */
const cmb_cli_option *cmb_cli_match(const char *arg)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const cmb_cli_option *o = &options[i];
        size_t n = strlen(o->name);
        if (!strncmp(arg, o->name, n) && (arg[n] == '\0' || (arg[n] == '=' && o->metavar)))
            return o;
        if (o->alias && !strcmp(arg, o->alias))
            return o;
    }
    return NULL;
}

/* --- parsing ------------------------------------------------------------------------------- */

static void defaults(cmb_cli *cli)
{
    memset(cli, 0, sizeof *cli);
    cli->seed = CMB_DEFAULT_SEED;
    cli->mode = CMB_CHOOSE_AUTO;
    cli->case_timeout_s = CMB_DEFAULT_CASE_TIMEOUT_S;
    cli->result_fd = -1;
    cli->fault.seed = 1;
    cli->timeline = -1;
}

/* The value of argv[*i]: after its '=', or the next argument. */
const char *cmb_cli_value(int argc, char **argv, int *i, char *err, size_t errlen)
{
    const cmb_cli_option *o = cmb_cli_match(argv[*i]);
    const char *eq = o ? argv[*i] + strlen(o->name) : NULL;
    if (!o || !o->metavar)
        return NULL;
    if (*eq == '=')
        return eq + 1;
    if (*i + 1 >= argc) {
        snprintf(err, errlen, "option %s needs a value", o->name);
        return NULL;
    }
    return argv[++*i];
}

/* Options that contradict each other, or a parameter given twice: refused
 * rather than one silently winning. `given` marks the table's options seen. */
static int check_conflicts(cmb_cli *cli, const unsigned char *given, char *err, size_t errlen)
{
    int device_given = 0, capacity_given = 0;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        device_given |= given[i] && !strcmp(options[i].name, "--device");
        capacity_given |= given[i] && !strcmp(options[i].name, "--capacity");
    }
    cli->device_given = device_given; /* in sim mode it only labels the run: said when the run starts */
    for (size_t k = 0; k < cli->n_overrides; k++) {
        const char *name = cli->overrides[k].name;
        if (capacity_given && !strcmp(name, "capacity")) {
            snprintf(err, errlen, "--capacity and --param capacity=... both set the device size: give one");
            return -1;
        }
        for (size_t j = 0; j < k; j++)
            if (!strcmp(cli->overrides[j].name, name)) {
                snprintf(err, errlen, "--param %s is given twice (a sweep is one --param %s=A,B)", name, name);
                return -1;
            }
    }
    return 0;
}

/* --record-trace's file is written at the end of the case (FILE.tmp, then
 * renamed): a place it cannot be written is found now, not after the case
 * ran and its measurements were lost. */
static int check_record_trace(const char *path, char *err, size_t errlen)
{
    char dir[4096];
    struct stat st;
    if (!stat(path, &st) && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "--record-trace: %s exists and is not a regular file", path);
        return -1;
    }
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        slash[slash == dir] = '\0'; /* "/x" -> "/" */
    if (access(dir, W_OK | X_OK)) {
        snprintf(err, errlen, "--record-trace: cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* "unknown option '--sceanrio'; did you mean '--scenario'?" (the user's
 * options only). Returns -1. */
static int unknown_option(const char *arg, char *err, size_t errlen)
{
    char word[CMB_SUGGEST_MAX_LEN + 1], mean[96];
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    cmb_suggest sg;
    snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), arg);
    cmb_suggest_init(&sg, word);
    for (size_t k = 0; k < N_OPTIONS; k++)
        if (!(options[k].flags & CMB_OPT_INTERNAL))
            cmb_suggest_try(&sg, options[k].name);
    snprintf(err, errlen, "unknown option '%s'%s", arg, cmb_suggest_text(&sg, ";", mean, sizeof mean));
    return -1;
}

/* --costs / --gpu-model: checked before anything runs and made the run's
 * cost file (CMB_COSTS, inherited by the case processes; harness/costs.h). */
static int apply_costs(const cmb_cli *cli, char *err, size_t errlen)
{
    if (cli->costs && cli->gpu_model) {
        snprintf(err, errlen, "--costs and --gpu-model both choose the cost file: give one");
        return -1;
    }
    if (cli->costs)
        return cmb_costs_use_file(cli->costs, err, errlen);
    return cli->gpu_model ? cmb_costs_use_gpu_model(cli->gpu_model, err, errlen) : 0;
}

int cmb_cli_parse(int argc, char **argv, cmb_cli *cli, char *err, size_t errlen)
{
    unsigned char given[N_OPTIONS];
    memset(given, 0, sizeof given);
    defaults(cli);
    for (int i = 1; i < argc; i++) {
        const cmb_cli_option *o = cmb_cli_match(argv[i]);
        if (!o)
            return unknown_option(argv[i], err, errlen);
        const char *v = o->metavar ? cmb_cli_value(argc, argv, &i, err, errlen) : NULL;
        if (o->metavar && !v)
            return -1;
        size_t idx = (size_t)(o - options);
        if (given[idx] && o->set != set_param && !(o->flags & (CMB_OPT_INTERNAL | CMB_OPT_RESUMABLE))) {
            snprintf(err, errlen, "%s is given twice: give it once (a list is comma-separated)", o->name);
            return -1;
        }
        given[idx] = 1;
        if (o->set(cli, o, v, err, errlen))
            return -1;
    }
    if (check_conflicts(cli, given, err, errlen) || apply_costs(cli, err, errlen))
        return -1;
    if (cli->record_trace && !cli->child && check_record_trace(cli->record_trace, err, errlen))
        return -1;
    if (!cli->repetitions)
        cli->repetitions = CMB_DEFAULT_REPETITIONS; /* the full preset widens the grids, not the repetitions */
    return 0;
}

/* --- help ---------------------------------------------------------------------------------- */

void cmb_cli_usage(FILE *f)
{
    fputs("usage: cumembench [options]\n"
          "       cumembench tune INPUT [--budget SIZE] [--for torch|cupy|rmm|any] [--objective ...] [--json]\n"
          "                                the allocator setting to paste for a recorded workload (docs/tune.md)\n"
          "\n"
          "Runs allocator scenarios and writes Google Benchmark JSON and a tidy CSV.\n"
          "\n",
          f);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const cmb_cli_option *o = &options[i];
        char head[96];
        if (o->flags & CMB_OPT_INTERNAL)
            continue;
        snprintf(head, sizeof head, "%s%s%s%s%s", o->name, o->alias ? ", " : "", o->alias ? o->alias : "",
                 o->metavar ? " " : "", o->metavar ? o->metavar : "");
        fprintf(f, "  %-26s", head);
        if (strlen(head) > 25)
            fprintf(f, "\n  %-26s", "");
        for (const char *line = o->help; *line;) {
            size_t n = strcspn(line, "\n");
            fprintf(f, "%.*s\n", (int)n, line);
            line += n;
            if (*line == '\n' && *++line)
                fprintf(f, "  %-26s", "");
        }
    }
}
