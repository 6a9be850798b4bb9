"""The metrics the report knows: label, unit, which direction is better and
the exact definition, in the order the report shows them. Counters it does
not know (a scenario's own) are shown after these, under their raw name."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str          # "s", "ns", "bytes", "ratio", "count", "1/s"
    better: str        # "lower", "higher" or "" (neither)
    definition: str


_M = Metric

KNOWN = [
    _M("time_s", "time", "s", "lower",
       "Time of the scenario's measured region in one repetition: the scenario's own region when it sets one "
       "(CUDA events around GPU work, or CLOCK_MONOTONIC around its host loop), otherwise the wall time of run(). "
       "In sim mode this is host-side bookkeeping only."),
    _M("alloc_p50_ns", "alloc p50", "ns", "lower",
       "Median latency of one allocate call: CLOCK_MONOTONIC read just before and just after the call alone "
       "(bookkeeping outside), nearest-rank quantile over every call (a uniform reservoir of 4 Mi samples beyond that)."),
    _M("alloc_p99_ns", "alloc p99", "ns", "lower", "99th percentile of the allocate latency, as alloc p50."),
    _M("free_p50_ns", "free p50", "ns", "lower", "Median latency of one deallocate call, as alloc p50."),
    _M("free_p99_ns", "free p99", "ns", "lower", "99th percentile of the deallocate latency, as alloc p50."),
    _M("ops_per_s", "ops/s", "1/s", "higher", "(allocs + frees) / time."),
    _M("peak_requested_bytes", "peak requested", "bytes", "",
       "Highest sum of live request sizes during the scenario, counted by the harness (independent of the allocator)."),
    _M("peak_allocated_bytes", "peak allocated", "bytes", "lower",
       "Highest bytes in live blocks after the allocator's rounding, from its own statistics."),
    _M("peak_reserved_bytes", "peak reserved", "bytes", "lower",
       "Highest bytes the allocator held from its upstream at once (cudaMalloc'd or mapped): its peak footprint."),
    _M("device_peak_bytes", "device peak", "bytes", "lower",
       "GPU: highest device memory in use by the case (free memory at the case's start minus cudaMemGetInfo's free "
       "memory, read after every allocation). Sim: the simulated device's peak after its own rounding."),
    _M("frag_ratio", "fragmentation", "ratio", "lower",
       "1 - peak_requested / peak_reserved: the share of the allocator's peak footprint the program never asked for "
       "(GMLake's 1 - utilization). Undefined (left out) when nothing was reserved."),
    _M("ext_frag_peak", "ext. frag. at peak", "ratio", "lower",
       "(free_reserved - largest_free_block) / free_reserved, free_reserved = reserved - allocated, at the moment "
       "requested bytes peaked (TensorFlow BFC's GetFragmentation). Undefined when nothing reserved is free."),
    _M("ext_frag_end", "ext. frag. at end", "ratio", "lower",
       "External fragmentation as above, after the scenario (before the capacity probe)."),
    _M("capacity_ratio", "capacity ratio", "ratio", "higher",
       "After the scenario, with its blocks still live: the largest single allocation the allocator still serves "
       "divided by (capacity - live requested bytes). 1 = every free byte usable in one block; low = out of memory "
       "despite free memory. Exact to 512 B in sim; binary search in 2 MiB steps on a GPU."),
    _M("largest_alloc_bytes", "largest allocation", "bytes", "higher",
       "The largest single allocation found by the capacity probe."),
    _M("capacity_bytes", "capacity", "bytes", "",
       "Device bytes available to the case: sim capacity, or GPU free memory at the start (or --capacity if lower)."),
    _M("leaked_bytes", "leaked", "bytes", "lower",
       "Bytes the upstream still held after the allocator was destroyed (for allocators without an upstream on a GPU: "
       "device bytes not returned)."),
    _M("device_leak_bytes", "device leak", "bytes", "lower",
       "GPU: free device memory at the case's start minus free memory after teardown."),
    _M("upstream_allocs", "upstream allocs", "count", "lower", "Calls that took memory from the upstream."),
    _M("upstream_frees", "upstream frees", "count", "", "Calls that returned memory to the upstream."),
    _M("oom_retries", "OOM retries", "count", "", "Failed upstream requests retried after freeing cached memory."),
    _M("allocs", "allocs", "count", "", "Successful allocate calls made by the scenario."),
    _M("frees", "frees", "count", "", "Successful deallocate calls made by the scenario."),
    _M("failed_allocs", "failed allocs", "count", "", "Allocate calls that returned an error (out of memory)."),
    _M("live_at_end_bytes", "live at end", "bytes", "", "Requested bytes still live when the scenario returned."),
    _M("reserved_at_end_bytes", "reserved at end", "bytes", "", "Bytes held from the upstream when the scenario returned."),
    _M("cpu_time_s", "CPU time", "s", "", "Process CPU time of the repetition."),
    _M("stats_disagree", "stats disagree", "count", "lower",
       "1 when the allocator's own requested-byte count differs from the harness's (a bug in the allocator)."),
    _M("upstream_misuse", "upstream misuse", "count", "lower",
       "Invalid upstream calls (double free, unknown pointer): 0 for a correct policy."),
]

BY_NAME = {m.name: m for m in KNOWN}

# The summary ranks allocators on these (the headline of each scenario).
RANKED = ["time_s", "peak_reserved_bytes", "frag_ratio", "capacity_ratio"]

# The per-case tables show these first (when present), then every other counter.
DETAIL = ["time_s", "alloc_p50_ns", "alloc_p99_ns", "free_p50_ns", "peak_requested_bytes", "peak_reserved_bytes",
          "device_peak_bytes", "frag_ratio", "ext_frag_peak", "ext_frag_end", "capacity_ratio", "leaked_bytes"]

# The cross-GPU comparison puts these side by side.
COMPARED = ["time_s", "alloc_p50_ns", "free_p50_ns", "peak_reserved_bytes", "device_peak_bytes", "frag_ratio",
            "capacity_ratio"]

# Scenario-specific figures find their data under the first name present.
LARGEST_BATCH = ["largest_batch", "max_batch", "largest_batch_size", "max_batch_size"]
BUDGET_PARAMS = ["budget", "mem_budget", "memory_budget", "budget_bytes"]
SIZE_PARAMS = ["size", "max_size", "block_size"]
BATCH_SCENARIOS = ["batch-sweep"]
GEMM_SCENARIOS = ["gemm-chunked"]


def metric(name):
    """The catalog entry of a counter; unknown ones get a plain entry."""
    m = BY_NAME.get(name)
    if m:
        return m
    unit = "bytes" if name.endswith("_bytes") else "s" if name.endswith("_s") else \
        "ns" if name.endswith("_ns") else ""
    return Metric(name, name, unit, "", "A counter of the scenario (see the scenario's documentation).")


def ordered(names):
    """Known metrics in catalog order, then the rest alphabetically."""
    names = set(names)
    known = [m.name for m in KNOWN if m.name in names]
    return known + sorted(names - set(known))


# --- formatting --------------------------------------------------------------------

_BYTES = [(1024.0 ** i, u) for i, u in enumerate(["B", "KiB", "MiB", "GiB", "TiB", "PiB"])]
_SECONDS = [(1e-9, "ns"), (1e-6, "us"), (1e-3, "ms"), (1.0, "s")]


def _scaled(v, units):
    """v in the largest unit it reaches (after rounding to 3 digits)."""
    factor, name = units[0]
    for f, n in units:
        if abs(v) >= f * 0.9995:
            factor, name = f, n
    x = v / factor
    return f"{x:.3g} {name}" if abs(x) < 999.5 else f"{x:.0f} {name}"


def fmt_bytes(v):
    return f"{v:.0f} B" if abs(v) < 1023.5 else _scaled(float(v), _BYTES)


def fmt_seconds(v):
    return "0 s" if v == 0 else _scaled(float(v), _SECONDS)


def fmt_value(name, v):
    """A value in the unit of its metric, short enough for a table cell."""
    unit = metric(name).unit
    if unit == "bytes":
        return fmt_bytes(v)
    if unit == "s":
        return fmt_seconds(v)
    if unit == "ns":
        return fmt_seconds(v * 1e-9)
    if unit == "ratio":
        return f"{v:.3f}"
    if unit == "count" or float(v).is_integer():
        return f"{v:,.0f}"
    return f"{v:.4g}"
