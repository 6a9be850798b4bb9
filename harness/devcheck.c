/* devcheck.c - the device's used memory between cases (see devcheck.h). */
#define _GNU_SOURCE
#include "devcheck.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "../common/cmb_units.h"
#include "../common/cmb_clock.h"
#include "spawn.h"

#define PROBE_TIMEOUT_S 60.0
#define POLL_S 0.02

/* --- NVML, loaded at run time (no link to the driver) ------------------------------ */

/* nvmlMemory_t of nvml.h: total, free, used */
typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;

typedef int (*nvml_void_fn)(void);
typedef int (*nvml_handle_fn)(const char *, void **);
typedef int (*nvml_mem_fn)(void *, void *);

static int read_nvml(void *ctx, uint64_t *used)
{
    cmb_devcheck *d = ctx;
    nvml_memory m;
    if (d->nvml_mem(d->nvml_dev, &m) != 0)
        return -1;
    *used = m.used;
    return 0;
}

static int open_nvml(cmb_devcheck *d, const char *uuid)
{
    if (!uuid)
        return -1;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return -1;
    nvml_void_fn init = (nvml_void_fn)dlsym(lib, "nvmlInit_v2");
    nvml_handle_fn by_uuid = (nvml_handle_fn)dlsym(lib, "nvmlDeviceGetHandleByUUID");
    d->nvml_mem = (nvml_mem_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo");
    d->nvml_shutdown = (nvml_void_fn)dlsym(lib, "nvmlShutdown");
    if (!init || !by_uuid || !d->nvml_mem || !d->nvml_shutdown || init() != 0)
        goto out_close;
    if (by_uuid(uuid, &d->nvml_dev) != 0) {
        d->nvml_shutdown();
        goto out_close;
    }
    d->nvml_lib = lib;
    return 0;

out_close:
    dlclose(lib);
    return -1;
}

/* --- the probe process ---------------------------------------------------------------- */

int cmb_devcheck_probe_main(int device)
{
    size_t free_b = 0, total = 0;
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaMemGetInfo(&free_b, &total);
    if (e != cudaSuccess) {
        fprintf(stderr, "cumembench: cudaMemGetInfo on device %d: %s\n", device, cudaGetErrorString(e));
        return 3;
    }
    printf("used\t%llu\nfree\t%llu\ntotal\t%llu\n", (unsigned long long)(total - free_b),
           (unsigned long long)free_b, (unsigned long long)total);
    return 0;
}

static int read_probe(void *ctx, uint64_t *used)
{
    cmb_devcheck *d = ctx;
    char buf[512] = "";
    cmb_spawn_buffer out = {buf, sizeof buf, 0};
    cmb_child_result res;
    char *argv[] = {d->self, "--probe-mem", "--device", d->device, NULL};
    if (cmb_spawn_run(argv, PROBE_TIMEOUT_S, NULL, NULL, cmb_spawn_buffer_append, &out, NULL, &res) || !res.ok)
        return -1;
    const char *u = strstr(buf, "used\t");
    return u && !cmb_parse_u64(strndupa(u + 5, strcspn(u + 5, "\n")), used) ? 0 : -1;
}

/* --- the check ------------------------------------------------------------------------- */

void cmb_devcheck_start_with(cmb_devcheck *d, cmb_devcheck_read_fn read, void *ctx, double settle_s)
{
    uint64_t used;
    d->read = read;
    d->ctx = ctx;
    d->settle_s = settle_s;
    d->active = read(ctx, &used) == 0;
    d->baseline = d->before = d->active ? used : 0;
}

void cmb_devcheck_start(cmb_devcheck *d, int gpu_mode, cmb_env *env, const char *self, int device)
{
    memset(d, 0, sizeof *d);
    snprintf(d->self, sizeof d->self, "%s", self);
    snprintf(d->device, sizeof d->device, "%d", device);
    if (!gpu_mode) {
        snprintf(d->method, sizeof d->method, "off (sim mode)");
        return;
    }
    if (open_nvml(d, cmb_env_get(env, "gpu_uuid")) == 0) {
        cmb_devcheck_start_with(d, read_nvml, d, CMB_DEVCHECK_SETTLE_S);
        snprintf(d->method, sizeof d->method, "nvml");
    }
    if (!d->active) {
        cmb_devcheck_start_with(d, read_probe, d, CMB_DEVCHECK_SETTLE_S);
        snprintf(d->method, sizeof d->method, d->active ? "cudaMemGetInfo in a probe process"
                                                        : "off (neither NVML nor a probe process could read it)");
    }
    cmb_env_set(env, "device_check", d->method);
    if (d->active) {
        char buf[32];
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)d->baseline);
        cmb_env_set(env, "device_used_at_start_bytes", buf);
    }
}

void cmb_devcheck_stop(cmb_devcheck *d)
{
    if (d->nvml_lib) {
        d->nvml_shutdown();
        dlclose(d->nvml_lib);
    }
    d->nvml_lib = NULL;
    d->active = 0;
}

void cmb_devcheck_before(cmb_devcheck *d)
{
    uint64_t used;
    d->dirty = d->unreturned = 0;
    if (!d->active || d->read(d->ctx, &used))
        return;
    d->before = used;
    if (used < d->baseline)
        d->baseline = used;
    if (used > d->baseline + CMB_DEVCHECK_SLACK) {
        d->dirty = used - d->baseline;
        d->n_dirty++;
    }
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

void cmb_devcheck_after(cmb_devcheck *d)
{
    uint64_t used;
    if (!d->active)
        return;
    double t0 = cmb_now_s();
    for (;;) {
        if (d->read(d->ctx, &used))
            return;
        if (used <= d->before + CMB_DEVCHECK_SLACK || cmb_now_s() - t0 >= d->settle_s)
            break;
        sleep_s(POLL_S); /* a process's memory may take a moment to come back */
    }
    if (used > d->before + CMB_DEVCHECK_SLACK) {
        d->unreturned = used - d->before;
        d->n_unreturned++;
    }
}

static void add_counter(cmb_bench_run *r, const char *name, double value)
{
    if (r->n_counters == CMB_BENCH_MAX_COUNTERS)
        return;
    cmb_bench_counter *k = &r->counters[r->n_counters++];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->value = value;
    k->one_k_1024 = 1;
}

void cmb_devcheck_annotate(const cmb_devcheck *d, cmb_bench_run *runs, size_t n)
{
    char note[320];
    if (!d->active)
        return;
    int have_note = cmb_devcheck_note(d, note, sizeof note);
    for (size_t i = 0; i < n; i++) {
        cmb_bench_run *r = &runs[i];
        if (r->error_occurred && have_note) {
            size_t used = strlen(r->error_message);
            snprintf(r->error_message + used, sizeof r->error_message - used, "; %s", note);
        }
        if (r->is_aggregate || r->error_occurred)
            continue;
        add_counter(r, "device_dirty_bytes", (double)d->dirty);
        add_counter(r, "device_unreturned_bytes", (double)d->unreturned);
    }
}

int cmb_devcheck_note(const cmb_devcheck *d, char *out, size_t len)
{
    char a[32], b[32];
    out[0] = '\0';
    if (!d->active || (!d->dirty && !d->unreturned))
        return 0;
    if (d->dirty && d->unreturned)
        snprintf(out, len, "ran on a dirty device (%s above the run's starting level) and %s was not returned "
                 "after its process ended", cmb_format_size(d->dirty, a, sizeof a),
                 cmb_format_size(d->unreturned, b, sizeof b));
    else if (d->dirty)
        snprintf(out, len, "ran on a dirty device: %s above the run's starting level, not returned by an earlier "
                 "case or taken by another program", cmb_format_size(d->dirty, a, sizeof a));
    else
        snprintf(out, len, "device memory not returned: %s still used after the case's process ended",
                 cmb_format_size(d->unreturned, b, sizeof b));
    return 1;
}
