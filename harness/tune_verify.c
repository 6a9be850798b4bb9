/* tune_verify.c - --verify (GPU): the user's program run unchanged under the
 * recommended and the recorded setting, through
 * `python3 -m cumembench_alloc run SETTING --out JSON -- CMD ...`
 * (python/cumembench_alloc.py), which installs the setting before the first
 * CUDA allocation and writes peak reserved, allocated and wall time at exit;
 * then predicted against measured for each. */
#include "tune.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

/* python/ of the source tree the binary was built in (build/cumembench ->
 * python/cumembench_alloc.py) ahead of PYTHONPATH, so the module is found. */
static void add_module_path(void)
{
    char exe[4096], path[8192];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    const char *old = getenv("PYTHONPATH");
    snprintf(path, sizeof path, "%s/../python%s%s", exe, old && *old ? ":" : "", old ? old : "");
    setenv("PYTHONPATH", path, 1);
}

/* Runs the program under one setting; 0 with the measured peaks and time. */
static int run_under(const char *setting, uint64_t capacity, char **cmd, int n_cmd, json_t **measured)
{
    char out[256], cap[32];
    const char *tmp = getenv("TMPDIR");
    snprintf(out, sizeof out, "%s/cmb-tune-verify-%ld.json", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    /* 10 words of the wrapper at most, the program's, and the NULL that ends them */
    char **argv = calloc((size_t)n_cmd + 11, sizeof *argv);
    if (!argv)
        return -1;
    int k = 0;
    argv[k++] = "python3", argv[k++] = "-m", argv[k++] = "cumembench_alloc", argv[k++] = "run";
    argv[k++] = (char *)setting, argv[k++] = "--out", argv[k++] = out;
    if (capacity) { /* a GPU of the budget: PyTorch's memory fraction, or the policy's capacity */
        snprintf(cap, sizeof cap, "%llu", (unsigned long long)capacity);
        argv[k++] = "--capacity", argv[k++] = cap;
    }
    argv[k++] = "--";
    for (int i = 0; i < n_cmd; i++)
        argv[k++] = cmd[i];
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(2, 1); /* the program's output goes to stderr: stdout stays tune's */
        add_module_path();
        execvp(argv[0], argv);
        fprintf(stderr, "cumembench tune: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    free(argv);
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return -1;
    /* a program that failed still wrote what it measured (its exit status, out-of-memory
     * errors, the error): shown like the others; none written (killed, or the wrapper
     * refused the setting) is a failure with nothing to show */
    json_error_t e;
    *measured = json_load_file(out, 0, &e);
    unlink(out);
    return *measured ? 0 : -1;
}

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void compare(const char *what, const cmb_tune_cand *c, uint64_t predicted, uint64_t gpu, const json_t *m)
{
    double peak = num(m, "peak_reserved_bytes");
    printf("  %-12s %s", what, c->spec);
    if (gpu)
        printf(" on %.3f GiB", (double)gpu / (1u << 30));
    printf(": peak reserved predicted %.1f MiB, measured %.1f MiB (%+.2f%%); wall %.2f s; exit %d",
           (double)predicted / (1 << 20), peak / (1 << 20), 100.0 * (peak - (double)predicted) / (double)predicted,
           num(m, "wall_s"), (int)num(m, "exit_status"));
    const char *error = json_string_value(json_object_get(m, "error"));
    double ooms = num(m, "ooms");
    if (ooms > 0)
        printf("; %.0f out-of-memory errors", ooms);
    printf("%s%s\n", error ? "; " : "", error ? error : "");
}

/* The program's exit status under a setting, from what the wrapper wrote. */
static int exit_of(const json_t *m)
{
    double x = num(m, "exit_status");
    return isnan(x) ? 1 : (int)x;
}

int cmb_tune_verify(const cmb_tune_report *r, char **cmd, int n_cmd, int json)
{
    int idx[2] = {r->recommended, r->recorded};
    const char *what[2] = {"recommended", "recorded"};
    int failed = 0;
    if (r->recommended < 0)
        return 1;
    if (!json)
        printf("\nverified on this GPU (python3 -m cumembench_alloc run SETTING -- the program):\n");
    for (int i = 0; i < 2; i++) {
        char setting[320];
        json_t *m = NULL;
        cmb_tune_run_setting(&r->s->c[idx[i]], setting, sizeof setting);
        const cmb_tune_cand *c = &r->s->c[idx[i]];
        uint64_t gpu = i == 0 ? (r->budget ? r->budget : c->min_capacity) : 0; /* the recorded: as it ran */
        uint64_t predicted = i == 0 ? r->rec_at_budget.peak_reserved : c->peak_reserved;
        if (run_under(setting, gpu, cmd, n_cmd, &m)) {
            fprintf(stderr, "cumembench tune: the program wrote no result under %s (%s): see its output above\n",
                    what[i], setting);
            return 2;
        }
        if (json) {
            char *text = json_dumps(m, JSON_COMPACT);
            fprintf(stderr, "verify %s: %s\n", what[i], text ? text : "?");
            free(text);
        }
        else
            compare(what[i], c, predicted, gpu, m);
        if (exit_of(m))
            failed = i + 1;
        json_decref(m);
        if (i == 0 && idx[1] == idx[0])
            break;
    }
    if (failed) /* both measured first: the recorded setting's run is evidence too */
        fprintf(stderr, "cumembench tune: the program exited non-zero under the %s setting\n", what[failed - 1]);
    return failed ? 2 : 0;
}
