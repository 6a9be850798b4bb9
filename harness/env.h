/* env.h - the environment a run was measured in: GPU name, UUID, compute
 * capability, memory, driver and runtime versions, clocks, host, git
 * revision, WSL or not. The parent never touches CUDA itself (a context
 * in the parent would take device memory from every case), so the GPU
 * part is read by a short-lived child: cumembench --probe-env. */
#ifndef CMB_ENV_H
#define CMB_ENV_H

#include <stddef.h>

#define CMB_ENV_MAX 64

typedef struct cmb_env {
    size_t n;
    char key[CMB_ENV_MAX][48];
    char value[CMB_ENV_MAX][256];
    int gpu_count;        /* 0 when no usable GPU                     */
    char no_gpu_reason[256];
    char gpu_slug[96];    /* "nvidia-h100-80gb-hbm3", or "sim"         */
    unsigned long long gpu_memory_bytes;
} cmb_env;

/* Child side: prints key<TAB>value lines for device `device` to stdout. */
int cmb_env_probe_main(int device);

/* Parent side: runs the probe child and adds host facts. Never fails: a
 * probe that crashes means "no usable GPU" with the reason recorded. */
void cmb_env_collect(cmb_env *env, const char *self_exe, int device, double timeout_s);

const char *cmb_env_get(const cmb_env *env, const char *key);
void cmb_env_set(cmb_env *env, const char *key, const char *value);

/* Lowercase, non-alphanumerics folded to '-': "NVIDIA H100 80GB HBM3" ->
 * "nvidia-h100-80gb-hbm3". */
void cmb_env_slug(const char *name, char *out, size_t outlen);

#endif /* CMB_ENV_H */
