/* tune_verify.c - --verify (GPU): the user's program run unchanged under the
 * recommended and the recorded setting, through
 * `python3 -m cumembench_alloc run SETTING --out JSON -- CMD ...`
 * (python/cumembench_alloc.py), which installs the setting before the first
 * CUDA allocation and writes peak reserved, allocated and wall time at exit;
 * then predicted against measured for each. */
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

/* Runs the program under one setting; 0 with the measured peaks and time. */
static int run_under(const char *setting, char **cmd, int n_cmd, json_t **measured)
{
    char out[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(out, sizeof out, "%s/cmb-tune-verify-%ld.json", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    char **argv = calloc((size_t)n_cmd + 10, sizeof *argv);
    if (!argv)
        return -1;
    int k = 0;
    argv[k++] = "python3", argv[k++] = "-m", argv[k++] = "cumembench_alloc", argv[k++] = "run";
    argv[k++] = (char *)setting, argv[k++] = "--out", argv[k++] = out, argv[k++] = "--";
    for (int i = 0; i < n_cmd; i++)
        argv[k++] = cmd[i];
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(2, 1); /* the program's output goes to stderr: stdout stays tune's */
        execvp(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    free(argv);
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
        return -1;
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

static void compare(const char *what, const cmb_tune_cand *c, const json_t *m)
{
    double peak = num(m, "peak_reserved_bytes");
    printf("  %-12s %-48s predicted peak reserved %.1f MiB, measured %.1f MiB (%+.2f%%); wall %.2f s; "
           "allocated peak %.1f MiB\n",
           what, c->spec, (double)c->peak_reserved / (1 << 20), peak / (1 << 20),
           100.0 * (peak - (double)c->peak_reserved) / (double)c->peak_reserved, num(m, "wall_s"),
           num(m, "peak_allocated_bytes") / (1 << 20));
}

int cmb_tune_verify(const cmb_tune_report *r, char **cmd, int n_cmd, int json)
{
    int idx[2] = {r->recommended, r->recorded};
    const char *what[2] = {"recommended", "recorded"};
    if (r->recommended < 0)
        return 1;
    if (!json)
        printf("\nverified on this GPU (python3 -m cumembench_alloc run SETTING -- the program):\n");
    for (int i = 0; i < 2; i++) {
        char setting[320];
        json_t *m = NULL;
        cmb_tune_run_setting(&r->s->c[idx[i]], setting, sizeof setting);
        if (run_under(setting, cmd, n_cmd, &m)) {
            fprintf(stderr, "cumembench tune: the program failed under %s (%s)\n", what[i], setting);
            return 2;
        }
        if (json) {
            char *text = json_dumps(m, JSON_COMPACT);
            fprintf(stderr, "verify %s: %s\n", what[i], text ? text : "?");
            free(text);
        }
        else
            compare(what[i], &r->s->c[idx[i]], m);
        json_decref(m);
        if (i == 0 && idx[1] == idx[0])
            break;
    }
    return 0;
}
