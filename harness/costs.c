/* costs.c - predicted allocator time from a case's counts and a cost file
 * (docs/costs.md). */
#define _GNU_SOURCE
#include "costs.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../allocators/real.h"
#include "../scenarios/scenario.h"

/* --- reading a cost file ----------------------------------------------------------------------- */

static const char *const call_names[CMB_CC_COUNT] = {
    "cudaMalloc", "cudaFree", "cudaFree_in_flight", "cuMemCreate", "cuMemMap", "cuMemSetAccess",
    "cuMemUnmap", "cuMemRelease", "cudaMallocAsync", "cudaFreeAsync", "cudaEventRecord", "cudaEventQuery",
    "cudaDeviceSynchronize_in_flight", "cuMemSetAccess_handles"};

/* points: [{x, median_s, ...}] ascending in x; -1 when malformed. */
static int read_curve(json_t *points, cmb_cost_curve *cv)
{
    size_t i;
    json_t *p;
    cv->n = 0;
    if (!json_is_array(points) || json_array_size(points) > CMB_COST_POINTS)
        return -1;
    json_array_foreach(points, i, p) {
        double x = json_number_value(json_object_get(p, "x"));
        double s = json_number_value(json_object_get(p, "median_s"));
        if (!json_is_number(json_object_get(p, "x")) || !json_is_number(json_object_get(p, "median_s")) ||
            x <= 0 || s < 0 || (cv->n && x <= cv->x[cv->n - 1]))
            return -1;
        cv->x[cv->n] = x;
        cv->s[cv->n++] = s;
    }
    return 0;
}

static int read_reals(json_t *real, cmb_costs *out)
{
    const char *name;
    json_t *v;
    json_object_foreach(real, name, v) {
        if (json_is_object(v) && json_is_array(json_object_get(v, "points")))
            v = json_object_get(v, "points"); /* calibrate writes {"points": [...], "unit": ...} */
        if (!json_is_array(v) || out->n_real == CMB_COST_REALS)
            continue; /* {"skipped": why}: not calibrated */
        snprintf(out->real_name[out->n_real], sizeof out->real_name[0], "%s", name);
        if (read_curve(v, &out->real_pair[out->n_real]))
            return -1;
        out->n_real++;
    }
    return 0;
}

static int read_doc(json_t *doc, cmb_costs *out, char *err, size_t errlen)
{
    json_t *calls = json_object_get(doc, "calls");
    const char *fmt = json_string_value(json_object_get(doc, "format"));
    if (!fmt || strcmp(fmt, "cumembench-costs/1") || !json_is_object(calls))
        return snprintf(err, errlen, "not a cumembench cost file (format cumembench-costs/1)"), -1;
    const char *gpu = json_string_value(json_object_get(json_object_get(doc, "gpu"), "name"));
    snprintf(out->gpu, sizeof out->gpu, "%s", gpu ? gpu : "?");
    out->granularity = json_number_value(json_object_get(calls, "granularity_bytes"));
    if (out->granularity <= 0)
        out->granularity = 2u << 20;
    for (int k = 0; k < CMB_CC_COUNT; k++) {
        json_t *e = json_object_get(calls, call_names[k]);
        if (e && read_curve(json_object_get(e, "points"), &out->call[k]))
            return snprintf(err, errlen, "malformed points of %s", call_names[k]), -1;
    }
    json_t *idle = json_object_get(calls, "cudaStreamSynchronize");
    if (!out->call[CMB_CC_STREAM_SYNC].n && idle &&
        read_curve(json_object_get(idle, "points"), &out->call[CMB_CC_STREAM_SYNC]))
        return snprintf(err, errlen, "malformed points of cudaStreamSynchronize"), -1;
    if (!out->call[CMB_CC_MALLOC].n || !out->call[CMB_CC_FREE].n)
        return snprintf(err, errlen, "no cudaMalloc/cudaFree points"), -1;
    if (read_reals(json_object_get(doc, "real"), out))
        return snprintf(err, errlen, "malformed real: points"), -1;
    return 0;
}

int cmb_costs_load(const char *path, cmb_costs *out, char *err, size_t errlen)
{
    json_error_t je;
    struct stat st;
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f || fstat(fileno(f), &st)) {
        snprintf(err, errlen, "cost file %s: %s", path, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) { /* a directory cannot be read, /dev/zero would be read forever */
        snprintf(err, errlen, "cost file %s: not a regular file", path);
        fclose(f);
        return -1;
    }
    json_t *doc = json_loadf(f, 0, &je);
    fclose(f);
    if (!doc) {
        if (je.line > 0)
            snprintf(err, errlen, "cost file %s: %s (line %d)", path, je.text, je.line);
        else
            snprintf(err, errlen, "cost file %s: %s", path, je.text);
        return -1;
    }
    char why[200];
    int rc = read_doc(doc, out, why, sizeof why);
    if (rc)
        snprintf(err, errlen, "cost file %s: %s", path, why);
    json_decref(doc);
    return rc;
}

/* --- finding the committed one ------------------------------------------------------------------- */

static size_t shared_prefix(const char *a, const char *b)
{
    size_t n = 0;
    while (a[n] && a[n] == b[n])
        n++;
    return n;
}

/* results/ beside the working directory, else beside the binary's parent. */
static int results_dir(char *dir, size_t len)
{
    if (access("results", R_OK) == 0)
        return snprintf(dir, len, "results"), 0;
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    snprintf(dir, len, "%s/../results", exe);
    return access(dir, R_OK) == 0 ? 0 : -1;
}

/* The GPU's directory name under results/ (harness/env.c's slug): its
 * words lower-cased and joined by '-'. "NVIDIA H200" -> "nvidia-h200". */
static size_t gpu_slug(const char *model, char *slug, size_t len)
{
    size_t n = 0;
    for (const char *p = model; *p && n + 1 < len; p++)
        if (isalnum((unsigned char)*p))
            slug[n++] = (char)tolower((unsigned char)*p);
        else if (n && slug[n - 1] != '-')
            slug[n++] = '-';
    while (n && slug[n - 1] == '-')
        n--;
    slug[n] = '\0';
    return n;
}

/* The directories of results/ that hold a costs.json, in name order (so a
 * tie and a message come out the same on every file system). */
static int cost_dirs(char *dir, size_t len, struct dirent ***list)
{
    if (results_dir(dir, len))
        return -1;
    return scandir(dir, list, NULL, alphasort);
}

static int has_costs(const char *dir, const struct dirent *e)
{
    char probe[900];
    snprintf(probe, sizeof probe, "%s/%s/costs.json", dir, e->d_name);
    return e->d_name[0] != '.' && access(probe, R_OK) == 0;
}

/* 1 when the slug `want` is the words `words`, then nothing or more words. */
static int starts_with_words(const char *want, const char *words)
{
    size_t n = strlen(words);
    return n && !strncmp(want, words, n) && (want[n] == '\0' || want[n] == '-');
}

/* How much of the GPU directory `dir` (a slug) the slug `want` names: its
 * words, then nothing or more ("nvidia-h100-80gb-hbm3" is nvidia-h100's
 * card), the vendor's word optional ("h100"); 0 when `want` is another GPU
 * or only part of a word ("n", "nvidia-h10"). */
static size_t names_gpu(const char *dir, const char *want)
{
    const char *dash = strchr(dir, '-');
    if (starts_with_words(want, dir))
        return strlen(dir);
    return dash && starts_with_words(want, dash + 1) ? strlen(dash + 1) : 0;
}

/* The committed cost file (results/<gpu>/costs.json) whose directory
 * scores highest against the slug `want` (the first in name order on a
 * tie): its path and score. With `any`, a directory scoring 0 still
 * counts; without, -1 when none scores above 0, as when none is committed. */
static int best_cost_file(const char *want, size_t (*score)(const char *dir, const char *want), int any,
                          char *path, size_t len, size_t *best_score)
{
    char dir[600], best[256] = "";
    size_t best_n = 0;
    struct dirent **list;
    int n = cost_dirs(dir, sizeof dir, &list);
    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        size_t k = score(list[i]->d_name, want);
        if ((k > best_n || (any && !best[0])) && has_costs(dir, list[i])) {
            best_n = k;
            snprintf(best, sizeof best, "%s", list[i]->d_name);
        }
        free(list[i]);
    }
    free(list);
    if (!best[0])
        return -1;
    snprintf(path, len, "%s/%s/costs.json", dir, best);
    *best_score = best_n;
    return 0;
}

/* The committed cost file whose directory shares the longest prefix with
 * `want`; the prefix's length in *shared. */
static int closest_cost_file(const char *want, char *path, size_t len, size_t *shared)
{
    return best_cost_file(want, shared_prefix, 1, path, len, shared);
}

/* The committed cost file of the GPU the slug `want` names (names_gpu; the
 * most specific directory when several do). */
static int named_cost_file(const char *want, char *path, size_t len)
{
    size_t named;
    return best_cost_file(want, names_gpu, 0, path, len, &named);
}

int cmb_costs_default_path(const char *gpu_model, char *path, size_t len)
{
    char slug[128];
    size_t shared;
    if (!gpu_model || !gpu_slug(gpu_model, slug, sizeof slug))
        snprintf(slug, sizeof slug, "nvidia-h100");
    if (!named_cost_file(slug, path, len))
        return 0;
    return closest_cost_file(slug, path, len, &shared);
}

/* --- chosen on the command line ------------------------------------------------------------------- */

int cmb_costs_use_file(const char *path, char *err, size_t errlen)
{
    char abs[PATH_MAX];
    struct stat st;
    if (access(path, R_OK) || stat(path, &st)) {
        snprintf(err, errlen, "--costs %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) { /* /dev/zero would be read forever */
        snprintf(err, errlen, "--costs %s: not a regular file", path);
        return -1;
    }
    cmb_costs *c = malloc(sizeof *c);
    if (!c) {
        snprintf(err, errlen, "--costs: host out of memory");
        return -1;
    }
    int rc = cmb_costs_load(path, c, err, errlen);
    free(c);
    if (rc)
        return -1;
    if (!realpath(path, abs)) {
        snprintf(err, errlen, "--costs %s: %s", path, strerror(errno));
        return -1;
    }
    return setenv(CMB_COSTS_ENV, abs, 1);
}

/* The committed GPUs with a cost file, "a, b", for a message. */
static void committed_gpus(char *out, size_t len)
{
    char dir[600];
    struct dirent **list;
    size_t used = 0;
    int n = cost_dirs(dir, sizeof dir, &list);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (used < len && has_costs(dir, list[i]))
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "", list[i]->d_name);
        free(list[i]);
    }
    if (n >= 0)
        free(list);
}

int cmb_costs_use_gpu_model(const char *model, char *err, size_t errlen)
{
    char slug[128], path[1024], have[512];
    if (!gpu_slug(model, slug, sizeof slug) || named_cost_file(slug, path, sizeof path)) {
        committed_gpus(have, sizeof have);
        snprintf(err, errlen, "--gpu-model %s: no committed cost file is close to '%s' (committed: %s); name one of "
                 "those, measure one with cumembench calibrate on that GPU, or give --costs FILE", model, slug,
                 have[0] ? have : "none");
        return -1;
    }
    return cmb_costs_use_file(path, err, errlen);
}

/* --- the prediction ------------------------------------------------------------------------------ */

double cmb_cost_at(const cmb_cost_curve *cv, double x)
{
    if (!cv->n)
        return 0;
    if (x <= cv->x[0])
        return cv->s[0];
    for (int i = 1; i < cv->n; i++) {
        if (x <= cv->x[i]) {
            double f = (log(x) - log(cv->x[i - 1])) / (log(cv->x[i]) - log(cv->x[i - 1]));
            return cv->s[i - 1] + f * (cv->s[i] - cv->s[i - 1]);
        }
    }
    return cv->s[cv->n - 1];
}

int cmb_costs_access_per_handle(const cmb_costs *c)
{
    return c->call[CMB_CC_SET_ACCESS_HANDLES].n > 0;
}

/* n calls of curve `cc` at the bucket's mean size (pages for cuMem*). */
static double priced(const cmb_costs *c, cmb_cost_call cc, uint64_t n, uint64_t bytes, int pages)
{
    double mean = (double)bytes / (double)n;
    if (pages)
        mean = ceil(mean / c->granularity);
    return (double)n * cmb_cost_at(&c->call[cc], mean > 0 ? mean : 1);
}

/* n cuMemSetAccess calls at defer_access(0), over `handles` handles in
 * all: per handle where the file measured it (cuMemSetAccess_handles at
 * the calls' mean handles), else as one handle of the mean pages. */
static double priced_access_runs(const cmb_costs *c, uint64_t n, uint64_t bytes, uint64_t handles)
{
    if (!cmb_costs_access_per_handle(c) || !handles)
        return priced(c, CMB_CC_SET_ACCESS, n, bytes, 1);
    double mean = (double)handles / (double)n;
    return (double)n * cmb_cost_at(&c->call[CMB_CC_SET_ACCESS_HANDLES], mean > 1 ? mean : 1);
}

/* `handles`: CMB_UPK_SET_ACCESS's, the handles its n calls covered (0: not counted) */
static void price_bucket(const cmb_costs *c, cmb_up_kind k, uint64_t n, uint64_t bytes, uint64_t handles,
                         cmb_cost_parts *o)
{
    switch (k) {
    case CMB_UPK_ALLOC:
        o->upstream_s += priced(c, CMB_CC_MALLOC, n, bytes, 0);
        break;
    case CMB_UPK_FREE: { /* cudaFree synchronizes the device: its cost with work queued */
        double idle = priced(c, CMB_CC_FREE, n, bytes, 0);
        double busy = priced(c, CMB_CC_FREE_IN_FLIGHT, n, bytes, 0);
        o->upstream_s += idle;
        o->sync_s += busy > idle ? busy - idle : 0;
        break;
    }
    case CMB_UPK_MAP:
        o->upstream_s += priced(c, CMB_CC_MEM_CREATE, n, bytes, 1) + priced(c, CMB_CC_MEM_MAP, n, bytes, 1) +
                         priced(c, CMB_CC_SET_ACCESS, n, bytes, 1);
        break;
    case CMB_UPK_UNMAP:
        o->upstream_s += priced(c, CMB_CC_MEM_UNMAP, n, bytes, 1) + priced(c, CMB_CC_MEM_RELEASE, n, bytes, 1);
        break;
    case CMB_UPK_PARK: /* cuMemUnmap, the handle kept: priced per call as one unmap */
        o->upstream_s += priced(c, CMB_CC_MEM_UNMAP, n, bytes, 1);
        break;
    case CMB_UPK_UNPARK:
        o->upstream_s += priced(c, CMB_CC_MEM_MAP, n, bytes, 1) + priced(c, CMB_CC_SET_ACCESS, n, bytes, 1);
        break;
    case CMB_UPK_DROP_PARKED:
        o->upstream_s += priced(c, CMB_CC_MEM_RELEASE, n, bytes, 1);
        break;
    case CMB_UPK_MAP_NOACCESS: /* defer_access: the access priced once per range below */
        o->upstream_s += priced(c, CMB_CC_MEM_CREATE, n, bytes, 1) + priced(c, CMB_CC_MEM_MAP, n, bytes, 1);
        break;
    case CMB_UPK_UNPARK_NOACCESS:
        o->upstream_s += priced(c, CMB_CC_MEM_MAP, n, bytes, 1);
        break;
    case CMB_UPK_SET_ACCESS: /* one cuMemSetAccess over a range of several handles */
        o->upstream_s += priced_access_runs(c, n, bytes, handles);
        break;
    case CMB_UPK_EVENT_RECORD:
        o->upstream_s += (double)n * cmb_cost_at(&c->call[CMB_CC_EVENT_RECORD], 1);
        break;
    case CMB_UPK_EVENT_QUERY:
        o->upstream_s += (double)n * cmb_cost_at(&c->call[CMB_CC_EVENT_QUERY], 1);
        break;
    case CMB_UPK_STREAM_SYNC:
        o->sync_s += (double)n * cmb_cost_at(&c->call[CMB_CC_STREAM_SYNC], 1);
        break;
    default: /* address reservations: rare, not calibrated */
        break;
    }
}

/* The real library an allocator is, or emulates, when the file has it. */
static const cmb_cost_curve *real_pair(const cmb_costs *c, const char *allocator, const char **name)
{
    const char *want = allocator;
    if (strncmp(allocator, CMB_REAL_PREFIX, strlen(CMB_REAL_PREFIX))) {
        want = NULL;
        for (size_t i = 0; i < cmb_real_count() && !want; i++)
            if (!strcmp(cmb_real_at(i)->emulation, allocator))
                want = cmb_real_at(i)->name;
    }
    for (int i = 0; want && i < c->n_real; i++)
        if (!strcmp(c->real_name[i], want))
            return *name = c->real_name[i], &c->real_pair[i];
    return NULL;
}

static void price_ops(const cmb_costs *c, const cmb_cost_input *in, cmb_cost_parts *o)
{
    const char *name = NULL, *ops_env = getenv(CMB_COSTS_OPS_ENV);
    /* bookkeeping: the policy's own code runs (through libcmb_pluggable),
     * not the library it emulates */
    int own_code = in->own_code || (ops_env && !strcmp(ops_env, "bookkeeping"));
    const cmb_cost_curve *pair = own_code ? NULL : real_pair(c, in->allocator, &name);
    double ops = (double)(in->allocs + in->frees);
    double mean = in->mean_request > 0 ? in->mean_request : 1;
    if (pair) {
        o->ops_s = ops / 2 * cmb_cost_at(pair, mean);
        o->ops_from = "real library's calibrated alloc+free pair";
    } else if (!strcmp(in->allocator, "cuda")) {
        o->ops_s = 0; /* every request is the upstream call priced above */
        o->ops_from = "upstream calls only";
    } else if (!strcmp(in->allocator, "cuda-async")) {
        o->ops_s = (double)in->allocs * cmb_cost_at(&c->call[CMB_CC_MALLOC_ASYNC], mean) +
                   (double)in->frees * cmb_cost_at(&c->call[CMB_CC_FREE_ASYNC], mean);
        o->ops_from = "calibrated cudaMallocAsync/cudaFreeAsync";
    } else {
        o->ops_s = in->bookkeeping_s; /* the suite's own code: the same work on a GPU */
        o->ops_from = "measured bookkeeping";
    }
}

void cmb_costs_predict(const cmb_costs *c, const cmb_cost_input *in, cmb_cost_parts *out)
{
    memset(out, 0, sizeof *out);
    for (int k = 0; in->up && k < CMB_UPK_COUNT; k++)
        for (int b = 0; b < CMB_UP_BUCKETS; b++)
            if (in->up->calls[k][b])
                price_bucket(c, (cmb_up_kind)k, in->up->calls[k][b], in->up->bytes[k][b],
                             k == CMB_UPK_SET_ACCESS ? in->up->access_handles[b] : 0, out);
    price_ops(c, in, out);
    out->total_s = out->upstream_s + out->sync_s + out->ops_s;
}

/* --- into the case's counters ---------------------------------------------------------------------- */

static const cmb_costs *process_costs(struct cmb_case *c)
{
    static int tried;
    static cmb_costs costs;
    static int ok;
    if (!tried) {
        tried = 1;
        char path[1024], err[700];
        const char *given = getenv(CMB_COSTS_ENV);
        if (given && *given)
            snprintf(path, sizeof path, "%s", given);
        else if (cmb_costs_default_path(getenv(CMB_COSTS_GPU_ENV), path, sizeof path))
            return NULL; /* none committed: the answers say 'no cost file' */
        ok = cmb_costs_load(path, &costs, err, sizeof err) == 0;
        if (!ok)
            cmb_case_note(c, "%s", err);
    }
    return ok ? &costs : NULL;
}

static const char *const up_counter[CMB_UPK_COUNT] = {
    "up_alloc_calls", "up_free_calls", "up_map_calls", "up_unmap_calls", "up_va_reserve_calls",
    "up_va_release_calls", "up_event_record_calls", "up_event_query_calls", "up_stream_sync_calls",
    "up_park_calls", "up_unpark_calls", "up_drop_parked_handles", "up_map_noaccess_calls",
    "up_unpark_noaccess_calls", "up_set_access_calls"};

static void put_counts(struct cmb_case *c, const cmb_up_counts *n)
{
    for (int k = 0; k < CMB_UPK_COUNT; k++) {
        uint64_t calls = 0;
        for (int b = 0; b < CMB_UP_BUCKETS; b++)
            calls += n->calls[k][b];
        if (calls)
            cmb_case_counter(c, up_counter[k], (double)calls);
    }
}

/* An access call of the case that covered several handles. */
static int access_over_handles(const cmb_up_counts *n)
{
    for (int b = 0; n && b < CMB_UP_BUCKETS; b++)
        if (n->access_handles[b] > n->calls[CMB_UPK_SET_ACCESS][b])
            return 1;
    return 0;
}

void cmb_costs_put(struct cmb_case *c, const cmb_metered *mt, const char *allocator)
{
    if (mt->up_counts)
        put_counts(c, mt->up_counts);
    const cmb_costs *costs = process_costs(c);
    if (!costs)
        return;
    if (!cmb_costs_access_per_handle(costs) && access_over_handles(mt->up_counts))
        cmb_case_note(c, "cost file without cuMemSetAccess_handles: an access over several handles priced as "
                         "over one (under-priced; docs/costs.md)");
    cmb_cost_input in = {allocator, mt->up_counts, mt->allocs, mt->frees,
                         mt->allocs ? (double)mt->requested.total / (double)mt->allocs : 0,
                         (double)(mt->alloc_ns.sum_ns + mt->free_ns.sum_ns) * 1e-9, 0};
    cmb_cost_parts p;
    cmb_costs_predict(costs, &in, &p);
    cmb_case_counter(c, "predicted_alloc_time_s", p.total_s);
    cmb_case_counter(c, "predicted_upstream_time_s", p.upstream_s);
    cmb_case_counter(c, "predicted_sync_time_s", p.sync_s);
    cmb_case_counter(c, "predicted_ops_time_s", p.ops_s);
}

/* --- the last pass alone ---------------------------------------------------------------------------- */

void cmb_costs_mark_take(cmb_costs_mark *k, const cmb_metered *mt)
{
    memset(k, 0, sizeof *k);
    if (mt->up_counts)
        k->up = *mt->up_counts;
    k->allocs = mt->allocs;
    k->frees = mt->frees;
    k->ops_ns = mt->alloc_ns.sum_ns + mt->free_ns.sum_ns;
    k->requested = mt->requested.total;
    k->set = 1;
}

void cmb_costs_put_since(struct cmb_case *c, const cmb_metered *mt, const cmb_costs_mark *k, const char *allocator)
{
    const cmb_costs *costs = process_costs(c);
    if (!k->set || !costs)
        return;
    cmb_up_counts up = {0};
    for (int i = 0; mt->up_counts && i < CMB_UPK_COUNT; i++)
        for (int b = 0; b < CMB_UP_BUCKETS; b++) {
            up.calls[i][b] = mt->up_counts->calls[i][b] - k->up.calls[i][b];
            up.bytes[i][b] = mt->up_counts->bytes[i][b] - k->up.bytes[i][b];
        }
    for (int b = 0; mt->up_counts && b < CMB_UP_BUCKETS; b++)
        up.access_handles[b] = mt->up_counts->access_handles[b] - k->up.access_handles[b];
    uint64_t allocs = mt->allocs - k->allocs, frees = mt->frees - k->frees;
    uint64_t ops_ns = mt->alloc_ns.sum_ns + mt->free_ns.sum_ns - k->ops_ns;
    cmb_cost_input in = {allocator, mt->up_counts ? &up : NULL, allocs, frees,
                         allocs ? (double)(mt->requested.total - k->requested) / (double)allocs : 0,
                         (double)ops_ns * 1e-9, 0};
    cmb_cost_parts p;
    cmb_costs_predict(costs, &in, &p);
    cmb_case_counter(c, "predicted_alloc_time_last_pass_s", p.total_s);
}
