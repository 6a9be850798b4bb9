// test_torch_raise.cc - cmb_torch_malloc's two answers to an allocation it
// cannot serve, called the way PyTorch calls it (through a std::function,
// torch/csrc/cuda/CUDAPluggableAllocator.cpp): NULL by default, and with
// CMB_TORCH_OOM=raise (here cmb_pluggable_set_torch_oom(1)) a
// std::runtime_error that C++ code above it can catch, carrying the reason.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <utility>

#include <cuda_runtime_api.h>

#include "pluggable/cmb_pluggable.h"

static int failures;

static void check(bool ok, const char *what)
{
    if (!ok) {
        std::fprintf(stderr, "FAIL: %s (%s)\n", what, cmb_pluggable_last_error());
        failures++;
    }
}

int main()
{
    setenv("CMB_PLUGGABLE_ALLOW_SIM", "1", 1);
    check(cmb_pluggable_configure("bfc@sim") == 0, "configure");
    check(cmb_pluggable_set_capacity(64ull << 20) == 0, "capacity");
    std::function<void *(size_t, int, void *)> alloc_fn = cmb_torch_malloc;
    std::function<void(void *, size_t, int, void *)> free_fn = cmb_torch_free;

    void *p = alloc_fn(1 << 20, 0, nullptr);
    check(p != nullptr, "a small allocation");
    check(alloc_fn(1ull << 32, 0, nullptr) == nullptr, "NULL when out of memory (default)");
    check(alloc_fn(0, 0, nullptr) == nullptr, "NULL for 0 bytes");

    check(cmb_pluggable_set_torch_oom(1) == 0, "set_torch_oom(1)");
    bool raised = false;
    try {
        alloc_fn(1ull << 32, 0, nullptr);
    } catch (const std::runtime_error &e) {
        /* PyTorch's own words first (what batch-size finders look for), then the account */
        raised = std::strncmp(e.what(), "CUDA out of memory. ", 20) == 0 &&
                 std::strstr(e.what(), "cumembench pluggable: out of memory on device 0") != nullptr;
        if (!raised)
            std::fprintf(stderr, "unexpected message: %s\n", e.what());
    }
    check(raised, "std::runtime_error when out of memory with raise");
    check(alloc_fn(0, 0, nullptr) == nullptr, "0 bytes is no failure, even with raise");
    free_fn(p, 1 << 20, 0, nullptr);

    /* The graph-pool hooks as torch/csrc/cuda/Module.cpp reaches them: an
     * address cast to void(int, MempoolId_t, std::function<bool(cudaStream_t)>). */
    typedef std::pair<unsigned long long, unsigned long long> mempool_id;
    typedef void begin_t(int, mempool_id, std::function<bool(cudaStream_t)>);
    typedef void end_t(int, mempool_id);
    std::function<begin_t> begin = reinterpret_cast<begin_t *>(&cmb_torch_begin_allocate_to_pool_fn);
    std::function<end_t> end = reinterpret_cast<end_t *>(&cmb_torch_end_allocate_to_pool_fn);
    std::function<end_t> release = reinterpret_cast<end_t *>(&cmb_torch_release_pool_fn);
    cudaStream_t captured = reinterpret_cast<cudaStream_t>(0x77);
    int asked = 0;
    begin(0, mempool_id(5, 6), [&](cudaStream_t s) { asked++; return s == captured; });
    void *g = alloc_fn(4096, 0, captured);
    void *n = alloc_fn(4096, 0, nullptr);
    check(g && n && asked == 2, "the filter is asked for each allocation");
    cmb_pluggable_memstats ps{};
    ps.struct_size = sizeof ps;
    cmb_pluggable_stats(0, &ps);
    end(0, mempool_id(5, 6));
    free_fn(g, 4096, 0, captured);
    free_fn(n, 4096, 0, nullptr);
    release(0, mempool_id(5, 6));
    cmb_pluggable_memstats after{};
    after.struct_size = sizeof after;
    cmb_pluggable_stats(0, &after);
    check(ps.reserved_current - after.reserved_current >= 4096, "the released pool's segment went back");

    cmb_pluggable_memstats s{};
    s.struct_size = sizeof s;
    check(cmb_pluggable_stats(0, &s) == 0 && s.ooms == 2 && s.requested_current == 0 && s.bad_frees == 0, "stats after");
    if (!failures)
        std::puts("ok: NULL by default, std::runtime_error with raise, the graph-pool hooks");
    return failures ? 1 : 0;
}
