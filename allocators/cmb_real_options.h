/* cmb_real_options.h - option parsing for the real plug-ins.
 *
 * A plug-in links nothing of the suite (docs/plugins.md), so it reads its
 * options itself, through the declarations below and the header-only
 * checks of allocators/cmb_option_check.h: the same spelling ("64MiB",
 * "max", "true"), bounds and messages as the suite's own allocators.
 */
#ifndef CMB_REAL_OPTIONS_H
#define CMB_REAL_OPTIONS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmb_allocator.h"
#include "cmb_option_check.h"

#if defined(__GNUC__)
#define CMB_REAL_MAYBE_UNUSED __attribute__((unused))
#else
#define CMB_REAL_MAYBE_UNUSED
#endif

/* --- the options of each real allocator -----------------------------------------
 * Declared once, here: the suite checks a spec against them before a run
 * (allocators/real.c), and the plug-in checks them again at create, since
 * it can also be loaded as external:/path/libcmb_real_X.so. */

/* PYTORCH_CUDA_ALLOC_CONF keys under the emulation's names
 * (c10/cuda/CUDAAllocatorConfig.cpp); PyTorch takes whole MiB. */
#define CMB_REAL_TORCH_OPTION_LIST                                                                                   \
    CMB_OPTION_EX("max_split_size", CMB_OPT_SIZE, "max", "20MiB", "max", "B",                                          \
                  "blocks at least this large are never split (max_split_size_mb; whole MiB)", NULL, CMB_OPT_MAX_OK, \
                  "max_split_size_mb"),                                                                              \
        CMB_OPTION_EX("max_split_size_mb", CMB_OPT_INT, "(none)", "20", NULL, "MiB",                                  \
                      "the same in MiB, as PyTorch spells it", NULL, 0, "max_split_size"),                            \
        CMB_OPTION_EX("max_non_split_rounding_size", CMB_OPT_SIZE, "20MiB", "20MiB", "max", "B",                      \
                      "oversize requests round up within this (max_non_split_rounding_mb; whole MiB)", NULL,          \
                      CMB_OPT_MAX_OK, "max_non_split_rounding_mb"),                                                   \
        CMB_OPTION_EX("max_non_split_rounding_mb", CMB_OPT_INT, "(none)", "20", NULL, "MiB",                          \
                      "the same in MiB, as PyTorch spells it", NULL, 0, "max_non_split_rounding_size"),               \
        CMB_OPTION("roundup_power2_divisions", CMB_OPT_STRING, "(none)", NULL, NULL, NULL,                           \
                   "N, or MB=N/MB=N/>=N per size interval"),                                                          \
        CMB_OPTION("garbage_collection_threshold", CMB_OPT_REAL, "(off)", "0", "1", "fraction, in (0, 1)",            \
                   "share of the memory limit that starts freeing cached blocks"),                                    \
        CMB_OPTION("per_process_memory_fraction", CMB_OPT_REAL, "(the whole device)", "0", "1", "fraction",           \
                   "setMemoryFraction: share of the device the allocator may hold")

/* What a user may give real:torch-*. */
static const cmb_option_decl cmb_real_torch_options[] CMB_REAL_MAYBE_UNUSED = {CMB_REAL_TORCH_OPTION_LIST,
                                                                                CMB_OPTION_END};

/* What the plug-in reads: the same, plus the switch between the two tables
 * (real:torch-expandable's default options set it; no user option). */
static const cmb_option_decl cmb_real_torch_plugin_options[] CMB_REAL_MAYBE_UNUSED = {
    CMB_REAL_TORCH_OPTION_LIST,
    CMB_OPTION("expandable_segments", CMB_OPT_BOOL, "false", NULL, NULL, NULL,
               "expandable_segments:True (set by real:torch-expandable)"),
    CMB_OPTION_END};

/* pool_memory_resource(upstream, initial, maximum) (include/rmm/mr/device/pool_memory_resource.hpp) */
static const cmb_option_decl cmb_real_pool_options[] CMB_REAL_MAYBE_UNUSED = {
    CMB_OPTION("initial_pool_size", CMB_OPT_SIZE, "(50% of free memory)", "0", NULL, "B",
               "initial pool, a multiple of 256 (default: percent_of_free_device_memory(50))"),
    CMB_OPTION_EX("maximum_pool_size", CMB_OPT_SIZE, "(none)", "0", "max", "B",
                  "the pool never grows beyond it, a multiple of 256 (default: no maximum)", NULL, CMB_OPT_MAX_OK,
                  NULL),
    CMB_OPTION_END};

static const cmb_option_decl cmb_real_arena_options[] CMB_REAL_MAYBE_UNUSED = {
    CMB_OPTION("arena_size", CMB_OPT_SIZE, "(half the free memory)", "0", NULL, "B",
               "size of the global arena (default: RMM's, half the free memory)"),
    CMB_OPTION_END};

/* binning_memory_resource(pool, 18, 22) as RMM's own benchmarks build it */
static const cmb_option_decl cmb_real_binning_options[] CMB_REAL_MAYBE_UNUSED = {
    CMB_OPTION("min_bin_exp", CMB_OPT_INT, "18", "8", "40", NULL, "smallest bin 2^N bytes"),
    CMB_OPTION("max_bin_exp", CMB_OPT_INT, "22", "8", "40", NULL, "largest bin 2^N bytes"),
    CMB_OPTION("initial_pool_size", CMB_OPT_SIZE, "(50% of free memory)", "0", NULL, "B",
               "the pool behind the bins: initial size, a multiple of 256"),
    CMB_OPTION_EX("maximum_pool_size", CMB_OPT_SIZE, "(none)", "0", "max", "B",
                  "the pool behind the bins: maximum size, a multiple of 256", NULL, CMB_OPT_MAX_OK, NULL),
    CMB_OPTION_END};

static const cmb_option_decl cmb_real_async_options[] CMB_REAL_MAYBE_UNUSED = {
    CMB_OPTION_EX("release_threshold", CMB_OPT_SIZE, "(RMM's)", "0", "max", "B",
                  "cudaMemPoolAttrReleaseThreshold", NULL, CMB_OPT_MAX_OK, NULL),
    CMB_OPTION("initial_pool_size", CMB_OPT_SIZE, "(none)", "0", NULL, "B",
               "allocated and freed once at creation"),
    CMB_OPTION_END};

/* MemoryPool.set_limit(size=None, fraction=None) (cupy/cuda/memory.pyx) */
static const cmb_option_decl cmb_real_cupy_options[] CMB_REAL_MAYBE_UNUSED = {
    CMB_OPTION_EX("limit", CMB_OPT_SIZE, "0", "0", NULL, "B", "MemoryPool.set_limit(size=...); 0: none", NULL, 0,
                  "limit_fraction"),
    CMB_OPTION_EX("limit_fraction", CMB_OPT_REAL, "0", "0", "1", "fraction", "MemoryPool.set_limit(fraction=...)", NULL,
                  0, "limit"),
    CMB_OPTION("null_call", CMB_OPT_BOOL, "false", NULL, NULL, NULL,
               "the baseline: the same CPython call into the pool (MemoryPool.used_bytes) per allocate and free, "
               "memory from a per-size free list in C"),
    CMB_OPTION_END};

/* --- parsing helpers --------------------------------------------------------------- */


/* A byte size as the suite writes it: 512B, 64KiB, 2MiB, 1GiB (a bare
 * number is bytes), or "max"/"unlimited" (UINT64_MAX). 0 on success. */
static inline int cmb_real_parse_size(const char *s, uint64_t *out)
{
    char why[160];
    return cmb_optck_size(s, "B", 1, out, why, sizeof why);
}

static inline int cmb_real_parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static inline int cmb_real_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v != v)
        return -1;
    *out = v;
    return 0;
}

static inline int cmb_real_parse_bool(const char *s, int *out)
{
    if (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "on"))
        *out = 1;
    else if (!strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "no") || !strcmp(s, "off"))
        *out = 0;
    else
        return -1;
    return 0;
}

/* The value of `key` (the last one given wins), or NULL. */
static inline const char *cmb_real_option(const cmb_config *cfg, const char *key)
{
    for (size_t i = cfg->n_options; i-- > 0;)
        if (!strcmp(cfg->options[i].key, key))
            return cfg->options[i].value;
    return NULL;
}

/* Every option is one of `decls` with a well-formed value, and no two
 * exclude each other; 0, or -1 with the reason in cfg->error. */
static inline int cmb_real_check_options(const cmb_config *cfg, const char *allocator, const cmb_option_decl *decls)
{
    return cmb_optck_options(allocator, decls, cfg->options, cfg->n_options, 0, cfg->error, cfg->error_len);
}

/* A size option: 0 and *out = the value (*given = 1), or *given = 0 when
 * absent; -1 with the reason in cfg->error when malformed. */
static inline int cmb_real_size_option(const cmb_config *cfg, const char *allocator, const char *key, uint64_t *out,
                                       int *given)
{
    const char *v = cmb_real_option(cfg, key);
    *given = v != NULL;
    if (v && cmb_real_parse_size(v, out)) {
        snprintf(cfg->error, cfg->error_len, "%s: option %s=%s: expected a size such as 64MiB or max", allocator,
                 key, v);
        return -1;
    }
    return 0;
}

#endif /* CMB_REAL_OPTIONS_H */
