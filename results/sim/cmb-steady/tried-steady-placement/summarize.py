#!/usr/bin/env python3
"""Summarizes run.sh's OUT directory as markdown (experiments.md) and one
CSV of the figures it is made from (experiments.csv)."""
import csv
import os
import sys

TRACES = ["torch_convnet", "torch_llm_decode", "torch_mlp_sweep_default", "torch_serving",
          "torch_transformer_sweep"]
KEYS = ["peak_reserved_bytes", "peak_requested_bytes", "upstream_allocs", "upstream_frees",
        "driver_calls", "trace_allocs"]


def metrics(d):
    with open(os.path.join(d, "results.csv")) as f:
        return {r["metric"]: float(r["value"]) for r in csv.DictReader(f) if r["value"]}


def growths(d, per_pass):
    """GROW lines of the patch: allocations so far, bytes, pages mapped,
    pages held after, budget, over-budget growths so far, peak need."""
    out = []
    with open(os.path.join(d, "run.log"), errors="replace") as f:
        for line in f:
            if line.startswith("GROW "):
                v = [int(x) for x in line.split()[1:]]
                out.append(((v[0] - 1) // per_pass, (v[0] - 1) % per_pass, *v[1:]))
    return out


def placements(d, per_pass):
    """Where the slow path put the blocks at a few places of each pass (ALLOC
    lines of the patch: allocations so far, bytes, recalled, address, ...),
    as MiB above the lowest large block of the run. Fast-bin hits print no
    line."""
    at = {}
    with open(os.path.join(d, "run.log"), errors="replace") as f:
        for line in f:
            if line.startswith("ALLOC "):
                v = line.split()[1:]
                n, size, ptr = int(v[0]), int(v[1]), int(v[3], 16)
                if size >= 1 << 20:
                    at[((n - 1) // per_pass, (n - 1) % per_pass + 1)] = (size, ptr)
    low = min(p for _, p in at.values())
    picks = [15, 17, 19, 11397, 11398, 11403, 11413, 11928, 12453]
    md = ["", "Where `base` put a few blocks of torch_transformer_sweep, pass by pass (MiB above the lowest large "
          "block of a 4-pass run; the same allocation of the trace each column; `-` a fast-bin hit, which prints "
          "no line). The first three are parameters or optimizer state (alive to the end of the pass), the rest the "
          "allocations that grow in every steady pass (table above).", "",
          "| pass | " + " | ".join(f"allocation {i} ({at.get((0, i), (0, 0))[0] / 2**20:.2f} MiB)" for i in picks) + " |",
          "|---|" + "---|" * len(picks)]
    for p in range(4):
        cells = [f"{(at[(p, i)][1] - low) / 2**20:.0f}" if (p, i) in at else "-" for i in picks]
        md.append(f"| {p + 1} | " + " | ".join(cells) + " |")
    return md


def main(out_dir, md_path, csv_path):
    rows, md = [], []
    md.append("| configuration | trace | reserved/requested, 1 pass | 100 passes | upstream calls a pass "
              "after the first | driver calls, 100 passes | growths a pass, passes 2-25 / 26-50 / 51-75 / 76-100 |")
    md.append("|---|---|---|---|---|---|---|")
    configs = sorted((c for c in os.listdir(out_dir) if c != "placements"), key=lambda c: (c != "base", c))
    for c in configs:
        for t in TRACES:
            d1, d100 = (os.path.join(out_dir, c, f"{t}-{p}") for p in (1, 100))
            if not os.path.isdir(d100):
                continue
            m1, m100 = metrics(d1), metrics(d100)
            calls1 = m1["upstream_allocs"] + m1["upstream_frees"]
            calls100 = m100["upstream_allocs"] + m100["upstream_frees"]
            per = int(m1["trace_allocs"])
            g = growths(d100, per)
            counts = [sum(1 for x in g if lo <= x[0] < hi) / (hi - lo) for lo, hi in
                      ((1, 25), (25, 50), (50, 75), (75, 100))]
            r = {"configuration": c, "trace": t,
                 "ratio_1": m1["peak_reserved_bytes"] / m1["peak_requested_bytes"],
                 "ratio_100": m100["peak_reserved_bytes"] / m100["peak_requested_bytes"],
                 "calls_per_pass": (calls100 - calls1) / 99, "driver_calls_100": m100["driver_calls"],
                 "growths": " / ".join(f"{x:.1f}" for x in counts)}
            rows.append(r)
            md.append(f"| {c} | {t} | {r['ratio_1']:.4f} | {r['ratio_100']:.4f} | {r['calls_per_pass']:.1f} | "
                      f"{r['driver_calls_100']:.0f} | {r['growths']} |")
    base = os.path.join(out_dir, "base", "torch_transformer_sweep-100")
    per = int(metrics(os.path.join(out_dir, "base", "torch_transformer_sweep-1"))["trace_allocs"])
    md.append("")
    md.append("Every growth of `base` on torch_transformer_sweep in pass 50 (of 100): the allocation's place "
              "in the pass, its size, the pages it mapped, the pages held after it and the budget "
              "(pages; held above the budget means the budget found too few whole cached handles).")
    md.append("")
    md.append("| allocation in the pass | MiB | pages mapped | pages held after | budget | peak pages needed |")
    md.append("|---|---|---|---|---|---|")
    for x in growths(base, per):
        if x[0] == 49:
            md.append(f"| {x[1] + 1} | {x[2] / 2**20:.2f} | {x[3]} | {x[4]} | {x[5]} | {x[7]} |")
    md += placements(os.path.join(out_dir, "placements", "torch_transformer_sweep-4"), per)
    with open(md_path, "w") as f:
        f.write("\n".join(md) + "\n")
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: summarize.py OUT experiments.md experiments.csv")
    main(*sys.argv[1:])
