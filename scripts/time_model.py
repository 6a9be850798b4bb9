#!/usr/bin/env python3
"""time_model.py - the cost model checked on real programs (run by
scripts/gpu-time-model.sh; docs/costs.md, "Validation").

  time_model.py run --workload W --out RUN.json [--policy SPEC --lib LIB] [--trace FILE]
                    [--rounds 3] [--steps N]
      One process: workload W (transformer, convnet, llm-decode) natively
      (PyTorch's own allocator, as PYTORCH_CUDA_ALLOC_CONF says) or through
      libcmb_pluggable.so under SPEC. A warm-up round, then --rounds rounds
      of --steps steps, every step timed to torch.cuda.synchronize(). With
      --trace (library only), the first measured round's traffic is recorded.
  time_model.py table --work DIR --bin CUMEMBENCH --costs FILE --out OUTDIR
      Replays each workload's recorded round in sim under every setting's
      policy with the cost file, and writes time-model.json and
      time-model.md: per setting, the measured difference in step time
      against native PyTorch (median over rounds of the mean step) and the
      predicted one (predicted_alloc_time_s per step), and whether it is
      within max(25% of the measured difference, 1 ms).

The workloads are those of the recorded sample traces: the transformer of
record_torch_transformer.py (a step at each of its sequence lengths in turn),
record_torch_workload.py's ResNet-50 (a step at each image size in turn) and
its LLM decode (a step is one request: prefill and decoding).
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)

# setting -> (how it runs, the sim policy that predicts it, pricing)
#   pricing "original": the emulation is priced as the calibrated original
#   (PyTorch's own allocator runs); "bookkeeping": the policy's own code runs.
SETTINGS = {
    "native": ("native", "torch-caching", "original"),
    "native-expandable": ("native:expandable_segments:True", "torch-expandable", "original"),
    "lib-torch-caching": ("torch-caching@cuda", "torch-caching", "bookkeeping"),
    "lib-cmb": ("cmb@vmm", "cmb", "bookkeeping"),
    # cmb following a layout planned from the recorded round itself (docs/cmb.md, "A layout planned
    # from a recording"); {trace} is the workload's recorded trace, the one the replays price
    "lib-cmb-layout": ("cmb:layout={trace}@vmm", "cmb:layout={trace}", "bookkeeping"),
    "lib-cuda": ("cuda@cuda", "cuda", "bookkeeping"),
    "lib-rmm-pool": ("rmm-pool@cuda", "rmm-pool", "bookkeeping"),
}
TARGET_FRAC, TARGET_FLOOR_S = 0.25, 1e-3


def workload(name, torch, dev="cuda"):
    """(steps per round, step(i)) of workload `name`."""
    if name == "transformer":
        import record_torch_transformer as rt
        model, head, opt = rt.build()
        lens = rt.SEQUENCE_LENGTHS
        return len(lens), lambda i: rt.train_step(model, head, opt, lens[i % len(lens)])
    import record_torch_workload as rw
    if name == "convnet":
        import torchvision
        model = torchvision.models.resnet50(num_classes=1000).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step(i):
            size = rw.IMAGE_SIZES[i % len(rw.IMAGE_SIZES)]
            x = torch.randn(32, 3, size, size, device=dev)
            y = torch.randint(0, 1000, (32,), device=dev)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            del x, y, loss
        return len(rw.IMAGE_SIZES), step
    if name == "llm-decode":
        vocab, d, layers = 32000, 2048, 6
        emb = torch.nn.Embedding(vocab, d).to(dev, torch.float16)
        blocks = torch.nn.ModuleList(rw.DecoderBlock(d, 16) for _ in range(layers)).to(dev, torch.float16)
        head = torch.nn.Linear(d, vocab).to(dev, torch.float16)
        reqs = rw.REQUESTS[:6]  # six requests a round: the round stays within the time budget

        def step(i):
            prompt, gen = reqs[i % len(reqs)]
            with torch.inference_mode():
                tokens = torch.randint(0, vocab, (8, prompt), device=dev)
                x, caches = emb(tokens), [None] * layers
                for _ in range(gen):
                    for j, blk in enumerate(blocks):
                        x, caches[j] = blk(x, caches[j])
                    x = emb(head(x[:, -1:]).argmax(-1))
                del tokens, x, caches
        return len(reqs), step
    raise SystemExit(f"time_model.py: unknown workload {name!r} (transformer, convnet, llm-decode)")


COUNTED = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams",
           "segment.all.allocated", "segment.all.freed", "allocation.all.allocated")


def allocator_counts(torch):
    """The cumulative counters of torch.cuda.memory_stats() that say what the allocator called."""
    try:
        stats = torch.cuda.memory_stats()
    except Exception:  # noqa: BLE001 - a library without statistics: nothing to count
        return {}
    return {k: stats[k] for k in COUNTED if isinstance(stats.get(k), (int, float))}


def run(args):
    cmb = None
    if args.policy:
        import cumembench_alloc as cmb
        cmb.install_torch(args.policy, path=args.lib, oom="raise")
    import torch
    out = {"workload": args.workload, "policy": args.policy, "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
           "torch": torch.__version__, "device": torch.cuda.get_device_name(), "cuda_runtime": torch.version.cuda,
           "rounds": [], "error": None}
    try:
        steps, step = workload(args.workload, torch)
        steps = args.steps or steps
        for i in range(steps):  # warm-up: kernels chosen, pools grown
            step(i)
        torch.cuda.synchronize()
        before = allocator_counts(torch)
        for r in range(args.rounds):
            if r == 0 and args.trace and cmb:
                cmb.trace_start(args.trace)
            times, cpu = [], []
            for i in range(steps):
                c0, t0 = time.thread_time(), time.perf_counter()
                step(i)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
                cpu.append(time.thread_time() - c0)  # the host's share: a host-bound step's wall is mostly this
            if r == 0 and args.trace and cmb:
                cmb.trace_stop()
            out["rounds"].append(times)
            out.setdefault("cpu_rounds", []).append(cpu)
        out["steps"] = steps
        after = allocator_counts(torch)
        # what the allocator did in the measured rounds, by its own statistics (native PyTorch's;
        # through the library, what the library's statistics answer)
        out["allocator_counts"] = {k: after[k] - before[k] for k in after if k in before}
    except Exception as e:  # noqa: BLE001 - a setting that fails is a row saying so
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    if out["error"]:  # in the JSON and here, for whoever runs it (tune --verify shows this output)
        print(f"time_model.py: {args.workload}: {out['error']}", file=sys.stderr)
    return 0 if not out["error"] else 1


def mean_step(rounds):
    """Median over rounds of the round's mean step time (seconds)."""
    return statistics.median(sum(r) / len(r) for r in rounds) if rounds else None


def predict_passes(bin_path, trace, policy, pricing, costs, outdir, passes):
    """Median predicted_alloc_time_s of a sim replay of `passes` passes (seconds), and the command."""
    env = dict(os.environ, CMB_COSTS=costs)
    env.pop("CMB_COSTS_OPS", None)
    if pricing == "bookkeeping":
        env["CMB_COSTS_OPS"] = "bookkeeping"
    cmd = [bin_path, "--mode", "sim", "--scenario", "replay", "--allocator", policy, "--param", f"trace={trace}",
           "--param", "find_min_capacity=false", "--param", f"passes={passes}", "--repetitions", "3",
           "--timeline", "off", "--out", outdir]  # only the predicted time is read
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    try:
        with open(os.path.join(outdir, "results.json")) as f:
            runs = [b for b in json.load(f)["benchmarks"] if b.get("run_type") == "iteration"]
        vals = [b["predicted_alloc_time_s"] for b in runs if "predicted_alloc_time_s" in b]
        return statistics.median(vals) if vals else None, " ".join(cmd)
    except (OSError, ValueError, KeyError):
        return None, " ".join(cmd) + " failed: " + (p.stderr.strip().splitlines() or ["?"])[-1]


def predict(bin_path, trace, policy, pricing, costs, outdir):
    """(cold, warm, command): the predicted allocator time of the recorded round replayed by a fresh
    policy (cold), and of the same round replayed again by the policy the first pass left (warm: the
    second pass of a two-pass replay, its total less the one-pass total). The measured rounds run
    after a warm-up round of the same steps, so the warm pass is the one they are compared with."""
    one, cmd = predict_passes(bin_path, trace, policy, pricing, costs, outdir + "-1pass", 1)
    two, _ = predict_passes(bin_path, trace, policy, pricing, costs, outdir + "-2pass", 2)
    warm = two - one if one is not None and two is not None else None
    return one, warm, cmd


def load_runs(work, wl, setting):
    """Every process's rounds of a setting ({wl}-{setting}.json, then .p2.json, ...), merged: the rounds
    in one list, the first error, the number of processes."""
    merged = {"rounds": [], "error": None, "processes": 0}
    names = [f"{wl}-{setting}.json"] + sorted(os.path.basename(p) for p in
                                              glob.glob(os.path.join(work, f"{wl}-{setting}.p*.json")))
    for name in names:
        try:
            with open(os.path.join(work, name)) as f:
                d = json.load(f)
        except (OSError, ValueError):
            if name == names[0]:
                merged["error"] = "no result (crashed or cut short: see logs)"
            continue
        merged["processes"] += 1
        merged["rounds"] += d.get("rounds") or []
        merged["steps"] = d.get("steps", merged.get("steps"))
        merged["error"] = merged["error"] or d.get("error")
    if merged["rounds"] and merged["error"] and merged["error"].startswith("no result"):
        merged["error"] = None
    return merged


def table_rows(args):
    rows = []
    for wl in ("transformer", "convnet", "llm-decode"):
        trace = os.path.join(args.work, f"{wl}.trace")
        # the settings this run asked for (a process log, finished or not): CMB_TM_SETTINGS and
        # CMB_TM_WORKLOADS may leave some out, and those are no rows
        asked = [s for s in SETTINGS if glob.glob(os.path.join(args.work, f"{wl}-{s}.*log"))]
        if not asked:
            continue
        runs = {s: load_runs(args.work, wl, s) for s in set(asked) | {"native"}}
        base = runs["native"]
        steps = base.get("steps") or 1
        preds = {s: predict(args.bin, trace, SETTINGS[s][1].format(trace=trace), SETTINGS[s][2], args.costs,
                            os.path.join(args.work, "replay", f"{wl}-{s}"))
                 if os.path.exists(trace) else (None, None, "no trace recorded") for s in set(asked) | {"native"}}
        for s in asked:
            m, mb = mean_step(runs[s].get("rounds")), mean_step(base.get("rounds"))
            p, pb = preds[s][1], preds["native"][1]
            c, cb = preds[s][0], preds["native"][0]
            row = {"workload": wl, "setting": s, "runs_as": SETTINGS[s][0].format(trace=f"{wl}.trace"),
                   "predicted_by": SETTINGS[s][1].format(trace=f"{wl}.trace"),
                   "pricing": SETTINGS[s][2], "error": runs[s].get("error") or base.get("error"),
                   "measured_step_ms": m * 1e3 if m else None,
                   "measured_delta_ms": (m - mb) * 1e3 if m and mb else None,
                   "predicted_delta_ms": (p - pb) / steps * 1e3 if p is not None and pb is not None else None,
                   "predicted_cold_delta_ms": (c - cb) / steps * 1e3 if c is not None and cb is not None else None,
                   "replay": preds[s][2],
                   "processes": runs[s].get("processes", 0),
                   "round_means_ms": [sum(r) / len(r) * 1e3 for r in runs[s].get("rounds") or []]}
            if row["measured_delta_ms"] is not None and row["predicted_delta_ms"] is not None:
                md = row["measured_delta_ms"] / 1e3
                tol = max(TARGET_FRAC * abs(md), TARGET_FLOOR_S)
                row["tolerance_ms"] = tol * 1e3
                row["within"] = abs(row["predicted_delta_ms"] / 1e3 - md) <= tol
            rows.append(row)
    return rows


def rounds_of(rows):
    """'10 rounds (2 processes)': how many rounds each median is over, as the rows have them."""
    n = sorted({(len(r["round_means_ms"]), r["processes"]) for r in rows if r["round_means_ms"]})
    return ", ".join(f"{k} rounds ({p} process{'es' if p != 1 else ''})" for k, p in n) or "no rounds"


def table(args):
    rows = table_rows(args)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "time-model.json"), "w") as f:
        json.dump({"costs": args.costs, "target": "within max(25% of the measured difference, 1 ms) per step",
                   "rows": rows}, f, indent=1)
    fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    lines = ["# Predicted against measured allocator time per step", "",
             f"Cost file: `{os.path.relpath(args.costs)}`. Difference in mean step time against native PyTorch "
             f"(default allocator); the median of the rounds' mean steps over {rounds_of(rows)}, their range in brackets. "
             "Predicted: the recorded round replayed a second time by the policy its first pass left (the "
             "measured rounds follow a warm-up round); a fresh policy's first pass (cold) beside it. Target: "
             "within max(25% of the measured difference, 1 ms).", "",
             "| workload | setting | step ms (range) | measured Δ ms | predicted Δ ms | cold Δ ms | tolerance ms "
             "| within | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ok = {True: "yes", False: "**no**"}.get(r.get("within"), "-")
        rm = r["round_means_ms"]
        span = f" ({min(rm):.2f}–{max(rm):.2f})" if rm else ""
        lines.append(f"| {r['workload']} | {r['setting']} | {fmt(r['measured_step_ms'])}{span} | "
                     f"{fmt(r['measured_delta_ms'])} | {fmt(r['predicted_delta_ms'])} | "
                     f"{fmt(r.get('predicted_cold_delta_ms'))} | {fmt(r.get('tolerance_ms'))} | "
                     f"{ok} | {r['error'] or ''} |")
    n_in = sum(1 for r in rows if r.get("within"))
    n_cmp = sum(1 for r in rows if "within" in r)
    lines += ["", f"{n_in} of {n_cmp} compared pairs within the target ({len(rows)} rows)."]
    with open(os.path.join(args.out, "time-model.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--workload", required=True, choices=["transformer", "convnet", "llm-decode"])
    r.add_argument("--out", required=True)
    r.add_argument("--policy")
    r.add_argument("--lib")
    r.add_argument("--trace")
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--steps", type=int, default=0)
    t = sub.add_parser("table")
    t.add_argument("--work", required=True)
    t.add_argument("--bin", required=True)
    t.add_argument("--costs", required=True)
    t.add_argument("--out", required=True)
    args = ap.parse_args()
    return run(args) if args.cmd == "run" else table(args)


if __name__ == "__main__":
    sys.exit(main())
