/* resume.c - cumembench --resume DIR (see resume.h). */
#define _GNU_SOURCE
#include "resume.h"

#include "output.h"
#include "results.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#define ARGS_FILE "run.args"
#define ARGS_MAGIC "cumembench-run-args 1"
#define MAX_ARGS 1024


static int saved_argc;
static char **saved_argv;
/* the arguments read back from run.args: the options point into them */
static char *resumed_text;
static char **resumed_argv;

void cmb_resume_release(void)
{
    free(resumed_argv);
    free(resumed_text);
    resumed_argv = NULL;
    resumed_text = NULL;
}

void cmb_resume_remember_args(int argc, char **argv)
{
    saved_argc = argc;
    saved_argv = argv;
}

/* --- run.args ---------------------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n = -1;
    if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)n + 1)))
        n = (long)fread(buf, 1, (size_t)n, f);
    if (f)
        fclose(f);
    if (buf) {
        buf[n] = '\0';
        *len = (size_t)n;
    }
    return buf;
}

/* --- the saved command line --------------------------------------------------------------- */

static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
    fputc('\n', f);
}

static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (*s == '\\' && (s[1] == '\\' || s[1] == 'n')) {
            *o++ = s[1] == 'n' ? '\n' : '\\';
            s++;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

int cmb_resume_save_command(const char *dir, char *err, size_t errlen)
{
    char path[1024], tmp[1100], cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, ".");
    snprintf(path, sizeof path, "%s/%s", dir, ARGS_FILE);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "%s\ncwd ", ARGS_MAGIC);
    put_escaped(f, cwd);
    for (int i = 1; i < saved_argc; i++) {
        fputs("arg ", f);
        put_escaped(f, saved_argv[i]);
    }
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The options that may be given beside --resume (CMB_OPT_RESUMABLE),
 * named for a message: "--quiet and --case-timeout". */
static void resumable_names(char *out, size_t len)
{
    const cmb_cli_option *o;
    size_t n = 0, k = 0, used = 0;
    out[0] = '\0';
    for (size_t i = 0; (o = cmb_cli_option_at(i)); i++)
        n += (o->flags & CMB_OPT_RESUMABLE) && strcmp(o->name, "--resume");
    for (size_t i = 0; (o = cmb_cli_option_at(i)) && used < len; i++) {
        if (!(o->flags & CMB_OPT_RESUMABLE) || !strcmp(o->name, "--resume"))
            continue;
        k++;
        used += (size_t)snprintf(out + used, len - used, "%s%s", k == 1 ? "" : k == n ? " and " : ", ", o->name);
    }
}

/* Every argument beside --resume must be a resumable option. */
static int check_resume_args(int argc, char **argv, char *err, size_t errlen)
{
    for (int i = 1; i < argc; i++) {
        const cmb_cli_option *o = cmb_cli_match(argv[i]);
        if (o && (o->flags & CMB_OPT_RESUMABLE)) {
            if (o->metavar && !cmb_cli_value(argc, argv, &i, err, errlen))
                return -1;
            continue;
        }
        char names[256];
        resumable_names(names, sizeof names);
        snprintf(err, errlen,
                 "--resume continues a run with the options it was started with; only %s may be given beside "
                 "it, not '%s'", names, argv[i]);
        return -1;
    }
    return 0;
}

/* The saved arguments live as long as the process: the parsed options
 * point into them. */
static int load_args(const char *dir, char *cwd, size_t cwdlen, int *argc, char ***argv, char *err, size_t errlen)
{
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", dir, ARGS_FILE);
    char *text = read_file(path, &len);
    if (!text) {
        snprintf(err, errlen, "cannot read %s (%s): is %s the --out directory of a run?", path, strerror(errno),
                 dir);
        return -1;
    }
    char **av = calloc(MAX_ARGS + 2, sizeof *av);
    int n = 0, line_no = 0;
    cwd[0] = '\0';
    if (!av) {
        free(text);
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    av[n++] = "cumembench";
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), line_no++) {
        if (line_no == 0) {
            if (strcmp(line, ARGS_MAGIC))
                goto out_bad;
        } else if (!strncmp(line, "cwd ", 4)) {
            unescape(line + 4);
            snprintf(cwd, cwdlen, "%s", line + 4);
        } else if (!strncmp(line, "arg ", 4) && n < MAX_ARGS) {
            unescape(line + 4);
            av[n++] = line + 4;
        } else {
            goto out_bad;
        }
    }
    if (line_no == 0)
        goto out_bad;
    av[n] = NULL;
    *argc = n;
    *argv = av;
    resumed_text = text; /* kept for the life of the process: the options point into it */
    return 0;

out_bad:
    snprintf(err, errlen, "%s is damaged (line %d)", path, line_no + 1);
    free(av);
    free(text);
    return -1;
}

/* The saved command line, then this one's resumable options but --resume
 * (later wins: --case-timeout given now replaces the saved one). */
static int merge_args(int s_argc, char **s_argv, int argc, char **argv, int *m_argc, char ***m_argv)
{
    char **av = calloc((size_t)(s_argc + argc + 1), sizeof *av);
    int n = 0;
    if (!av)
        return -1;
    for (int i = 0; i < s_argc; i++)
        av[n++] = s_argv[i];
    for (int i = 1; i < argc; i++) {
        const cmb_cli_option *o = cmb_cli_match(argv[i]);
        int with_value = o->metavar && !strchr(argv[i], '=');
        if (strcmp(o->name, "--resume")) {
            av[n++] = argv[i];
            if (with_value)
                av[n++] = argv[i + 1];
        }
        i += with_value;
    }
    av[n] = NULL;
    free(s_argv);
    *m_argc = n;
    *m_argv = resumed_argv = av; /* kept for the life of the process: the options point into it */
    return 0;
}

int cmb_resume_prepare(int argc, char **argv, cmb_cli *cli, char *err, size_t errlen)
{
    char dir[PATH_MAX], cwd[PATH_MAX], perr[512];
    int s_argc;
    char **s_argv;
    static char out_dir[PATH_MAX];
    if (check_resume_args(argc, argv, err, errlen))
        return -1;
    if (!realpath(cli->resume, dir)) {
        snprintf(err, errlen, "--resume %s: %s", cli->resume, strerror(errno));
        return -1;
    }
    if (load_args(dir, cwd, sizeof cwd, &s_argc, &s_argv, err, errlen))
        return -1;
    if (merge_args(s_argc, s_argv, argc, argv, &s_argc, &s_argv)) {
        free(s_argv);
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    if (cmb_cli_parse(s_argc, s_argv, cli, perr, sizeof perr)) {
        snprintf(err, errlen, "%s/%s: %s", dir, ARGS_FILE, perr);
        return -1;
    }
    if (cli->child || cli->list || cli->help || cli->version || cli->probe_env || cli->resume) {
        snprintf(err, errlen, "%s/%s does not hold the command line of a run", dir, ARGS_FILE);
        return -1;
    }
    if (cwd[0] && chdir(cwd))
        fprintf(stderr, "cumembench: cannot enter %s, where the run started (%s); relative paths are taken from "
                        "here\n", cwd, strerror(errno));
    snprintf(out_dir, sizeof out_dir, "%s", dir);
    cli->out = out_dir;
    cli->resume = out_dir;
    return 0;
}

/* --- the finished cases: the results store ---------------------------------------------------------- */

int cmb_resume_load(cmb_resume *r, const char *dir, char *err, size_t errlen)
{
    return cmb_results_recover(dir, r, err, errlen);
}

int cmb_resume_is_done(const cmb_resume *r, const char *name)
{
    return cmb_results_is_done(r, name);
}

void cmb_resume_free(cmb_resume *r)
{
    cmb_results_cases_free(r);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int cmb_resume_check_plan(const cmb_resume *r, const char **names, size_t n, const char *dir, char *err,
                          size_t errlen)
{
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < r->n_done; i++) {
        if (n && bsearch(&r->done[i], names, n, sizeof *names, cmp_str))
            continue;
        snprintf(err, errlen, "%s/results.csv holds case %.200s, which the command line in %s/%s does not plan: "
                              "run.args is another run's, and the two would mix", dir, r->done[i], dir, ARGS_FILE);
        return -1;
    }
    return 0;
}

/* What a run's context records of its configuration must be this run's:
 * run.args of another run (another seed or preset) would mix two. */
static int check_context(const cmb_resume *r, const char *dir, const cmb_env *env, char *err, size_t errlen)
{
    static const char *const keys[] = {"mode", "seed", "preset", "sim_capacity_bytes", NULL};
    for (size_t i = 0; keys[i]; i++) {
        const char *was = json_string_value(json_object_get(r->context, keys[i]));
        const char *now = cmb_env_get(env, keys[i]);
        if (was && now && strcmp(was, now)) {
            snprintf(err, errlen, "%s/results.json was run with %s %s; %s/%s now says %s %s: run.args is another "
                                  "run's, and the two would mix", dir, keys[i], was, dir, ARGS_FILE, keys[i], now);
            return -1;
        }
    }
    return 0;
}

/* --- opening the outputs ------------------------------------------------------------------------- */

static int check_resumed(const cmb_resume *r, const char *dir, const cmb_env *env, const char *mode, char *err,
                         size_t errlen)
{
    if (r->mode[0] && strcmp(r->mode, mode)) {
        snprintf(err, errlen, "%s holds a run in %s mode; this one would run in %s mode", dir, r->mode, mode);
        return -1;
    }
    if (r->gpu[0] && strcmp(r->gpu, env->gpu_slug)) {
        snprintf(err, errlen, "%s was measured on %s, this machine has %s: results of two devices would mix", dir,
                 r->gpu, env->gpu_slug);
        return -1;
    }
    return check_context(r, dir, env, err, errlen);
}

int cmb_resume_open_output(cmb_output *out, cmb_resume *r, const cmb_cli *cli, const char *dir, cmb_env *env,
                           const char *mode, char *err, size_t errlen)
{
    if (!cli->resume) {
        if (cmb_output_open(out, dir, env, mode, "cumembench", err, errlen))
            return -1;
        if (cmb_resume_save_command(dir, err, errlen)) {
            cmb_output_close(out, NULL, 0);
            return -1;
        }
        return 0;
    }
    /* the lock first: no other process may repair or append while this one reads */
    if (cmb_output_lock(out, dir, env, mode, err, errlen))
        return -1;
    if (cmb_resume_load(r, dir, err, errlen) || check_resumed(r, dir, env, mode, err, errlen) ||
        cmb_output_reopen(out, r->run_id, err, errlen)) {
        cmb_output_close(out, NULL, 0);
        return -1;
    }
    fprintf(stderr, "cumembench: resuming %s: %zu finished cases kept%s%s%s\n", dir, r->n_done,
            r->csv_repaired ? "; the last case of results.csv, cut short, dropped" : "",
            r->json_dropped ? "; results.json entries of an unfinished case dropped" : "",
            r->json_repaired & CMB_RESULTS_TORN ? "; a torn tail of results.json cut off"
            : r->json_repaired ? "; results.json rewritten as strict JSON (NaN of an older run made null)" : "");
    return 0;
}
