"""What the report computes from the runs: cells (a value with its spread,
or why there is none), the ranking of allocators per scenario, and the
side-by-side comparison of runs (one column per GPU, ratios against the
first)."""

import math
from collections import OrderedDict
from dataclasses import dataclass

from . import metrics as M


def _union(seq):
    return list(OrderedDict.fromkeys(seq))


def scenarios(runs):
    return _union(s for r in runs for s in r.scenarios())


def param_sets(runs, scenario):
    return _union(c.params for r in runs for c in r.cases_of(scenario))


def allocators(runs, scenario=None):
    return _union(c.allocator for r in runs for c in r.cases.values() if scenario in (None, c.scenario))


def find(run, scenario, params, allocator):
    idx = getattr(run, "_index", None)
    if idx is None:
        idx = run._index = {(c.scenario, c.params, c.allocator): c for c in run.cases.values()}
    return idx.get((scenario, params, allocator))


_SHIFTS = {"": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20, "g": 30, "gb": 30,
           "gib": 30, "t": 40, "tb": 40, "tib": 40}


def param_value(text):
    """A parameter value as a number: sizes as cumembench parses them (the
    units are powers of 1024, case-insensitive), plain numbers as they are;
    None for anything else."""
    i = 0
    while i < len(text) and (text[i].isdigit() or text[i] == "."):
        i += 1
    shift = _SHIFTS.get(text[i:].lower())
    if i == 0 or shift is None:
        return None
    try:
        return float(text[:i]) * (1 << shift)
    except ValueError:
        return None


def params_label(params, drop=()):
    """'n=10000;dist=uniform' -> 'n=10000 dist=uniform' (without the keys in drop)."""
    kv = [p for p in params.split(";") if p and p.split("=", 1)[0] not in drop]
    return " ".join(kv) or "(defaults)"


def varying_keys(param_list):
    """The parameter keys whose value differs between the parameter sets."""
    seen = OrderedDict()
    for params in param_list:
        for kv in params.split(";"):
            if "=" in kv:
                k, v = kv.split("=", 1)
                seen.setdefault(k, set()).add(v)
    return [k for k, vals in seen.items() if len(vals) > 1]


def short_params(params, param_list):
    """Only the keys that vary across the scenario's parameter sets."""
    keys = varying_keys(param_list)
    kv = [p for p in params.split(";") if p.split("=", 1)[0] in keys]
    return " ".join(kv) or "(one parameter set)"


# --- cells ------------------------------------------------------------------------------


@dataclass
class Cell:
    kind: str           # value, failed, skipped, missing, na
    text: str
    title: str = ""
    stat: object = None
    partial: bool = False


def cell(case, metric):
    """A case's value of one metric as the tables show it; never a 0 for
    something that was not measured."""
    if case is None:
        return Cell("missing", "not run", "no such case in this run")
    if case.status == "skipped":
        return Cell("skipped", "skipped", case.reason)
    if case.status == "failed":
        return Cell("failed", "FAILED", case.reason)
    st = case.stat(metric)
    if st is None:
        return Cell("na", "n/a", f"{metric} was not reported for this case")
    text = M.fmt_value(metric, st.median)
    title = f"median of {st.n} repetition(s)"
    if st.n > 1 and st.hi != st.lo:
        text += f" [{M.fmt_value(metric, st.lo)} - {M.fmt_value(metric, st.hi)}]"
        title += ", [min - max]"
    c = Cell("value", text, title, st)
    if case.status == "partial":
        c.partial = True
        c.title = f"{title}; PARTIAL: {case.reason}"
    return c


def ratio(a, b):
    """b / a of two cells' medians, or None."""
    if a.kind != "value" or b.kind != "value" or a.stat.median == 0:
        return None
    return b.stat.median / a.stat.median


# --- ranking --------------------------------------------------------------------------


@dataclass
class RankRow:
    allocator: str
    rank: object            # int, or None when it has no result at all
    scores: dict            # metric -> (score, rank) or None
    ok: int
    total: int
    failed: int
    skipped: int
    partial: int


def _score(metric, values, bests):
    """Time and peak: geometric mean of value / best over the parameter sets
    (1.00 = best everywhere). Fragmentation: mean. Capacity ratio: worst."""
    if metric in ("time_s", "peak_reserved_bytes"):
        rel = [v / b for v, b in zip(values, bests) if b and b > 0]
        return math.exp(sum(math.log(x) for x in rel) / len(rel)) if rel else None
    if metric == "capacity_ratio":
        return min(values)
    return sum(values) / len(values)


def ranking(run, scenario, all_allocators=()):
    """Rows sorted by overall rank: the mean of the allocator's ranks on the
    RANKED metrics it has; allocators without any result come last, and
    those of all_allocators the run has no case of (total 0) after them."""
    cases = run.cases_of(scenario)
    psets = _union(c.params for c in cases)
    allocs = _union([c.allocator for c in cases] + list(all_allocators))
    rows = {a: RankRow(a, None, {}, 0, 0, 0, 0, 0) for a in allocs}
    for c in cases:
        row = rows[c.allocator]
        row.total += 1
        row.ok += c.status in ("ok", "partial")
        row.partial += c.status == "partial"
        row.failed += c.status == "failed"
        row.skipped += c.status == "skipped"
    for m in M.RANKED:
        lower = M.metric(m).better != "higher"
        best = {}
        for p in psets:
            vals = [c.stat(m).median for c in cases if c.params == p and c.status in ("ok", "partial") and c.stat(m)]
            if vals:
                best[p] = min(vals) if lower else max(vals)
        scores = {}
        for a in allocs:
            pairs = []
            for p in psets:
                c = find(run, scenario, p, a)
                st = c.stat(m) if c and c.status in ("ok", "partial") else None
                if st and p in best:
                    pairs.append((st.median, best[p]))
            s = _score(m, [v for v, _ in pairs], [b for _, b in pairs]) if pairs else None
            if s is not None:
                scores[a] = s
        order = sorted(scores, key=lambda a: scores[a] if lower else -scores[a])
        for a in allocs:
            if a in scores:
                rank = 1 + sum(1 for b in order if (scores[b] < scores[a] if lower else scores[b] > scores[a]))
                rows[a].scores[m] = (scores[a], rank)
            else:
                rows[a].scores[m] = None

    def overall(row):
        ranks = [v[1] for v in row.scores.values() if v]
        return sum(ranks) / len(ranks) if ranks else None

    ranked = [r for r in rows.values() if overall(r) is not None]
    ranked.sort(key=lambda r: (overall(r), r.scores.get("time_s")[1] if r.scores.get("time_s") else 1e9))
    for i, r in enumerate(ranked, 1):
        r.rank = i
    return ranked + [r for r in rows.values() if overall(r) is None]


# --- side by side ------------------------------------------------------------------------


@dataclass
class CompareRow:
    params: str
    allocator: str
    cells: list      # one per run
    ratios: list     # one per run after the first: float or None


def runs_with(runs, scenario):
    return [r for r in runs if r.cases_of(scenario)]


def compare(runs, scenario, metric):
    """Rows of the side-by-side table; [] when no run has a value."""
    rows = []
    for p in param_sets(runs, scenario):
        for a in allocators(runs, scenario):
            cases = [find(r, scenario, p, a) for r in runs]
            if not any(cases):
                continue
            cells = [cell(c, metric) for c in cases]
            if all(c.kind in ("na", "missing") for c in cells):
                continue
            rows.append(CompareRow(p, a, cells, [ratio(cells[0], c) for c in cells[1:]]))
    return rows if any(c.kind == "value" for row in rows for c in row.cells) else []


def geomean_ratios(runs, scenario, metric):
    """Per allocator and run after the first: the geometric mean of the
    ratios over the parameter sets both ran, and how many that was."""
    out = OrderedDict()
    for row in compare(runs, scenario, metric):
        acc = out.setdefault(row.allocator, [[] for _ in runs[1:]])
        for i, r in enumerate(row.ratios):
            if r is not None and r > 0:
                acc[i].append(math.log(r))
    return OrderedDict((a, [(math.exp(sum(v) / len(v)), len(v)) if v else None for v in acc])
                       for a, acc in out.items())
