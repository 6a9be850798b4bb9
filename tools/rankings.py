#!/usr/bin/env python3
"""Ranking of the allocators per scenario, as Markdown, from committed runs.

usage: rankings.py [RUN_DIR ...] [--full] [--where k=v ...]

RUN_DIR defaults to the full runs, results/nvidia-h200/full and results/nvidia-h100/full.
Reads RUN_DIR/results.csv(.gz) and the context block of results.json(.gz);
writes nothing. For each run and scenario it prints the best allocator for

  time     time_s, the scenario's measured region;
  peak     peak_reserved_bytes, what the allocator held from its upstream;
  frag     frag_ratio = 1 - peak_requested / peak_reserved (lower is better);
  trade-off  the allocator whose worst rank over the three is best (ties:
           the smaller sum of the three ranks, then the faster).

Per case (one parameter set of the scenario) the value of a metric is the
median over the repetitions. Over the cases of a scenario, time and peak are
scored as in the HTML report (plots/cmb_report/analysis.py): the geometric
mean of value / best value of that case (1.00 = best in every case);
frag_ratio as the mean over the cases. Ranks are competition ranks (1 + the
number of allocators with a strictly better score; equal scores share a
rank). Only cases that every allocator of the scenario finished are used,
so that every allocator is scored on the same cases; the others are named
below the table. An allocator missing a metric in a used case is not ranked
on that metric and not eligible for the trade-off.

--full also prints every allocator's scores and ranks per scenario.
--where k=v keeps only cases whose parameter k is v (repeatable).
"""
import argparse
import csv
import json
import math
import os
import statistics
import sys
from collections import OrderedDict, defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plots"))
from cmb_report.results import existing, open_text  # noqa: E402  (reads .gz runs too)

DEFAULT_RUNS = ["results/nvidia-h200/full", "results/nvidia-h100/full"]
METRICS = ("time_s", "peak_reserved_bytes", "frag_ratio")
LABEL = {"time_s": "time", "peak_reserved_bytes": "peak reserved", "frag_ratio": "frag_ratio"}
REL_TOL = 1e-9
SERVED_TOL = 1e-3  # peak_requested this far below the case's highest: served less




def load(run):
    """(context, {scenario: {params: {allocator: {metric: median}}}}, scenario order)."""
    csv_path = existing(os.path.join(run, "results.csv"))
    if not csv_path:
        sys.exit(f"rankings.py: {run}: no results.csv or results.csv.gz")
    ctx = {}
    json_path = existing(os.path.join(run, "results.json"))
    if json_path:
        with open_text(json_path) as f:
            ctx = json.load(f).get("context", {})
    vals = defaultdict(list)  # (scenario, params, allocator, metric) -> values
    order = OrderedDict()
    with open_text(csv_path) as f:
        for row in csv.DictReader(f):
            if row["status"] != "ok":
                continue
            try:
                int(row["repetition"])  # aggregates (mean, median, ...) are left out
                v = float(row["value"])
            except ValueError:
                continue
            order.setdefault(row["scenario"], None)
            vals[(row["scenario"], row["params"], row["allocator"], row["metric"])].append(v)
    data = defaultdict(lambda: defaultdict(dict))
    for (scen, params, alloc, metric), v in vals.items():
        data[scen][params].setdefault(alloc, {})[metric] = statistics.median(v)
    return ctx, data, list(order)


def param_dict(params):
    return dict(kv.split("=", 1) for kv in params.split(";") if "=" in kv)


def same(a, b):
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b), 1e-300)


def rank_scenario(cases):
    """cases: {params: {allocator: {metric: median}}} (complete cases only).
    Returns {allocator: {metric: (score, rank) or None}}, allocator order."""
    allocs = list(OrderedDict.fromkeys(a for c in cases.values() for a in c))
    out = {a: {} for a in allocs}
    for m in METRICS:
        scores = {}
        for a in allocs:
            if any(m not in cases[p][a] for p in cases):
                continue
            if m == "frag_ratio":
                scores[a] = sum(cases[p][a][m] for p in cases) / len(cases)
                continue
            logs = []
            for p in cases:
                best = min(cases[p][b][m] for b in cases[p] if m in cases[p][b])
                v = cases[p][a][m]
                if best > 0:
                    logs.append(math.log(v / best))
                elif v == 0:
                    logs.append(0.0)  # best is 0 and so is this one
                else:
                    logs = None
                    break
            if logs is not None and logs:
                scores[a] = math.exp(sum(logs) / len(logs))
        for a in allocs:
            if a not in scores:
                out[a][m] = None
                continue
            better = sum(1 for b in scores if scores[b] < scores[a] and not same(scores[b], scores[a]))
            out[a][m] = (scores[a], 1 + better)
    return out, allocs


def fmt_score(m, s):
    if m == "frag_ratio":
        return f"{s:.3f}"
    return f"{s:.2f}x"


def best_cell(ranks, allocs, m):
    top = [a for a in allocs if ranks[a].get(m) and ranks[a][m][1] == 1]
    if not top:
        return "n/a"
    return " = ".join(top) + f" ({fmt_score(m, ranks[top[0]][m][0])})"


def tradeoff(ranks, allocs):
    elig = [a for a in allocs if all(ranks[a].get(m) for m in METRICS)]
    if not elig:
        return None, []

    def key(a):
        r = [ranks[a][m][1] for m in METRICS]
        return (max(r), sum(r), ranks[a]["time_s"][0])

    elig.sort(key=key)
    k0 = key(elig[0])[:2]
    tied = [a for a in elig if key(a)[:2] == k0]
    return elig[0], tied


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", default=DEFAULT_RUNS)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--where", action="append", default=[])
    a = ap.parse_args()
    where = dict(w.split("=", 1) for w in a.where)
    for run in a.runs:
        ctx, data, order = load(run)
        rev = (ctx.get("cumembench_revision") or "?")[:7]
        print(f"### {ctx.get('gpu_name', ctx.get('mode', '?'))}: `{run}`\n")
        print(f"Driver {ctx.get('driver_version', 'n/a')}, CUDA runtime {ctx.get('cuda_runtime', 'n/a')}, "
              f"{ctx.get('mode', '?')} mode, preset {ctx.get('preset', '?')}, cumembench {rev}. "
              f"Medians over the repetitions; time and peak as the geometric mean of value / best of "
              f"the case (1.00x = best in every case), frag_ratio as the mean over the cases.\n")
        print("| scenario | cases | allocators ranked | fastest | smallest peak reserved | lowest frag_ratio "
              "| best trade-off (worst rank of 3) |")
        print("|---|---|---|---|---|---|---|")
        notes, details = [], []
        for scen in order:
            cases = {p: c for p, c in data[scen].items()
                     if all(param_dict(p).get(k) == v for k, v in where.items())}
            if not cases:
                continue
            allocs_all = list(OrderedDict.fromkeys(al for c in cases.values() for al in c))
            complete = {p: c for p, c in cases.items() if all(al in c for al in allocs_all)}
            dropped = [p for p in cases if p not in complete]
            if dropped:
                for p in dropped:
                    notes.append(f"{scen}: case `{p}` left out, {len(cases[p])} of {len(allocs_all)} "
                                 f"allocators finished it")
            if not complete:
                print(f"| {scen} | 0 of {len(cases)} | {len(allocs_all)} | n/a | n/a | n/a | n/a |")
                continue
            short = []
            for p, c in complete.items():
                top = max((r.get("peak_requested_bytes", 0) for r in c.values()), default=0)
                for al, r in c.items():
                    if r.get("peak_requested_bytes", 0) < (1 - SERVED_TOL) * top and al not in short:
                        short.append(al)
            if short:
                notes.append(f"{scen}: left out of the ranking, served less than the others "
                             f"(peak_requested_bytes more than 0.1% below the case's highest): {', '.join(short)}")
                complete = {p: {al: r for al, r in c.items() if al not in short} for p, c in complete.items()}
            ranks, allocs = rank_scenario(complete)
            best, tied = tradeoff(ranks, allocs)
            if best:
                worst = max(ranks[best][m][1] for m in METRICS)
                t_cell = " = ".join(tied) + f" ({worst})"
            else:
                t_cell = "n/a"
            cells = [best_cell(ranks, allocs, m) for m in METRICS]
            slow = [al for al in allocs if ranks[al]["time_s"]]
            if slow:
                sl = max(slow, key=lambda al: ranks[al]["time_s"][0])
                cells[0] += f"; slowest {sl} {ranks[sl]['time_s'][0]:.2f}x"
            print(f"| {scen} | {len(complete)} | {len(allocs)} | " + " | ".join(cells) + f" | {t_cell} |")
            for al in allocs:
                for m in METRICS:
                    if ranks[al][m] is None:
                        notes.append(f"{scen}: {al} has no {m} in every case, not ranked on it")
            if a.full:
                details.append((scen, ranks, allocs))
        if notes:
            print()
            for n in notes:
                print(f"- {n}")
        print()
        for scen, ranks, allocs in details:
            print(f"#### {scen}\n")
            print("| allocator | time score (rank) | peak score (rank) | frag_ratio (rank) | worst rank |")
            print("|---|---|---|---|---|")

            def worst(al):
                r = [ranks[al][m][1] for m in METRICS if ranks[al][m]]
                return max(r) if len(r) == len(METRICS) else None

            for al in sorted(allocs, key=lambda x: (worst(x) is None, worst(x) or 0,
                                                    sum(ranks[x][m][1] for m in METRICS if ranks[x][m]))):
                cells = [f"{fmt_score(m, ranks[al][m][0])} ({ranks[al][m][1]})" if ranks[al][m] else "n/a"
                         for m in METRICS]
                w = worst(al)
                print(f"| {al} | " + " | ".join(cells) + f" | {w if w is not None else 'n/a'} |")
            print()


if __name__ == "__main__":
    main()
