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

/* Bumped on any incompatible change of the structs below. Version 2 added
 * `options` at the end of cmb_allocator_methods, version 3 `free_account`
 * after it; a table of an older version is still loaded (external.c,
 * real.c) and reads as one without the later fields. */
#define CMB_ALLOCATOR_ABI_VERSION 3u
#define CMB_ALLOCATOR_ABI_VERSION_MIN 1u

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

/* --- option declarations ---------------------------------------------------
 *
 * Each allocator declares its options in one table, ending with {NULL}:
 * the suite checks every --allocator spec against it before anything runs
 * (cmb_allocator_check_options), --list prints it, and create() reads the
 * values through it (allocators/options.h). A plug-in reads its own with
 * the header-only checks of cmb_option_check.h.
 *
 * Values as written on the command line:
 *   SIZE    a byte size with a unit: 512B, 64KiB, 2MiB, 1.5GiB, 1TiB (powers
 *           of 1024; KB/MB/GB and lower-case units are refused as
 *           ambiguous). A bare number is read in `unit` ("B", "MiB"), or
 *           refused when `unit` is NULL; 0 needs no unit. "max" (or
 *           "unlimited") where CMB_OPT_MAX_OK is set.
 *   REAL    a number; INT a whole number (decimal or 0x hex);
 *   BOOL    true/false, 1/0, yes/no, on/off;
 *   ENUM    one of `choices`, '|'-separated ("once|always");
 *   STRING  any text; the allocator checks it at create.
 * `min` and `max` are bounds written the same way ("0", "0.95", "20MiB",
 * "max"), NULL for none; they print as written.
 */
typedef enum cmb_option_type {
    CMB_OPT_SIZE = 1,
    CMB_OPT_REAL,
    CMB_OPT_INT,
    CMB_OPT_BOOL,
    CMB_OPT_ENUM,
    CMB_OPT_STRING
} cmb_option_type;

enum {
    CMB_OPT_MAX_OK = 1u << 0, /* SIZE: "max"/"unlimited" means no limit (UINT64_MAX) */
    CMB_OPT_POW2 = 1u << 1,   /* SIZE, INT: a power of two (0 allowed where min allows it) */
    CMB_OPT_FILE = 1u << 2    /* STRING: the path of a file that can be read */
};

typedef struct cmb_option_decl {
    const char *name;
    cmb_option_type type;
    const char *dflt;     /* the default as written ("1MiB", "true"), or a rule in
                             parentheses ("(50% of free memory)") read by create() */
    const char *min;      /* inclusive bounds, or NULL                          */
    const char *max;
    const char *unit;     /* SIZE: the unit of a bare number ("B", "MiB") or NULL;
                             others: a word for --list ("fraction", "blocks")   */
    const char *help;     /* one line; says the unit                            */
    const char *choices;  /* ENUM: "a|b|c"                                      */
    uint32_t flags;       /* CMB_OPT_*                                          */
    const char *excludes; /* an option that says the same thing: give one      */
} cmb_option_decl;

/* Table entries: {name, type, default, min, max, unit, help}, the rest
 * zero; with choices, flags and an excluded option; the end of a table. */
#define CMB_OPTION(n, t, d, lo, hi, u, h) {(n), (t), (d), (lo), (hi), (u), (h), NULL, 0u, NULL}
#define CMB_OPTION_EX(n, t, d, lo, hi, u, h, ch, fl, ex) {(n), (t), (d), (lo), (hi), (u), (h), (ch), (fl), (ex)}
#define CMB_OPTION_END {NULL, (cmb_option_type)0, NULL, NULL, NULL, NULL, NULL, NULL, 0u, NULL}

/* --- free memory by reason (ABI version 3) --------------------------------
 *
 * Why a request was refused although the reservation holds free bytes:
 * free_account() sorts every free byte inside the reservation by the first
 * reason, in this order, that keeps the request (as the policy rounds it)
 * from using it. The bytes add up to the policy's free bytes; CMB_FREE_USABLE
 * holds those that would serve the request (0 right after it failed, unless
 * the policy refused for another reason, e.g. a limit on its reservation).
 */
typedef enum cmb_free_reason {
    CMB_FREE_OTHER_POOL = 0,    /* in the other size pool (small vs large)          */
    CMB_FREE_OTHER_STREAM,      /* cached for another stream                        */
    CMB_FREE_EVENT_WAIT,        /* freed, but waiting on events of streams that used it */
    CMB_FREE_OVERSIZE,          /* blocks above max_split_size a smaller request may not split */
    CMB_FREE_NOT_CONTIGUOUS,    /* mapped pages, but not next to each other         */
    CMB_FREE_TOO_SMALL,         /* a free block smaller than the request            */
    CMB_FREE_USABLE,            /* would serve the request                          */
    CMB_FREE_N_REASONS
} cmb_free_reason;

typedef struct cmb_free_account {
    uint64_t rounded;                    /* the request as the policy rounds it  */
    uint64_t largest_free;               /* largest free block, any pool/stream */
    uint64_t bytes[CMB_FREE_N_REASONS];  /* free bytes by cmb_free_reason        */
} cmb_free_account;

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

    /* ABI version 2: the options it takes, ending with {NULL}; NULL when
     * the allocator does not declare them (it then checks them itself). */
    const cmb_option_decl *options;

    /* ABI version 3: the free memory a request of `size` bytes on `stream`
     * could not use, by reason (for --explain-oom); NULL when the policy
     * gives no account. Cheap enough after a failure, not for the hot path. */
    cmb_status (*free_account)(void *state, size_t size, cmb_stream stream, cmb_free_account *out);
} cmb_allocator_methods;

/* The entry point a plug-in library exports. It returns NULL when it does
 * not support `abi_version`. */
typedef const cmb_allocator_methods *(*cmb_plugin_entry_fn)(uint32_t abi_version);
#define CMB_PLUGIN_ENTRY_SYMBOL "cmb_plugin_allocator"

#ifdef __cplusplus
}
#endif

#endif /* CMB_ALLOCATOR_H */
