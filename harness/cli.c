/* cli.c - command-line parsing: every malformed option is one clear error. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "../common/cmb_units.h"
#include "timeline.h"

void cmb_cli_usage(FILE *f)
{
    fputs("usage: cumembench [options]\n"
          "\n"
          "Runs allocator scenarios and writes Google Benchmark JSON and a tidy CSV.\n"
          "\n"
          "  --list                    scenarios, allocators and parameters, then exit\n"
          "  --scenario NAME[,NAME]    scenarios to run, or 'all' (default all)\n"
          "  --allocator SPEC[,SPEC]   allocators, or 'all' (default all);\n"
          "                            SPEC = NAME[:key=value...][@cuda|@vmm|@sim],\n"
          "                            or external:/path/lib.so[:key=value...]\n"
          "  --preset quick|full       parameter presets (default quick)\n"
          "  --param NAME=V[,V...]     set a scenario parameter; a list is a sweep (repeatable)\n"
          "  --seed N                  seed of every random choice (default 42)\n"
          "  --mode auto|gpu|sim       gpu needs a CUDA GPU; sim simulates one (default auto)\n"
          "  --capacity SIZE           sim: device size (default 80GiB); gpu: cap for the policies\n"
          "  --repetitions N           repetitions per case (default 3)\n"
          "  --device N                CUDA device ordinal (default 0)\n"
          "  --out DIR                 output directory (default results/runs/<gpu>-<time>)\n"
          "  --resume DIR              continue an interrupted run in DIR with its options,\n"
          "                            skipping the cases it finished\n"
          "  --case-timeout SECONDS    kill a case that runs longer (default 900)\n"
          "  --fault nth=N,every=K,prob=P,seed=S\n"
          "                            inject upstream failures (fault-injection runs)\n"
          "  --record-trace FILE       write the allocation traffic of the one selected case\n"
          "                            (first repetition) as a trace (traces/FORMAT.md)\n"
          "  --timeline auto|on|off    memory-over-time CSVs in DIR/timelines/ (default auto:\n"
          "                            the scenarios that ask for one, such as churn and replay)\n"
          "  --timeline-points N       at most N samples per timeline (default 512)\n"
          "  --quiet                   only errors and the summary\n"
          "  --version, --help\n",
          f);
}

/* Returns the option's value: "--opt=value" or the next argument. */
static const char *value_of(int argc, char **argv, int *i, const char *arg, const char *name, char *err,
                            size_t errlen)
{
    size_t n = strlen(name);
    if (arg[n] == '=')
        return arg + n + 1;
    if (*i + 1 >= argc) {
        snprintf(err, errlen, "option %s needs a value", name);
        return NULL;
    }
    return argv[++*i];
}

static int matches(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == '\0' || arg[n] == '=');
}

static int parse_fault(const char *v, cmb_fault_spec *f, char *err, size_t errlen)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        int bad = !eq;
        if (eq) {
            *eq = '\0';
            const char *val = eq + 1;
            if (!strcmp(kv, "nth"))
                bad = cmb_parse_u64(val, &f->fail_nth);
            else if (!strcmp(kv, "every"))
                bad = cmb_parse_u64(val, &f->fail_every);
            else if (!strcmp(kv, "seed"))
                bad = cmb_parse_u64(val, &f->seed);
            else if (!strcmp(kv, "prob"))
                bad = cmb_parse_double(val, &f->fail_prob) || f->fail_prob < 0 || f->fail_prob > 1;
            else
                bad = 1;
        }
        if (bad) {
            snprintf(err, errlen, "--fault: expected nth=N,every=K,prob=P (0..1),seed=S; got '%s'", v);
            return -1;
        }
    }
    return 0;
}

static int parse_override(cmb_cli *cli, const char *v, char *err, size_t errlen)
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
    /* names live in a static pool: argv strings are not modified */
    static char names[CMB_MAX_OVERRIDES][64];
    size_t n = (size_t)(eq - v);
    if (n >= sizeof names[0]) {
        snprintf(err, errlen, "--param name too long");
        return -1;
    }
    memcpy(names[cli->n_overrides], v, n);
    names[cli->n_overrides][n] = '\0';
    for (size_t i = 0; i < cli->n_overrides; i++) {
        if (!strcmp(cli->overrides[i].name, names[cli->n_overrides])) {
            snprintf(err, errlen, "--param %s given twice", names[cli->n_overrides]);
            return -1;
        }
    }
    cli->overrides[cli->n_overrides].name = names[cli->n_overrides];
    cli->overrides[cli->n_overrides].values = eq + 1;
    cli->n_overrides++;
    return 0;
}

static int parse_int_range(const char *v, const char *opt, long lo, long hi, int *out, char *err, size_t errlen)
{
    int64_t x;
    if (cmb_parse_i64(v, &x) || x < lo || x > hi) {
        snprintf(err, errlen, "%s expects an integer in [%ld, %ld], got '%s'", opt, lo, hi, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

int cmb_cli_parse(int argc, char **argv, cmb_cli *cli, char *err, size_t errlen)
{
    memset(cli, 0, sizeof *cli);
    cli->seed = CMB_DEFAULT_SEED;
    cli->mode = CMB_CHOOSE_AUTO;
    cli->case_timeout_s = 900;
    cli->result_fd = -1;
    cli->fault.seed = 1;
    cli->timeline = -1;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v;
#define VALUE(name)                                                   \
    do {                                                              \
        v = value_of(argc, argv, &i, a, name, err, errlen);           \
        if (!v)                                                       \
            return -1;                                                \
    } while (0)
        if (!strcmp(a, "--list")) {
            cli->list = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli->help = 1;
        } else if (!strcmp(a, "--version")) {
            cli->version = 1;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            cli->quiet = 1;
        } else if (!strcmp(a, "--child")) {
            cli->child = 1;
        } else if (!strcmp(a, "--probe-env")) {
            cli->probe_env = 1;
        } else if (!strcmp(a, "--probe-mem")) {
            cli->probe_mem = 1;
        } else if (!strcmp(a, "--multi-gpu-rank")) {
            cli->multi_gpu_rank = 1;
        } else if (matches(a, "--result-fd")) {
            VALUE("--result-fd");
            if (parse_int_range(v, "--result-fd", 0, 1023, &cli->result_fd, err, errlen))
                return -1;
        } else if (matches(a, "--timeline")) {
            VALUE("--timeline");
            if (!strcmp(v, "auto"))
                cli->timeline = -1;
            else if (!strcmp(v, "on"))
                cli->timeline = 1;
            else if (!strcmp(v, "off"))
                cli->timeline = 0;
            else {
                snprintf(err, errlen, "--timeline expects auto, on or off, got '%s'", v);
                return -1;
            }
        } else if (matches(a, "--timeline-points")) {
            int points;
            VALUE("--timeline-points");
            if (parse_int_range(v, "--timeline-points", CMB_TIMELINE_MIN_POINTS, CMB_TIMELINE_MAX_POINTS, &points,
                                err, errlen))
                return -1;
            cli->timeline_points = (unsigned)points;
        } else if (matches(a, "--timeline-dir")) {
            VALUE("--timeline-dir");
            cli->timeline_dir = v;
        } else if (matches(a, "--scenario")) {
            VALUE("--scenario");
            cli->scenarios = v;
        } else if (matches(a, "--allocator")) {
            VALUE("--allocator");
            cli->allocators = v;
        } else if (matches(a, "--preset")) {
            VALUE("--preset");
            if (!strcmp(v, "quick"))
                cli->preset = CMB_PRESET_QUICK;
            else if (!strcmp(v, "full"))
                cli->preset = CMB_PRESET_FULL;
            else {
                snprintf(err, errlen, "--preset expects quick or full, got '%s'", v);
                return -1;
            }
        } else if (matches(a, "--param")) {
            VALUE("--param");
            if (parse_override(cli, v, err, errlen))
                return -1;
        } else if (matches(a, "--seed")) {
            VALUE("--seed");
            if (cmb_parse_u64(v, &cli->seed)) {
                snprintf(err, errlen, "--seed expects a non-negative integer, got '%s'", v);
                return -1;
            }
        } else if (matches(a, "--mode")) {
            VALUE("--mode");
            if (!strcmp(v, "auto"))
                cli->mode = CMB_CHOOSE_AUTO;
            else if (!strcmp(v, "gpu"))
                cli->mode = CMB_CHOOSE_GPU;
            else if (!strcmp(v, "sim"))
                cli->mode = CMB_CHOOSE_SIM;
            else {
                snprintf(err, errlen, "--mode expects auto, gpu or sim, got '%s'", v);
                return -1;
            }
        } else if (matches(a, "--out")) {
            VALUE("--out");
            if (!*v) {
                snprintf(err, errlen, "--out needs a directory");
                return -1;
            }
            cli->out = v;
        } else if (matches(a, "--repetitions")) {
            VALUE("--repetitions");
            if (parse_int_range(v, "--repetitions", 1, 1000, &cli->repetitions, err, errlen))
                return -1;
        } else if (matches(a, "--capacity")) {
            VALUE("--capacity");
            if (cmb_parse_size(v, &cli->capacity) || cli->capacity < (1u << 20)) {
                snprintf(err, errlen, "--capacity expects a size of at least 1MiB such as 16GiB, got '%s'", v);
                return -1;
            }
        } else if (matches(a, "--device")) {
            VALUE("--device");
            if (parse_int_range(v, "--device", 0, 1023, &cli->device, err, errlen))
                return -1;
        } else if (matches(a, "--case-timeout")) {
            VALUE("--case-timeout");
            if (cmb_parse_double(v, &cli->case_timeout_s) || cli->case_timeout_s <= 0) {
                snprintf(err, errlen, "--case-timeout expects a positive number of seconds, got '%s'", v);
                return -1;
            }
        } else if (matches(a, "--hold-memory")) {
            VALUE("--hold-memory");
            if (cmb_parse_size(v, &cli->hold_memory) || !cli->hold_memory) {
                snprintf(err, errlen, "--hold-memory expects a size in bytes, got '%s'", v);
                return -1;
            }
        } else if (matches(a, "--record-trace")) {
            VALUE("--record-trace");
            if (!*v) {
                snprintf(err, errlen, "--record-trace needs a file name");
                return -1;
            }
            cli->record_trace = v;
        } else if (matches(a, "--resume")) {
            VALUE("--resume");
            if (!*v) {
                snprintf(err, errlen, "--resume needs the directory of the run to continue");
                return -1;
            }
            cli->resume = v;
        } else if (matches(a, "--fault")) {
            VALUE("--fault");
            if (parse_fault(v, &cli->fault, err, errlen))
                return -1;
        } else {
            snprintf(err, errlen, "unknown option '%s'", a);
            return -1;
        }
#undef VALUE
    }
    if (!cli->repetitions)
        cli->repetitions = 3; /* the full preset widens the grids, not the repetitions */
    return 0;
}
