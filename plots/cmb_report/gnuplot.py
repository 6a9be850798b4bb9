"""The quick-look plots: tidy tables for the gnuplot scripts in plots/*.gp,
and the scripts run on them to PNG and SVG.

Each table is a CSV with a header line; `series` names a line or point set
(no commas or spaces), rows of one series are contiguous and in x order.
A plot whose data a run does not have (no batch-sweep, no timelines) is not
drawn, and the summary says so."""

import csv
import os
import shutil
import subprocess

from . import analysis as A
from . import metrics as M
from .results import ReportError, read_timeline

PLOTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _clean(text):
    return "".join(ch if ch.isalnum() or ch in "._=+-/:" else "_" for ch in text)


def _write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def _num(v):
    return "" if v is None else "%.17g" % float(v)


# --- tables -------------------------------------------------------------------------------


def _series(first, params, keys, drop):
    """A series name: `first`, then the varying parameters but `drop`."""
    rest = [kv for kv in params.split(";") if kv.split("=", 1)[0] in keys and kv.split("=", 1)[0] != drop]
    return _clean("/".join([first] + rest))


def latency_rows(run):
    rows = []
    for s in run.scenarios():
        keys = A.varying_keys(A.param_sets([run], s))
        size = next((p for p in M.SIZE_PARAMS if p in keys), None)
        if not size:
            continue
        for c in run.cases_of(s):
            x = A.param_value(c.param_dict().get(size, ""))
            p50, p99 = c.stat("alloc_p50_ns"), c.stat("alloc_p99_ns")
            if x is None or not p50 or not c.ran:
                continue
            rows.append((_series(f"{s}/{c.allocator}", c.params, keys, size), x, p50.median,
                         p99.median if p99 else None))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(r[0], _num(r[1]), _num(r[2]), _num(r[3])) for r in rows]


def per_allocator_rows(run, scenario, metric):
    """series (parameter set), x (allocator position), allocator, status,
    median, min, max; a row without a value for a case that has none."""
    psets = A.param_sets([run], scenario)
    allocs = A.allocators([run], scenario)
    rows = []
    for p in psets:
        series = _clean(A.short_params(p, psets).replace(" ", "/")) if len(psets) > 1 else "all"
        for i, a in enumerate(allocs, 1):
            case = A.find(run, scenario, p, a)
            if case is None:
                continue
            cell = A.cell(case, metric)
            st = cell.stat
            status = {"value": case.status, "na": "n/a"}.get(cell.kind, cell.kind)
            rows.append((series, i, a, status) + ((_num(st.median), _num(st.lo), _num(st.hi)) if st else ("", "", "")))
    return rows


def gemm_rows(run, scenario, budget):
    keys = A.varying_keys(A.param_sets([run], scenario))
    rows = []
    for c in run.cases_of(scenario):
        x = A.param_value(c.param_dict().get(budget, ""))
        st = c.stat("time_s")
        if x is None or not st or not c.ran:
            continue
        rows.append((_series(c.allocator, c.params, keys, budget), x, st))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [(s, _num(x), _num(st.median), _num(st.lo), _num(st.hi)) for s, x, st in rows]


def timeline_rows(run, scenario, params):
    rows = []
    for c in run.cases_of(scenario):
        if c.params != params or c.name not in run.timelines:
            continue
        tl = read_timeline(run.timelines[c.name])
        for op, req, res in zip(tl["op"], tl["requested_bytes"], tl["reserved_bytes"]):
            rows.append((_clean(c.allocator), _num(op), _num(req), _num(res)))
    return rows


# --- the plots of one run -------------------------------------------------------------------


def _plan(run, data_dir):
    """(script, table path, title) of every plot this run has data for, after
    writing the tables; and a list of plots left out with why."""
    plan, left_out = [], []

    def table(name, header, rows, script, title):
        if not rows:
            return False
        path = os.path.join(data_dir, name + ".csv")
        _write(path, header, rows)
        plan.append((script, path, title))
        return True

    if not table("latency", ["series", "size_bytes", "alloc_p50_ns", "alloc_p99_ns"], latency_rows(run),
                 "latency.gp", f"allocation latency per allocator and size ({run.label})"):
        left_out.append("latency: no scenario swept a size parameter (" + ", ".join(M.SIZE_PARAMS) + ")")
    for s in run.scenarios():
        slug = _clean(s).replace("/", "_")
        rows = per_allocator_rows(run, s, "frag_ratio")
        if any(r[4] != "" for r in rows):
            table(f"frag_{slug}", ["series", "x", "allocator", "status", "frag_ratio", "frag_lo", "frag_hi"], rows,
                  "frag.gp", f"{s}: fragmentation per allocator ({run.label})")
        metric_names = set().union(*(c.metrics() for c in run.cases_of(s)))
        batch = next((m for m in M.LARGEST_BATCH if m in metric_names), None)
        if batch:
            table(f"batch_{slug}", ["series", "x", "allocator", "status", "largest_batch", "lo", "hi"],
                  per_allocator_rows(run, s, batch), "batch.gp", f"{s}: largest batch that fits ({run.label})")
        elif s in M.BATCH_SCENARIOS:
            left_out.append(f"batch: {s} reported none of " + ", ".join(M.LARGEST_BATCH))
        budget = next((p for p in M.BUDGET_PARAMS if p in A.varying_keys(A.param_sets([run], s))), None)
        if budget:
            table(f"gemm_{slug}", ["series", "budget_bytes", "time_s", "time_lo", "time_hi"], gemm_rows(run, s, budget),
                  "gemm.gp", f"{s}: time against the memory budget ({run.label})")
        elif s in M.GEMM_SCENARIOS:
            left_out.append(f"gemm: {s} did not sweep a budget parameter (" + ", ".join(M.BUDGET_PARAMS) + ")")
        psets = A.param_sets([run], s)
        for k, p in enumerate(psets, 1):
            table(f"timeline_{slug}_{k}", ["series", "op", "requested_bytes", "reserved_bytes"],
                  timeline_rows(run, s, p), "timeline.gp",
                  f"{s} {A.short_params(p, psets)}: memory over time ({run.label})")
    if not run.timelines:
        left_out.append("timeline: the run has no timelines/ (scenarios churn and replay record them)")
    if not any(M.BATCH_SCENARIOS[0] == s for s in run.scenarios()):
        left_out.append("batch: no batch-sweep results")
    if not any(M.GEMM_SCENARIOS[0] == s for s in run.scenarios()):
        left_out.append("gemm: no gemm-chunked results")
    return plan, left_out


def render(run, out_dir, formats=("png", "svg")):
    """Writes out_dir/data/*.csv and out_dir/<plot>.{png,svg}. Returns the
    image paths and the plots left out; a script that fails raises."""
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        raise ReportError("gnuplot is not installed (Debian: gnuplot-nox); it draws the quick-look plots")
    data_dir = os.path.join(out_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    plan, left_out = _plan(run, data_dir)
    images = []
    for script, table, title in plan:
        base = os.path.splitext(os.path.basename(table))[0]
        for fmt in formats:
            out = os.path.join(out_dir, f"{base}.{fmt}")
            cmd = [gnuplot, "-c", os.path.join(PLOTS_DIR, script), table, out, title]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0 or not os.path.isfile(out) or os.path.getsize(out) == 0:
                raise ReportError(f"gnuplot {script} on {table} failed: {res.stderr.strip() or 'no output'}")
            images.append(out)
    return images, left_out
