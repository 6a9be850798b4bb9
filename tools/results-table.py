#!/usr/bin/env python3
"""Markdown tables from a cumembench run, for the README: one row per case,
the median over the repetitions of each requested metric with its spread
(min-max), and the environment line naming GPU, driver and CUDA.

usage: results-table.py RUN_DIR --scenario S [--metric M[:unit] ...]
                        [--where k=v ...] [--columns param,...] [--allocators a,b]
                        [--pivot param [--median-only]]
--pivot P: one metric, one column per value of the parameter P (a grid as
a matrix); --median-only drops the spreads (they are in the run's files).
units: ns us ms s GiB MiB x (ratio) raw; time_s is the case time.
"""
import argparse
import json
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plots"))
from cmb_report.results import existing, open_text  # noqa: E402  (reads .gz runs too)

SCALE = {"ns": (1e9, "ns"), "us": (1e6, "us"), "ms": (1e3, "ms"), "s": (1, "s"),
         "GiB": (1 / 2**30, "GiB"), "MiB": (1 / 2**20, "MiB"), "x": (1, ""), "raw": (1, "")}


def load(run):
    path = run if run.endswith((".json", ".json.gz")) else run + "/results.json"
    with open_text(existing(path) or path) as f:  # committed runs are kept compressed
        return json.load(f)


def parse_name(name):
    """scenario/allocator/key:value/...; a value may hold '/' (a trace's
    path), so a part without ':' continues the value before it."""
    parts = name.split("/")
    params, last = {}, None
    for p in parts[2:]:
        if ":" in p:
            k, v = p.split(":", 1)
            params[k] = v
            last = k
        elif last is not None:
            params[last] += "/" + p
    return parts[0], parts[1], params


def value_of(b, metric):
    if metric == "time_s":
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[b["time_unit"]]
        return b["real_time"] * unit
    return b.get(metric)


def fmt(vals, unit):
    if not vals:
        return "n/a"
    k, _ = SCALE[unit]
    med = statistics.median(vals) * k
    lo, hi = min(vals) * k, max(vals) * k
    digits = 3 if unit in ("x",) else (2 if med < 100 else 0)
    if len(vals) == 1 or abs(hi - lo) < 1e-12:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--metric", action="append", default=[])
    ap.add_argument("--where", action="append", default=[])
    ap.add_argument("--columns", default="")
    ap.add_argument("--allocators", default="")
    ap.add_argument("--pivot", default="")
    ap.add_argument("--median-only", action="store_true")
    a = ap.parse_args()
    if a.pivot and len(a.metric) != 1:
        ap.error("--pivot takes exactly one --metric")
    d = load(a.run)
    ctx = d["context"]
    where = dict(w.split("=", 1) for w in a.where)
    cols = [c for c in a.columns.split(",") if c]
    allow = [x for x in a.allocators.split(",") if x]
    rows = defaultdict(list)
    failed = {}
    n_failed = defaultdict(int)  # repetitions of a key that failed
    order = []
    for b in d["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        scen, alloc, params = parse_name(b["name"])
        if scen != a.scenario or any(params.get(k) != v for k, v in where.items()):
            continue
        if allow and alloc not in allow:
            continue
        key = (alloc,) + tuple(params.get(c, "") for c in cols)
        if key not in rows and key not in failed:
            order.append(key)
        if b.get("error_occurred"):
            failed[key] = b.get("error_message", "failed")
            n_failed[key] += 1
            continue
        rows[key].append(b)
    if allow:
        order.sort(key=lambda k: allow.index(k[0]))  # stable: run order within
    metrics = [m.split(":") if ":" in m else (m, "raw") for m in a.metric]
    partly = {k: n for k, n in n_failed.items() if rows.get(k)}
    if a.pivot:
        print_pivot(a, cols, metrics[0], rows, failed, order, ctx, partly)
        return notes(rows, failed, partly)
    head = ["allocator"] + cols + [f"{m} ({SCALE[u][1]})" if SCALE[u][1] else m for m, u in metrics]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in order:
        if key in failed and not rows.get(key):
            cells = ["FAILED: " + failed[key][:60]] + [""] * (len(metrics) - 1)
        else:
            cells = [fmt([v for v in (value_of(b, m) for b in rows[key]) if v is not None], u) for m, u in metrics]
            if key in partly:
                cells = [c + " †" for c in cells]
        print("| " + " | ".join(list(key) + cells) + " |")
    footer(ctx, rows)
    notes(rows, failed, partly)


def print_pivot(a, cols, metric, rows, failed, order, ctx, partly):
    """One row per allocator (and the other --columns), one column per value of --pivot."""
    m, u = metric
    pi = cols.index(a.pivot) + 1 if a.pivot in cols else None
    if pi is None:
        raise SystemExit("results-table.py: --pivot must also be one of --columns")
    values, lines = [], {}
    for key in order:
        v = key[pi]
        if v not in values:
            values.append(v)
        line = key[:pi] + key[pi + 1:]
        if line not in lines:
            lines[line] = {}
        if key in failed and not rows.get(key):
            lines[line][v] = "failed"
        else:
            vals = [x for x in (value_of(b, m) for b in rows[key]) if x is not None]
            lines[line][v] = fmt([statistics.median(vals)] if a.median_only and vals else vals, u)
            if key in partly:
                lines[line][v] += " †"
    head = ["allocator"] + [c for c in cols if c != a.pivot] + [f"{a.pivot}={v}" for v in values]
    print(f"{m}" + (f" ({SCALE[u][1]})" if SCALE[u][1] else ""))
    print()
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for line, cells in lines.items():
        print("| " + " | ".join(list(line) + [cells.get(v, "") for v in values]) + " |")
    footer(ctx, rows)


def notes(rows, failed, partly):
    """† marks a median over fewer repetitions: the others failed (why, below)."""
    for key, n in partly.items():
        print(f"† {'/'.join(key)}: {n} of {n + len(rows[key])} repetitions failed, the figure is over "
              f"the other {len(rows[key])}: {failed[key]}")


def footer(ctx, rows):
    reps = max((len(v) for v in rows.values()), default=0)
    print(f"\n{ctx.get('gpu_name', 'sim')}, driver {ctx.get('driver_version', 'n/a')}, "
          f"CUDA runtime {ctx.get('cuda_runtime', 'n/a')}, {ctx.get('mode')} mode, median ({'min–max' if reps > 1 else 'one run'}) "
          f"of {reps} repetitions, seed {ctx.get('seed')}, cumembench {ctx.get('cumembench_revision')}.")


if __name__ == "__main__":
    main()
