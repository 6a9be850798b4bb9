#!/usr/bin/env python3
"""cmb_steady_table.py [--candidate PREFIX] REPLAY_CSV[,REPLAY_CSV...] [CHURN_CSV] - the tables of
scripts/gpu-cmb-steady.sh: per sample trace and allocator, at passes=1 and
passes=100, reserved/requested (peaks), the smallest device (sim), upstream
calls (upstream_allocs + upstream_frees), driver calls (driver_calls), and
the calls each pass after the first costs ((passes=100 - passes=1) / 99);
then churn's checkerboard capacity_ratio; then issue 26's goals for cmb,
checked on every PyTorch sample trace (torch_*) against torch-expandable.
Medians over repetitions. Several replay runs (the parts of one sweep run in
separate calls) are read as one; an allocator's upstream suffix (cmb@vmm)
counts as that allocator for the goals. --candidate checks the goals for
the allocator whose name starts with PREFIX instead of cmb (for
cmb:layout=TRACE, the layout of another run of the program where the runs
hold one, else the trace's own)."""
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


MODES = set()


def load(path):
    cells, failed = defaultdict(lambda: defaultdict(list)), []
    for r in csv.DictReader(open(path, newline="")):
        MODES.add(r.get("mode", ""))
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


def ratio(c):
    r, q = med(c, "peak_reserved_bytes"), med(c, "peak_requested_bytes")
    return r / q if r and q else None


def calls(c):
    a, f = med(c, "upstream_allocs"), med(c, "upstream_frees")
    return None if a is None or f is None else a + f


def mib(c):
    m = med(c, "min_capacity_bytes")
    return None if m is None else m / 2**20


def per(a, b):
    return None if a is None or b is None else (b - a) / 99


def row_of(rows, trace, name):
    """The row of allocator NAME on TRACE, named with or without "@upstream"; None when absent."""
    return next((rows[k] for k in sorted(rows) if k[0] == trace and k[1].split("@")[0] == name), None)


def spread(v):
    return f"{statistics.median(v):.4f} [{min(v):.4f}–{max(v):.4f}]" if v else "—"


def times(rows):
    """The replay's time_s per trace, allocator and passes: median [min-max]
    over repetitions, and each allocator's median against torch-expandable's.
    On a GPU the replay's measured time; in sim, the policy's bookkeeping."""
    what = "GPU replay time_s" if MODES == {"gpu"} else "time_s (sim bookkeeping)"
    print(f"\n| trace | allocator | {what}, 1 pass | 100 passes | x torch-expandable, 1 pass | 100 passes |")
    print("|---|---|---|---|---|---|")
    for (trace, label) in sorted(rows):
        by = rows[(trace, label)]
        exp = row_of(rows, trace, "torch-expandable") or {}
        cols = []
        for n in ("1", "100"):
            v, e = by.get(n, {}).get("time_s"), exp.get(n, {}).get("time_s")
            cols.append((spread(v), f"{statistics.median(v) / statistics.median(e):.2f}" if v and e else "—"))
        print(f"| {trace} | {label} | {cols[0][0]} | {cols[1][0]} | {cols[0][1]} | {cols[1][1]} |")


def candidate(rows, t, prefix):
    """The label checked for trace t: cmb, or the one starting with prefix
    whose layout is another recording's where there is one."""
    labels = sorted(label.split("@")[0] for (tr, label) in rows if tr == t and label.split("@")[0].startswith(prefix))
    other = [x for x in labels if os.path.basename(x.split("@")[0][len(prefix):]) != t]
    return (other or labels or [None])[0]


def goals(rows, out, prefix="cmb"):
    """Issue 26's goals for cmb on the PyTorch sample traces: one line per
    goal and trace, the measured values and met / NOT met."""
    exact = prefix == "cmb"
    out.append(f"\n| goal (issue 26) | trace | {prefix if exact else prefix + '...'} | torch-expandable | met |")
    out.append("|---|---|---|---|---|")
    traces = sorted({t for (t, label) in rows if t.startswith("torch_") and
                     (label.split("@")[0] == "cmb" if exact else label.startswith(prefix))})
    n_met = n_all = 0
    for t in traces:
        cand = "cmb" if exact else candidate(rows, t, prefix)
        c, e = row_of(rows, t, cand), row_of(rows, t, "torch-expandable") or {}
        c1, c100, e1, e100 = c.get("1", {}), c.get("100", {}), e.get("1", {}), e.get("100", {})
        # the call goal names four workloads: none for the others (serving)
        lim = 50 if t.startswith("torch_transformer") else (
            0 if t.startswith(("torch_convnet", "torch_mlp", "torch_llm_decode")) else None)
        checks = [
            ("reserved/requested, 1 pass <= 1.015", ratio(c1), ratio(e1), lambda v, x: v <= 1.015, ".4f"),
            ("reserved/requested, 100 passes <= 1.02", ratio(c100), ratio(e100), lambda v, x: v <= 1.02, ".4f"),
            ("smallest device MiB <= torch-expandable's", mib(c1), mib(e1), lambda v, x: x is not None and v <= x, ".0f"),
            (f"upstream calls per pass after the first <= {lim}", per(calls(c1), calls(c100)),
             per(calls(e1), calls(e100)), lambda v, x: v <= lim, ".2f"),
            ("driver calls, 100 passes <= 2 x torch-expandable's", med(c100, "driver_calls"),
             med(e100, "driver_calls"), lambda v, x: x is not None and v <= 2 * x, ".0f"),
        ]
        for name, v, x, ok, fmt in checks:
            if v is None or (lim is None and name.startswith("upstream calls per pass")):
                continue
            met = ok(v, x)
            n_met += met
            n_all += 1
            xs = "—" if x is None else format(x, fmt)
            who = "" if exact else f", layout {os.path.basename(cand.split('@')[0][len(prefix):])}"
            out.append(f"| {name} | {t}{who} | {format(v, fmt)} | {xs} | {'met' if met else 'NOT met'} |")
    out.append(f"\n{n_met} of {n_all} checks met.")


def main():
    prefix = "cmb"
    if len(sys.argv) > 2 and sys.argv[1] == "--candidate":
        prefix = sys.argv[2]
        del sys.argv[1:3]
    if len(sys.argv) not in (2, 3) or sys.argv[1].startswith("-") or not prefix:
        sys.exit("usage: cmb_steady_table.py [--candidate PREFIX] REPLAY_CSV[,REPLAY_CSV...] [CHURN_CSV]")
    cells, failed = defaultdict(lambda: defaultdict(list)), []
    for path in sys.argv[1].split(","):
        if not os.path.isfile(path):
            sys.exit(f"cmb_steady_table.py: no such file: {path}")
        c, f = load(path)
        failed += f
        for key, cell in c.items():
            for m, v in cell.items():
                cells[key][m] += v
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
    times(rows)
    g = []
    goals(rows, g, prefix)
    print("\n".join(g))
    for line in failed:
        print(f"\nfailed: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
