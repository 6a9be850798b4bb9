/* resume.c - cumembench --resume DIR (see resume.h). */
#define _GNU_SOURCE
#include "resume.h"

#include "output.h"
#include "schema.h"

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

static const char JSON_CLOSING[] = "\n  ]\n}\n";


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

/* --- whole files ------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0;
    if (!f)
        return NULL;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 1 << 17;
            char *grown = realloc(buf, ncap);
            if (!grown)
                goto out_fail;
            buf = grown;
            cap = ncap;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
    }
    if (ferror(f))
        goto out_fail;
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;

out_fail:
    fclose(f);
    free(buf);
    return NULL;
}

/* Replaces path with text: temporary name, fsync, rename. */
static int replace_file(const char *path, const char *text, size_t len, char *err, size_t errlen)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    int bad = fwrite(text, 1, len, f) != len;
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
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

/* --- the finished cases: results.csv ----------------------------------------------------------- */

/* Splits one CSV line (as output.c writes it: quotes around fields with
 * , or ", "" inside) in place; returns the number of fields. */
static int split_csv_line(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    while (n < max) {
        char *o = p;
        f[n++] = p;
        if (*p == '"') {
            p++;
            for (;;) {
                if (*p == '\0')
                    return -1;
                if (*p == '"' && p[1] == '"') {
                    *o++ = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    *o++ = *p++;
                }
            }
            if (*p != ',' && *p != '\0')
                return -1;
        } else {
            while (*p && *p != ',')
                *o++ = *p++;
        }
        int more = *p == ',';
        *o = '\0';
        if (!more)
            return n;
        p++;
    }
    return -1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_name(cmb_resume *r, size_t *cap, const char *name)
{
    if (r->n_done == *cap) {
        size_t ncap = *cap ? *cap * 2 : 256;
        char **grown = realloc(r->done, ncap * sizeof *grown);
        if (!grown)
            return -1;
        r->done = grown;
        *cap = ncap;
    }
    if (!(r->done[r->n_done] = strdup(name)))
        return -1;
    r->n_done++;
    return 0;
}

/* Sorts the names and folds duplicates. */
static void sort_names(cmb_resume *r)
{
    if (!r->n_done)
        return;
    qsort(r->done, r->n_done, sizeof *r->done, cmp_str);
    size_t o = 0;
    for (size_t i = 0; i < r->n_done; i++) {
        if (o && !strcmp(r->done[o - 1], r->done[i])) {
            free(r->done[i]);
            continue;
        }
        r->done[o++] = r->done[i];
    }
    r->n_done = o;
}

/* The case column of the line that starts at `line` (ends at '\n'). */
static int case_of_line(const char *line, char *out, size_t outlen)
{
    char *f[CMB_N_COLS + 1];
    char *buf = strndup(line, strcspn(line, "\n"));
    int rc = -1;
    if (buf && split_csv_line(buf, f, CMB_N_COLS + 1) == CMB_N_COLS) {
        snprintf(out, outlen, "%s", f[CMB_COL_CASE]);
        rc = 0;
    }
    free(buf);
    return rc;
}

/* Length of text[0, len) without the trailing lines of its last case
 * (never the header). */
static size_t drop_last_case(const char *text, size_t len)
{
    char last[1024], cur[1024];
    size_t header = cmb_csv_header_len;
    if (len <= header)
        return len;
    size_t start = len - 1;
    while (start > header && text[start - 1] != '\n')
        start--;
    if (case_of_line(text + start, last, sizeof last))
        return start;
    while (start > header) {
        size_t prev = start - 1;
        while (prev > header && text[prev - 1] != '\n')
            prev--;
        if (case_of_line(text + prev, cur, sizeof cur) || strcmp(cur, last))
            break;
        start = prev;
    }
    return start;
}

static int read_csv(cmb_resume *r, const char *dir, char *err, size_t errlen)
{
    char path[1024];
    size_t len, cap = 0, fcap = 0;
    cmb_resume failed = {0}; /* failed cases, to count them */
    snprintf(path, sizeof path, "%s/results.csv", dir);
    char *text = read_file(path, &len);
    if (!text) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (len < cmb_csv_header_len || memcmp(text, cmb_csv_header, cmb_csv_header_len)) {
        snprintf(err, errlen, "%s does not start with this version's CSV header (harness/schema.def): a run "
                              "of another version of the suite cannot be resumed", path);
        goto out_fail;
    }
    if (text[len - 1] != '\n') {
        /* A case's rows are one write: a torn line ends the file, and the
         * case before the fragment may be cut short too. Both go; read_json
         * then drops their JSON entries and they run again. */
        while (len && text[len - 1] != '\n')
            len--;
        len = drop_last_case(text, len);
        if (replace_file(path, text, len, err, errlen))
            goto out_fail;
        text[len] = '\0';
        r->csv_repaired = 1;
    }
    char *save = NULL;
    strtok_r(text, "\n", &save); /* the header */
    for (char *line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[CMB_N_COLS + 1];
        if (split_csv_line(line, f, CMB_N_COLS + 1) != CMB_N_COLS) {
            snprintf(err, errlen, "%s: a line does not have %d fields: %.80s", path, CMB_N_COLS, line);
            goto out_fail;
        }
        if (!r->run_id[0]) {
            snprintf(r->run_id, sizeof r->run_id, "%s", f[CMB_COL_RUN_ID]);
            snprintf(r->gpu, sizeof r->gpu, "%s", f[CMB_COL_GPU]);
            snprintf(r->mode, sizeof r->mode, "%s", f[CMB_COL_MODE]);
        }
        if ((!r->n_done || strcmp(r->done[r->n_done - 1], f[CMB_COL_CASE])) && add_name(r, &cap, f[CMB_COL_CASE]))
            goto out_nomem;
        if (!strcmp(f[CMB_COL_STATUS], CMB_STATUS_FAILED) &&
            (!failed.n_done || strcmp(failed.done[failed.n_done - 1], f[CMB_COL_CASE])) &&
            add_name(&failed, &fcap, f[CMB_COL_CASE]))
            goto out_nomem;
    }
    sort_names(r);
    sort_names(&failed);
    r->n_failed = failed.n_done;
    cmb_resume_free(&failed);
    free(text);
    return 0;

out_nomem:
    snprintf(err, errlen, "host out of memory");
out_fail:
    cmb_resume_free(&failed);
    free(text);
    return -1;
}

/* --- results.json: drop entries of cases the CSV does not hold ------------------------------------ */

/* The document's text with a cursor: jansson reads each entry and says
 * where it ended, so entries are dropped at their exact bytes and the rest
 * of the file is kept as the library's reporter wrote it. */
typedef struct json_text {
    const char *s;
    size_t len, at;
} json_text;

static void skip_space(json_text *t)
{
    while (t->at < t->len && (t->s[t->at] == ' ' || t->s[t->at] == '\n' || t->s[t->at] == '\t' ||
                              t->s[t->at] == '\r'))
        t->at++;
}

static int take(json_text *t, char ch)
{
    skip_space(t);
    if (t->at >= t->len || t->s[t->at] != ch)
        return -1;
    t->at++;
    return 0;
}

/* The object or array at the cursor, parsed; NULL when it is not one. */
static json_t *take_value(json_text *t)
{
    json_error_t e;
    skip_space(t);
    json_t *v = json_loadb(t->s + t->at, t->len - t->at, JSON_DISABLE_EOF_CHECK, &e);
    if (v)
        t->at += (size_t)e.position; /* the bytes the parser read */
    return v;
}

/* A key of the top-level object ("context", "benchmarks"): 1 when it is
 * `name`, 0 when another, -1 when there is none. */
static int take_key(json_text *t, const char *name)
{
    skip_space(t);
    if (t->at >= t->len || t->s[t->at] != '"')
        return -1;
    size_t start = ++t->at;
    while (t->at < t->len && t->s[t->at] != '"')
        t->at += t->s[t->at] == '\\' ? 2 : 1;
    if (t->at >= t->len)
        return -1;
    int is = t->at - start == strlen(name) && !memcmp(t->s + start, name, t->at - start);
    t->at++;
    return take(t, ':') ? -1 : is;
}

/* Google Benchmark writes NaN and Infinity (a cv over zeros), which JSON
 * lacks: the parser reads a copy in which they are numbers of the same
 * length ("0.0", "0.000000"), so every offset is the original's. */
static void replace_non_numbers(char *s, size_t len)
{
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        if (in_string) {
            if (s[i] == '\\')
                i++; /* the escaped character */
            else
                in_string = s[i] != '"';
        } else if (s[i] == '"') {
            in_string = 1;
        } else if (!strncmp(s + i, "NaN", 3)) {
            memcpy(s + i, "0.0", 3);
        } else if (!strncmp(s + i, "Infinity", 8)) {
            memcpy(s + i, "0.000000", 8);
        }
    }
}

/* Moves the cursor past the '[' of the "benchmarks" list. */
static int find_list(json_text *t)
{
    if (take(t, '{'))
        return -1;
    for (;;) {
        int is = take_key(t, "benchmarks");
        if (is < 0)
            return -1;
        if (is)
            return take(t, '[');
        json_t *skipped = take_value(t);
        int bad = !skipped || take(t, ',');
        json_decref(skipped);
        if (bad)
            return -1;
    }
}

/* What the entries say: where the kept ones end, and the first finished
 * case that follows an unfinished one (the two files disagree). */
typedef struct json_cut {
    size_t keep_end;   /* bytes to keep: through the last finished entry */
    size_t dropped;
    char bad[CMB_BENCH_NAME_MAX];
} json_cut;

/* Walks the entries; each entry's "run_name" is its case's name. */
static int walk_entries(const cmb_resume *r, json_text *t, json_cut *c, char *err, size_t errlen)
{
    c->keep_end = t->at;
    for (int first = 1;; first = 0) {
        skip_space(t);
        if (t->at < t->len && t->s[t->at] == ']')
            return 0;
        if (!first && take(t, ','))
            break;
        json_t *entry = take_value(t);
        const char *name = json_string_value(json_object_get(entry, "run_name"));
        if (!name) {
            json_decref(entry);
            snprintf(err, errlen, "an entry has no run_name");
            return -1;
        }
        int done = cmb_resume_is_done(r, name);
        if (done && c->dropped && !c->bad[0])
            snprintf(c->bad, sizeof c->bad, "%s", name);
        if (done && !c->dropped)
            c->keep_end = t->at;
        c->dropped += !done;
        json_decref(entry);
    }
    snprintf(err, errlen, "the list of entries is damaged");
    return -1;
}

static int read_json(cmb_resume *r, const char *dir, char *err, size_t errlen)
{
    char path[1024], why[256] = "";
    size_t len, cl = sizeof JSON_CLOSING - 1;
    json_cut cut = {0};
    snprintf(path, sizeof path, "%s/results.json", dir);
    char *text = read_file(path, &len);
    if (!text) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char *parsed = malloc(len + 1);
    if (!parsed) {
        free(text);
        snprintf(err, errlen, "host out of memory");
        return -1;
    }
    memcpy(parsed, text, len + 1);
    replace_non_numbers(parsed, len);
    json_text t = {parsed, len, 0};
    /* the closing is where the writer appends (harness/bench_shim.cc) */
    int bad = len < cl || memcmp(text + len - cl, JSON_CLOSING, cl) || find_list(&t) ||
              walk_entries(r, &t, &cut, why, sizeof why);
    free(parsed);
    if (bad) {
        snprintf(err, errlen, "%s is not a results file of this suite, or was damaged%s%s", path,
                 why[0] ? ": " : "", why);
        free(text);
        return -1;
    }
    int rc = 0;
    if (cut.bad[0]) {
        snprintf(err, errlen, "%s and results.csv disagree: case %.200s follows a case the CSV does not hold", path,
                 cut.bad);
        rc = -1;
    } else if (cut.dropped) {
        memcpy(text + cut.keep_end, JSON_CLOSING, cl);
        rc = replace_file(path, text, cut.keep_end + cl, err, errlen);
    }
    r->json_dropped = cut.dropped;
    free(text);
    return rc;
}

int cmb_resume_load(cmb_resume *r, const char *dir, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (read_csv(r, dir, err, errlen))
        return -1;
    if (read_json(r, dir, err, errlen)) {
        cmb_resume_free(r);
        return -1;
    }
    return 0;
}

int cmb_resume_is_done(const cmb_resume *r, const char *name)
{
    return r->n_done && bsearch(&name, r->done, r->n_done, sizeof *r->done, cmp_str) != NULL;
}

void cmb_resume_free(cmb_resume *r)
{
    for (size_t i = 0; i < r->n_done; i++)
        free(r->done[i]);
    free(r->done);
    r->done = NULL;
    r->n_done = 0;
}

/* --- opening the outputs ------------------------------------------------------------------------- */

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
    if (cmb_resume_load(r, dir, err, errlen))
        return -1;
    if (r->mode[0] && strcmp(r->mode, mode)) {
        snprintf(err, errlen, "%s holds a run in %s mode; this one would run in %s mode", dir, r->mode, mode);
        return -1;
    }
    if (r->gpu[0] && strcmp(r->gpu, env->gpu_slug)) {
        snprintf(err, errlen, "%s was measured on %s, this machine has %s: results of two devices would mix", dir,
                 r->gpu, env->gpu_slug);
        return -1;
    }
    if (cmb_output_reopen(out, dir, r->run_id, env, mode, "cumembench", err, errlen))
        return -1;
    fprintf(stderr, "cumembench: resuming %s: %zu finished cases kept%s%s\n", dir, r->n_done,
                r->csv_repaired ? "; a torn last line of results.csv dropped" : "",
                r->json_dropped ? "; results.json entries of an unfinished case dropped" : "");
    return 0;
}
