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

It reads the run's results.csv by column (tools/cmb_schema.py): one row per
allocator configuration (allocator, options, upstream), whatever its
options hold ('/' included), and results.json only for the environment.
"""
import argparse
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmb_schema  # noqa: E402  (reads .gz runs too)

SCALE = {"ns": (1e9, "ns"), "us": (1e6, "us"), "ms": (1e3, "ms"), "s": (1, "s"),
         "GiB": (1 / 2**30, "GiB"), "MiB": (1 / 2**20, "MiB"), "x": (1, ""), "raw": (1, "")}


def context(run):
    """The environment block of the run's results.json (or .json.gz)."""
    return cmb_schema.read_context(run)


def repetitions(rows):
    """{(label, params): {repetition: {metric: value}}} of the ok and oom
    rows, failures {(label, params): [error, ...]} (one per failed
    repetition or failed case), and the keys in the order the run holds
    them. Skipped cases are left out."""
    reps, failed, order = defaultdict(dict), defaultdict(list), []
    for row in rows:
        status = row["status"]
        if status == "skipped":
            continue
        key = cmb_schema.key(row)
        if key not in reps and key not in failed:
            order.append(key)
        if status == "failed":
            failed[key].append(row["error"] or "failed")
        elif status in ("ok", "oom"):
            rep = reps[key].setdefault(int(row["repetition"]), {})
            rep[row["metric"]] = float(row["value"])
            if status == "oom":
                rep["_oom"] = row["error"]
        else:
            raise SystemExit(f"results-table.py: status '{status}' unknown (expected {', '.join(cmb_schema.STATUSES)})")
    return reps, failed, order


def value_of(rep, metric):
    return rep.get(metric)


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
    ctx = context(a.run)
    where = dict(w.split("=", 1) for w in a.where)
    cols = [c for c in a.columns.split(",") if c]
    allow = [x for x in a.allocators.split(",") if x]
    try:
        rows = [r for r in cmb_schema.read_rows(a.run) if r["scenario"] == a.scenario]
    except cmb_schema.SchemaError as e:
        raise SystemExit(f"results-table.py: {e}")
    rows = [r for r in rows if all(cmb_schema.params(r).get(k) == v for k, v in where.items())
            and (not allow or cmb_schema.label(r) in allow)]
    reps, errors, by_case = repetitions(rows)
    rows, failed, n_failed, order = defaultdict(list), {}, defaultdict(int), []
    for label, params in by_case:  # one line per configuration and --columns values
        pd = dict(kv.split("=", 1) for kv in params.split(";") if "=" in kv)
        key = (label,) + tuple(pd.get(c, "") for c in cols)
        if key not in order:
            order.append(key)
        rows[key] += [reps[(label, params)][r] for r in sorted(reps[(label, params)])]
        if errors[(label, params)]:
            failed[key] = errors[(label, params)][-1]
            n_failed[key] += len(errors[(label, params)])
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
            if any("_oom" in b for b in rows[key]):
                cells = [c + " ‡" for c in cells]
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
    """† marks a median over fewer repetitions: the others failed (why, below);
    ‡ a workload that did not fit (its numbers are of a run that stopped short)."""
    for key, n in partly.items():
        print(f"† {'/'.join(key)}: {n} of {n + len(rows[key])} repetitions failed, the figure is over "
              f"the other {len(rows[key])}: {failed[key]}")
    for key, reps in rows.items():
        oom = [b["_oom"] for b in reps if "_oom" in b]
        if oom:
            print(f"‡ {'/'.join(key)}: {len(oom)} of {len(reps)} repetitions {oom[0]}")


def footer(ctx, rows):
    reps = max((len(v) for v in rows.values()), default=0)
    print(f"\n{ctx.get('gpu_name', 'sim')}, driver {ctx.get('driver_version', 'n/a')}, "
          f"CUDA runtime {ctx.get('cuda_runtime', 'n/a')}, {ctx.get('mode')} mode, median ({'min–max' if reps > 1 else 'one run'}) "
          f"of {reps} repetitions, seed {ctx.get('seed')}, cumembench {ctx.get('cumembench_revision')}.")


if __name__ == "__main__":
    main()
