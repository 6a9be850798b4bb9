/* tune_input.c - tune's input in memory: a suite trace or an RMM log read
 * as replay reads it, a PyTorch snapshot converted first with
 * traces/torch_snapshot_to_trace.py; and the setting it was recorded under
 * (the converter keeps PyTorch's allocator_settings in the header). */
#include "tune.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../traces/trace.h"

/* --- a snapshot pickle, converted --------------------------------------------------------------------- */

static int is_pickle(const char *path)
{
    FILE *f = fopen(path, "rb");
    int c = f ? fgetc(f) : EOF;
    if (f)
        fclose(f);
    return c == 0x80; /* pickle protocol 2 and later start with PROTO */
}

/* The converter: $CMB_SNAPSHOT_CONVERTER, else beside the binary's source
 * tree (build/cumembench -> traces/), else in the working directory. */
static void converter_path(char *out, size_t len)
{
    const char *env = getenv("CMB_SNAPSHOT_CONVERTER");
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return;
    }
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(out, len, "%s/../traces/torch_snapshot_to_trace.py", exe);
        if (!access(out, R_OK))
            return;
    }
    snprintf(out, len, "traces/torch_snapshot_to_trace.py");
}

static int convert_snapshot(const char *input, cmb_tune_trace *t, char *err, size_t errlen)
{
    char conv[PATH_MAX + 64], cmd[3 * PATH_MAX];
    converter_path(conv, sizeof conv);
    const char *tmp = getenv("TMPDIR");
    snprintf(t->path, sizeof t->path, "%s/cmb-tune-%ld.trace", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    if (strchr(input, '\'') || strchr(conv, '\'')) {
        snprintf(err, errlen, "%s: a path with a quote cannot be converted", input);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' '%s' >/dev/null 2>&1", conv, input, t->path);
    if (system(cmd) != 0) {
        unlink(t->path);
        snprintf(err, errlen, "%s: a PyTorch snapshot that %s could not convert", input, conv);
        return -1;
    }
    return 0;
}

/* --- the recorded setting --------------------------------------------------------------------------- */

/* "[64:8,>:0]" (PyTorch) -> "64=8/>=0" (the emulation's option). */
static void divisions_option(const char *v, char *out, size_t len)
{
    size_t k = 0;
    for (const char *p = v; *p && k + 1 < len; p++) {
        if (*p == '[' || *p == ']')
            continue;
        out[k++] = *p == ':' ? '=' : *p == ',' ? '/' : *p;
    }
    out[k] = '\0';
}

/* PYTORCH_CUDA_ALLOC_CONF as written -> a spec; the keys tune does not model are left out. */
static void spec_from_conf(const char *conf, char *spec, size_t len)
{
    char buf[512], opts[256] = "";
    int expandable = 0;
    snprintf(buf, sizeof buf, "%s", conf);
    char *save = NULL;
    /* ',' separates keys, except inside [..] */
    for (char *p = buf; *p; p++)
        if (*p == '[')
            for (; *p && *p != ']'; p++)
                if (*p == ',')
                    *p = ';';
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(kv, ':'), val[128];
        if (!colon)
            continue;
        *colon = '\0';
        for (char *q = colon + 1; *q; q++)
            if (*q == ';')
                *q = ',';
        if (!strcmp(kv, "expandable_segments")) {
            expandable = !strcmp(colon + 1, "True") || !strcmp(colon + 1, "true");
            continue;
        }
        if (!strcmp(kv, "roundup_power2_divisions"))
            divisions_option(colon + 1, val, sizeof val);
        else if (!strcmp(kv, "max_split_size_mb") || !strcmp(kv, "garbage_collection_threshold") ||
                 !strcmp(kv, "max_non_split_rounding_mb"))
            snprintf(val, sizeof val, "%s", colon + 1);
        else
            continue;
        size_t used = strlen(opts);
        snprintf(opts + used, sizeof opts - used, ":%s=%s", kv, val);
    }
    snprintf(spec, len, "%s%s", expandable ? "torch-expandable" : "torch-caching", opts);
}

/* The header's "# allocator_settings: {... 'PYTORCH_CUDA_ALLOC_CONF': '...' ...}". */
static int recorded_from_header(const char *path, char *spec, size_t len)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int found = 0;
    for (int i = 0; f && i < 16 && fgets(line, sizeof line, f) && line[0] == '#'; i++) {
        const char *key = strstr(line, "'PYTORCH_CUDA_ALLOC_CONF': '");
        if (!strstr(line, "allocator_settings") || !key)
            continue;
        char conf[512];
        const char *v = key + strlen("'PYTORCH_CUDA_ALLOC_CONF': '");
        const char *end = strchr(v, '\'');
        size_t n = end ? (size_t)(end - v) : 0;
        snprintf(conf, sizeof conf, "%.*s", (int)(n < sizeof conf ? n : sizeof conf - 1), v);
        spec_from_conf(conf, spec, len);
        found = 1;
        break;
    }
    if (f)
        fclose(f);
    return found;
}

static void recorded_setting(cmb_tune_trace *t, cmb_tune_for fw)
{
    if ((fw == CMB_TUNE_TORCH || fw == CMB_TUNE_ANY) && recorded_from_header(t->path, t->recorded, sizeof t->recorded)) {
        snprintf(t->recorded_from, sizeof t->recorded_from, "the trace's allocator_settings");
        return;
    }
    const char *dflt = fw == CMB_TUNE_CUPY ? "cupy" : fw == CMB_TUNE_RMM ? "rmm-pool" : "torch-caching";
    snprintf(t->recorded, sizeof t->recorded, "%s", dflt);
    snprintf(t->recorded_from, sizeof t->recorded_from, "the framework's default");
}

/* --- the events ----------------------------------------------------------------------------------------- */

/* Reads every event (traces/trace_load.c, as replay reads them). */
static int read_events(cmb_tune_trace *t, char *err, size_t errlen)
{
    if (cmb_trace_load(&t->trace, t->path, err, errlen))
        return -1;
    if (!t->trace.counts.allocs) {
        snprintf(err, errlen, "%s: no allocations to replay", t->input);
        return -1;
    }
    return 0;
}

int cmb_tune_load(const char *input, cmb_tune_for fw, cmb_tune_trace *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    snprintf(t->input, sizeof t->input, "%s", input);
    snprintf(t->path, sizeof t->path, "%s", input);
    if (access(input, R_OK)) {
        snprintf(err, errlen, "%s: cannot read the input", input);
        return -1;
    }
    if (is_pickle(input) && convert_snapshot(input, t, err, errlen))
        return -1;
    recorded_setting(t, fw);
    if (read_events(t, err, errlen)) {
        cmb_tune_trace_free(t);
        return -1;
    }
    return 0;
}

void cmb_tune_trace_free(cmb_tune_trace *t)
{
    if (strcmp(t->path, t->input))
        unlink(t->path); /* the converted snapshot */
    cmb_trace_unload(&t->trace);
}
