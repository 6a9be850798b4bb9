#!/usr/bin/env python3
"""The serving ceiling from one recording: predict, then the table.

  predict BIN TRACE RECORD.json ALLOCATOR OUT.json
      The highest --gpu-memory-utilization (0.001 steps) at which
      scripts/serving_server.py would serve its stream without running out of
      memory under ALLOCATOR (a sim policy: torch-caching, torch-expandable,
      cmb, ...), from the trace of one recorded run (RECORD.json: that run's
      report). Between utilizations only the KV cache's per-layer tensors
      change size (the stream, the batches and every other allocation are the
      same as long as no request waits for blocks, which the recorded run
      shows): each trial rewrites those sizes as the server would size them
      at u and replays the trace in sim mode (cumembench --scenario replay)
      on a device of the memory the program could use (total - the largest
      non-torch use the recording measured: device used by cudaMemGetInfo -
      reserved, after profiling, after capture and while serving). The
      decode graphs' allocations (between the recording's two capture
      markers) live in a private pool the serving steps never reuse: they
      become one allocation of the pool's recorded size (graph_pool_private),
      held to the end. Bisection from the recorded u (completes) and 1.2
      (cannot).
  table DIR
      Markdown of DIR/predict/*.json and DIR/runs/*.json (the real runs at
      the prediction, +0.005 and +0.01) on stdout. The ceiling by running is
      [lo, hi): lo the highest utilization that completed, hi the lowest above
      it that ran out of memory (a run ending in another error says nothing
      of memory and bounds nothing; the table shows it); on the 0.001 grid the true ceiling c is one of lo ..
      hi - 0.001. "prediction within 0.005" (verdict()) is "yes" when the
      prediction is within 0.005 of every such c (hi - 0.006 <= p <= lo +
      0.005), "no" when of none (p < lo - 0.005 or p > hi + 0.004), else
      "undecided" (the runs bracket the ceiling too loosely to tell).
Exit status 0, 1 when a step could not be made, 2 on bad usage.
"""
import csv
import glob
import json
import os
import subprocess
import sys
import tempfile

GRID = 1000
TOP = 1200  # 1.2: the server's own bound on --gpu-memory-utilization


def fail(msg, code=2):
    print(f"serving_ceiling: {msg}", file=sys.stderr)
    sys.exit(code)


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")


def kv_layer_bytes(rec, m):
    """The server's sizing (serving_server.py, Engine.allocate_kv) at m/GRID."""
    budget = rec["total"] * (m / GRID) - rec["weights"] - rec["profile_peak"] - rec["non_torch"] - rec["graph_estimate"]
    blocks = int(budget // rec["kv_block_bytes"]) if budget > 0 else 0
    a = rec["args"]
    if (blocks - 1) * a["block_size"] < a["max_model_len"]:
        return None  # the server refuses: fewer tokens than max_model_len
    return blocks * rec["kv_block_bytes"] // a["layers"]


def pin_capture(lines, rec):
    """The trace with the capture window (between the recording's two marker
    allocations) replaced by one allocation of the private pool's size, never
    freed; the markers and every block allocated inside dropped with their
    frees. Fails when the markers are not there exactly once each."""
    marks, pool = rec.get("capture_marks"), rec.get("graph_pool_private")
    if not marks or pool is None:
        fail("the recording has no capture markers or graph_pool_private (recorded before they existed, "
             "or without graphs)", 1)
    at = {}
    for i, ln in enumerate(lines):
        f = ln.split()
        if len(f) == 5 and f[0] == "a" and int(f[2]) in marks:
            if int(f[2]) in at:
                fail(f"capture marker of {f[2]} bytes seen twice in the trace", 1)
            at[int(f[2])] = i
    if len(at) != 2 or at[marks[0]] > at[marks[1]]:
        fail(f"capture markers {marks} not found in order in the trace", 1)
    i0, i1 = at[marks[0]], at[marks[1]]
    out, dropped = [], set()
    pool_id = max(int(x.split()[1]) for x in lines if x.startswith("a ")) + 1
    for i, ln in enumerate(lines):
        f = ln.split()
        if i == i0 and pool > 0:
            out.append(f"a {pool_id} {pool} {f[3]} {f[4]}")
        if len(f) == 5 and f[0] in "af":
            if f[0] == "a" and i0 <= i <= i1:
                dropped.add(f[1])
                continue
            if f[0] == "f" and f[1] in dropped:
                dropped.discard(f[1])
                continue
        out.append(ln)
    return out


class Trial:
    def __init__(self, binary, trace, rec, allocator, work):
        self.bin, self.rec, self.allocator, self.work = binary, rec, allocator, work
        with open(trace) as f:
            self.lines = pin_capture(f.read().split("\n"), rec)
        want = str(rec["kv_layer_bytes"])
        self.kv = [i for i, ln in enumerate(self.lines)
                   if ln.startswith("a ") and ln.split()[2] == want]
        if len(self.kv) != rec["args"]["layers"]:
            fail(f"{trace}: {len(self.kv)} allocations of the recorded KV tensor size {want}, expected "
                 f"{rec['args']['layers']} (one per layer)", 1)
        non_torch = max(rec.get("non_torch", 0), rec.get("non_torch_peak", 0), rec.get("non_torch_capture", 0))
        self.capacity = rec["total"] - non_torch
        self.log = []

    def fits(self, m):
        size = kv_layer_bytes(self.rec, m)
        if size is None:
            self.log.append({"util": m / GRID, "fits": False, "why": "KV below max_model_len"})
            return False
        lines = list(self.lines)
        for i in self.kv:
            f = lines[i].split()
            f[2] = str(size)
            lines[i] = " ".join(f)
        path = os.path.join(self.work, "trial.trace")
        with open(path, "w") as f:
            f.write("\n".join(lines))
        out = os.path.join(self.work, f"replay-{m}")
        cmd = [self.bin, "--mode", "sim", "--scenario", "replay", "--allocator", self.allocator,
               "--param", f"trace={path}", "--param", "find_min_capacity=false",
               "--param", f"capacity={int(self.capacity)}", "--repetitions", "1", "--timeline", "off",
               "--quiet", "--out", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        status = set()
        peak = None
        try:
            with open(os.path.join(out, "results.csv")) as f:
                for row in csv.DictReader(f):
                    status.add(row["status"])
                    if row["metric"] == "peak_reserved_bytes":
                        peak = float(row["value"])
        except OSError:
            pass
        if not status or status - {"ok", "oom"}:
            fail(f"replay at {m / GRID:.3f} under {self.allocator} did not run (exit {r.returncode}): "
                 f"{(r.stderr or r.stdout).strip()[-300:]}", 1)
        ok = status == {"ok"}
        self.log.append({"util": m / GRID, "fits": ok, "kv_layer_bytes": size, "peak_reserved": peak})
        return ok


def predict(binary, trace, record, allocator, out_path):
    rec = load_json(record)
    if rec.get("outcome") != "completed":
        fail(f"{record}: the recorded run did not complete ({rec.get('outcome')})", 1)
    if rec.get("preemptions") or rec.get("kv_blocked_steps"):
        fail(f"{record}: requests waited for KV blocks while recording (preemptions {rec.get('preemptions')}, "
             f"blocked steps {rec.get('kv_blocked_steps')}): record at a higher utilization", 1)
    with tempfile.TemporaryDirectory() as work:
        t = Trial(binary, trace, rec, allocator, work)
        lo, hi = round(rec["util"] * GRID), TOP
        note = None
        if not t.fits(lo):
            note = f"the recorded utilization {lo / GRID:.3f} does not fit the replay"
            while lo > 50 and not t.fits(lo - 50):
                lo -= 50
            hi, lo = lo, lo - 50
        elif t.fits(hi):
            lo = hi
            note = "fits at 1.2, the server's bound"
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if t.fits(mid):
                lo = mid
            else:
                hi = mid
        result = {"allocator": allocator, "predicted": lo / GRID, "capacity": t.capacity, "recorded_util": rec["util"],
                  "trials": t.log, "note": note, "trace": trace}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"serving_ceiling: {allocator}: predicted ceiling {lo / GRID:.3f} ({len(t.log)} replays)")
    return 0


# --- the table ---------------------------------------------------------------------------------

MODES = [("default", "torch-caching", "PyTorch default (native)"),
         ("expandable", "torch-expandable", "PyTorch expandable_segments:True (native)"),
         ("cmb", "cmb", "cmb@vmm through libcmb_pluggable")]


def gib(v):
    return f"{v / 2**30:.2f} GiB" if isinstance(v, (int, float)) else "n/a"


def verdict_of(pred, lo, hi, tol=0.005):
    """Is pred within tol of the ceiling by running, [lo, hi) (module doc)?
    In thousandths, so that no float rounding decides a boundary."""
    if pred is None or (lo is None and hi is None):
        return "n/a"
    p, t = round(pred * GRID), round(tol * GRID)
    first = round(lo * GRID) if lo is not None else None      # lowest possible ceiling
    last = round(hi * GRID) - 1 if hi is not None else None   # highest possible ceiling
    if (first is not None and p < first - t) or (last is not None and p > last + t):
        return "no"
    if first is not None and last is not None and last - t <= p <= first + t:
        return "yes"
    return "undecided"


def table(d):
    rows, env = [], None
    for mode, policy, label in MODES:
        p = os.path.join(d, "predict", f"{policy}.json")
        pred = load_json(p)["predicted"] if os.path.exists(p) else None
        runs = []
        for path in sorted(glob.glob(os.path.join(d, "runs", f"{mode}-*.json"))):
            r = load_json(path)
            env = env or r
            runs.append(r)
        runs.sort(key=lambda r: r["util"])
        done = [r["util"] for r in runs if r.get("outcome") == "completed"]
        failed = [r["util"] for r in runs if r.get("outcome") == "oom"]  # an error says nothing of memory
        lo = max(done) if done else None
        hi = min([u for u in failed if lo is None or u > lo], default=None)
        verdict = verdict_of(pred, lo, hi)
        rows.append((label, policy, pred, runs, lo, hi, verdict))
    out = ["# The serving ceiling: predicted from one recording, verified by running", ""]
    if env:
        out.append(f"GPU {env.get('device')}, PyTorch {env.get('torch')}, CUDA runtime {env.get('cuda_runtime')}, "
                   f"device memory {gib(env.get('total'))}; scripts/gpu-serving.sh (scripts/serving_server.py "
                   f"defaults).")
        out.append("")
    out += ["| allocator | predicted (replay policy) | run at | outcome | peak reserved | KV blocks | graphs |",
            "|---|---|---|---|---|---|---|"]
    for label, policy, pred, runs, lo, hi, verdict in rows:
        ptext = f"{pred:.3f} ({policy})" if pred is not None else f"not predicted ({policy})"
        if not runs:
            out.append(f"| {label} | {ptext} | not run | | | | |")
        for r in runs:
            why = r.get("outcome", "?") + (f": {r['error'][:120]}" if r.get("error") else "")
            out.append(f"| {label} | {ptext} | {r['util']:.3f} | {why.replace('|', '/')} | "
                       f"{gib(r.get('peak_reserved'))} | {r.get('kv_blocks', 'n/a')} | {r.get('graphs', 'n/a')} |")
    out += ["", "| allocator | predicted | ceiling by running | prediction within 0.005 |", "|---|---|---|---|"]
    for label, policy, pred, runs, lo, hi, verdict in rows:
        span = (f"[{lo:.3f}, {hi:.3f})" if lo is not None and hi is not None else
                f">= {lo:.3f}" if lo is not None else f"< {hi:.3f}" if hi is not None else "n/a")
        out.append(f"| {label} | {'n/a' if pred is None else f'{pred:.3f}'} | {span} | {verdict} |")
    print("\n".join(out))
    return 0


def main(argv):
    if len(argv) == 6 and argv[0] == "predict":
        return predict(*argv[1:])
    if len(argv) == 2 and argv[0] == "table":
        return table(argv[1])
    fail("usage: serving_ceiling.py predict BIN TRACE RECORD.json ALLOCATOR OUT.json | table DIR")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
