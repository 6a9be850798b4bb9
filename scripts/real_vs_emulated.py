#!/usr/bin/env python3
"""real_vs_emulated.py - each emulation beside its real original, as Markdown.

    scripts/real_vs_emulated.py RUN [RUN...] [-o OUT.md]

RUN is a results directory (holding results.csv) or a .tar.gz of one, as
scripts/gpu-real-vs-emulated.sh writes them. Every allocator `real:X` found in
the runs is paired with the emulation `X` of the same run, and one table per
pair lists each case both ran (scenario and parameters):

  peak reserved   peak_reserved_bytes of each, and (real - emulation) / real
  upstream allocs upstream_allocs of each (calls that took memory from CUDA)
  p50             fastpath: the time of one alloc+free pair (Google Benchmark's
                  time per iteration); other scenarios: alloc_p50_ns +
                  free_p50_ns, the median single allocation plus the median
                  single free
  real / emul.    the ratio of the two p50s: how much more the original costs
                  than the emulation's bookkeeping

Each number is the median over the case's repetitions. A case that one side
did not run shows that side's status and reason. Columns are read by name
(allocator, scenario, params, status, metric, value, error), so files with
more columns (impl, options) read the same; the allocator's name is taken up
to its first option (`real:rmm-pool:initial_pool_size=1GiB` pairs with
`rmm-pool:initial_pool_size=1GiB`, options and all).
"""
import argparse
import csv
import gzip
import io
import os
import statistics
import sys
import tarfile

REAL = "real:"


def open_csvs(run):
    """The text of every results.csv in a directory or a .tar.gz."""
    if os.path.isdir(run):
        path = os.path.join(run, "results.csv")
        if os.path.exists(path):
            with open(path, newline="") as f:
                return [f.read()]
        if os.path.exists(path + ".gz"):  # a committed run, compressed
            with gzip.open(path + ".gz", "rt", newline="") as f:
                return [f.read()]
        raise SystemExit(f"real_vs_emulated: {run} has no results.csv")
    if tarfile.is_tarfile(run):
        out = []
        with tarfile.open(run) as t:
            for m in t.getmembers():
                if m.isfile() and os.path.basename(m.name) == "results.csv":
                    out.append(t.extractfile(m).read().decode())
        if not out:
            raise SystemExit(f"real_vs_emulated: {run} holds no results.csv")
        return out
    raise SystemExit(f"real_vs_emulated: {run} is neither a results directory nor a .tar.gz of one")


class Case:
    def __init__(self):
        self.values = {}  # metric -> [value per repetition]
        self.status = "ok"
        self.reason = ""


def read_runs(runs):
    """{(scenario, params, allocator): Case}, in the order the cases ran"""
    cases = {}
    for run in runs:
        for text in open_csvs(run):
            for row in csv.DictReader(io.StringIO(text)):
                label = row["allocator"] + (":" + row["options"] if row.get("options") else "")
                key = (row["scenario"], row["params"], label)
                c = cases.setdefault(key, Case())
                if row["status"] != "ok":
                    c.status, c.reason = row["status"], row.get("error", "")
                if row.get("metric") and row.get("value") not in (None, ""):
                    try:
                        c.values.setdefault(row["metric"], []).append(float(row["value"]))
                    except ValueError:
                        pass
    return cases


def median(case, metric):
    v = case.values.get(metric) if case else None
    return statistics.median(v) if v else None


def p50_series(scenario, case):
    """The p50 of each repetition in ns ([] when none)."""
    if case is None:
        return []
    if scenario == "fastpath":
        return [t * 1e9 for t in case.values.get("time_s", [])]
    a, f = case.values.get("alloc_p50_ns", []), case.values.get("free_p50_ns", [])
    return [x + y for x, y in zip(a, f)]


def p50_ns(scenario, case):
    v = p50_series(scenario, case)
    return statistics.median(v) if v else None


def spread(scenario, case):
    """'median (min-max)' of the case's p50s, '-' when none."""
    v = p50_series(scenario, case)
    if not v:
        return "-"
    if len(v) == 1:
        return num(v[0])
    return f"{num(statistics.median(v))} ({num(min(v))}–{num(max(v))})"


def size(v):
    if v is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= scale:
            return f"{int(v):,} ({v / scale:.2f} {unit})"
    return f"{int(v):,}"


def num(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def side(case):
    """'' when the case ran, else its status and reason."""
    if case is None:
        return "not run"
    if case.status != "ok" or not case.values:
        reason = case.reason.split(";")[0].split(" (")[0][:100]
        return f"{case.status}: {reason}" if reason else case.status
    return ""


def pair_rows(cases, emul, real):
    keys = list(dict.fromkeys((s, p) for (s, p, a) in cases if a in (emul, real)))
    rows = []
    for scenario, params in keys:
        e, r = cases.get((scenario, params, emul)), cases.get((scenario, params, real))
        pe, pr = median(e, "peak_reserved_bytes"), median(r, "peak_reserved_bytes")
        diff = f"{(pr - pe) / pr * 100:+.1f}%" if pe is not None and pr else "-"
        te, tr = p50_ns(scenario, e), p50_ns(scenario, r)
        ratio = f"{tr / te:.1f}x" if te and tr is not None else "-"
        note = "; ".join(f"{who}: {s}" for who, s in (("emulation", side(e)), ("real", side(r))) if s)
        rows.append([f"{scenario} {params}".strip(), size(pe), size(pr), diff,
                     num(median(e, "upstream_allocs")), num(median(r, "upstream_allocs")),
                     spread(scenario, e), spread(scenario, r), ratio, note])
    return rows


HEADER = ["case", "peak reserved, emulation (B)", "peak reserved, real (B)", "difference",
          "upstream allocs, emulation", "upstream allocs, real", "p50 emulation, ns: median (min–max)", "p50 real, ns: median (min–max)",
          "real / emulation", "not run"]


def table(rows):
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    out += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(out)


def render(cases):
    reals = sorted({a for (_, _, a) in cases if a.startswith(REAL)})
    if not reals:
        return None
    counts = sorted({len(p50_series(s, c)) for (s, _, _), c in cases.items() if p50_series(s, c)})
    reps = "-".join(str(n) for n in (counts[0], counts[-1]) if n) if counts else "0"
    if counts and counts[0] == counts[-1]:
        reps = str(counts[0])
    parts = [f"p50: fastpath, one alloc+free pair (time per iteration); churn and replay, the median allocation "
             f"plus the median free. Difference: (real - emulation) / real. Median (min–max) over {reps} "
             "repetitions per case. An emulation's time is its policy's bookkeeping, not what the original "
             "costs: the original adds its locks, device queries, events, statistics and (CuPy) the Python "
             "call, and is usually slower, but a ratio below 1.0x is the original being faster. Upstream "
             "allocs count what each side calls one: PyTorch's expandable segments count mapped ranges, "
             "their emulation 2 MiB pages (docs/real.md)."]
    for real in reals:
        emul = real[len(REAL):]
        parts.append(f"\n### {emul} beside {real}\n\n" + table(pair_rows(cases, emul, real)))
    baseline = null_call_rows(cases)
    if baseline:
        parts.append("\n### real:cupy's CPython call alone (real:cupy:null_call=true)\n\n" + baseline)
    return "\n".join(parts) + "\n"


NULL_CALL = ":null_call=true"


def null_call_rows(cases):
    """real:cupy beside real:cupy:null_call=true (the same CPython call into
    the pool, memory from a free list in C): what the call alone costs."""
    real, null = REAL + "cupy", REAL + "cupy" + NULL_CALL
    keys = list(dict.fromkeys((s, p) for (s, p, a) in cases if a == null))
    if not keys:
        return None
    out = ["| case | p50 real:cupy, ns: median (min–max) | p50 null call, ns: median (min–max) | null call / real |",
           "|---|---|---|---|"]
    for scenario, params in keys:
        r, n = cases.get((scenario, params, real)), cases.get((scenario, params, null))
        tr, tn = p50_ns(scenario, r), p50_ns(scenario, n)
        share = f"{tn / tr:.2f}" if tr and tn is not None else "-"
        out.append(f"| {scenario} {params} | {spread(scenario, r)} | {spread(scenario, n)} | {share} |")
    return "\n".join(out) + "\n"


def summary(cases):
    """One row per pair: how far apart the peaks are over every case both ran,
    the fastpath p50s (emulation -> real) by size, the ratio's range, and the
    repetitions behind each median."""
    reals = sorted({a for (_, _, a) in cases if a.startswith(REAL) and NULL_CALL not in a})
    if not reals:
        return None
    out = ["| pair | cases | peak reserved, (real - emulation) / real: largest | fastpath p50 ns, emulation → real, "
           "by size | real / emulation, all cases | repetitions |", "|---|---|---|---|---|---|"]
    for real in reals:
        emul = real[len(REAL):]
        keys = list(dict.fromkeys((s, p) for (s, p, a) in cases if a in (emul, real)))
        diffs, fe, fr, ratios, reps = [], [], [], [], set()
        for scenario, params in keys:
            e, r = cases.get((scenario, params, emul)), cases.get((scenario, params, real))
            pe, pr = median(e, "peak_reserved_bytes"), median(r, "peak_reserved_bytes")
            if pe is not None and pr:
                diffs.append((pr - pe) / pr * 100)
            te, tr = p50_ns(scenario, e), p50_ns(scenario, r)
            if te and tr is not None:
                ratios.append(tr / te)
            reps.update(len(p50_series(scenario, c)) for c in (e, r) if p50_series(scenario, c))
            if scenario == "fastpath" and te is not None and tr is not None:
                fe.append(num(te))
                fr.append(num(tr))
        worst = max(diffs, key=abs) if diffs else None
        peak = "-" if worst is None else ("identical" if worst == 0 else f"{worst:+.3f}%")
        fast = " / ".join(fe) + " → " + " / ".join(fr) if fe else "-"
        ratio = f"{min(ratios):.1f}–{max(ratios):.1f}x" if ratios else "-"
        out.append(f"| `{emul}` / `{real}` | {len(diffs)} | {peak} | {fast} | {ratio} | "
                   f"{'-'.join(str(n) for n in sorted(reps)) or '-'} |")
    baseline = null_call_rows(cases)
    return "\n".join(out) + "\n" + ("\nreal:cupy's CPython call alone (`real:cupy:null_call=true`):\n\n" + baseline
                                   if baseline else "")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="results directories or .tar.gz of them")
    ap.add_argument("-o", "--out", help="write the Markdown here (default: standard output)")
    ap.add_argument("--summary", action="store_true", help="one row per pair (docs/real.md's table)")
    args = ap.parse_args(argv)
    cases = read_runs(args.runs)
    text = summary(cases) if args.summary else render(cases)
    if text is None:
        print("real_vs_emulated: no real:* allocator in these runs", file=sys.stderr)
        return 1
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
