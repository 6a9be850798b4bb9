/* torch_caching.h - the state shared by "torch-caching" (alloc_torch_caching.c,
 * PyTorch's DeviceCachingAllocator) and "torch-expandable"
 * (alloc_torch_expandable.c, its ExpandableSegment). Private to those two
 * files: PyTorch keeps both in c10/cuda/CUDACachingAllocator.cpp and
 * switches with a flag, and so do we.
 */
#ifndef CMB_TORCH_CACHING_H
#define CMB_TORCH_CACHING_H

#include <stddef.h>
#include <stdint.h>

#include "../common/cmb_assert.h"
#include "../common/cmb_hashmap.h"
#include "../common/cmb_rbtree.h"
#include "cmb_allocator.h"

/* --- constants (c10/cuda/CUDACachingAllocator.cpp unless noted) -------------- */

#define TC_MIN_BLOCK_SIZE ((size_t)512)            /* kMinBlockSize: every size rounds to 512 B     */
#define TC_SMALL_SIZE ((size_t)1 << 20)            /* kSmallSize: largest small request, 1 MiB     */
#define TC_SMALL_BUFFER ((size_t)2 << 20)          /* kSmallBuffer: small segments are 2 MiB       */
#define TC_LARGE_BUFFER ((size_t)20 << 20)         /* kLargeBuffer: 20 MiB segments for 1-10 MiB   */
#define TC_MIN_LARGE_ALLOC ((size_t)10 << 20)      /* kMinLargeAlloc: below it, kLargeBuffer       */
#define TC_ROUND_LARGE ((size_t)2 << 20)           /* kRoundLarge: larger segments round to 2 MiB  */
#define TC_ROUNDUP_INTERVALS 16                    /* kRoundUpPowerOfTwoIntervals
                                                      (c10/core/AllocatorConfig.cpp)              */
#define TC_ROUNDUP_START_LOG2 20                   /* kRoundUpPowerOfTwoStart = 1 MiB
                                                      (c10/core/AllocatorConfig.cpp)              */

/* --- blocks and pools ---------------------------------------------------------- */

typedef struct _cmb_tc_pool _cmb_tc_pool;
typedef struct _cmb_tc_expseg _cmb_tc_expseg;

enum { TC_IN_NONE = 0, TC_IN_BLOCKS = 1, TC_IN_UNMAPPED = 2 };

/* PyTorch's Block: a piece of a segment, allocated or free. Free blocks sit
 * in their pool's ordered set; neighbours in the same segment are linked
 * through prev/next so a free can coalesce. */
typedef struct _cmb_tc_block {
    cmb_rbnode node;            /* in pool->blocks or pool->unmapped          */
    uintptr_t ptr;
    size_t size;
    size_t requested;           /* the unrounded request (allocated blocks)   */
    cmb_stream stream;          /* allocation stream                          */
    _cmb_tc_pool *pool;
    struct _cmb_tc_block *prev; /* neighbours inside the segment              */
    struct _cmb_tc_block *next; /* (also the slab free-list link)             */
    _cmb_tc_expseg *es;         /* expandable segment, NULL for cudaMalloc'd  */
    cmb_stream *uses;           /* record_stream: other streams that used it  */
    uint64_t gc_count_base;     /* pool's get_free_block count at insertion   */
    uint32_t n_uses, cap_uses;
    uint32_t event_count;       /* outstanding end-of-use events              */
    uint8_t allocated;
    uint8_t mapped;             /* backed by memory (always, unless expandable) */
    uint8_t where;              /* TC_IN_*                                    */
    uint8_t in_use;             /* taken from the slab (for destroy)          */
} _cmb_tc_block;

struct _cmb_tc_pool {
    cmb_rbtree blocks;   /* free mapped blocks ordered by (stream, size, ptr) */
    cmb_rbtree unmapped; /* expandable: unmapped ranges by (stream, ptr)      */
    uint64_t get_free_blocks_call_count;
    int is_small;
};

/* One outstanding event recorded on `stream` after `block` was freed. */
typedef struct _cmb_tc_event {
    cmb_stream stream;
    cmb_event ev;
    _cmb_tc_block *block;
} _cmb_tc_event;

typedef struct _cmb_tc_slab _cmb_tc_slab;

/* A request on its way through malloc (PyTorch's AllocParams). */
typedef struct _cmb_tc_params {
    size_t size;       /* rounded request                   */
    size_t alloc_size; /* segment size a cudaMalloc would get */
    cmb_stream stream;
    _cmb_tc_pool *pool;
    _cmb_tc_block *block;
} _cmb_tc_params;

/* --- the allocator state ---------------------------------------------------------- */

typedef struct _cmb_tc_state {
    cmb_upstream *up;
    int expandable;                       /* expandable_segments:True           */

    /* configuration (CUDAAllocatorConfig / AcceleratorAllocatorConfig) */
    size_t max_split_size;
    size_t max_non_split_rounding_size;
    size_t divisions[TC_ROUNDUP_INTERVALS];
    double gc_threshold;
    int set_fraction;
    size_t allowed_memory_maximum;
    size_t es_page_small, es_page_large; /* expandable page sizes             */
    size_t es_va_size_small, es_va_size_large;

    _cmb_tc_pool large, small;
    cmb_hashmap live;                     /* ptr -> allocated block            */
    size_t total_allocated_memory;        /* bytes held: segments or mappings  */

    _cmb_tc_event *events;                /* in record order (per-stream FIFO) */
    size_t n_events, cap_events;

    _cmb_tc_expseg **segs;                /* live expandable segments          */
    size_t n_segs, cap_segs;

    _cmb_tc_slab *slabs;
    _cmb_tc_block *free_structs;

    /* statistics PyTorch keeps (DeviceStats) that the suite reports */
    cmb_stat_count requested, allocated, blocks;
    uint64_t num_alloc_retries, num_ooms;

    char err[256];
    CMB_DEBUG_ONLY(uint64_t ops;)
} _cmb_tc_state;

/* --- core calls used by the expandable half ------------------------------------------ */

_cmb_tc_block *_cmb_tc_block_new(_cmb_tc_state *st);
void _cmb_tc_block_free(_cmb_tc_state *st, _cmb_tc_block *b);
void _cmb_tc_insert_free(_cmb_tc_block *b);      /* pool.insert_into_blocks */
void _cmb_tc_insert_unmapped(_cmb_tc_block *b);
void _cmb_tc_erase(_cmb_tc_block *b);            /* from whichever set holds it */
size_t _cmb_tc_try_merge(_cmb_tc_state *st, _cmb_tc_block *dst, _cmb_tc_block *src);
void _cmb_tc_splice(_cmb_tc_block *b, _cmb_tc_block *before, _cmb_tc_block *after);

cmb_status _cmb_tc_create(const cmb_config *cfg, cmb_upstream *up, void **state, int expandable,
                          const char *name);
cmb_status _cmb_tc_allocate(void *state, size_t size, cmb_stream stream, void **ptr);
cmb_status _cmb_tc_deallocate(void *state, void *ptr, size_t size, cmb_stream stream);
cmb_status _cmb_tc_trim(void *state);
cmb_status _cmb_tc_stats(void *state, cmb_alloc_stats *out);
cmb_status _cmb_tc_destroy(void *state);
const char *_cmb_tc_last_error(void *state);
/* Free bytes a request could not use, by reason (cmb_allocator.h). */
cmb_status _cmb_tc_free_account(void *state, size_t size, cmb_stream stream, cmb_free_account *out);
/* The options of both (PyTorch's CUDAAllocatorConfig). */
extern const cmb_option_decl _cmb_tc_options[];
/* The invariant walk of both (common/cmb_assert.h). */
int _cmb_tc_walk(const void *state, cmb_walk *w);

/* --- the expandable half (alloc_torch_expandable.c) ---------------------------------- */

/* try_allocate_expandable_block: CMB_OK with p->block, CMB_ERR_OOM, or an error. */
cmb_status _cmb_tc_es_allocate(_cmb_tc_state *st, _cmb_tc_params *p);
/* unmap_block: unmaps the fully free pages of a free mapped block. */
cmb_status _cmb_tc_es_unmap_block(_cmb_tc_state *st, _cmb_tc_block *b);
/* release_expandable_segment: `b` is the whole, unmapped segment. */
cmb_status _cmb_tc_es_release(_cmb_tc_state *st, _cmb_tc_block *b);
/* destroy: unmap everything still mapped and release every segment. */
cmb_status _cmb_tc_es_destroy_all(_cmb_tc_state *st);
/* The invariants of the segment that `head` starts: it covers the whole
 * reserved range, every mapped block lies on mapped pages and no unmapped
 * one does; adds the mapped bytes to *held. */
int _cmb_tc_es_walk(const _cmb_tc_block *head, cmb_walk *w, size_t *held);

#endif /* CMB_TORCH_CACHING_H */
