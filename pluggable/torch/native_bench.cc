/* native_bench.cc - cmb_torch_native_bench: PyTorch's own
 * CUDACachingAllocator (c10/cuda/CUDACachingAllocator.h: raw_alloc_with_stream,
 * raw_delete) driven by the same threads, ring of sizes and work between
 * calls as cmb_pluggable_bench drives the library (pluggable/bench_threads.h),
 * so the two tables compare on one GPU. Built against the running PyTorch's
 * headers and libc10_cuda (pluggable/torch/CMakeLists.txt).
 *
 *   cmb_torch_native_bench [--pairs N] [--threads 1,2,4,8,16] [--work-ns NS] [--json FILE]
 */
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "pluggable/bench_threads.h"

namespace ca = c10::cuda::CUDACachingAllocator;

static void *native_alloc(void *, size_t size, void *stream)
{
    try {
        return ca::raw_alloc_with_stream(size, static_cast<cudaStream_t>(stream));
    } catch (const std::exception &) {
        return nullptr;
    }
}

static void native_free(void *, void *ptr, size_t, void *)
{
    ca::raw_delete(ptr);
}

int main(int argc, char **argv)
{
    long pairs = 200000, work_ns = 200;
    std::string threads = "1,2,4,8,16";
    const char *json = nullptr;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--pairs") && i + 1 < argc)
            pairs = std::atol(argv[++i]);
        else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = argv[++i];
        else if (!std::strcmp(argv[i], "--work-ns") && i + 1 < argc)
            work_ns = std::atol(argv[++i]);
        else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else {
            std::fprintf(stderr, "usage: %s [--pairs N] [--threads 1,2,4] [--work-ns NS] [--json FILE]\n", argv[0]);
            return 2;
        }
    }
    if (pairs < 1 || work_ns < 0 || c10::cuda::device_count() < 1) {
        std::fprintf(stderr, "%s: --pairs >= 1, --work-ns >= 0 and a GPU are needed\n", argv[0]);
        return 2;
    }
    ca::init(c10::cuda::device_count());
    c10::cuda::set_device(0);
    double iters_per_ns;
    cmb_bench_calibrate(&iters_per_ns);
    cmb_bench_ops ops = {native_alloc, native_free, nullptr};
    cmb_bench_result one;
    cmb_bench_threads(&ops, 1, pairs, 0, iters_per_ns, &one);
    std::printf("PyTorch CUDACachingAllocator: one thread, %.1f ns per pair\n", 1e9 / one.pairs_per_s);
    std::FILE *jf = json ? std::fopen(json, "w") : nullptr;
    if (jf)
        std::fprintf(jf, "{\"allocator\": \"pytorch-native\", \"pairs\": %ld, \"work_ns\": %ld, \"native_ns\": %.1f, "
                     "\"threads\": [", pairs, work_ns, 1e9 / one.pairs_per_s);
    int failed = one.failed, first = 1;
    std::printf("%8s %16s %14s %10s %10s   (work between calls: %ld ns)\n", "threads", "pairs/s", "ns/pair agg",
                "p50 ns", "p99 ns", work_ns);
    for (size_t pos = 0; pos < threads.size();) {
        size_t comma = threads.find(',', pos);
        int n = std::atoi(threads.substr(pos, comma - pos).c_str());
        pos = comma == std::string::npos ? threads.size() : comma + 1;
        cmb_bench_result r;
        if (n < 1 || n > CMB_BENCH_MAX_THREADS || cmb_bench_threads(&ops, n, pairs, work_ns, iters_per_ns, &r))
            continue;
        failed |= r.failed;
        std::printf("%8d %16.0f %14.1f %10.0f %10.0f\n", n, r.pairs_per_s, 1e9 / r.pairs_per_s, r.p50_ns, r.p99_ns);
        if (jf)
            std::fprintf(jf, "%s{\"threads\": %d, \"pairs_per_s\": %.0f, \"p50_ns\": %.0f, \"p99_ns\": %.0f}",
                         first ? "" : ", ", n, r.pairs_per_s, r.p50_ns, r.p99_ns);
        first = 0;
    }
    if (jf) {
        std::fprintf(jf, "], \"failed\": %s}\n", failed ? "true" : "false");
        std::fclose(jf);
    }
    return failed ? 1 : 0;
}
