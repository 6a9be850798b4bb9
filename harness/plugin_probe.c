/* plugin_probe.c - plug-ins loaded and checked in a probe process (see
 * plugin_probe.h): the probe's side, its report, and the parent's loader. */
#define _GNU_SOURCE
#include "plugin_probe.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../allocators/external.h"
#include "../allocators/real.h"
#include "../allocators/upstream.h"
#include "spawn.h"

/* --- fields of a record --------------------------------------------------------------------- */

/* A record is one line of tab-separated fields. A field escapes '\\',
 * tab, newline and carriage return; a NULL string is "\\0". */
static void put_field(FILE *f, const char *s)
{
    fputc('\t', f);
    if (!s) {
        fputs("\\0", f);
        return;
    }
    for (; *s; s++) {
        switch (*s) {
        case '\\': fputs("\\\\", f); break;
        case '\t': fputs("\\t", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        default: fputc(*s, f);
        }
    }
}

/* The field in place (it only shrinks); 1 when it was "\\0" (NULL), 0
 * otherwise, -1 for an escape this writer does not make. */
static int unescape(char *s)
{
    if (!strcmp(s, "\\0"))
        return 1;
    char *w = s;
    for (const char *r = s; *r; r++) {
        if (*r != '\\') {
            *w++ = *r;
            continue;
        }
        r++;
        char c = *r == '\\' ? '\\' : *r == 't' ? '\t' : *r == 'n' ? '\n' : *r == 'r' ? '\r' : 0;
        if (!c)
            return -1;
        *w++ = c;
    }
    *w = '\0';
    return 0;
}

void cmb_plugin_report_table(FILE *f, const cmb_allocator_methods *m)
{
    fprintf(f, "table\t%u\t%u", m->abi_version, m->flags);
    put_field(f, m->name);
    put_field(f, m->summary);
    fputc('\n', f);
    for (const cmb_option_decl *d = m->options; d && d->name; d++) {
        fprintf(f, "option\t%d\t%u", (int)d->type, d->flags);
        const char *text[] = {d->name, d->dflt, d->min, d->max, d->unit, d->help, d->choices, d->excludes};
        for (size_t i = 0; i < sizeof text / sizeof text[0]; i++)
            put_field(f, text[i]);
        fputc('\n', f);
    }
}

/* --- the describing table ------------------------------------------------------------------------ */

/* Its methods refuse: a table from a report is never run in this process. */
static cmb_status described_create(const cmb_config *cfg, cmb_upstream *up, void **state)
{
    (void)up;
    (void)state;
    snprintf(cfg->error, cfg->error_len, "a plug-in runs only in a case's process, never in cumembench's parent");
    return CMB_ERR_UNSUPPORTED;
}

static cmb_status described_alloc(void *state, size_t size, cmb_stream stream, void **ptr)
{
    (void)state, (void)size, (void)stream, (void)ptr;
    return CMB_ERR_STATE;
}

static cmb_status described_free(void *state, void *ptr, size_t size, cmb_stream stream)
{
    (void)state, (void)ptr, (void)size, (void)stream;
    return CMB_ERR_STATE;
}

static cmb_status described_stats(void *state, cmb_alloc_stats *out)
{
    (void)state, (void)out;
    return CMB_ERR_STATE;
}

static cmb_status described_destroy(void *state)
{
    (void)state;
    return CMB_ERR_STATE;
}

#define MAX_FIELDS 12
#define MAX_OPTIONS 128

/* A report's table under construction: kept for the life of the process
 * once the report is read (one per plug-in, a handful per run). */
typedef struct described {
    cmb_allocator_methods m;
    cmb_option_decl decls[MAX_OPTIONS + 1];
    size_t n_decls;
} described;

static char *keep(const char *s, int is_null)
{
    return is_null ? NULL : strdup(s);
}

/* A table read in part: its strings and itself. */
static void drop(described *d)
{
    if (!d)
        return;
    free((char *)d->m.name);
    free((char *)d->m.summary);
    for (size_t i = 0; i < d->n_decls; i++) {
        cmb_option_decl *o = &d->decls[i];
        const char *text[] = {o->name, o->dflt, o->min, o->max, o->unit, o->help, o->choices, o->excludes};
        for (size_t k = 0; k < sizeof text / sizeof text[0]; k++)
            free((char *)text[k]);
    }
    free(d);
}

/* The line split into unescaped fields; the count, or -1. */
static int split(char *line, char **field, int *is_null)
{
    int n = 0;
    for (char *t; (t = strsep(&line, "\t"));) { /* strsep keeps empty fields */
        if (n == MAX_FIELDS || (is_null[n] = unescape(t)) < 0)
            return -1;
        field[n++] = t;
    }
    return n;
}

static int read_table(described *d, char **fv, const int *nul, int n)
{
    if (n != 5 || nul[3])
        return -1;
    d->m.abi_version = (uint32_t)strtoul(fv[1], NULL, 10);
    d->m.flags = (uint32_t)strtoul(fv[2], NULL, 10);
    d->m.name = keep(fv[3], 0);
    d->m.summary = keep(fv[4], nul[4]);
    return 0;
}

static int read_option(described *d, char **fv, const int *nul, int n)
{
    if (n != 11 || nul[3] || d->n_decls == MAX_OPTIONS)
        return -1;
    cmb_option_decl *o = &d->decls[d->n_decls++];
    o->type = (cmb_option_type)atoi(fv[1]);
    o->flags = (uint32_t)strtoul(fv[2], NULL, 10);
    const char **text[] = {&o->name, &o->dflt, &o->min, &o->max, &o->unit, &o->help, &o->choices, &o->excludes};
    for (int i = 0; i < 8; i++)
        *text[i] = keep(fv[3 + i], nul[3 + i]);
    return 0;
}

static int read_record(cmb_plugin_report *r, described *d, char *line)
{
    char *fv[MAX_FIELDS];
    int nul[MAX_FIELDS];
    int n = split(line, fv, nul);
    if (n <= 0)
        return -1;
    if (!strcmp(fv[0], "stage") && n == 2 && strlen(fv[1]) < sizeof r->stage)
        snprintf(r->stage, sizeof r->stage, "%s", fv[1]);
    else if (!strcmp(fv[0], "table") && !d->m.name)
        return read_table(d, fv, nul, n);
    else if (!strcmp(fv[0], "option") && d->m.name)
        return read_option(d, fv, nul, n);
    else if (!strcmp(fv[0], "error") && n == 2)
        snprintf(r->error, sizeof r->error, "%s", fv[1]);
    else if (!strcmp(fv[0], "ok") && n == 1 && d->m.name)
        r->ok = 1;
    else
        return -1;
    return 0;
}

/* The describing table, with today's ABI (its option field is read). */
static const cmb_allocator_methods *finish(described *d)
{
    d->m.abi_version = CMB_ALLOCATOR_ABI_VERSION;
    d->m.create = described_create;
    d->m.allocate = described_alloc;
    d->m.deallocate = described_free;
    d->m.stats = described_stats;
    d->m.destroy = described_destroy;
    d->m.options = d->n_decls ? d->decls : NULL;
    return &d->m;
}

int cmb_plugin_report_read(const char *text, cmb_plugin_report *r)
{
    memset(r, 0, sizeof *r);
    described *d = calloc(1, sizeof *d);
    char *copy = strdup(text);
    int rc = -1;
    if (!d || !copy) {
        snprintf(r->error, sizeof r->error, "host out of memory reading a plug-in's probe report");
        goto out;
    }
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (read_record(r, d, line)) {
            snprintf(r->error, sizeof r->error, "the probe's report is malformed near '%.60s'", line);
            goto out;
        }
    rc = 0;
    if (r->ok) {
        r->methods = finish(d);
        d = NULL; /* kept: the table lives as long as the process */
    }
out:
    drop(d);
    free(copy);
    return rc;
}

void cmb_plugin_report_release(cmb_plugin_report *r)
{
    drop((described *)r->methods); /* the table is the first member */
    r->methods = NULL;
}

/* --- the probe process --------------------------------------------------------------------- */

static void stage(FILE *rep, const char *what)
{
    fprintf(rep, "stage\t%s\n", what);
    fflush(rep); /* a crash in the next step leaves this line */
}

static int fail(FILE *rep, const char *why)
{
    fputs("error", rep);
    put_field(rep, why);
    fputc('\n', rep);
    fflush(rep);
    return 1;
}

/* An instance over the sim upstream with the allocator's defaults, then
 * destroyed. A table that needs a GPU is not created here. */
static int create_destroy(FILE *rep, const cmb_allocator_methods *m)
{
    char why[320] = "", msg[512];
    cmb_upstream *up = NULL;
    void *state = NULL;
    if (m->flags & CMB_ALLOC_NEEDS_GPU)
        return 0;
    cmb_upstream_config ucfg;
    cmb_upstream_config_default(&ucfg);
    ucfg.kind = CMB_UPSTREAM_SIM;
    if ((m->flags & CMB_ALLOC_USES_UPSTREAM) && cmb_upstream_open(&ucfg, &up, why, sizeof why) != CMB_OK) {
        snprintf(msg, sizeof msg, "cannot open the sim upstream to create it: %s", why);
        return fail(rep, msg);
    }
    cmb_config cfg = {.device = 0, .sim = 1, .error = why, .error_len = sizeof why};
    stage(rep, "create");
    cmb_status st = m->create(&cfg, up, &state);
    if (st == CMB_OK) {
        stage(rep, "destroy");
        if ((st = m->destroy(state)) != CMB_OK)
            snprintf(why, sizeof why, "its destroy() returned %s", cmb_status_str(st));
    }
    if (up)
        cmb_upstream_close(up);
    if (st != CMB_OK) {
        snprintf(msg, sizeof msg, "creating an instance over the sim upstream with its defaults failed: %s",
                 why[0] ? why : cmb_status_str(st));
        return fail(rep, msg);
    }
    return 0;
}

int cmb_plugin_probe_main(const char *path, const char *real_name)
{
    char why[512] = "";
    const cmb_allocator_methods *m = NULL;
    const cmb_real_info *ri = real_name ? cmb_real_find(real_name) : NULL;
    FILE *rep = fdopen(3, "w");
    if (!rep) {
        fprintf(stderr, "cumembench: %s: no report descriptor (3)\n", CMB_ARG_PROBE_PLUGIN);
        return 2;
    }
    if (real_name && !ri)
        return fail(rep, "no such real allocator");
    stage(rep, "load");
    dlopen(path, RTLD_NOW | RTLD_LOCAL); /* its constructors run here; a failure is told below */
    stage(rep, "table");
    if (ri ? cmb_real_load(ri, path, &m, why, sizeof why) : cmb_external_load(path, &m, why, sizeof why))
        return fail(rep, why);
    cmb_plugin_report_table(rep, m);
    fflush(rep);
    if (create_destroy(rep, m))
        return 1;
    stage(rep, "exit");
    fputs("ok\n", rep);
    return fclose(rep) ? 2 : 0;
}

/* --- the parent's loader ------------------------------------------------------------------- */

/* One probe per plug-in (path and real: name) and process; failures are
 * kept too, so a plug-in named twice is probed once. */
#define MAX_PROBED 64

typedef struct probed {
    char path[PATH_MAX];
    char real_name[64];
    const cmb_allocator_methods *m;
    char why[512];
} probed;

static probed cache[MAX_PROBED];
static size_t n_cached;
static char self_exe[PATH_MAX];

static double probe_timeout(char *err, size_t errlen)
{
    const char *v = getenv(CMB_PLUGIN_PROBE_TIMEOUT_ENV);
    char *end;
    if (!v || !*v)
        return CMB_PLUGIN_PROBE_TIMEOUT_S;
    double t = strtod(v, &end);
    if (*end || !(t > 0 && t <= 600)) {
        snprintf(err, errlen, "%s=%s: not a number of seconds in (0, 600]", CMB_PLUGIN_PROBE_TIMEOUT_ENV, v);
        return -1;
    }
    return t;
}

static const char *stage_words(const char *stage)
{
    if (!strcmp(stage, "load"))
        return "while loading it (dlopen: its constructors)";
    if (!strcmp(stage, "table"))
        return "while asking it for its table and checking its ABI";
    if (!strcmp(stage, "create"))
        return "while creating an instance over the sim upstream";
    if (!strcmp(stage, "destroy"))
        return "while destroying its instance";
    if (!strcmp(stage, "exit"))
        return "while the probe process exited (its destructors)";
    return "before loading it";
}

/* The last line the probe printed, made one line of at most 160 bytes. */
static void last_output(const cmb_child_result *res, char *out, size_t len)
{
    char tail[sizeof res->tail];
    snprintf(tail, sizeof tail, "%s", res->tail);
    size_t n = strlen(tail);
    while (n && (tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == ' '))
        tail[--n] = '\0';
    const char *line = strrchr(tail, '\n') ? strrchr(tail, '\n') + 1 : tail;
    out[0] = '\0';
    if (*line)
        snprintf(out, len, " (its last output: %.160s)", line);
    for (char *c = out; *c; c++)
        if ((unsigned char)*c < 0x20)
            *c = ' ';
}

/* Why a probe that left no verdict failed, in one line. */
static void describe_failure(const char *who, const char *path, const cmb_child_result *res, const cmb_plugin_report *r,
                             double timeout, char *why, size_t len)
{
    char how[160], said[200];
    const char *when = stage_words(r->stage);
    last_output(res, said, sizeof said);
    cmb_child_result_describe(res, how, sizeof how);
    if (res->interrupted)
        snprintf(why, len, "interrupted while the probe process checked %s", who);
    else if (res->timed_out)
        snprintf(why, len, "%s: the plug-in did not answer within %g s %s; killed (the probe's limit, %s)%s", who,
                 timeout, when, CMB_PLUGIN_PROBE_TIMEOUT_ENV, said);
    else if (res->signaled)
        snprintf(why, len, "%s: the plug-in crashed its probe process (%s) %s%s", who, how, when, said);
    else if (r->error[0] && strstr(r->error, path))
        snprintf(why, len, "%s", r->error);
    else if (r->error[0])
        snprintf(why, len, "%s: %s", who, r->error);
    else
        snprintf(why, len, "%s: the plug-in ended the probe process (%s) %s, with no report%s", who,
                 how, when, said);
}

/* Runs the probe of one plug-in: its describing table into p->m, or the
 * reason into p->why. */
static void probe(probed *p)
{
    char who[PATH_MAX + 80], report_text[65536];
    cmb_spawn_buffer report = {report_text, sizeof report_text, 0};
    cmb_child_result res;
    cmb_plugin_report r = {0};
    report_text[0] = '\0';
    snprintf(who, sizeof who, p->real_name[0] ? "%s (plug-in %s)" : "external:%s", p->real_name[0] ? p->real_name : p->path, p->path);
    double timeout = probe_timeout(p->why, sizeof p->why);
    if (timeout < 0)
        return;
    char *argv[] = {self_exe, CMB_ARG_PROBE_PLUGIN, p->path, CMB_ARG_PROBE_REAL, p->real_name, NULL};
    if (!p->real_name[0])
        argv[3] = NULL;
    if (cmb_spawn_run(argv, timeout, cmb_spawn_buffer_append, &report, NULL, NULL, NULL, &res)) {
        snprintf(p->why, sizeof p->why, "%s: cannot start the probe process (%s)", who, self_exe);
        return;
    }
    if (report.len == report.cap - 1)
        snprintf(r.error, sizeof r.error, "%s: the probe's report is longer than %zu bytes", who, report.cap - 1);
    else if (cmb_plugin_report_read(report_text, &r) == 0 && r.ok && res.ok) {
        p->m = r.methods;
        return;
    }
    cmb_plugin_report_release(&r); /* a report, then a crash on the way out */
    describe_failure(who, p->path, &res, &r, timeout, p->why, sizeof p->why);
}

static int probe_loader(const char *path, const char *real_name, const cmb_allocator_methods **out, char *err,
                        size_t errlen)
{
    probed *p = NULL;
    real_name = real_name ? real_name : "";
    for (size_t i = 0; i < n_cached && !p; i++)
        if (!strcmp(cache[i].path, path) && !strcmp(cache[i].real_name, real_name))
            p = &cache[i];
    if (!p) {
        if (n_cached == MAX_PROBED || strlen(path) >= sizeof p->path || strlen(real_name) >= sizeof p->real_name) {
            snprintf(err, errlen, "%s: too many plug-ins, or a path too long", path);
            return -1;
        }
        p = &cache[n_cached++];
        snprintf(p->path, sizeof p->path, "%s", path);
        snprintf(p->real_name, sizeof p->real_name, "%s", real_name);
        probe(p);
        if (cmb_interrupted)
            n_cached--; /* not a verdict on the plug-in */
    }
    *out = p->m;
    if (!p->m)
        snprintf(err, errlen, "%s", p->why);
    return p->m ? 0 : -1;
}

void cmb_plugin_probe_install(void)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    self_exe[n > 0 ? n : 0] = '\0';
    cmb_plugin_loader_set(probe_loader);
}
