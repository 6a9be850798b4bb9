#!/usr/bin/env python3
"""e2e-cupy.py - a CuPy workload under CuPy's own pool and under the suite's
policies through libcmb_pluggable.so (run by scripts/gpu-e2e.sh; the table is
written by scripts/e2e-torch.py table --kind cupy).

  e2e-cupy.py run --out RUN.json [--native --trace FILE] | [--policy SPEC --lib LIB --trace FILE]

The workload: --steps steps, each a pass in a fixed shuffled order over
chunked real FFTs (rows x n float32 -> power spectrum, 64 to 256 MiB per
chunk) and a GEMM loop (float32, three shapes), so blocks of many sizes come
and go. Natively, CuPy's MemoryPool serves it and a memory hook records its
requests as a suite trace (sizes asked for, the pool's own rounding left to
the replay) and follows its reserved bytes at every cudaMalloc; through the
library, the library's counters and its own trace. Each step is timed after a
device synchronization.
"""
import argparse
import json
import os
import random
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

FFT_CHUNKS = [(256, 1 << 16), (64, 1 << 20), (1024, 1 << 14), (128, 1 << 19), (512, 1 << 17), (32, 1 << 21)]
GEMMS = [(4096, 4096, 4096), (8192, 2048, 8192), (2048, 8192, 2048)]


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def cudart_copies():
    """The CUDA runtime libraries mapped into this process (one is the goal)."""
    seen = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "libcudart" in path:
                    seen.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(seen)


class PoolRecorder:
    """A CuPy memory hook over the default MemoryPool: the requests as a trace
    (traces/FORMAT.md) and the pool's reserved and requested peaks."""

    def __init__(self, cupy, pool, path):
        self.pool, self.name = pool, "cumembench-recorder"
        self.f = open(path + ".tmp", "w") if path else None
        self.path = path
        self.ids, self.next_id, self.t0 = {}, 1, time.perf_counter_ns()
        self.requested = self.requested_peak = self.reserved_peak = self.allocated_peak = 0
        self.upstream_allocs = 0
        if self.f:
            self.f.write("# cumembench-trace 1\n# CuPy MemoryPool requests, recorded by scripts/e2e-cupy.py\n")
        base = cupy.cuda.MemoryHook
        recorder = self

        class Hook(base):
            name = "cumembench-recorder"

            def alloc_postprocess(self, **kw):
                recorder.upstream_allocs += 1
                recorder.reserved_peak = max(recorder.reserved_peak, recorder.pool.total_bytes())

            def malloc_postprocess(self, **kw):
                recorder.on_malloc(kw["size"], kw["mem_ptr"])

            def free_postprocess(self, **kw):
                recorder.on_free(kw["mem_ptr"])

        self.hook = Hook()

    def on_malloc(self, size, ptr):
        if not ptr or not size:  # a failed malloc; a 0-byte one (not in the format)
            return
        # Reserved grows only inside a malloc, so reading it after each one
        # (and after each cudaMalloc) sees its every high-water mark.
        self.reserved_peak = max(self.reserved_peak, self.pool.total_bytes())
        self.requested += size
        self.requested_peak = max(self.requested_peak, self.requested)
        self.allocated_peak = max(self.allocated_peak, self.pool.used_bytes())
        ident = self.next_id
        self.next_id += 1
        self.ids[ptr] = (ident, size)
        if self.f:
            self.f.write(f"a {ident} {size} 0 {time.perf_counter_ns() - self.t0}\n")

    def on_free(self, ptr):
        entry = self.ids.pop(ptr, None)
        if entry is None:
            return
        self.requested -= entry[1]
        if self.f:
            self.f.write(f"f {entry[0]} - 0 {time.perf_counter_ns() - self.t0}\n")

    def close(self):
        if self.f:
            self.f.close()
            os.replace(self.path + ".tmp", self.path)


def step(cp, order, rng_seed, phase):
    rs = cp.random.RandomState(rng_seed)
    acc = 0.0
    for kind, index in order:
        if kind == "fft":
            rows, n = FFT_CHUNKS[index]
            x = rs.standard_normal((rows, n), dtype=cp.float32)
            spec = cp.fft.rfft(x, axis=1)
            power = cp.abs(spec) ** 2
            acc += float(power[:, 1:].sum(dtype=cp.float64))
            del x, spec, power
        else:
            m, k, n = GEMMS[index]
            a = rs.standard_normal((m, k), dtype=cp.float32)
            b = rs.standard_normal((k, n), dtype=cp.float32)
            c = a @ b
            acc += float(cp.trace(c[: min(m, n), : min(m, n)]))
            del a, b, c
        phase()
    return acc


def run(args):
    result = {"kind": "cupy", "mode": "library" if args.policy else "native", "policy": args.policy,
              "conf": "" if args.policy else "pool", "trace": args.trace, "oom": False, "error": None,
              "timed": {"steps": args.steps}}
    cmb = None
    if args.policy:
        import cumembench_alloc as cmb
        cmb.install_cupy(args.policy, trace=args.trace, path=args.lib)
    import cupy as cp
    result.update(cupy=cp.__version__, device=cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                  cuda_runtime=cp.cuda.runtime.runtimeGetVersion())
    free0, total = cp.cuda.runtime.memGetInfo()
    result.update(device_total=total, device_used_at_start=total - free0)
    recorder = None
    if not args.policy:
        pool = cp.get_default_memory_pool()
        recorder = PoolRecorder(cp, pool, args.trace)
        recorder.hook.__enter__()
        result.update(replay_policy="cupy@cuda", free_at_create=free0)
    used_peak = [total - free0]

    def phase():
        free, _ = cp.cuda.runtime.memGetInfo()
        used_peak[0] = max(used_peak[0], total - free)

    order = [("fft", i) for i in range(len(FFT_CHUNKS))] + [("gemm", i) for i in range(len(GEMMS))]
    times = []
    try:
        for s in range(args.steps):
            random.Random(s).shuffle(order)
            t0 = time.perf_counter()
            step(cp, order, s, phase)
            cp.cuda.runtime.deviceSynchronize()
            times.append(time.perf_counter() - t0)
    except cp.cuda.memory.OutOfMemoryError as e:
        result.update(oom=True, error=f"OutOfMemoryError: {e}")
    if recorder:
        recorder.hook.__exit__(None, None, None)
        recorder.close()
        result.update(reserved_peak=recorder.reserved_peak, requested_peak=recorder.requested_peak,
                      allocated_peak=recorder.allocated_peak,
                      stats={"upstream_allocs": recorder.upstream_allocs,
                             "pool_total_bytes_end": cp.get_default_memory_pool().total_bytes()})
    else:
        if args.trace:
            cmb.trace_stop()
        s = cmb.stats()
        result.update(stats=s, reserved_peak=s["reserved_peak"], requested_peak=s["requested_peak"],
                      allocated_peak=s["allocated_peak"], device_used_peak_library=s["device_used_peak"],
                      free_at_create=s["device_free_at_create"])
    s = sorted(times)
    if s:
        med = statistics.median(s)
        q = lambda p: s[min(len(s) - 1, round(p * (len(s) - 1)))]  # noqa: E731 - nearest rank
        result["timed"].update(times_ms=[t * 1e3 for t in times], median_ms=med * 1e3, p10_ms=q(0.1) * 1e3,
                               p90_ms=q(0.9) * 1e3, min_ms=s[0] * 1e3, max_ms=s[-1] * 1e3,
                               spread=(q(0.9) - q(0.1)) / med)
    result["device_used_peak_sampled"] = used_peak[0]
    result["cudart_loaded"] = cudart_copies()
    write_json(args.out, result)
    print(json.dumps({"event": "done", "oom": result["oom"], "median_ms": result["timed"].get("median_ms"),
                      "reserved_peak": result.get("reserved_peak")}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--native", action="store_true")
    r.add_argument("--policy")
    r.add_argument("--lib")
    r.add_argument("--trace")
    r.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    if bool(args.native) == bool(args.policy):
        ap.error("give --native or --policy")
    if args.policy and not args.lib:
        ap.error("--policy needs --lib")
    try:
        run(args)
    except Exception:  # noqa: BLE001 - the log keeps the traceback, the status file the failure
        traceback.print_exc()
        sys.exit(1)


if __name__ == "__main__":
    main()
