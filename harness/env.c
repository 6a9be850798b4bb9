/* env.c - environment capture. */
#define _GNU_SOURCE
#include "env.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "build_info.h"
#include "spawn.h"

/* --- key/value list ------------------------------------------------------------- */

const char *cmb_env_get(const cmb_env *env, const char *key)
{
    for (size_t i = 0; i < env->n; i++)
        if (!strcmp(env->key[i], key))
            return env->value[i];
    return NULL;
}

void cmb_env_set(cmb_env *env, const char *key, const char *value)
{
    size_t i;
    for (i = 0; i < env->n; i++)
        if (!strcmp(env->key[i], key))
            break;
    if (i == env->n) {
        if (env->n == CMB_ENV_MAX)
            return;
        env->n++;
    }
    snprintf(env->key[i], sizeof env->key[i], "%s", key);
    snprintf(env->value[i], sizeof env->value[i], "%s", value);
}

void cmb_env_slug(const char *name, char *out, size_t outlen)
{
    size_t o = 0;
    int dash = 0;
    for (const char *p = name; *p && o + 1 < outlen; p++) {
        if (isalnum((unsigned char)*p)) {
            if (dash && o)
                out[o++] = '-';
            dash = 0;
            if (o + 1 < outlen)
                out[o++] = (char)tolower((unsigned char)*p);
        } else {
            dash = 1;
        }
    }
    out[o] = '\0';
}

/* --- the probe child ----------------------------------------------------------------- */

static void kv(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void kv(const char *key, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (char *p = buf; *p; p++)
        if (*p == '\t' || *p == '\n')
            *p = ' ';
    printf("%s\t%s\n", key, buf);
}

static void format_uuid(const unsigned char b[16], char *out, size_t len)
{
    snprintf(out, len,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* NVML is optional: driver version string and clocks when the library is there. */
typedef int (*nvml_void_fn)(void);
typedef int (*nvml_str_fn)(char *, unsigned);
typedef int (*nvml_handle_fn)(const char *, void **);
typedef int (*nvml_clock_fn)(void *, int, unsigned *);

static void probe_nvml(const char *uuid)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    nvml_void_fn init = (nvml_void_fn)dlsym(lib, "nvmlInit_v2");
    nvml_void_fn shutdown = (nvml_void_fn)dlsym(lib, "nvmlShutdown");
    nvml_str_fn driver = (nvml_str_fn)dlsym(lib, "nvmlSystemGetDriverVersion");
    nvml_handle_fn by_uuid = (nvml_handle_fn)dlsym(lib, "nvmlDeviceGetHandleByUUID");
    nvml_clock_fn clock = (nvml_clock_fn)dlsym(lib, "nvmlDeviceGetClockInfo");
    nvml_clock_fn max_clock = (nvml_clock_fn)dlsym(lib, "nvmlDeviceGetMaxClockInfo");
    if (!init || !shutdown || init() != 0)
        goto out_close;
    char ver[96];
    if (driver && driver(ver, sizeof ver) == 0)
        kv("driver_version", "%s", ver);
    void *dev = NULL;
    if (by_uuid && by_uuid(uuid, &dev) == 0) {
        unsigned v;
        /* NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 (nvml.h) */
        if (clock && clock(dev, 1, &v) == 0)
            kv("gpu_sm_clock_mhz", "%u", v);
        if (clock && clock(dev, 2, &v) == 0)
            kv("gpu_mem_clock_mhz", "%u", v);
        if (max_clock && max_clock(dev, 1, &v) == 0)
            kv("gpu_sm_clock_max_mhz", "%u", v);
        if (max_clock && max_clock(dev, 2, &v) == 0)
            kv("gpu_mem_clock_max_mhz", "%u", v);
    }
    shutdown();
out_close:
    dlclose(lib);
}

int cmb_env_probe_main(int device)
{
    int count = 0, rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    kv("cuda_runtime", "%d.%d", rt / 1000, (rt % 1000) / 10);
    cudaError_t e = cudaDriverGetVersion(&drv);
    if (e == cudaSuccess && drv)
        kv("cuda_driver_api", "%d.%d", drv / 1000, (drv % 1000) / 10);
    e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        kv("gpu_count", "0");
        kv("no_gpu_reason", "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device found");
        return 0;
    }
    kv("gpu_count", "%d", count);
    if (device < 0 || device >= count) {
        kv("no_gpu_reason", "device %d does not exist (%d visible)", device, count);
        kv("gpu_count", "0");
        return 0;
    }
    struct cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess) {
        kv("gpu_count", "0");
        kv("no_gpu_reason", "cudaGetDeviceProperties: %s", cudaGetErrorString(e));
        return 0;
    }
    char uuid[64];
    format_uuid((const unsigned char *)p.uuid.bytes, uuid, sizeof uuid);
    kv("gpu_device", "%d", device);
    kv("gpu_name", "%s", p.name);
    kv("gpu_uuid", "%s", uuid);
    kv("gpu_cc", "%d.%d", p.major, p.minor);
    kv("gpu_memory_bytes", "%llu", (unsigned long long)p.totalGlobalMem);
    kv("gpu_sm_count", "%d", p.multiProcessorCount);
    kv("gpu_l2_bytes", "%d", p.l2CacheSize);
    kv("gpu_smem_per_block_optin", "%zu", p.sharedMemPerBlockOptin);
    kv("gpu_pci_bus", "%04x:%02x:%02x", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    probe_nvml(uuid);
    fflush(stdout);
    return 0;
}

/* --- the parent ---------------------------------------------------------------------------- */

static void host_facts(cmb_env *env)
{
    struct utsname u;
    char buf[256];
    if (uname(&u) == 0) {
        snprintf(buf, sizeof buf, "%s %s %s", u.sysname, u.release, u.machine);
        cmb_env_set(env, "host_os", buf);
    }
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "model name", 10)) {
                char *colon = strchr(line, ':');
                if (colon) {
                    colon += 2;
                    colon[strcspn(colon, "\n")] = '\0';
                    cmb_env_set(env, "host_cpu", colon);
                }
                break;
            }
        }
        fclose(f);
    }
    int wsl = 0;
    f = fopen("/proc/sys/kernel/osrelease", "r");
    if (f) {
        if (fgets(buf, sizeof buf, f))
            wsl = strcasestr(buf, "microsoft") != NULL || strcasestr(buf, "wsl") != NULL;
        fclose(f);
    }
    cmb_env_set(env, "wsl", wsl ? "yes" : "no");
    cmb_env_set(env, "cumembench_revision", CMB_GIT_REVISION);
    cmb_env_set(env, "cumembench_build", CMB_BUILD_TYPE);
    snprintf(buf, sizeof buf, "%d.%d", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
    cmb_env_set(env, "cuda_toolkit_built_with", buf);
}

void cmb_env_collect(cmb_env *env, const char *self_exe, int device, double timeout_s)
{
    char dev[16];
    cmb_spawn_buffer out = {calloc(1, 8192), 8192, 0};
    cmb_child_result res;
    memset(env, 0, sizeof *env);
    host_facts(env);
    snprintf(dev, sizeof dev, "%d", device);
    char *argv[] = {(char *)self_exe, "--probe-env", "--device", dev, NULL};
    if (!out.data || cmb_spawn_run(argv, timeout_s, NULL, NULL, cmb_spawn_buffer_append, &out, NULL, &res) != 0 ||
        !res.ok) {
        snprintf(env->no_gpu_reason, sizeof env->no_gpu_reason, "the GPU probe %s",
                 !out.data ? "could not run" : res.timed_out ? "hung" : "crashed (driver problem?)");
        cmb_env_set(env, "gpu_count", "0");
        cmb_env_set(env, "no_gpu_reason", env->no_gpu_reason);
    } else {
        char *save = NULL;
        for (char *line = strtok_r(out.data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char *tab = strchr(line, '\t');
            if (!tab)
                continue;
            *tab = '\0';
            cmb_env_set(env, line, tab + 1);
        }
    }
    free(out.data);
    const char *count = cmb_env_get(env, "gpu_count");
    env->gpu_count = count ? atoi(count) : 0;
    const char *why = cmb_env_get(env, "no_gpu_reason");
    if (why)
        snprintf(env->no_gpu_reason, sizeof env->no_gpu_reason, "%s", why);
    const char *name = cmb_env_get(env, "gpu_name");
    const char *mem = cmb_env_get(env, "gpu_memory_bytes");
    env->gpu_memory_bytes = mem ? strtoull(mem, NULL, 10) : 0;
    if (env->gpu_count > 0 && name)
        cmb_env_slug(name, env->gpu_slug, sizeof env->gpu_slug);
    else
        snprintf(env->gpu_slug, sizeof env->gpu_slug, "sim");
}
