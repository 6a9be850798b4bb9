/* tune_space.c - the candidates tune replays, per framework, and how each
 * is pasted into a program.
 *
 * PyTorch's own allocator (c10/cuda/CUDAAllocatorConfig.cpp, PyTorch 2.11):
 * expandable_segments, max_split_size_mb (>= 20), max_non_split_rounding_mb
 * (>= 20, only with a split limit), roundup_power2_divisions (a power of two,
 * or per interval [MB:N,...,>:N]), garbage_collection_threshold (in (0, 1),
 * honoured only under set_per_process_memory_fraction); the suite's policies
 * through libcmb_pluggable (cmb, bfc, cupy, rmm-pool with its pool sizes);
 * RMM's pool_memory_resource sizes and arena; CuPy's MemoryPool.
 *
 * Not a grid: stage 1 moves one knob at a time from the recorded setting
 * (and from expandable segments); stage 2 combines only the values that
 * were on the front alone; stage 3 tries values between the grid's around
 * the front's members. */
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the set ------------------------------------------------------------------------------------------ */

int cmb_tune_add(cmb_tune_set *s, const char *spec, int pluggable, int stage)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->c[i].spec, spec))
            return -1;
    if (s->n >= CMB_TUNE_MAX_CANDIDATES)
        return -1;
    cmb_tune_cand *c = &s->c[s->n];
    memset(c, 0, sizeof *c);
    snprintf(c->spec, sizeof c->spec, "%s", spec);
    c->pluggable = pluggable;
    c->stage = stage;
    c->time_s = NAN;
    return s->n++;
}

/* --- PyTorch's knobs ---------------------------------------------------------------------------------- */

typedef struct tknobs {
    int expandable;
    int msz;          /* max_split_size_mb, 0: unlimited         */
    int nonsplit;     /* max_non_split_rounding_mb, 0: default   */
    char rdiv[40];    /* roundup_power2_divisions, "": none      */
    double gc;        /* garbage_collection_threshold, 0: off    */
} tknobs;

static const int msz_grid[] = {20, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 4096, 8192};
static const char *const rdiv_grid[] = {"1", "2", "4", "8", "16", "64=8/>=0", "256=4/>=0", "1024=2/>=0", "32=16/>=4"};
static const double gc_grid[] = {0.5, 0.6, 0.7, 0.8, 0.9};
static const int nonsplit_grid[] = {40, 80, 160, 320};
#define N_OF(a) ((int)(sizeof(a) / sizeof(a)[0]))

static void knobs_spec(const tknobs *k, char *out, size_t len)
{
    int n = snprintf(out, len, "%s", k->expandable ? "torch-expandable" : "torch-caching");
    if (k->msz)
        n += snprintf(out + n, len - (size_t)n, ":max_split_size_mb=%d", k->msz);
    if (k->msz && k->nonsplit)
        n += snprintf(out + n, len - (size_t)n, ":max_non_split_rounding_mb=%d", k->nonsplit);
    if (k->rdiv[0])
        n += snprintf(out + n, len - (size_t)n, ":roundup_power2_divisions=%s", k->rdiv);
    if (k->gc > 0)
        snprintf(out + n, len - (size_t)n, ":garbage_collection_threshold=%.2f:per_process_memory_fraction=1", k->gc);
}

static const char *opt_value(const char *spec, const char *key, char *buf, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, ":%s=", key);
    const char *p = strstr(spec, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    size_t n = strcspn(p, ":@");
    snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), p);
    return buf;
}

/* 0 when `spec` is PyTorch's own allocator (torch-caching / torch-expandable). */
static int knobs_parse(const char *spec, tknobs *k)
{
    char v[64];
    memset(k, 0, sizeof *k);
    if (strncmp(spec, "torch-caching", 13) && strncmp(spec, "torch-expandable", 16))
        return -1;
    k->expandable = !strncmp(spec, "torch-expandable", 16);
    k->msz = opt_value(spec, "max_split_size_mb", v, sizeof v) ? atoi(v) : 0;
    k->nonsplit = opt_value(spec, "max_non_split_rounding_mb", v, sizeof v) ? atoi(v) : 0;
    if (opt_value(spec, "roundup_power2_divisions", v, sizeof v))
        snprintf(k->rdiv, sizeof k->rdiv, "%s", v);
    k->gc = opt_value(spec, "garbage_collection_threshold", v, sizeof v) ? atof(v) : 0;
    return 0;
}

static int add_knobs(cmb_tune_set *s, const tknobs *k, int stage)
{
    char spec[256];
    knobs_spec(k, spec, sizeof spec);
    return cmb_tune_add(s, spec, 0, stage);
}

/* Split limits beyond the largest request change nothing. */
static int msz_useful(int mb, const cmb_tune_trace *t)
{
    uint64_t largest = 0;
    for (size_t i = 0; i < t->trace.n; i++)
        if (t->trace.ev[i].op == CMB_TRACE_ALLOC && t->trace.ev[i].size > largest)
            largest = t->trace.ev[i].size;
    return (uint64_t)mb << 20 <= largest * 2 + ((uint64_t)20 << 20);
}

static void torch_single_knobs(cmb_tune_set *s, const cmb_tune_trace *t, const tknobs *base)
{
    tknobs k = *base;
    add_knobs(s, &k, 1);
    for (int i = 0; i < N_OF(msz_grid); i++) {
        k = *base;
        k.msz = msz_grid[i];
        if (msz_useful(k.msz, t))
            add_knobs(s, &k, 1);
    }
    for (int i = 0; i < N_OF(rdiv_grid); i++) {
        k = *base;
        snprintf(k.rdiv, sizeof k.rdiv, "%s", rdiv_grid[i]);
        add_knobs(s, &k, 1);
    }
    for (int i = 0; i < N_OF(gc_grid); i++) {
        k = *base;
        k.gc = gc_grid[i];
        add_knobs(s, &k, 1);
    }
}

/* --- the suite's policies and the other frameworks ------------------------------------------------------- */

static void pool_sizes(cmb_tune_set *s, const cmb_tune_trace *t, const char *suffix, int pluggable)
{
    static const double share[] = {1.0, 1.05, 1.1, 1.25};
    char spec[256];
    snprintf(spec, sizeof spec, "rmm-pool:initial_pool_size=0%s", suffix);
    cmb_tune_add(s, spec, pluggable, 1);
    for (int i = 0; i < N_OF(share); i++) {
        uint64_t mib = (uint64_t)((double)t->trace.peak_requested * share[i] / (1 << 20)) + 1;
        snprintf(spec, sizeof spec, "rmm-pool:initial_pool_size=%lluMiB%s", (unsigned long long)mib, suffix);
        cmb_tune_add(s, spec, pluggable, 1);
        snprintf(spec, sizeof spec, "rmm-pool:initial_pool_size=%lluMiB:maximum_pool_size=%lluMiB%s",
                 (unsigned long long)mib, (unsigned long long)(mib * 5 / 4), suffix);
        cmb_tune_add(s, spec, pluggable, 1);
    }
}

/* The suite's policies a framework runs through libcmb_pluggable. */
static void pluggable_policies(cmb_tune_set *s, const cmb_tune_trace *t)
{
    static const char *const specs[] = {"cmb@vmm", "cmb:slack=0@vmm", "cmb:slack=0.02@vmm", "cmb:small_max=4MiB@vmm",
                                        "cmb:fast_bins=false@vmm", "bfc@cuda", "bfc:garbage_collection=false@cuda",
                                        "cupy@cuda"};
    for (int i = 0; i < N_OF(specs); i++)
        cmb_tune_add(s, specs[i], 1, 1);
    pool_sizes(s, t, "@cuda", 1);
}

/* Which framework the pluggable policies are pasted into. */
static cmb_tune_for space_fw;

void cmb_tune_space_start(cmb_tune_set *s, const cmb_tune_trace *t, cmb_tune_for fw)
{
    tknobs base;
    space_fw = fw;
    cmb_tune_add(s, t->recorded, 0, 0);
    if (fw == CMB_TUNE_TORCH || fw == CMB_TUNE_ANY) {
        if (knobs_parse(t->recorded, &base))
            memset(&base, 0, sizeof base);
        torch_single_knobs(s, t, &base);
        base.expandable = !base.expandable;
        torch_single_knobs(s, t, &base);
    }
    if (fw == CMB_TUNE_RMM || fw == CMB_TUNE_ANY) {
        pool_sizes(s, t, "", 0);
        cmb_tune_add(s, "arena", 0, 1);
        cmb_tune_add(s, "binning", 0, 1);
    }
    if (fw == CMB_TUNE_CUPY || fw == CMB_TUNE_ANY)
        cmb_tune_add(s, "cupy", 0, 1);
    if (fw != CMB_TUNE_RMM)
        pluggable_policies(s, t);
}

/* --- stage 2: combinations ------------------------------------------------------------------------------- */

/* The values of each knob whose single-knob candidate was not dominated. */
typedef struct kept {
    int msz[8], n_msz;
    char rdiv[8][40];
    int n_rdiv;
    double gc[4];
    int n_gc;
} kept;

static void keep_value(kept *kp, const tknobs *k, const tknobs *base)
{
    if (k->msz != base->msz && kp->n_msz < 4)
        kp->msz[kp->n_msz++] = k->msz;
    else if (strcmp(k->rdiv, base->rdiv) && kp->n_rdiv < 4)
        snprintf(kp->rdiv[kp->n_rdiv++], sizeof kp->rdiv[0], "%s", k->rdiv);
    else if (k->gc != base->gc && kp->n_gc < 3)
        kp->gc[kp->n_gc++] = k->gc;
}

static void combine_kept(cmb_tune_set *s, const kept *kp, int expandable)
{
    for (int a = -1; a < kp->n_msz; a++)
        for (int b = -1; b < kp->n_rdiv; b++)
            for (int g = -1; g < kp->n_gc; g++)
                for (int ns = -1; ns < (a >= 0 ? 2 : 0); ns++) {
                    tknobs k = {expandable, a >= 0 ? kp->msz[a] : 0, ns >= 0 ? nonsplit_grid[ns] : 0, "",
                                g >= 0 ? kp->gc[g] : 0};
                    if (b >= 0)
                        snprintf(k.rdiv, sizeof k.rdiv, "%s", kp->rdiv[b]);
                    add_knobs(s, &k, 2);
                }
}

/* Stage-1 candidates in order of their smallest GPU (a bound for the dominated). */
static int by_capacity(const void *a, const void *b)
{
    const cmb_tune_cand *x = *(cmb_tune_cand *const *)a, *y = *(cmb_tune_cand *const *)b;
    return (x->min_capacity > y->min_capacity) - (x->min_capacity < y->min_capacity);
}

void cmb_tune_space_combine(cmb_tune_set *s, const cmb_tune_trace *t, cmb_tune_for fw)
{
    (void)t;
    if (fw != CMB_TUNE_TORCH && fw != CMB_TUNE_ANY)
        return;
    for (int e = 0; e < 2; e++) {
        kept kp;
        memset(&kp, 0, sizeof kp);
        tknobs base = {e, 0, 0, "", 0}, k;
        cmb_tune_cand *order[CMB_TUNE_MAX_CANDIDATES];
        int n = 0;
        for (int i = 0; i < s->n; i++)
            if (!s->c[i].failed && !s->c[i].pluggable && !knobs_parse(s->c[i].spec, &k) && k.expandable == e)
                order[n++] = &s->c[i];
        qsort(order, (size_t)n, sizeof *order, by_capacity);
        for (int i = 0; i < n; i++) /* the best values first, dominated or not */
            if (!knobs_parse(order[i]->spec, &k))
                keep_value(&kp, &k, &base);
        combine_kept(s, &kp, e);
    }
}

/* --- stage 3: around the front --------------------------------------------------------------------------- */

static void refine_one(cmb_tune_set *s, const char *spec)
{
    tknobs k, r;
    if (knobs_parse(spec, &k))
        return;
    for (int i = 0; k.msz && i < N_OF(msz_grid); i++)
        if (msz_grid[i] == k.msz) {
            r = k;
            if (i > 0 && (r.msz = (msz_grid[i - 1] + k.msz) / 2) > msz_grid[i - 1])
                add_knobs(s, &r, 3);
            if (i + 1 < N_OF(msz_grid) && (r.msz = (msz_grid[i + 1] + k.msz) / 2) > k.msz)
                add_knobs(s, &r, 3);
        }
    for (int d = -1; k.gc > 0 && d <= 1; d += 2) {
        r = k;
        r.gc = k.gc + 0.05 * d;
        if (r.gc > 0 && r.gc < 1)
            add_knobs(s, &r, 3);
    }
    for (int i = 0; k.msz && i < N_OF(nonsplit_grid); i++) {
        r = k;
        r.nonsplit = nonsplit_grid[i];
        add_knobs(s, &r, 3);
    }
}

void cmb_tune_space_refine(cmb_tune_set *s, const int *front, int n_front)
{
    char specs[64][256];
    int n = n_front < 64 ? n_front : 64;
    for (int i = 0; i < n; i++) /* the set grows while refining: copy the specs first */
        snprintf(specs[i], sizeof specs[i], "%s", s->c[front[i]].spec);
    for (int i = 0; i < n; i++)
        refine_one(s, specs[i]);
}

/* --- pasting -------------------------------------------------------------------------------------------------- */

/* PyTorch's spelling of the options: key:value, per-interval divisions in [MB:N,>:N]. */
static void torch_conf(const tknobs *k, char *out, size_t len)
{
    int n = 0;
    out[0] = '\0';
    if (k->expandable)
        n += snprintf(out + n, len - (size_t)n, "%sexpandable_segments:True", n ? "," : "");
    if (k->msz)
        n += snprintf(out + n, len - (size_t)n, "%smax_split_size_mb:%d", n ? "," : "", k->msz);
    if (k->msz && k->nonsplit)
        n += snprintf(out + n, len - (size_t)n, "%smax_non_split_rounding_mb:%d", n ? "," : "", k->nonsplit);
    if (k->rdiv[0]) {
        char r[48];
        size_t j = 0;
        for (const char *p = k->rdiv; *p && j + 1 < sizeof r; p++)
            r[j++] = *p == '=' ? ':' : *p == '/' ? ',' : *p;
        r[j] = '\0';
        n += snprintf(out + n, len - (size_t)n, strchr(k->rdiv, '=') ? "%sroundup_power2_divisions:[%s]"
                                                                      : "%sroundup_power2_divisions:%s",
                      n ? "," : "", r);
    }
    if (k->gc > 0)
        snprintf(out + n, len - (size_t)n, "%sgarbage_collection_threshold:%.2f", n ? "," : "", k->gc);
}

void cmb_tune_paste(const cmb_tune_cand *c, char *out, size_t len)
{
    tknobs k;
    char conf[256];
    if (!knobs_parse(c->spec, &k) && !c->pluggable) {
        torch_conf(&k, conf, sizeof conf);
        if (!conf[0])
            snprintf(out, len, "PYTORCH_CUDA_ALLOC_CONF unset (PyTorch's default)");
        else if (k.gc > 0)
            snprintf(out, len, "PYTORCH_CUDA_ALLOC_CONF=%s\n    and in the program, before its first allocation: "
                     "torch.cuda.set_per_process_memory_fraction(1.0)", conf);
        else
            snprintf(out, len, "PYTORCH_CUDA_ALLOC_CONF=%s", conf);
    } else if (c->pluggable) {
        snprintf(out, len, "import cumembench_alloc; cumembench_alloc.install_%s(\"%s\")",
                 space_fw == CMB_TUNE_CUPY ? "cupy" : "torch", c->spec);
    } else if (!strncmp(c->spec, "rmm-pool", 8)) {
        char a[64] = "None", b[64] = "None";
        opt_value(c->spec, "initial_pool_size", a, sizeof a);
        opt_value(c->spec, "maximum_pool_size", b, sizeof b);
        snprintf(out, len, "rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=\"%s\", "
                 "maximum_pool_size=%s%s%s)", a, strcmp(b, "None") ? "\"" : "", b, strcmp(b, "None") ? "\"" : "");
    } else if (!strcmp(c->spec, "arena") || !strcmp(c->spec, "binning")) {
        snprintf(out, len, "rmm.mr.%sMemoryResource(rmm.mr.CudaMemoryResource())",
                 c->spec[0] == 'a' ? "Arena" : "Binning");
    } else {
        snprintf(out, len, "cupy's default MemoryPool");
    }
}

void cmb_tune_run_setting(const cmb_tune_cand *c, char *out, size_t len)
{
    tknobs k;
    char conf[256];
    if (!c->pluggable && !knobs_parse(c->spec, &k)) {
        torch_conf(&k, conf, sizeof conf);
        snprintf(out, len, "native:%s%s", conf, k.gc > 0 ? ";fraction=1.0" : "");
    } else {
        snprintf(out, len, "%s", c->spec);
    }
}
