/* registry.c - the table of named allocators, in the order --list shows. */
#include "registry.h"

#include <stdio.h>
#include <string.h>

#include "../common/cmb_assert.h"

extern const cmb_allocator_methods cmb_cuda_methods;
extern const cmb_allocator_methods cmb_cuda_async_methods;
extern const cmb_allocator_methods cmb_managed_methods;
extern const cmb_allocator_methods cmb_cub_methods;
extern const cmb_allocator_methods cmb_torch_caching_methods;
extern const cmb_allocator_methods cmb_torch_expandable_methods;
extern const cmb_allocator_methods cmb_rmm_pool_methods;
extern const cmb_allocator_methods cmb_arena_methods;
extern const cmb_allocator_methods cmb_binning_methods;
extern const cmb_allocator_methods cmb_bfc_methods;
extern const cmb_allocator_methods cmb_cupy_methods;
extern const cmb_allocator_methods cmb_buddy_methods;
extern const cmb_allocator_methods cmb_cmb_methods;

/* --- invariant walks (each policy's, in its file) ---------------------------------- */

int _cmb_rmm_pool_walk(const void *state, cmb_walk *w);
int _cmb_binning_walk(const void *state, cmb_walk *w);
int _cmb_arena_walk(const void *state, cmb_walk *w);
int _cmb_bfc_walk(const void *state, cmb_walk *w);
int _cmb_buddy_walk(const void *state, cmb_walk *w);
int _cmb_cupy_walk(const void *state, cmb_walk *w);
int _cmb_tc_walk(const void *state, cmb_walk *w);

static const cmb_allocator_entry entries[] = {
    {"cuda", &cmb_cuda_methods, "", NULL, NULL, NULL},
    {"cuda-async", &cmb_cuda_async_methods, "pool=default:release_threshold=0", NULL, NULL, NULL},
    {"cuda-async-retain", &cmb_cuda_async_methods, "pool=own:release_threshold=max",
     "cudaMallocAsync on its own pool, release threshold UINT64_MAX (RMM's cuda_async default)", NULL, NULL},
    {"managed", &cmb_managed_methods, "", NULL, NULL, NULL},
    {"cub", &cmb_cub_methods, "", NULL, NULL, NULL},
    {"cub-1g", &cmb_cub_methods, "bin_growth=8:min_bin=3:max_bin=10:max_cached_bytes=unlimited",
     "CUB CachingDeviceAllocator with bins up to 1 GiB (8^10) and no cache limit", NULL, NULL},
    {"torch-caching", &cmb_torch_caching_methods, "", NULL, "PyTorch CUDACachingAllocator", _cmb_tc_walk},
    {"torch-expandable", &cmb_torch_expandable_methods, "", NULL,
     "PyTorch CUDACachingAllocator, expandable_segments:True", _cmb_tc_walk},
    {"rmm-pool", &cmb_rmm_pool_methods, "", NULL, "RMM pool_memory_resource", _cmb_rmm_pool_walk},
    {"arena", &cmb_arena_methods, "", NULL, "RMM arena_memory_resource", _cmb_arena_walk},
    {"binning", &cmb_binning_methods, "", NULL, "RMM binning_memory_resource", _cmb_binning_walk},
    {"bfc", &cmb_bfc_methods, "", NULL, "TensorFlow/XLA BFCAllocator", _cmb_bfc_walk},
    {"bfc-prealloc", &cmb_bfc_methods, "allow_growth=false",
     "TensorFlow BFC as TF's GPU default (allow_growth off): one region of the whole memory limit",
     "TensorFlow/XLA BFCAllocator", _cmb_bfc_walk},
    {"cupy", &cmb_cupy_methods, "", NULL, "CuPy MemoryPool", _cmb_cupy_walk},
    {"buddy", &cmb_buddy_methods, "", NULL, NULL, _cmb_buddy_walk},
    {"cmb", &cmb_cmb_methods, "", NULL, NULL, NULL},
};

size_t cmb_allocator_count(void)
{
    return sizeof entries / sizeof entries[0];
}

const cmb_allocator_entry *cmb_allocator_at(size_t i)
{
    return i < cmb_allocator_count() ? &entries[i] : NULL;
}

const cmb_allocator_entry *cmb_allocator_find(const char *name)
{
    for (size_t i = 0; i < cmb_allocator_count(); i++)
        if (!strcmp(entries[i].name, name))
            return &entries[i];
    return NULL;
}

const char *cmb_allocator_sim_skip_reason(const cmb_allocator_methods *m)
{
    if (m->flags & CMB_ALLOC_NEEDS_GPU)
        return "needs a GPU: it allocates through the CUDA driver, not through an upstream";
    return NULL;
}

const char *cmb_allocator_impl(const cmb_allocator_entry *e)
{
    if (e && e->emulates)
        return "emulation";
    /* "cuda" hands every request to its upstream: what runs is cudaMalloc
     * itself (or the sim device standing in for it) */
    if (!e || e->methods == &cmb_cuda_methods)
        return "real";
    /* a policy over an upstream that imitates no library is the suite's own */
    return (e->methods->flags & CMB_ALLOC_USES_UPSTREAM) ? "suite" : "real";
}

int cmb_allocator_walk(const cmb_allocator_methods *m, const void *state, char *why, size_t whylen)
{
    for (size_t i = 0; i < cmb_allocator_count(); i++) {
        if (entries[i].methods != m || !entries[i].walk)
            continue;
        cmb_walk w = {0};
        if (!entries[i].walk(state, &w)) {
            if (why && whylen)
                why[0] = '\0';
            return 0;
        }
        if (why && whylen)
            snprintf(why, whylen, "%s (%s:%u, %s)", w.expr, w.file, w.line, w.func);
        return 1;
    }
    return -1;
}
