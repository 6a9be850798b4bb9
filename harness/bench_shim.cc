// bench_shim.cc - the C API of cmb_bench.h over Google Benchmark.
#include "cmb_bench.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

struct cmb_bench_state {
    benchmark::State *st;
};

namespace {

/* --- conversions --------------------------------------------------------- */

benchmark::TimeUnit to_unit(cmb_time_unit u)
{
    switch (u) {
    case CMB_UNIT_US: return benchmark::kMicrosecond;
    case CMB_UNIT_MS: return benchmark::kMillisecond;
    case CMB_UNIT_S: return benchmark::kSecond;
    default: return benchmark::kNanosecond;
    }
}

cmb_time_unit from_unit(benchmark::TimeUnit u)
{
    switch (u) {
    case benchmark::kMicrosecond: return CMB_UNIT_US;
    case benchmark::kMillisecond: return CMB_UNIT_MS;
    case benchmark::kSecond: return CMB_UNIT_S;
    default: return CMB_UNIT_NS;
    }
}

void copy_str(char *dst, size_t cap, const std::string &src)
{
    std::snprintf(dst, cap, "%s", src.c_str());
    cmb_bench_sanitize(dst);
}

std::string clean(const char *s)
{
    std::string out = s ? s : "";
    std::vector<char> buf(out.begin(), out.end());
    buf.push_back('\0');
    cmb_bench_sanitize(buf.data());
    return std::string(buf.data());
}

/* --- child side: registration and a reporter that hands runs to C ---------- */

struct registered {
    std::string name;
    cmb_bench_fn fn;
    void *arg;
};

void trampoline(benchmark::State &st, registered *r)
{
    cmb_bench_state cs{&st};
    r->fn(&cs, r->arg);
}

class sink_reporter : public benchmark::BenchmarkReporter {
public:
    sink_reporter(cmb_bench_sink sink, void *ctx) : sink_(sink), ctx_(ctx) {}

    bool ReportContext(const Context &) override { return true; }

    void ReportRuns(const std::vector<Run> &reports) override
    {
        for (const Run &r : reports)
            sink_(to_c(r).get(), ctx_);
    }

private:
    std::unique_ptr<cmb_bench_run> to_c(const Run &r)
    {
        std::unique_ptr<cmb_bench_run> c(new cmb_bench_run());
        /* The registered name, without the library's /iterations:/repeats:
         * suffixes, so names stay stable across repetition settings. */
        copy_str(c->name, sizeof c->name, r.run_name.function_name);
        c->is_aggregate = r.run_type == Run::RT_Aggregate;
        copy_str(c->aggregate_name, sizeof c->aggregate_name, r.aggregate_name);
        c->aggregate_is_percentage = r.aggregate_unit == benchmark::kPercentage;
        c->repetition_index = c->is_aggregate ? -1 : r.repetition_index;
        c->repetitions = r.repetitions;
        c->iterations = r.iterations;
        c->threads = r.threads;
        c->real_accumulated_time = r.real_accumulated_time;
        c->cpu_accumulated_time = r.cpu_accumulated_time;
        c->time_unit = from_unit(r.time_unit);
        c->error_occurred = r.error_occurred;
        copy_str(c->error_message, sizeof c->error_message, r.error_message);
        copy_str(c->label, sizeof c->label, r.report_label);
        for (const auto &kv : r.counters) {
            if (c->n_counters == CMB_BENCH_MAX_COUNTERS)
                break;
            cmb_bench_counter *k = &c->counters[c->n_counters++];
            copy_str(k->name, sizeof k->name, kv.first);
            k->value = kv.second.value;
            k->flags = (unsigned)kv.second.flags;
            k->one_k_1024 = kv.second.oneK == benchmark::Counter::kIs1024;
        }
        return c;
    }

    cmb_bench_sink sink_;
    void *ctx_;
};

/* Owns the registrations for the life of the process (the library keeps
 * pointers to them); freed at exit, so leak checkers see no loss. */
std::vector<std::unique_ptr<registered>> &registry()
{
    static std::vector<std::unique_ptr<registered>> regs;
    return regs;
}

} // namespace

/* --- C API: timing loop ------------------------------------------------------- */

extern "C" void cmb_bench_register(const char *name, cmb_bench_fn fn, void *arg, const cmb_bench_options *opt)
{
    registered *r = new registered{clean(name), fn, arg};
    registry().emplace_back(r);
    benchmark::internal::Benchmark *b = benchmark::RegisterBenchmark(r->name.c_str(), trampoline, r);
    b->Unit(to_unit(opt->unit));
    if (opt->iterations > 0)
        b->Iterations(opt->iterations);
    else if (opt->min_time_s > 0)
        b->MinTime(opt->min_time_s);
    if (opt->repetitions > 1)
        b->Repetitions(opt->repetitions);
    if (opt->manual_time)
        b->UseManualTime();
}

extern "C" int cmb_bench_keep_running(cmb_bench_state *st)
{
    return st->st->KeepRunning() ? 1 : 0;
}

extern "C" void cmb_bench_pause(cmb_bench_state *st)
{
    st->st->PauseTiming();
}

extern "C" void cmb_bench_resume(cmb_bench_state *st)
{
    st->st->ResumeTiming();
}

extern "C" void cmb_bench_set_iteration_time(cmb_bench_state *st, double seconds)
{
    st->st->SetIterationTime(seconds);
}

extern "C" void cmb_bench_set_counter(cmb_bench_state *st, const char *name, double value, unsigned flags)
{
    st->st->counters[clean(name)] = benchmark::Counter(value, (benchmark::Counter::Flags)flags);
}

extern "C" void cmb_bench_set_label(cmb_bench_state *st, const char *label)
{
    st->st->SetLabel(clean(label));
}

extern "C" void cmb_bench_skip_with_error(cmb_bench_state *st, const char *message)
{
    st->st->SkipWithError(clean(message).c_str());
}

extern "C" int64_t cmb_bench_max_iterations(const cmb_bench_state *st)
{
    return (int64_t)st->st->max_iterations;
}

extern "C" size_t cmb_bench_run_registered(const char *argv0, cmb_bench_sink sink, void *ctx)
{
    char *argv[] = {const_cast<char *>(argv0), nullptr};
    int argc = 1;
    benchmark::Initialize(&argc, argv);
    sink_reporter reporter(sink, ctx);
    return benchmark::RunSpecifiedBenchmarks(&reporter);
}

/* --- C API: the context block ------------------------------------------------------- */

/* The result files are the results store's (harness/results.c); the
 * library gives only what it knows of the host, in its reporter's words. */
extern "C" void cmb_bench_add_context(const char *key, const char *value)
{
    benchmark::AddCustomContext(clean(key), clean(value));
}

extern "C" char *cmb_bench_context_text(const char *argv0)
{
    benchmark::BenchmarkReporter::Context::executable_name = argv0;
    std::ostringstream head;
    benchmark::JSONReporter reporter;
    reporter.SetOutputStream(&head);
    reporter.SetErrorStream(&head);
    benchmark::BenchmarkReporter::Context ctx;
    reporter.ReportContext(ctx);
    std::string text = head.str() + "]}"; /* the reporter leaves the list open */
    return strdup(text.c_str());
}

extern "C" void cmb_bench_sanitize(char *s)
{
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"')
            *s = '\'';
        else if (ch == '\\')
            *s = '/';
        else if (ch < 0x20 || ch == 0x7f)
            *s = ' ';
    }
}

extern "C" const char *cmb_bench_library_version(void)
{
    return "libbenchmark " CMB_BENCHMARK_VERSION;
}
