#!/usr/bin/env python3
"""doc-sample-traces.py - the README's summary table: every sim policy on every
sample trace in traces/samples/, the smallest device each trace fits on (the
replay's capacity search) and peak reserved / peak requested on the default
sim device. Sim replays are deterministic, so the table is exact and
regenerates byte for byte; tools/gendocs.py runs this for README.md.

  doc-sample-traces.py [--bin build/cumembench]
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import cmb_schema  # noqa: E402

POLICIES = "cuda,torch-caching,torch-expandable,rmm-pool,arena,binning,bfc,bfc-prealloc,cupy,buddy,cmb"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.environ.get("CMB_BIN", "build/cumembench"))
    args = ap.parse_args()
    traces = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "traces/samples/*.trace")))
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run")
        p = subprocess.run([args.bin, "--mode", "sim", "--scenario", "replay", "--repetitions", "1",
                            "--param", "trace=" + ",".join(traces), "--param", "find_min_capacity=true",
                            "--allocator", POLICIES, "--out", run, "--quiet"],
                           cwd=ROOT, capture_output=True, text=True)
        if p.returncode not in (0, 1):
            sys.exit(f"doc-sample-traces: cumembench exited {p.returncode}: {p.stderr.strip()[-300:]}")
        values, status = defaultdict(dict), {}
        for row in cmb_schema.read_rows(run):
            trace = os.path.basename(cmb_schema.params(row).get("trace", "")).rsplit(".", 1)[0]
            status[(row["allocator"], trace)] = row["status"]
            if row["status"] == "ok" and row["metric"] and row["value"] != "":
                values[(row["allocator"], trace)][row["metric"]] = float(row["value"])
    names = [os.path.basename(t).rsplit(".", 1)[0] for t in traces]
    print("| allocator | " + " | ".join(f"`{n}`" for n in names) + " |")
    print("|---|" + "---:|" * len(names))
    for a in POLICIES.split(","):
        cells = []
        for n in names:
            v = values.get((a, n), {})
            if "min_capacity_bytes" in v and v.get("peak_requested_bytes"):
                cells.append(f"{v['min_capacity_bytes'] / 2**30:.2f} GiB / "
                             f"{v['peak_reserved_bytes'] / v['peak_requested_bytes']:.3f}")
            elif status.get((a, n)) == "oom":
                cells.append("does not fit 80 GiB")
            else:
                cells.append(status.get((a, n), "not run"))
        print(f"| `{a}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
