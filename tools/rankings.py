#!/usr/bin/env python3
"""Ranking of the allocators per scenario, as Markdown, from committed runs.

usage: rankings.py [RUN_DIR ...] [--full] [--where k=v ...]

RUN_DIR defaults to the full runs, results/nvidia-h200/full and results/nvidia-h100/full.
Reads RUN_DIR/results.csv(.gz) and the context block of results.json(.gz);
writes nothing. For each run and scenario it prints the best allocator for

  time     time_s, the scenario's measured region, on a GPU and among REAL
           allocators only (cuda, cuda-async*, managed, cub*, real:*): an
           emulation's time (torch-caching, rmm-pool, bfc, cupy, ...) and that
           of the suite's own policies (buddy, cmb) is their policy's
           bookkeeping, not the original library's cost, and is shown
           in its own column, labelled so, never ranked against real ones;
  peak     peak_reserved_bytes, what the allocator held from its upstream;
  frag     frag_ratio = 1 - peak_requested / peak_reserved (lower is better);
  trade-off  the real allocator whose worst rank over the three is best
           (ties: the smaller sum of the three ranks, then the faster); in a
           sim run, where times are host bookkeeping, over peak and frag only,
           among every allocator.

Per case (one parameter set of the scenario) the value of a metric is the
median over the repetitions that finished (status ok: a repetition that did
not fit, status oom, is left out). Over the cases of a scenario, time and
peak are scored as in the HTML report (plots/cmb_report/analysis.py): the
geometric mean of value / best value of that case (1.00 = best in every
case), the best among the allocators compared; frag_ratio as the mean over
the cases. Ranks are competition ranks (1 + the number of allocators with a
strictly better score; equal scores share a rank). Only cases that every
allocator of the scenario finished are used, so that every allocator is
scored on the same cases; the others are named below the table. An
allocator missing a metric in a used case is not ranked on that metric and
not eligible for the trade-off. Whether an allocator is real comes from the
impl column of results.csv, else from allocators/registry.c
(plots/cmb_report/impl.py).

--full also prints every allocator's scores and ranks per scenario.
--where k=v keeps only cases whose parameter k is v (repeatable).
"""
import argparse
import math
import os
import statistics
import sys
from collections import OrderedDict, defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plots"))
from cmb_report import impl as I  # noqa: E402  (real, emulation or suite)
from cmb_report.results import existing  # noqa: E402  (reads .gz runs too)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmb_schema  # noqa: E402  (harness/schema.def; results.json as the results store reads it)

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
    if existing(os.path.join(run, "results.json")):
        ctx = cmb_schema.read_context(run)
    vals = defaultdict(list)  # (scenario, params, allocator, metric) -> values
    order = OrderedDict()
    impls = {}
    for row in cmb_schema.read_rows(csv_path):  # the rows by column, through harness/schema.def
        if row["status"] != "ok":
            continue
        impls.setdefault(row["allocator"], I.impl_of(row["allocator"] + (":" + row["options"]
                                                                         if row.get("options") else ""),
                                                      row.get("impl") or ""))
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
    return ctx, data, list(order), impls


def param_dict(params):
    return dict(kv.split("=", 1) for kv in params.split(";") if "=" in kv)


def same(a, b):
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b), 1e-300)


def rank_scenario(cases, metrics=METRICS, compared=None):
    """cases: {params: {allocator: {metric: median}}} (complete cases only).
    Returns {allocator: {metric: (score, rank) or None}}, allocator order.
    compared: {metric: allocators scored on it} (default: all)."""
    allocs = list(OrderedDict.fromkeys(a for c in cases.values() for a in c))
    out = {a: {} for a in allocs}
    for m in metrics:
        among = [a for a in allocs if compared is None or a in compared.get(m, allocs)]
        cases_m = {p: {a: r for a, r in c.items() if a in among} for p, c in cases.items()}
        scores = {}
        for a in among:
            if any(m not in cases_m[p][a] for p in cases_m):
                continue
            if m == "frag_ratio":
                scores[a] = sum(cases_m[p][a][m] for p in cases_m) / len(cases_m)
                continue
            logs = []
            for p in cases_m:
                best = min(cases_m[p][b][m] for b in cases_m[p] if m in cases_m[p][b])
                v = cases_m[p][a][m]
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


def tradeoff(ranks, allocs, metrics):
    elig = [a for a in allocs if all(ranks[a].get(m) and ranks[a][m][1] for m in metrics)]
    if not elig:
        return None, []

    def key(a):
        r = [ranks[a][m][1] for m in metrics]
        return (max(r), sum(r), ranks[a]["time_s"][0] if "time_s" in metrics else 0)

    elig.sort(key=key)
    k0 = key(elig[0])[:2]
    tied = [a for a in elig if key(a)[:2] == k0]
    return elig[0], tied


def header(run, ctx, gpu):
    rev = (ctx.get("cumembench_revision") or "?")[:7]
    print(f"### {ctx.get('gpu_name', ctx.get('mode', '?'))}: `{run}`\n")
    time_words = ("time among real allocators only; an emulation's or suite policy's time is its policy "
                  "bookkeeping, not the original's cost, shown apart and not ranked" if gpu else
                  "sim mode: times are host bookkeeping, not ranked")
    print(f"Driver {ctx.get('driver_version', 'n/a')}, CUDA runtime {ctx.get('cuda_runtime', 'n/a')}, "
          f"{ctx.get('mode', '?')} mode, preset {ctx.get('preset', '?')}, cumembench {rev}. "
          f"Medians over the repetitions; time and peak as the geometric mean of value / best of "
          f"the case (1.00x = best in every case), frag_ratio as the mean over the cases; {time_words}.\n")
    if gpu:
        print("| scenario | cases | allocators ranked | fastest real allocator | fastest emulation: policy bookkeeping "
              "(not the original's cost) | smallest peak reserved | lowest frag_ratio | best trade-off, real allocators "
              "(worst rank of 3) |")
        print("|---|---|---|---|---|---|---|---|")
    else:
        print("| scenario | cases | allocators ranked | smallest peak reserved | lowest frag_ratio "
              "| best trade-off (worst rank of 2) |")
        print("|---|---|---|---|---|---|")


def complete_cases(scen, cases, notes):
    """The cases every allocator finished, less the allocators that served less."""
    allocs_all = list(OrderedDict.fromkeys(al for c in cases.values() for al in c))
    complete = {p: c for p, c in cases.items() if all(al in c for al in allocs_all)}
    for p in cases:
        if p not in complete:
            notes.append(f"{scen}: case `{p}` left out, {len(cases[p])} of {len(allocs_all)} allocators finished it")
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
    return complete, allocs_all


def time_cells(ranks, allocs, real):
    """The fastest real allocator (and the slowest), the fastest emulation."""
    def best(group):
        top = [a for a in group if ranks[a].get("time_s")]
        if not top:
            return "n/a", None
        lo = min(ranks[a]["time_s"][0] for a in top)
        win = [a for a in top if same(ranks[a]["time_s"][0], lo)]
        return " = ".join(win) + f" ({lo:.2f}x)", max(top, key=lambda a: ranks[a]["time_s"][0])

    cell, slow = best([a for a in allocs if a in real])
    if slow and ranks[slow]["time_s"][0] > 1.0:
        cell += f"; slowest {slow} {ranks[slow]['time_s'][0]:.2f}x"
    emul, _ = best([a for a in allocs if a not in real])
    return [cell, emul]


def scenario_row(scen, complete, impls, gpu, notes, details, full):
    allocs = list(OrderedDict.fromkeys(al for c in complete.values() for al in c))
    real = {a for a in allocs if impls.get(a) == "real"}
    if gpu:
        # time: real allocators scored among themselves, the others among themselves (never mixed)
        ranks, _ = rank_scenario(complete, METRICS, {"time_s": real, "peak_reserved_bytes": allocs,
                                                     "frag_ratio": allocs})
        emul = rank_scenario({p: {a: r for a, r in c.items() if a not in real} for p, c in complete.items()},
                             ("time_s",))[0]
        for a in allocs:
            if a not in real:
                ranks[a]["time_s"] = (emul[a]["time_s"][0], None) if emul.get(a, {}).get("time_s") else None
        metrics = METRICS
        real_ranks, _ = rank_scenario({p: {a: r for a, r in c.items() if a in real} for p, c in complete.items()})
        best, tied = tradeoff(real_ranks, [a for a in allocs if a in real], METRICS)
        t_ranks = real_ranks
    else:
        metrics = METRICS[1:]
        ranks, _ = rank_scenario(complete, metrics)
        best, tied = tradeoff(ranks, allocs, metrics)
        t_ranks = ranks
    t_cell = " = ".join(tied) + f" ({max(t_ranks[best][m][1] for m in metrics)})" if best else "n/a"
    cells = (time_cells(ranks, allocs, real) if gpu else []) + [best_cell(ranks, allocs, m) for m in METRICS[1:]]
    print(f"| {scen} | {len(complete)} | {len(allocs)} | " + " | ".join(cells) + f" | {t_cell} |")
    for al in allocs:
        for m in metrics:
            if ranks[al][m] is None and not (m == "time_s" and al not in real):
                notes.append(f"{scen}: {al} has no {m} in every case, not ranked on it")
    if full:
        details.append((scen, ranks, allocs, metrics, real))


def print_details(details):
    for scen, ranks, allocs, metrics, real in details:
        print(f"#### {scen}\n")
        heads = {"time_s": "time score (rank; emulations: bookkeeping, no rank)", "peak_reserved_bytes":
                 "peak score (rank)", "frag_ratio": "frag_ratio (rank)"}
        print("| allocator | impl | " + " | ".join(heads[m] for m in metrics) + " | worst rank |")
        print("|---|---|" + "---|" * len(metrics) + "---|")

        def worst(al):
            r = [ranks[al][m][1] for m in metrics if ranks[al][m] and ranks[al][m][1]]
            return max(r) if r else None

        def cell(al, m):
            v = ranks[al][m]
            if not v:
                return "n/a"
            return f"{fmt_score(m, v[0])} ({v[1]})" if v[1] else f"{fmt_score(m, v[0])} (bookkeeping)"

        for al in sorted(allocs, key=lambda x: (worst(x) is None, worst(x) or 0, x)):
            w = worst(al)
            print(f"| {al} | {'real' if al in real else 'emulation/suite'} | "
                  + " | ".join(cell(al, m) for m in metrics) + f" | {w if w is not None else 'n/a'} |")
        print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", default=DEFAULT_RUNS)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--where", action="append", default=[])
    a = ap.parse_args()
    where = dict(w.split("=", 1) for w in a.where)
    for run in a.runs:
        ctx, data, order, impls = load(run)
        gpu = ctx.get("mode") != "sim"
        header(run, ctx, gpu)
        notes, details = [], []
        for scen in order:
            cases = {p: c for p, c in data[scen].items()
                     if all(param_dict(p).get(k) == v for k, v in where.items())}
            if not cases:
                continue
            complete, allocs_all = complete_cases(scen, cases, notes)
            if not complete:
                print(f"| {scen} | 0 of {len(cases)} | {len(allocs_all)} | " + " | ".join(["n/a"] * (5 if gpu else 3))
                      + " |")
                continue
            scenario_row(scen, complete, impls, gpu, notes, details, a.full)
        if notes:
            print()
            for n in notes:
                print(f"- {n}")
        print()
        print_details(details)


if __name__ == "__main__":
    main()
