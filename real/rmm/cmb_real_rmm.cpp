/* cmb_real_rmm.cpp - RMM's own memory resources as real allocators:
 * real:rmm-pool, real:arena, real:binning, real:cuda-async-retain.
 *
 * Built against librmm (the librmm-cu13 / librmm-cu12 wheel, or a RAPIDS
 * install; RMM 26.x, whose resources are cuda::mr::shared_resource types in
 * librmm.so). Each allocator is the resource a RAPIDS program builds, with
 * the same defaults as the suite's emulation of it:
 *
 *   real:rmm-pool   pool_memory_resource(stats(cuda_memory_resource),
 *                   initial = percent_of_free_device_memory(50), no maximum)
 *                   (include/rmm/mr/pool_memory_resource.hpp: RMM 26.x has no
 *                   default initial size; 50% of free is the one its docs and
 *                   benchmarks use, and the emulation's, allocators/alloc_rmm_pool.c)
 *   real:arena      arena_memory_resource(stats(cuda_memory_resource)), RMM's
 *                   default arena size (detail/arena.hpp: half the free memory)
 *   real:binning    binning_memory_resource(pool, 18, 22) over the pool above,
 *                   as benchmarks/random_allocations.cpp builds it
 *   real:cuda-async-retain
 *                   cuda_async_memory_resource(): its own cudaMemPool with the
 *                   release threshold at the device's total memory
 *                   (src/mr/detail/cuda_async_memory_resource_impl.cpp)
 *
 * Statistics come from RMM's statistics_resource_adaptor placed between the
 * resource and cuda_memory_resource: it sees exactly what the resource holds
 * from CUDA (reserved bytes: current, peak, total; upstream allocations and
 * frees), and it sits off the hot path, so the measured time is the
 * resource's own. cuda_async_memory_resource has no upstream: its reserved
 * and used bytes are its pool's attributes (cudaMemPoolAttrReservedMem*,
 * UsedMem*). Left out, never 0: requested bytes and live blocks (the harness
 * counts them), the largest free block (RMM does not expose it), OOM retries.
 *
 * Every RMM exception is caught at this boundary: rmm::out_of_memory is
 * CMB_ERR_OOM, anything else CMB_ERR_CUDA with its message in last_error.
 */
#include <cuda_runtime_api.h>

#include <rmm/aligned.hpp>
#include <rmm/cuda_device.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/binning_memory_resource.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>

#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>

#include "../../allocators/cmb_real_plugin.h"
#include "../../allocators/cmb_real_options.h"

namespace {

/* --- the four allocators ------------------------------------------------------------------ */

enum class kind { pool, arena, binning, async };

/* binning's bins: 2^18 .. 2^22 (benchmarks/random_allocations/random_allocations.cpp,
 * tests/mr/mr_ref_test.hpp), the emulation's defaults (allocators/alloc_binning.c) */
constexpr uint64_t default_min_bin_exp = 18;
constexpr uint64_t default_max_bin_exp = 22;
/* rmm::percent_of_free_device_memory(50): the initial pool (include/rmm/cuda_device.hpp) */
constexpr int default_pool_percent = 50;

struct state {
    kind k;
    std::optional<rmm::mr::statistics_resource_adaptor> stats; /* over cuda_memory_resource */
    std::optional<rmm::mr::pool_memory_resource> pool;
    std::optional<rmm::mr::arena_memory_resource> arena;
    std::optional<rmm::mr::binning_memory_resource> binning;
    std::optional<rmm::mr::cuda_async_memory_resource> async;
    std::string err;
};

const char *name_of(kind k)
{
    switch (k) {
    case kind::pool: return "real:rmm-pool";
    case kind::arena: return "real:arena";
    case kind::binning: return "real:binning";
    case kind::async: return "real:cuda-async-retain";
    }
    return "real:rmm";
}

/* --- options -------------------------------------------------------------------------------- */

struct options {
    uint64_t initial = 0, maximum = 0, arena_size = 0, release = 0, min_exp = default_min_bin_exp,
             max_exp = default_max_bin_exp;
    int has_initial = 0, has_maximum = 0, has_arena_size = 0, has_release = 0;
};

/* real/real_options.h */
constexpr const cmb_option_decl *options_of(kind k)
{
    switch (k) {
    case kind::pool: return cmb_real_pool_options;
    case kind::arena: return cmb_real_arena_options;
    case kind::binning: return cmb_real_binning_options;
    case kind::async: return cmb_real_async_options;
    }
    return cmb_real_pool_options;
}

int read_exp(const cmb_config *cfg, const char *who, const char *key, uint64_t *out)
{
    const char *v = cmb_real_option(cfg, key);
    if (v && (cmb_real_parse_u64(v, out) || *out < 8 || *out > 40)) {
        snprintf(cfg->error, cfg->error_len, "%s: option %s=%s: expected an exponent in [8, 40]", who, key, v);
        return -1;
    }
    return 0;
}

int read_options(kind k, const cmb_config *cfg, options *o)
{
    const char *who = name_of(k);
    if (cmb_real_check_options(cfg, who, options_of(k)) ||
        cmb_real_size_option(cfg, who, "initial_pool_size", &o->initial, &o->has_initial) ||
        cmb_real_size_option(cfg, who, "maximum_pool_size", &o->maximum, &o->has_maximum) ||
        cmb_real_size_option(cfg, who, "arena_size", &o->arena_size, &o->has_arena_size) ||
        cmb_real_size_option(cfg, who, "release_threshold", &o->release, &o->has_release) ||
        read_exp(cfg, who, "min_bin_exp", &o->min_exp) || read_exp(cfg, who, "max_bin_exp", &o->max_exp))
        return -1;
    /* RMM refuses pool sizes that are not multiples of 256 B (rmm::logic_error) */
    if ((o->has_initial && o->initial % rmm::CUDA_ALLOCATION_ALIGNMENT) ||
        (o->has_maximum && o->maximum != UINT64_MAX && o->maximum % rmm::CUDA_ALLOCATION_ALIGNMENT)) {
        snprintf(cfg->error, cfg->error_len, "%s: pool sizes must be multiples of 256 B", who);
        return -1;
    }
    if (o->min_exp > o->max_exp) {
        snprintf(cfg->error, cfg->error_len, "%s: min_bin_exp must not exceed max_bin_exp", who);
        return -1;
    }
    return 0;
}

/* --- building the resources --------------------------------------------------------------------- */

void build_pool(state *s, const options &o)
{
    std::size_t initial = o.has_initial ? o.initial : rmm::percent_of_free_device_memory(default_pool_percent);
    std::optional<std::size_t> maximum;
    if (o.has_maximum && o.maximum != UINT64_MAX)
        maximum = o.maximum;
    s->pool.emplace(*s->stats, initial, maximum);
}

void build(state *s, const options &o)
{
    if (s->k != kind::async)
        s->stats.emplace(rmm::mr::cuda_memory_resource{});
    switch (s->k) {
    case kind::pool: build_pool(s, o); break;
    case kind::arena: {
        std::optional<std::size_t> size;
        if (o.has_arena_size)
            size = o.arena_size;
        s->arena.emplace(*s->stats, size);
        break;
    }
    case kind::binning:
        build_pool(s, o);
        s->binning.emplace(*s->pool, static_cast<int8_t>(o.min_exp), static_cast<int8_t>(o.max_exp));
        break;
    case kind::async: {
        std::optional<std::size_t> initial, release;
        if (o.has_initial)
            initial = o.initial;
        if (o.has_release)
            release = o.release;
        s->async.emplace(initial, release);
        break;
    }
    }
}

/* Messages become one line: they end up in a CSV cell and a progress line. */
void one_line(std::string *s)
{
    for (auto &c : *s)
        if (c == '\n' || c == '\r')
            c = ' ';
}

/* Runs f, turning RMM's exceptions into a status and a message. */
template <class F>
cmb_status guarded(std::string *err, F &&f)
{
    try {
        f();
        return CMB_OK;
    } catch (rmm::out_of_memory const &e) {
        if (err) {
            *err = e.what();
            one_line(err);
        }
        return CMB_ERR_OOM;
    } catch (std::bad_alloc const &e) {
        if (err) {
            *err = e.what();
            one_line(err);
        }
        return CMB_ERR_HOST_NOMEM;
    } catch (std::exception const &e) {
        if (err) {
            *err = e.what();
            one_line(err);
        }
        return CMB_ERR_CUDA;
    }
}

/* --- the methods ------------------------------------------------------------------------------- */

template <kind K>
cmb_status rmm_create(const cmb_config *cfg, cmb_upstream *, void **out)
{
    options o;
    if (read_options(K, cfg, &o))
        return CMB_ERR_INVALID;
    if (cfg->sim) {
        snprintf(cfg->error, cfg->error_len, "%s needs a GPU: RMM takes its memory from CUDA", name_of(K));
        return CMB_ERR_UNSUPPORTED;
    }
    auto *s = new (std::nothrow) state{};
    if (!s)
        return CMB_ERR_HOST_NOMEM;
    s->k = K;
    std::string err;
    cmb_status st = guarded(&err, [&] { build(s, o); });
    if (st != CMB_OK) {
        snprintf(cfg->error, cfg->error_len, "%s: %s", name_of(K), err.c_str());
        delete s;
        return st;
    }
    *out = s;
    return CMB_OK;
}

cmb_status rmm_allocate(void *p, size_t size, cmb_stream stream, void **ptr)
{
    auto *s = static_cast<state *>(p);
    cuda::stream_ref sr{reinterpret_cast<cudaStream_t>(stream)};
    constexpr std::size_t align = rmm::CUDA_ALLOCATION_ALIGNMENT;
    return guarded(&s->err, [&] {
        switch (s->k) {
        case kind::pool: *ptr = s->pool->allocate(sr, size, align); break;
        case kind::arena: *ptr = s->arena->allocate(sr, size, align); break;
        case kind::binning: *ptr = s->binning->allocate(sr, size, align); break;
        case kind::async: *ptr = s->async->allocate(sr, size, align); break;
        }
    });
}

cmb_status rmm_deallocate(void *p, void *ptr, size_t size, cmb_stream stream)
{
    auto *s = static_cast<state *>(p);
    cuda::stream_ref sr{reinterpret_cast<cudaStream_t>(stream)};
    constexpr std::size_t align = rmm::CUDA_ALLOCATION_ALIGNMENT;
    switch (s->k) { /* noexcept in RMM */
    case kind::pool: s->pool->deallocate(sr, ptr, size, align); break;
    case kind::arena: s->arena->deallocate(sr, ptr, size, align); break;
    case kind::binning: s->binning->deallocate(sr, ptr, size, align); break;
    case kind::async: s->async->deallocate(sr, ptr, size, align); break;
    }
    return CMB_OK;
}

void put(cmb_stat_count *c, int64_t current, int64_t peak, int64_t total)
{
    c->current = current;
    c->peak = peak;
    c->total = total;
}

cmb_status async_stats(state *s, cmb_alloc_stats *out)
{
    cudaMemPool_t pool = s->async->pool_handle();
    uint64_t res = 0, res_high = 0, used = 0, used_high = 0;
    if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &res) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &res_high) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used_high) != cudaSuccess)
        return CMB_ERR_CUDA;
    /* totals are not kept by the driver: left at the current value */
    put(&out->reserved, (int64_t)res, (int64_t)res_high, (int64_t)res);
    put(&out->allocated, (int64_t)used, (int64_t)used_high, (int64_t)used);
    out->valid = CMB_STAT_RESERVED | CMB_STAT_ALLOCATED;
    return CMB_OK;
}

cmb_status rmm_stats(void *p, cmb_alloc_stats *out)
{
    auto *s = static_cast<state *>(p);
    std::memset(out, 0, sizeof *out);
    if (s->k == kind::async)
        return async_stats(s, out);
    auto bytes = s->stats->get_bytes_counter();
    auto calls = s->stats->get_allocations_counter();
    put(&out->reserved, bytes.value, bytes.peak, bytes.total);
    out->upstream_allocs = (uint64_t)calls.total;
    out->upstream_frees = (uint64_t)(calls.total - calls.value);
    out->valid = CMB_STAT_RESERVED | CMB_STAT_UPSTREAM;
    return CMB_OK;
}

cmb_status rmm_destroy(void *p)
{
    auto *s = static_cast<state *>(p);
    /* the wrappers first, the upstream last: each returns what it holds */
    cmb_status st = guarded(nullptr, [&] {
        s->binning.reset();
        s->pool.reset();
        s->arena.reset();
        s->async.reset();
        s->stats.reset();
    });
    delete s;
    return st;
}

const char *rmm_last_error(void *p)
{
    auto *s = static_cast<state *>(p);
    return s->err.empty() ? nullptr : s->err.c_str();
}

/* --- the tables ---------------------------------------------------------------------------------- */

template <kind K>
constexpr cmb_allocator_methods table(const char *summary)
{
    return cmb_allocator_methods{
        CMB_ALLOCATOR_ABI_VERSION, name_of(K), summary, CMB_ALLOC_NEEDS_GPU | CMB_ALLOC_STREAM_ORDERED,
        rmm_create<K>, rmm_allocate, rmm_deallocate, nullptr, rmm_stats, rmm_destroy, rmm_last_error,
        options_of(K),
    };
}

/* trim is NULL: none of these resources can give memory back short of
 * destruction (pool and arena never shrink; the async pool trims itself
 * only above its release threshold). */
const cmb_allocator_methods tables[] = {
    table<kind::pool>("RMM pool_memory_resource (librmm), initial pool 50% of free"),
    table<kind::arena>("RMM arena_memory_resource (librmm)"),
    table<kind::binning>("RMM binning_memory_resource 2^18..2^22 over a pool_memory_resource (librmm)"),
    table<kind::async>("RMM cuda_async_memory_resource (librmm)"),
};

} // namespace

/* --- entry points ------------------------------------------------------------------------------------ */

extern "C" CMB_REAL_EXPORT const cmb_allocator_methods *cmb_real_allocator(uint32_t abi_version, const char *name)
{
    if (abi_version != CMB_ALLOCATOR_ABI_VERSION || !name)
        return nullptr;
    for (const auto &t : tables)
        if (!std::strcmp(t.name, name))
            return &t;
    return nullptr;
}

extern "C" CMB_REAL_EXPORT const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version)
{
    return abi_version == CMB_ALLOCATOR_ABI_VERSION ? &tables[0] : nullptr;
}
