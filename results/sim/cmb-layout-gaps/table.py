#!/usr/bin/env python3
"""table.py OUT - the experiment's table: for each variant of the layout's
fallback (CMB_LAY_EXPERIMENT under the patch) and each program replayed under
the layout of its other recorded run, reserved/requested, the smallest device
(sim) and upstream calls after one pass and after 100 (medians over
repetitions; one here). OUT holds VARIANT-PROGRAM-PASSES/results.csv."""
import csv
import glob
import os
import re
import sys
from collections import defaultdict


def cells(path):
    c = defaultdict(dict)
    for r in csv.DictReader(open(path, newline="")):
        if r["status"] != "ok":
            continue
        passes = next(kv.split("=")[1] for kv in r["params"].split(";") if kv.startswith("passes="))
        try:
            c[passes][r["metric"]] = float(r["value"])
        except ValueError:
            pass
    return c


def fmt(c, what):
    if not c:
        return "—"
    if what == "ratio":
        return f"{c['peak_reserved_bytes'] / c['peak_requested_bytes']:.4f}"
    if what == "mib":
        return f"{c['min_capacity_bytes'] / 2**20:.0f}" if "min_capacity_bytes" in c else "—"
    return f"{c['upstream_allocs'] + c['upstream_frees']:.0f}"


out = sys.argv[1]
rows = defaultdict(dict)
for d in glob.glob(os.path.join(out, "*-*-*/results.csv")):
    variant, program = re.match(r"(.+)-(gpt|mlp|moe|resnet|unet)-", os.path.basename(os.path.dirname(d))).groups()
    for passes, c in cells(d).items():
        rows[(program, variant)][passes] = c
order = ["gaps", "nearest", "nearest-heaps", "giveup"]
print("| program | variant | reserved/requested, 1 pass | 100 passes | smallest device MiB, 1 pass | 100 passes "
      "| upstream calls, 1 pass | 100 passes |")
print("|---|---|---|---|---|---|---|---|")
for (program, variant) in sorted(rows, key=lambda k: (k[0], order.index(k[1]))):
    r = rows[(program, variant)]
    one, hundred = r.get("1", {}), r.get("100", {})
    print(f"| {program} | {variant} | {fmt(one, 'ratio')} | {fmt(hundred, 'ratio')} | {fmt(one, 'mib')} "
          f"| {fmt(hundred, 'mib')} | {fmt(one, 'calls')} | {fmt(hundred, 'calls')} |")
