/* cmb_allocator.h - the allocator interface of cumembench.
 *
 * Every allocator is one file that exports one table of methods
 * (cmb_allocator_methods), in the manner of SQLite's sqlite3_mem_methods.
 * The same header is the plug-in ABI: a shared library that exports
 *
 *     const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version);
 *
 * is loaded with `--allocator external:/path/lib.so` (see allocators/external.c).
 *
 * Rules every implementation follows:
 *  - every operation returns a cmb_status; none aborts, none prints;
 *  - policies (pool, caching, bfc, buddy, ...) never call CUDA themselves:
 *    they take memory from the cmb_upstream they are created with;
 *  - stats() is cheap (no full scans on the hot path of a benchmark);
 *  - deallocate() receives the size that was passed to allocate().
 */
#ifndef CMB_ALLOCATOR_H
#define CMB_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

#include "cmb_upstream.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of the structs below. */
#define CMB_ALLOCATOR_ABI_VERSION 1u

/* --- statistics: current / peak / total, as mimalloc keeps them --------- */

typedef struct cmb_stat_count {
    int64_t current; /* now                                   */
    int64_t peak;    /* high-water mark of current            */
    int64_t total;   /* cumulative sum of all increases       */
} cmb_stat_count;

/* Which optional fields of cmb_alloc_stats an allocator knows. */
enum {
    CMB_STAT_REQUESTED = 1u << 0,
    CMB_STAT_ALLOCATED = 1u << 1,
    CMB_STAT_RESERVED = 1u << 2,
    CMB_STAT_BLOCKS = 1u << 3,
    CMB_STAT_LARGEST_FREE = 1u << 4,
    CMB_STAT_UPSTREAM = 1u << 5,
    CMB_STAT_OOM_RETRIES = 1u << 6
};

typedef struct cmb_alloc_stats {
    uint32_t valid;            /* CMB_STAT_* bits of the fields filled in     */
    cmb_stat_count requested;  /* bytes the program asked for                 */
    cmb_stat_count allocated;  /* bytes in live blocks, after rounding        */
    cmb_stat_count reserved;   /* bytes held from the upstream                */
    cmb_stat_count blocks;     /* live blocks                                 */
    uint64_t largest_free;     /* largest free block inside the reservation   */
    uint64_t upstream_allocs;  /* calls that took memory from the upstream    */
    uint64_t upstream_frees;   /* calls that returned memory to the upstream  */
    uint64_t oom_retries;      /* times a failed upstream request was retried
                                  after releasing cached memory               */
} cmb_alloc_stats;

/* Update helpers for the counters above. */
static inline void cmb_stat_increase(cmb_stat_count *c, int64_t amount)
{
    c->current += amount;
    c->total += amount;
    if (c->current > c->peak)
        c->peak = c->current;
}

static inline void cmb_stat_decrease(cmb_stat_count *c, int64_t amount)
{
    c->current -= amount;
}

/* --- configuration: key=value options given on the command line ---------- */

typedef struct cmb_option {
    const char *key;
    const char *value;
} cmb_option;

typedef struct cmb_config {
    const cmb_option *options; /* allocator options, e.g. max_split_size_mb=128 */
    size_t n_options;
    int device;                /* CUDA device ordinal (GPU mode)                */
    int sim;                   /* non-zero when running over the sim upstream   */
    char *error;               /* create() writes a one-line reason here        */
    size_t error_len;
} cmb_config;

/* Look up an option; NULL when absent. */
const char *cmb_config_get(const cmb_config *cfg, const char *key);

/* --- the method table ----------------------------------------------------- */

enum {
    CMB_ALLOC_NEEDS_GPU = 1u << 0,      /* cannot run over the sim upstream  */
    CMB_ALLOC_USES_UPSTREAM = 1u << 1,  /* a policy: takes memory from the upstream */
    CMB_ALLOC_NEEDS_VMM = 1u << 2,      /* needs va_reserve/map (vmm or sim)  */
    CMB_ALLOC_STREAM_ORDERED = 1u << 3  /* frees are ordered on the stream     */
};

typedef struct cmb_allocator_methods {
    uint32_t abi_version;    /* CMB_ALLOCATOR_ABI_VERSION                     */
    const char *name;        /* e.g. "torch-caching"                          */
    const char *summary;     /* one line for --list                           */
    uint32_t flags;          /* CMB_ALLOC_* bits                              */

    /* Create an instance over `up` (may be NULL for allocators that do not
     * use one). Unknown or malformed options give CMB_ERR_INVALID. */
    cmb_status (*create)(const cmb_config *cfg, cmb_upstream *up, void **state);

    /* Allocate `size` bytes (> 0) for use on `stream`; *ptr is at least
     * 256-byte aligned. CMB_ERR_OOM when it cannot be served. */
    cmb_status (*allocate)(void *state, size_t size, cmb_stream stream, void **ptr);

    /* Free a block returned by allocate; `size` is the size asked for. */
    cmb_status (*deallocate)(void *state, void *ptr, size_t size, cmb_stream stream);

    /* Return cached memory to the upstream (empty_cache); may be NULL. */
    cmb_status (*trim)(void *state);

    /* Fill *out; fields not known are left out of out->valid. */
    cmb_status (*stats)(void *state, cmb_alloc_stats *out);

    /* Release everything the instance holds and free it. */
    cmb_status (*destroy)(void *state);

    /* A message describing the last failure of this instance, or NULL; may be NULL. */
    const char *(*last_error)(void *state);
} cmb_allocator_methods;

/* The entry point a plug-in library exports. It returns NULL when it does
 * not support `abi_version`. */
typedef const cmb_allocator_methods *(*cmb_plugin_entry_fn)(uint32_t abi_version);
#define CMB_PLUGIN_ENTRY_SYMBOL "cmb_plugin_allocator"

#ifdef __cplusplus
}
#endif

#endif /* CMB_ALLOCATOR_H */
