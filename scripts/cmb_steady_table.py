#!/usr/bin/env python3
"""cmb_steady_table.py REPLAY_CSV [CHURN_CSV] - the tables of
scripts/gpu-cmb-steady.sh: per sample trace and allocator, at passes=1 and
passes=100, reserved/requested (peaks), the smallest device (sim), upstream
calls (upstream_allocs + upstream_frees), driver calls (driver_calls), and
the calls each pass after the first costs ((passes=100 - passes=1) / 99);
then churn's checkerboard capacity_ratio. Medians over repetitions."""
import csv
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import cmb_schema  # noqa: E402


def param(params, key):
    for kv in params.split(";"):
        k, _, v = kv.partition("=")
        if k == key:
            return v
    return ""


def load(path):
    cells, failed = defaultdict(lambda: defaultdict(list)), []
    for r in csv.DictReader(open(path, newline="")):
        if r["status"] not in ("ok", "oom"):
            failed.append(f"{cmb_schema.label(r)} {r['params']}: {r['status']} {r['error']}")
            continue
        try:
            cells[(cmb_schema.label(r), r["params"])][r["metric"]].append(float(r["value"]))
        except ValueError:
            pass
    return cells, sorted(set(failed))


def med(cell, m):
    v = cell.get(m)
    return statistics.median(v) if v else None


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: cmb_steady_table.py REPLAY_CSV [CHURN_CSV]")
    cells, failed = load(sys.argv[1])
    rows = defaultdict(dict)  # (trace, label) -> passes -> cell
    for (label, params), cell in cells.items():
        rows[(os.path.basename(param(params, "trace")), label)][param(params, "passes")] = cell
    print("| trace | allocator | reserved/requested, 1 pass | 100 passes | smallest device MiB, 1 pass | 100 passes "
          "| upstream calls, 1 pass | 100 passes | per pass after the first | driver calls, 1 pass | 100 passes "
          "| per pass after the first |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    f = lambda x, s: "—" if x is None else format(x, s)  # noqa: E731
    for (trace, label) in sorted(rows):
        by = rows[(trace, label)]
        one, hun = by.get("1", {}), by.get("100", {})
        ratio = lambda c: (med(c, "peak_reserved_bytes") / med(c, "peak_requested_bytes")  # noqa: E731
                           if med(c, "peak_reserved_bytes") and med(c, "peak_requested_bytes") else None)
        calls = lambda c: (med(c, "upstream_allocs") + med(c, "upstream_frees")  # noqa: E731
                           if med(c, "upstream_allocs") is not None and med(c, "upstream_frees") is not None else None)
        mib = lambda c: None if med(c, "min_capacity_bytes") is None else med(c, "min_capacity_bytes") / 2**20  # noqa
        per = lambda a, b: None if a is None or b is None else (b - a) / 99  # noqa: E731
        print(f"| {trace} | {label} | {f(ratio(one), '.4f')} | {f(ratio(hun), '.4f')} | {f(mib(one), '.0f')} "
              f"| {f(mib(hun), '.0f')} | {f(calls(one), '.0f')} | {f(calls(hun), '.0f')} "
              f"| {f(per(calls(one), calls(hun)), '.1f')} | {f(med(one, 'driver_calls'), '.0f')} "
              f"| {f(med(hun, 'driver_calls'), '.0f')} | {f(per(med(one, 'driver_calls'), med(hun, 'driver_calls')), '.1f')} |")
    if len(sys.argv) == 3 and os.path.exists(sys.argv[2]):
        churn, cfailed = load(sys.argv[2])
        failed += cfailed
        print("\n| churn (quick preset) | case | capacity_ratio after the checkerboard | churn peak reserved / requested |")
        print("|---|---|---|---|")
        for (label, params), cell in sorted(churn.items()):
            r, q = med(cell, "churn_peak_reserved_bytes"), med(cell, "churn_peak_requested_bytes")
            print(f"| {label} | max_size={param(params, 'max_size')} | {f(med(cell, 'capacity_ratio'), '.4f')} | {f(r / q if r and q else None, '.4f')} |")
    for line in failed:
        print(f"\nfailed: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
