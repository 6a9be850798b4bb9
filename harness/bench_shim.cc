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

/* --- parent side: C structs back into library runs ---------------------------- */

benchmark::BenchmarkReporter::Run to_run(const cmb_bench_run &c)
{
    benchmark::BenchmarkReporter::Run r;
    r.run_name.function_name = clean(c.name);
    r.family_index = 0;
    r.per_family_instance_index = 0;
    r.run_type = c.is_aggregate ? benchmark::BenchmarkReporter::Run::RT_Aggregate
                                : benchmark::BenchmarkReporter::Run::RT_Iteration;
    r.aggregate_name = clean(c.aggregate_name);
    r.aggregate_unit = c.aggregate_is_percentage ? benchmark::kPercentage : benchmark::kTime;
    r.report_label = clean(c.label);
    r.error_occurred = c.error_occurred != 0;
    r.error_message = clean(c.error_message);
    r.iterations = c.iterations;
    r.threads = c.threads > 0 ? c.threads : 1;
    r.repetition_index = c.repetition_index;
    r.repetitions = c.repetitions;
    r.time_unit = to_unit(c.time_unit);
    r.real_accumulated_time = c.real_accumulated_time;
    r.cpu_accumulated_time = c.cpu_accumulated_time;
    r.statistics = nullptr;
    for (size_t i = 0; i < c.n_counters && i < CMB_BENCH_MAX_COUNTERS; i++) {
        const cmb_bench_counter &k = c.counters[i];
        benchmark::Counter counter(k.value, (benchmark::Counter::Flags)k.flags,
                                   k.one_k_1024 ? benchmark::Counter::kIs1024
                                                : benchmark::Counter::kIs1000);
        r.counters[clean(k.name)] = counter;
    }
    return r;
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

/* --- C API: JSON output ------------------------------------------------------------- */

/* The document is kept valid on disk at all times: it is created whole
 * (context, empty list, closing) under a temporary name and renamed; each
 * later batch of runs is written with one pwrite() over the old closing,
 * ending in a new closing. A killed run therefore never leaves a torn
 * file, and no case's results are rewritten. */
struct cmb_bench_json {
    std::string path;
    benchmark::JSONReporter reporter;
    int fd = -1;
    off_t committed = 0; /* bytes before the closing */
    bool need_comma = false; /* reopened over entries the reporter never saw */
};

static const std::string kClosing = "\n  ]\n}\n";

extern "C" void cmb_bench_add_context(const char *key, const char *value)
{
    benchmark::AddCustomContext(clean(key), clean(value));
}

static int open_rw(const char *path)
{
    return open(path, O_WRONLY | O_CLOEXEC);
}

static int write_new_file(const std::string &path, const std::string &text, char *err, size_t errlen)
{
    std::string tmp = path + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "w");
    if (!f) {
        std::snprintf(err, errlen, "cannot write %s", tmp.c_str());
        return -1;
    }
    size_t n = std::fwrite(text.data(), 1, text.size(), f);
    int bad = n != text.size() || std::fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= std::fclose(f) != 0;
    if (bad || std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::snprintf(err, errlen, "cannot write %s", path.c_str());
        std::remove(tmp.c_str());
        return -1;
    }
    return 0;
}

extern "C" cmb_bench_json *cmb_bench_json_open(const char *path, const char *argv0, char *err, size_t errlen)
{
    cmb_bench_json *j = new (std::nothrow) cmb_bench_json();
    if (!j) {
        std::snprintf(err, errlen, "host out of memory");
        return nullptr;
    }
    j->path = path;
    benchmark::BenchmarkReporter::Context::executable_name = argv0;
    std::ostringstream head;
    j->reporter.SetOutputStream(&head);
    j->reporter.SetErrorStream(&head);
    benchmark::BenchmarkReporter::Context ctx;
    j->reporter.ReportContext(ctx);
    std::string text = head.str();
    if (write_new_file(j->path, text + kClosing, err, errlen)) {
        delete j;
        return nullptr;
    }
    j->fd = open_rw(j->path.c_str());
    if (j->fd < 0) {
        std::snprintf(err, errlen, "cannot reopen %s", j->path.c_str());
        delete j;
        return nullptr;
    }
    j->committed = (off_t)text.size();
    return j;
}

/* A document this writer left: everything before the closing is kept and
 * later runs are appended in its place, exactly as if the writer had never
 * stopped. A file that does not end in the closing was not written here. */
extern "C" cmb_bench_json *cmb_bench_json_reopen(const char *path, const char *argv0, char *err, size_t errlen)
{
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::snprintf(err, errlen, "cannot read %s", path);
        return nullptr;
    }
    std::ostringstream all;
    all << in.rdbuf();
    std::string text = all.str();
    static const std::string kOpen = "\"benchmarks\": [";
    size_t list_at = text.find(kOpen);
    if (list_at == std::string::npos || text.size() < kClosing.size() ||
        text.compare(text.size() - kClosing.size(), kClosing.size(), kClosing) != 0) {
        std::snprintf(err, errlen, "%s is not a results file this suite wrote (no closing bracket)", path);
        return nullptr;
    }
    cmb_bench_json *j = new (std::nothrow) cmb_bench_json();
    if (!j) {
        std::snprintf(err, errlen, "host out of memory");
        return nullptr;
    }
    j->path = path;
    benchmark::BenchmarkReporter::Context::executable_name = argv0;
    j->committed = (off_t)(text.size() - kClosing.size());
    size_t last = text.find_last_not_of(" \n", (size_t)j->committed - 1);
    j->need_comma = last != list_at + kOpen.size() - 1; /* anything after the '[' */
    j->fd = open_rw(j->path.c_str());
    if (j->fd < 0) {
        std::snprintf(err, errlen, "cannot reopen %s", j->path.c_str());
        delete j;
        return nullptr;
    }
    return j;
}

extern "C" int cmb_bench_json_add(cmb_bench_json *j, const cmb_bench_run *runs, size_t n, char *err, size_t errlen)
{
    if (n == 0)
        return 0;
    std::vector<benchmark::BenchmarkReporter::Run> batch;
    batch.reserve(n);
    for (size_t i = 0; i < n; i++)
        batch.push_back(to_run(runs[i]));
    std::ostringstream chunk;
    j->reporter.SetOutputStream(&chunk);
    j->reporter.ReportRuns(batch);
    std::string body = chunk.str();
    if (j->need_comma) {
        body = ",\n" + body;
        j->need_comma = false;
    }
    std::string text = body + kClosing;
    const char *p = text.data();
    size_t left = text.size();
    off_t at = j->committed;
    while (left) {
        ssize_t w = pwrite(j->fd, p, left, at);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            std::snprintf(err, errlen, "cannot write %s: %s", j->path.c_str(), std::strerror(errno));
            return -1;
        }
        p += w;
        left -= (size_t)w;
        at += w;
    }
    if (fsync(j->fd) != 0) {
        std::snprintf(err, errlen, "cannot sync %s: %s", j->path.c_str(), std::strerror(errno));
        return -1;
    }
    j->committed += (off_t)body.size();
    return 0;
}

extern "C" int cmb_bench_json_close(cmb_bench_json *j, char *err, size_t errlen)
{
    int rc = 0;
    if (j->fd >= 0 && close(j->fd) != 0) {
        if (err && errlen)
            std::snprintf(err, errlen, "cannot close %s", j->path.c_str());
        rc = -1;
    }
    delete j;
    return rc;
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
