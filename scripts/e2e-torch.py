#!/usr/bin/env python3
"""e2e-torch.py - a real PyTorch training job under the suite's policies, beside
the sim replay's prediction for the same traffic (run by scripts/gpu-e2e.sh).

  e2e-torch.py run --out RUN.json [--policy SPEC --lib LIB --trace FILE [--oom raise|null]]
      The transformer of scripts/record_torch_transformer.py: its sweep (8
      sequence lengths x 3 steps, batch 32), then --timed-steps steps at
      sequence length --timed-seq. Natively (PyTorch's own allocator, as
      PYTORCH_CUDA_ALLOC_CONF says) or through libcmb_pluggable.so under SPEC,
      recording the traffic to FILE. Writes the peaks (the library's counters
      or torch.cuda.memory_stats), the device's used memory (cudaMemGetInfo
      after each forward, backward and optimizer step; the library also
      samples it whenever its reservation grows), each step's time, and
      whether the job ran out of memory.
  e2e-torch.py oom --out OOM.json --mode native|null|raise [--policy SPEC --lib LIB] --capacity BYTES
      What the program sees when the policy cannot serve an allocation: the
      sweep under a cap, the exception raised, and whether CUDA still works.
  e2e-torch.py table --work DIR --bin CUMEMBENCH --out OUTDIR --kind torch|cupy
      Replays every recorded trace in sim mode under its policy (the device
      size being the free memory the policy saw when it was created) and
      writes e2e-KIND.json and e2e-KIND.md: predicted against real peak
      reserved, native against the library, step times.
"""
import argparse
import csv
import glob
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)


def emit(event, **kw):
    print(json.dumps(dict(event=event, t=round(time.time(), 3), **kw)), flush=True)


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


def quantiles(times):
    if not times:
        return {}
    s = sorted(times)
    q = lambda p: s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]  # noqa: E731 - nearest rank
    med = statistics.median(s)
    return {"median_ms": med * 1e3, "p10_ms": q(0.1) * 1e3, "p90_ms": q(0.9) * 1e3, "min_ms": s[0] * 1e3,
            "max_ms": s[-1] * 1e3, "spread": (q(0.9) - q(0.1)) / med if med else None, "steps": len(s)}


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


# --- one job ---------------------------------------------------------------------

def run(args):
    result = {"kind": "torch", "mode": "library" if args.policy else "native", "policy": args.policy,
              "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "trace": args.trace, "oom": False,
              "error": None, "sweep": {"lengths": None, "steps_each": args.sweep_steps},
              "timed": {"seq": args.timed_seq, "steps": args.timed_steps}}
    cmb = None
    if args.policy:
        import cumembench_alloc as cmb
        # Before anything touches CUDA memory: PyTorch refuses to swap after.
        # raise: a policy that runs out of memory shows as a RuntimeError,
        # where a NULL could take the job down (the oom probes compare both).
        cmb.install_torch(args.policy, trace=args.trace, path=args.lib, oom=args.oom)
    import torch
    import record_torch_transformer as rt
    result.update(torch=torch.__version__, device=torch.cuda.get_device_name(),
                  cuda_runtime=torch.version.cuda)
    free0, total = torch.cuda.mem_get_info()
    result.update(device_total=total, device_used_at_start=total - free0)
    used_peak = [total - free0]

    def phase(_name):
        free, _ = torch.cuda.mem_get_info()
        used_peak[0] = max(used_peak[0], total - free)

    sweep_times, timed_times = [], []
    result["sweep"]["lengths"] = rt.SEQUENCE_LENGTHS
    try:
        model, head, opt = rt.build()
        for seq in rt.SEQUENCE_LENGTHS:
            for _ in range(args.sweep_steps):
                t0 = time.perf_counter()
                rt.train_step(model, head, opt, seq, phase=phase)
                torch.cuda.synchronize()
                sweep_times.append(time.perf_counter() - t0)
        emit("sweep-done", steps=len(sweep_times))
        for _ in range(args.timed_steps):
            t0 = time.perf_counter()
            rt.train_step(model, head, opt, args.timed_seq, phase=phase)
            torch.cuda.synchronize()
            timed_times.append(time.perf_counter() - t0)
    except torch.cuda.OutOfMemoryError as e:
        result.update(oom=True, error=f"OutOfMemoryError: {str(e).splitlines()[0]}")
    except RuntimeError as e:
        result.update(oom="out of memory" in str(e), error=f"RuntimeError: {str(e).splitlines()[0]}")
    try:
        torch.cuda.synchronize()
    except RuntimeError as e:  # a sticky CUDA error after the failure
        result["cuda_after"] = str(e).splitlines()[0]
    result["sweep"]["times_ms"] = [t * 1e3 for t in sweep_times]
    result["timed"]["times_ms"] = [t * 1e3 for t in timed_times]
    result["timed"].update(quantiles(timed_times))
    result["device_used_peak_sampled"] = used_peak[0]
    result["cudart_loaded"] = cudart_copies()
    if cmb:
        if args.trace:
            cmb.trace_stop()
        s = cmb.stats()
        result["stats"] = s
        result.update(reserved_peak=s["reserved_peak"], requested_peak=s["requested_peak"],
                      allocated_peak=s["allocated_peak"], device_used_peak_library=s["device_used_peak"],
                      free_at_create=s["device_free_at_create"])
    else:
        m = torch.cuda.memory_stats()
        result["stats"] = {k: m.get(k) for k in (
            "reserved_bytes.all.peak", "allocated_bytes.all.peak", "requested_bytes.all.peak",
            "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free", "segment.all.peak")}
        result.update(reserved_peak=m.get("reserved_bytes.all.peak"),
                      requested_peak=m.get("requested_bytes.all.peak"),
                      allocated_peak=m.get("allocated_bytes.all.peak"))
    write_json(args.out, result)
    emit("done", oom=result["oom"], median_ms=result["timed"].get("median_ms"),
         reserved_peak=result["reserved_peak"])


# --- what an out-of-memory looks like to the program -------------------------------------

def oom(args):
    result = {"kind": "torch-oom", "mode": args.mode, "policy": args.policy, "capacity": args.capacity}
    write_json(args.out, dict(result, outcome="started"))  # kept if the process dies
    import torch
    if args.mode == "native":
        _, total = torch.cuda.mem_get_info()
        torch.cuda.set_per_process_memory_fraction(args.capacity / total)
    else:
        import cumembench_alloc as cmb
        cmb.install_torch(args.policy, capacity=args.capacity, oom=args.mode, path=args.lib)
    import record_torch_transformer as rt
    steps = 0
    try:
        model, head, opt = rt.build()
        for seq in rt.SEQUENCE_LENGTHS:
            for _ in range(3):
                rt.train_step(model, head, opt, seq)
                torch.cuda.synchronize()
                steps += 1
        result.update(outcome="no error", steps=steps)
    except Exception as e:  # noqa: BLE001 - recording what the program sees is the point
        result.update(outcome="raised", exception=type(e).__module__ + "." + type(e).__qualname__,
                      message=str(e).splitlines()[0][:300] if str(e) else "", steps=steps,
                      is_torch_oom=isinstance(e, torch.cuda.OutOfMemoryError))
    write_json(args.out, result)
    try:  # does CUDA still work after it?
        x = torch.ones(1 << 20, device="cuda")
        torch.cuda.synchronize()
        result["cuda_after"] = "ok" if float(x.sum()) == float(1 << 20) else "wrong result"
    except Exception as e:  # noqa: BLE001
        result["cuda_after"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    write_json(args.out, result)
    emit("done", **{k: result.get(k) for k in ("outcome", "exception", "cuda_after")})


# --- the table ------------------------------------------------------------------------------

def replay(bin_path, trace, policy, capacity, outdir):
    """cumembench's sim replay of `trace` under `policy` (its upstream dropped)."""
    name = policy.rsplit("@", 1)[0]
    cmd = [bin_path, "--mode", "sim", "--scenario", "replay", "--allocator", name,
           "--param", f"trace={trace}", "--param", "find_min_capacity=false",
           "--param", f"capacity={int(capacity)}", "--out", outdir]
    r = subprocess.run(cmd, capture_output=True, text=True)
    metrics = {}
    path = os.path.join(outdir, "results.csv")
    if os.path.exists(path):
        with open(path) as f:
            for row in csv.DictReader(f):
                if row.get("status") in ("ok", "oom") and row.get("metric"):
                    try:
                        metrics[row["metric"]] = float(row["value"])
                    except ValueError:
                        pass
    return {"command": " ".join(cmd), "rc": r.returncode, "stderr": r.stderr[-2000:], "metrics": metrics}


def not_run(rc):
    if rc == "skipped":
        return "not run: the time budget was spent"
    if rc == "124":
        return "cut at its time limit"
    return f"crashed (exit {rc})"


def pct(a, b):
    return None if a is None or not b else 100.0 * (a - b) / b


def fmt_bytes(v):
    return "—" if v is None else f"{v / 2**20:.1f} MiB"


def fmt_pct(v):
    return "—" if v is None else f"{v:+.2f}%"


def fmt_spread(v):
    return "—" if v is None else f"{v:.3f}"


def fmt_ms(v):
    return "—" if v is None else f"{v:.2f}"


def load_runs(work, kind):
    runs = []
    for status in sorted(glob.glob(os.path.join(work, "runs", f"{kind}-*.status"))):
        base = status[: -len(".status")]
        with open(status) as f:
            rc = f.read().strip()
        run_json = base + ".json"
        data = {}
        if os.path.exists(run_json):
            with open(run_json) as f:
                data = json.load(f)
        data.update(name=os.path.basename(base), rc=rc)
        runs.append(data)
    return runs


def table(args):
    runs = [r for r in load_runs(args.work, args.kind) if r.get("kind") != "torch-oom"]
    probes = load_runs(args.work, f"{args.kind}oom")
    for r in runs:
        trace, policy = r.get("trace"), r.get("policy") or r.get("replay_policy")
        if policy and trace and os.path.exists(trace) and r.get("free_at_create"):
            out = os.path.join(args.work, "replay", r["name"])
            r["prediction"] = replay(args.bin, trace, policy, r["free_at_create"], out)
            m = r["prediction"]["metrics"]
            r["predicted_reserved_peak"] = m.get("peak_reserved_bytes")
            r["predicted_requested_peak"] = m.get("peak_requested_bytes")
            r["predicted_device_peak"] = m.get("device_peak_bytes")
            r["predicted_ooms"] = m.get("replay_ooms")
            # one stream: nothing a policy does depends on when the GPU completes work
            r["trace_streams"] = m.get("trace_streams")
            r["prediction_error_pct"] = pct(r["predicted_reserved_peak"], r.get("reserved_peak"))
    native = {r.get("conf") or "default": r for r in runs if r.get("mode") == "native"}
    # The library run of the same policy with no options, over whichever upstream.
    by_policy = {}
    for r in runs:
        if r.get("mode") == "library":
            by_policy.setdefault(r["policy"].rsplit("@", 1)[0], r)
    comparisons = []
    for conf, policy in (("default", "torch-caching"), ("expandable_segments:True", "torch-expandable"),
                         ("pool", "cupy"), ("default", "cmb"), ("expandable_segments:True", "cmb")):
        n, lib = native.get(conf), by_policy.get(policy)
        if n and lib:
            comparisons.append({
                "native": conf, "policy": lib["policy"], "native_reserved_peak": n.get("reserved_peak"),
                "library_reserved_peak": lib.get("reserved_peak"),
                "reserved_diff_pct": pct(lib.get("reserved_peak"), n.get("reserved_peak")),
                "native_median_ms": n.get("timed", {}).get("median_ms"),
                "library_median_ms": lib.get("timed", {}).get("median_ms"),
                "step_time_overhead_pct": pct(lib.get("timed", {}).get("median_ms"),
                                              n.get("timed", {}).get("median_ms"))})
    summary = {"kind": args.kind, "runs": runs, "oom_probes": probes, "native_vs_library": comparisons}
    write_json(os.path.join(args.out, f"e2e-{args.kind}.json"), summary)
    with open(os.path.join(args.out, f"e2e-{args.kind}.md"), "w") as f:
        f.write(markdown(summary))
    print(markdown(summary))


def markdown(s):
    any_run = next((r for r in s["runs"] if r.get("device")), {})
    lines = [f"# {s['kind']} end to end: predicted against real peak reserved", "",
             f"Device: {any_run.get('device', '?')}; {s['kind']} {any_run.get('torch') or any_run.get('cupy', '?')}; "
             f"CUDA runtime {any_run.get('cuda_runtime', '?')}. Predicted: `cumembench --mode sim --scenario "
             "replay` of the run's own trace under the same policy, the device size being the free memory the "
             "policy saw at creation. Step times: median (p10-p90) over the timed steps.", "",
             "| run | OOM | real peak reserved | predicted | diff | peak requested | device used peak "
             "(library / sampled) | median ms (p10-p90) | spread |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in s["runs"]:
        label = r.get("policy") or (f"native ({r.get('conf') or 'default'})" if r.get("mode") else r["name"])
        if r.get("rc") not in ("0", 0) and not r.get("timed"):
            lines.append(f"| {label} | {not_run(r.get('rc'))} | | | | | | | |")
            continue
        t = r.get("timed", {})
        used = f"{fmt_bytes(r.get('device_used_peak_library'))} / {fmt_bytes(r.get('device_used_peak_sampled'))}"
        oom = "yes" if r.get("oom") else "no"
        lines.append(f"| {label} | {oom} | {fmt_bytes(r.get('reserved_peak'))} | "
                     f"{fmt_bytes(r.get('predicted_reserved_peak'))} | {fmt_pct(r.get('prediction_error_pct'))} | "
                     f"{fmt_bytes(r.get('requested_peak'))} | {used} | {fmt_ms(t.get('median_ms'))} "
                     f"({fmt_ms(t.get('p10_ms'))}-{fmt_ms(t.get('p90_ms'))}) | "
                     f"{fmt_spread(t.get('spread'))} |")
    streams = sorted({int(r["trace_streams"]) for r in s["runs"] if r.get("trace_streams") is not None})
    if streams:
        lines += ["", f"Streams in the recorded traffic: {', '.join(map(str, streams))} (with one, a policy's "
                  "choices cannot depend on when the GPU completes work, only with several)."]
    copies = sorted({len(r["cudart_loaded"]) for r in s["runs"] if r.get("mode") == "library"
                     and r.get("cudart_loaded") is not None})
    if copies:
        lines += ["", f"CUDA runtime libraries mapped in a library run: {', '.join(map(str, copies))} "
                  "(1: the library shares the framework's libcudart)."]
    if s["native_vs_library"]:
        lines += ["", "| native | through the library | native reserved peak | library reserved peak | diff | "
                  "native median ms | library median ms | step-time overhead |", "|---|---|---|---|---|---|---|---|"]
        for c in s["native_vs_library"]:
            lines.append(f"| {c['native']} | {c['policy']} | {fmt_bytes(c['native_reserved_peak'])} | "
                         f"{fmt_bytes(c['library_reserved_peak'])} | {fmt_pct(c['reserved_diff_pct'])} | "
                         f"{fmt_ms(c['native_median_ms'])} | {fmt_ms(c['library_median_ms'])} | "
                         f"{fmt_pct(c['step_time_overhead_pct'])} |")
    if s["oom_probes"]:
        lines += ["", "| out-of-memory probe | policy | outcome | exception | message | CUDA after |",
                  "|---|---|---|---|---|---|"]
        for p in s["oom_probes"]:
            outcome = p.get("outcome", "?")
            if outcome == "started" or p.get("rc") not in ("0", 0):
                outcome = f"{outcome}; {not_run(p.get('rc'))}"
            lines.append(f"| {p.get('mode')} | {p.get('policy') or '—'} | {outcome} | {p.get('exception', '—')} | "
                         f"{(p.get('message') or '—').replace('|', '/')} | {p.get('cuda_after', '—')} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--policy")
    r.add_argument("--lib")
    r.add_argument("--trace")
    r.add_argument("--sweep-steps", type=int, default=3)
    r.add_argument("--timed-steps", type=int, default=20)
    r.add_argument("--timed-seq", type=int, default=512)
    r.add_argument("--oom", choices=["null", "raise"], default="raise")
    o = sub.add_parser("oom")
    o.add_argument("--out", required=True)
    o.add_argument("--mode", choices=["native", "null", "raise"], required=True)
    o.add_argument("--policy")
    o.add_argument("--lib")
    o.add_argument("--capacity", type=int, required=True)
    t = sub.add_parser("table")
    t.add_argument("--work", required=True)
    t.add_argument("--bin", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--kind", choices=["torch", "cupy"], required=True)
    args = ap.parse_args()
    if args.cmd in ("run", "oom") and args.policy and not args.lib:
        ap.error("--policy needs --lib")
    try:
        {"run": run, "oom": oom, "table": table}[args.cmd](args)
    except Exception:  # noqa: BLE001 - the log keeps the traceback, the status file the failure
        traceback.print_exc()
        sys.exit(1)


if __name__ == "__main__":
    main()
