/* cmb_real_torch.cpp - PyTorch's own CUDACachingAllocator as
 * real:torch-caching and real:torch-expandable.
 *
 * Built against an installed PyTorch's headers and libc10 / libc10_cuda
 * (PyTorch 2.11: c10/cuda/CUDACachingAllocator.h, c10/core/AllocatorConfig.h,
 * c10/core/CachingDeviceAllocator.h). A C++ program that uses PyTorch's
 * allocator without tensors calls exactly this:
 *
 *   allocate    CUDACachingAllocator::raw_alloc_with_stream(size, stream)
 *   deallocate  CUDACachingAllocator::raw_delete(ptr)
 *   trim        CUDACachingAllocator::emptyCache()
 *   stats       CUDACachingAllocator::getDeviceStats(device), cacheInfo()
 *
 * so the measured time is the allocator's own (its mutex, the block pools,
 * the pointer map, statistics, events), with no Python and no tensors.
 *
 * Options are the emulation's (allocators/alloc_torch_caching.c), mapped to
 * PYTORCH_CUDA_ALLOC_CONF keys of the same meaning (CUDAAllocatorConfig /
 * AcceleratorAllocatorConfig, PyTorch 2.11):
 *   max_split_size(_mb)             -> max_split_size_mb:N (whole MiB)
 *   max_non_split_rounding_size(_mb)-> max_non_split_rounding_mb:N
 *   roundup_power2_divisions        -> roundup_power2_divisions:N or [MB:N,...,>:N]
 *   garbage_collection_threshold    -> garbage_collection_threshold:X
 *   expandable_segments (real:torch-expandable's default) -> expandable_segments:True
 *   per_process_memory_fraction     -> setMemoryFraction(X, device)
 * The allocator reads its configuration once per process, when it is first
 * used: the plug-in replaces PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF
 * with its own string and applies it (setAllocatorSettings) before init(),
 * so a setting in the user's environment never leaks into a case. One
 * process runs one case, so one configuration per process is no limit; a
 * second configuration in the same process is refused.
 *
 * The allocator is one per process (a global in libc10_cuda): one instance
 * at a time. Each create() starts from an empty cache with the peak and
 * accumulated statistics reset, as each repetition of an emulation starts
 * from a fresh instance.
 *
 * Streams: PyTorch reuses a freed block on the stream it was allocated on.
 * A block freed on another stream needs record_stream first, or it could
 * be reused while that stream still uses it; the plug-in calls recordStream
 * for such frees (as a correct PyTorch program does), and only then: while
 * every allocation and free is on one stream, nothing is added.
 */
#include <c10/core/AllocatorConfig.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "../../allocators/cmb_real_plugin.h"
#include "../../allocators/cmb_real_options.h"

namespace ca = c10::cuda::CUDACachingAllocator;

namespace {

constexpr uint64_t mib = 1ull << 20;

struct state {
    c10::DeviceIndex device;
    cudaStream_t first_stream; /* the stream of the first allocation        */
    bool several_streams;      /* allocations or frees on another stream seen */
    bool used;                 /* first_stream is set                        */
    int64_t device_allocs0;    /* num_device_alloc / _free at create: counted */
    int64_t device_frees0;     /* from there, whatever the reset covers      */
    std::string err;
};

/* the process-wide allocator */
bool initialised = false;
std::string configured; /* the configuration it was initialised with */
int live_instances = 0;

/* --- options -> PYTORCH_CUDA_ALLOC_CONF ----------------------------------------------------- */

/* "N" stays; "MB=N/MB=N/>=N" (the suite's spelling, ':' and ',' being
 * taken on its command line) becomes "[MB:N,MB:N,>:N]". */
bool divisions(const char *text, std::string *out)
{
    if (!std::strchr(text, '=')) {
        uint64_t n;
        if (cmb_real_parse_u64(text, &n))
            return false;
        *out = text;
        return true;
    }
    std::string s = "[";
    const char *p = text;
    while (*p) {
        const char *slash = std::strchr(p, '/');
        std::string item(p, slash ? (size_t)(slash - p) : std::strlen(p));
        size_t eq = item.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
            return false;
        std::string key = item.substr(0, eq);
        if (key == "rest")
            key = ">";
        s += (s.size() > 1 ? "," : "") + key + ":" + item.substr(eq + 1);
        p = slash ? slash + 1 : p + item.size();
    }
    *out = s + "]";
    return true;
}

/* A size in bytes or MiB (the two spellings of one option): whole MiB. */
int mb_option(const cmb_config *cfg, const char *key, const char *key_mb, std::string *conf, const char *conf_key)
{
    uint64_t bytes = 0, mb = 0;
    int has_bytes = 0;
    const char *v_mb = cmb_real_option(cfg, key_mb);
    if (cmb_real_size_option(cfg, "real:torch", key, &bytes, &has_bytes))
        return -1;
    if (has_bytes && v_mb) {
        snprintf(cfg->error, cfg->error_len, "options %s and %s say the same thing: give one", key, key_mb);
        return -1;
    }
    if (v_mb && cmb_real_parse_u64(v_mb, &mb)) {
        snprintf(cfg->error, cfg->error_len, "option %s=%s: expected a whole number of MiB", key_mb, v_mb);
        return -1;
    }
    if (has_bytes && bytes != UINT64_MAX) {
        if (bytes % mib) {
            snprintf(cfg->error, cfg->error_len, "option %s: PyTorch takes whole MiB (%s)", key, key_mb);
            return -1;
        }
        mb = bytes / mib;
    }
    if (mb)
        *conf += std::string(conf->empty() ? "" : ",") + conf_key + ":" + std::to_string(mb);
    return 0;
}

struct config {
    std::string conf;
    double fraction = -1.0;
};

int read_options(const cmb_config *cfg, config *c)
{
    if (cmb_real_check_options(cfg, "real:torch", cmb_real_torch_plugin_options) ||
        mb_option(cfg, "max_split_size", "max_split_size_mb", &c->conf, "max_split_size_mb") ||
        mb_option(cfg, "max_non_split_rounding_size", "max_non_split_rounding_mb", &c->conf,
                  "max_non_split_rounding_mb"))
        return -1;
    const char *div = cmb_real_option(cfg, "roundup_power2_divisions");
    std::string d;
    if (div && !divisions(div, &d)) {
        snprintf(cfg->error, cfg->error_len,
                 "option roundup_power2_divisions=%s: expected N or MB=N/MB=N/>=N", div);
        return -1;
    }
    if (div)
        c->conf += std::string(c->conf.empty() ? "" : ",") + "roundup_power2_divisions:" + d;
    const char *gc = cmb_real_option(cfg, "garbage_collection_threshold");
    double x;
    if (gc && (cmb_real_parse_double(gc, &x) || !(x > 0.0 && x < 1.0))) {
        snprintf(cfg->error, cfg->error_len, "option garbage_collection_threshold=%s: expected a number in (0, 1)", gc);
        return -1;
    }
    if (gc)
        c->conf += std::string(c->conf.empty() ? "" : ",") + "garbage_collection_threshold:" + gc;
    const char *es = cmb_real_option(cfg, "expandable_segments");
    int on = 0;
    if (es && cmb_real_parse_bool(es, &on)) {
        snprintf(cfg->error, cfg->error_len, "option expandable_segments=%s: expected true or false", es);
        return -1;
    }
    c->conf += std::string(c->conf.empty() ? "" : ",") + "expandable_segments:" + (on ? "True" : "False");
    const char *fr = cmb_real_option(cfg, "per_process_memory_fraction");
    if (fr && (cmb_real_parse_double(fr, &c->fraction) || !(c->fraction >= 0.0 && c->fraction <= 1.0))) {
        snprintf(cfg->error, cfg->error_len, "option per_process_memory_fraction=%s: expected a number in [0, 1]", fr);
        return -1;
    }
    return 0;
}

/* --- the allocator, once per process ---------------------------------------------------------- */

/* Messages become one line: they end up in a CSV cell and a progress line. */
void one_line(std::string *s)
{
    for (auto &c : *s)
        if (c == '\n' || c == '\r')
            c = ' ';
}

/* Runs f, turning PyTorch's exceptions into a status and a message. */
template <class F>
cmb_status guarded(std::string *err, F &&f)
{
    try {
        f();
        return CMB_OK;
    } catch (c10::OutOfMemoryError const &e) {
        if (err) {
            *err = e.what_without_backtrace();
            one_line(err);
        }
        return CMB_ERR_OOM;
    } catch (c10::Error const &e) {
        if (err) {
            *err = e.what_without_backtrace();
            one_line(err);
        }
        return CMB_ERR_CUDA;
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

void initialise(const std::string &conf, c10::DeviceIndex device)
{
    ::unsetenv("PYTORCH_ALLOC_CONF");
    ::unsetenv("PYTORCH_HIP_ALLOC_CONF");
    ::setenv("PYTORCH_CUDA_ALLOC_CONF", conf.c_str(), 1);
    c10::CachingAllocator::setAllocatorSettings(conf);
    c10::cuda::set_device(device);
    ca::init(c10::cuda::device_count());
    initialised = true;
    configured = conf;
}

/* --- the methods ------------------------------------------------------------------------------------- */

cmb_status torch_create(const cmb_config *cfg, cmb_upstream *, void **out)
{
    config c;
    if (read_options(cfg, &c))
        return CMB_ERR_INVALID;
    if (cfg->sim) {
        snprintf(cfg->error, cfg->error_len, "PyTorch's allocator needs a GPU");
        return CMB_ERR_UNSUPPORTED;
    }
    if (live_instances) {
        snprintf(cfg->error, cfg->error_len, "PyTorch's allocator is one per process: one instance at a time");
        return CMB_ERR_STATE;
    }
    if (initialised && c.conf != configured) {
        snprintf(cfg->error, cfg->error_len, "PyTorch's allocator was set up with '%s' in this process: cannot "
                 "take '%s'", configured.c_str(), c.conf.c_str());
        return CMB_ERR_STATE;
    }
    auto *s = new (std::nothrow) state{};
    if (!s)
        return CMB_ERR_HOST_NOMEM;
    s->device = static_cast<c10::DeviceIndex>(cfg->device);
    std::string err;
    cmb_status st = guarded(&err, [&] {
        if (!initialised)
            initialise(c.conf, s->device);
        c10::cuda::set_device(s->device);
        if (c.fraction >= 0.0)
            ca::setMemoryFraction(c.fraction, s->device);
        ca::emptyCache();
        ca::resetPeakStats(s->device);
        ca::resetAccumulatedStats(s->device);
        auto ds = ca::getDeviceStats(s->device);
        s->device_allocs0 = ds.num_device_alloc;
        s->device_frees0 = ds.num_device_free;
    });
    if (st != CMB_OK) {
        snprintf(cfg->error, cfg->error_len, "PyTorch's allocator: %s", err.c_str());
        delete s;
        return st;
    }
    live_instances++;
    *out = s;
    return CMB_OK;
}

cmb_status torch_allocate(void *p, size_t size, cmb_stream stream, void **ptr)
{
    auto *s = static_cast<state *>(p);
    auto cs = reinterpret_cast<cudaStream_t>(stream);
    if (!s->used) {
        s->first_stream = cs;
        s->used = true;
    } else if (cs != s->first_stream) {
        s->several_streams = true;
    }
    return guarded(&s->err, [&] { *ptr = ca::raw_alloc_with_stream(size, cs); });
}

/* record_stream for a raw allocation: a DataPtr that names the allocator's
 * own deleter, released again so nothing is freed here. */
void record_stream(state *s, void *ptr, cudaStream_t stream)
{
    c10::DataPtr dp(ptr, ptr, ca::get()->raw_deleter(), c10::Device(c10::DeviceType::CUDA, s->device));
    ca::recordStream(dp, c10::cuda::getStreamFromExternal(stream, s->device));
    dp.release_context();
}

cmb_status torch_deallocate(void *p, void *ptr, size_t, cmb_stream stream)
{
    auto *s = static_cast<state *>(p);
    auto cs = reinterpret_cast<cudaStream_t>(stream);
    return guarded(&s->err, [&] {
        if (s->several_streams || cs != s->first_stream) {
            s->several_streams = true;
            record_stream(s, ptr, cs);
        }
        ca::raw_delete(ptr);
    });
}

cmb_status torch_trim(void *p)
{
    auto *s = static_cast<state *>(p);
    return guarded(&s->err, [] { ca::emptyCache(); });
}

void put(cmb_stat_count *c, const c10::CachingAllocator::Stat &st)
{
    c->current = st.current;
    c->peak = st.peak;
    c->total = st.allocated;
}

cmb_status torch_stats(void *p, cmb_alloc_stats *out)
{
    auto *s = static_cast<state *>(p);
    std::memset(out, 0, sizeof *out);
    return guarded(&s->err, [&] {
        constexpr auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
        auto ds = ca::getDeviceStats(s->device);
        size_t largest = 0;
        ca::cacheInfo(s->device, &largest); /* the largest cached free block (large pool) */
        put(&out->requested, ds.requested_bytes[all]);
        put(&out->allocated, ds.allocated_bytes[all]);
        put(&out->reserved, ds.reserved_bytes[all]);
        put(&out->blocks, ds.allocation[all]);
        out->largest_free = largest;
        out->upstream_allocs = (uint64_t)(ds.num_device_alloc - s->device_allocs0);
        out->upstream_frees = (uint64_t)(ds.num_device_free - s->device_frees0);
        out->oom_retries = (uint64_t)ds.num_alloc_retries;
        out->valid = CMB_STAT_REQUESTED | CMB_STAT_ALLOCATED | CMB_STAT_RESERVED | CMB_STAT_BLOCKS |
                     CMB_STAT_LARGEST_FREE | CMB_STAT_UPSTREAM | CMB_STAT_OOM_RETRIES;
    });
}

cmb_status torch_destroy(void *p)
{
    auto *s = static_cast<state *>(p);
    cmb_status st = guarded(nullptr, [] { ca::emptyCache(); });
    live_instances--;
    delete s;
    return st;
}

const char *torch_last_error(void *p)
{
    auto *s = static_cast<state *>(p);
    return s->err.empty() ? nullptr : s->err.c_str();
}

constexpr cmb_allocator_methods table(const char *name, const char *summary)
{
    return cmb_allocator_methods{
        CMB_ALLOCATOR_ABI_VERSION, name,         summary,     CMB_ALLOC_NEEDS_GPU, torch_create, torch_allocate,
        torch_deallocate,          torch_trim,   torch_stats, torch_destroy,       torch_last_error,
        cmb_real_torch_plugin_options,
    };
}

const cmb_allocator_methods tables[] = {
    table("real:torch-caching", "PyTorch CUDACachingAllocator (libc10_cuda)"),
    table("real:torch-expandable", "PyTorch CUDACachingAllocator, expandable_segments:True (libc10_cuda)"),
};

} // namespace

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
