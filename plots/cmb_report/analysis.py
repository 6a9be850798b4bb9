"""What the report computes from the runs: cells (a value with its spread,
or why there is none), the ranking of allocators per scenario, and the
side-by-side comparison of runs (one column per GPU, ratios against the
first)."""

import math
from collections import OrderedDict
from dataclasses import dataclass

from . import metrics as M
from .impl import TIME_LABEL as IMPL_TIME_LABEL


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
    kind: str           # value, failed, oom, skipped, missing, na
    text: str
    title: str = ""
    stat: object = None
    partial: bool = False


def cell(case, metric, oom_values=False):
    """A case's value of one metric as the tables show it; never a 0 for
    something that was not measured. A case that did not fit shows as such;
    with oom_values its numbers are shown (marked), for the detail tables."""
    if case is None:
        return Cell("missing", "not run", "no such case in this run")
    if case.status == "skipped":
        return Cell("skipped", "skipped", case.reason)
    if case.status == "failed":
        return Cell("failed", "FAILED", case.reason)
    if case.status == "oom" and not oom_values:
        return Cell("oom", "did not fit", case.reason)
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
    if case.status == "oom":
        c.partial = True
        c.title = f"{title}; DID NOT FIT: {case.reason}"
    return c


def ratio(a, b):
    """b / a of two cells' medians, or None."""
    if a.kind != "value" or b.kind != "value" or a.stat.median == 0:
        return None
    return b.stat.median / a.stat.median


# --- ranking --------------------------------------------------------------------------

SERVED_TOL = 1e-3   # peak requested this far below the set's highest: served less, not ranked on memory
MEMORY_METRICS = ("peak_reserved_bytes", "frag_ratio")


def ranked_metrics(mode):
    """What a run's mode measures: in sim the times are host bookkeeping, so
    only memory is ranked."""
    return [m for m in M.RANKED if mode != "sim" or m != "time_s"]


@dataclass
class RankRow:
    allocator: str
    rank: object            # int, or None when it has no result at all
    scores: dict            # metric -> (score, rank or None) or None; rank None: shown, not ranked
    ok: int
    total: int
    failed: int
    skipped: int
    partial: int
    oom: int = 0
    oom_reason: str = ""
    impl: str = ""
    served_less: int = 0    # parameter sets left out of the memory ranks

    def overall(self):
        ranks = [v[1] for v in self.scores.values() if v and v[1] is not None]
        return sum(ranks) / len(ranks) if ranks else None


def _score(metric, values, bests):
    """Time and peak: geometric mean of value / best over the parameter sets
    (1.00 = best everywhere). Fragmentation: mean. Capacity ratio: worst."""
    if metric in ("time_s", "peak_reserved_bytes"):
        rel = [v / b for v, b in zip(values, bests) if b and b > 0]
        return math.exp(sum(math.log(x) for x in rel) / len(rel)) if rel else None
    if metric == "capacity_ratio":
        return min(values)
    return sum(values) / len(values)


def _served_less(cases):
    """{(params, allocator)} of finished cases whose peak requested is more
    than SERVED_TOL below the highest of their parameter set: they served
    less (their allocations failed and the scenario went on), so their
    smaller peak is no merit."""
    top, out = {}, set()
    for c in cases:
        st = c.stat("peak_requested_bytes") if c.ran else None
        if st:
            top[c.params] = max(top.get(c.params, 0), st.median)
    for c in cases:
        st = c.stat("peak_requested_bytes") if c.ran else None
        if st and st.median < (1 - SERVED_TOL) * top[c.params]:
            out.add((c.params, c.allocator))
    return out


def _rows(run, scenario, cases, allocs):
    rows = {a: RankRow(a, None, {}, 0, 0, 0, 0, 0) for a in allocs}
    for c in cases:
        row = rows[c.allocator]
        row.impl = row.impl or c.impl
        row.total += 1
        row.ok += c.ran
        row.partial += c.status == "partial"
        row.failed += c.status == "failed"
        row.skipped += c.status == "skipped"
        if c.status == "oom":
            row.oom += 1
            row.oom_reason = row.oom_reason or c.reason
    return rows


def _metric_scores(run, scenario, cases, psets, allocs, m, short):
    """{allocator: score} and the allocators competing for a rank on m."""
    lower = M.metric(m).better != "higher"
    timed = m == "time_s" and run.mode != "sim"
    competing = {c.allocator for c in cases if not timed or c.impl == "real"}
    if not competing & {c.allocator for c in cases if c.ran}:
        competing = set()  # no real allocator timed: times shown, none ranked

    def value(p, a):
        c = find(run, scenario, p, a)
        if not c or not c.ran or (m in MEMORY_METRICS and (p, a) in short):
            return None
        st = c.stat(m)
        return st.median if st else None

    best = {}
    for p in psets:
        vals = [v for a in allocs for v in [value(p, a)] if v is not None and (a in competing or not competing)]
        if vals:
            best[p] = min(vals) if lower else max(vals)
    scores = {}
    for a in allocs:
        pairs = [(value(p, a), best[p]) for p in psets if p in best and value(p, a) is not None]
        s = _score(m, [v for v, _ in pairs], [b for _, b in pairs]) if pairs else None
        if s is not None:
            scores[a] = s
    return scores, competing, lower


def ranking(run, scenario, all_allocators=()):
    """Rows sorted by overall rank: the mean of the allocator's ranks on the
    metrics its run's mode measures (ranked_metrics). Cases that did not fit
    (status oom), failed or served less than the others are not ranked on
    what they could not show. On a GPU only real allocators are ranked on
    time; an emulation's time is kept as a score without a rank (policy
    bookkeeping, a lower bound). Ties: sim by peak reserved, a GPU by time,
    then by name. Allocators without any rank come last; those of
    all_allocators the run has no case of (total 0) after them."""
    cases = run.cases_of(scenario)
    psets = _union(c.params for c in cases)
    allocs = _union([c.allocator for c in cases] + list(all_allocators))
    rows = _rows(run, scenario, cases, allocs)
    short = _served_less(cases)
    for p, a in short:
        rows[a].served_less += 1
    metrics = ranked_metrics(run.mode)
    for m in metrics:
        scores, competing, lower = _metric_scores(run, scenario, cases, psets, allocs, m, short)
        ranked = [a for a in scores if a in competing]
        for a in allocs:
            if a not in scores:
                rows[a].scores[m] = None
                continue
            rank = None
            if a in ranked:
                rank = 1 + sum(1 for b in ranked if (scores[b] < scores[a] if lower else scores[b] > scores[a]))
            rows[a].scores[m] = (scores[a], rank)

    def tie(row):
        key = "peak_reserved_bytes" if run.mode == "sim" else "time_s"
        v = row.scores.get(key)
        return v[0] if v and v[1] is not None else math.inf

    ranked = [r for r in rows.values() if r.overall() is not None]
    ranked.sort(key=lambda r: (r.overall(), tie(r), r.allocator))
    for i, r in enumerate(ranked, 1):
        r.rank = i
    return ranked + [r for r in rows.values() if r.overall() is None]


# --- the answers -----------------------------------------------------------------------------


@dataclass
class Answer:
    """The answer table of a scenario in one run: one line each."""
    scenario: str
    memory: str
    time: str
    not_fit: str
    failed: str = ""


def _names(rows, metric):
    top = [r for r in rows if r.scores.get(metric) and r.scores[metric][1] == 1]
    return top


def _memory_answer(rows):
    top = _names(rows, "peak_reserved_bytes")
    if not top:
        return "no allocator finished with a peak reserved to compare"
    nxt = sorted((r for r in rows if r.scores.get("peak_reserved_bytes") and r.scores["peak_reserved_bytes"][1]
                  and r.scores["peak_reserved_bytes"][1] > 1), key=lambda r: r.scores["peak_reserved_bytes"][0])
    text = " = ".join(r.allocator for r in top) + " (smallest peak reserved"
    if nxt:
        text += f"; next {nxt[0].allocator} {nxt[0].scores['peak_reserved_bytes'][0]:.2f}x"
    return text + ")"


def _time_answer(run, rows):
    if run.mode == "sim":
        return "not ranked: sim times are host bookkeeping only (a GPU run measures time)"
    top = _names(rows, "time_s")
    emul = [r for r in rows if r.scores.get("time_s") and r.scores["time_s"][1] is None]
    if not top:
        return "no real allocator was timed" + (f"; {len(emul)} emulations' times are {IMPL_TIME_LABEL}"
                                                if emul else "")
    nxt = sorted((r for r in rows if r.scores.get("time_s") and r.scores["time_s"][1]
                  and r.scores["time_s"][1] > 1), key=lambda r: r.scores["time_s"][0])
    text = " = ".join(r.allocator for r in top) + " (fastest real allocator"
    if nxt:
        text += f"; next {nxt[0].allocator} {nxt[0].scores['time_s'][0]:.2f}x"
    text += ")"
    if emul:
        text += f"; emulations' and suite policies' times are {IMPL_TIME_LABEL}, not ranked"
    return text


def answer(run, scenario):
    """Best for memory, best for time (real allocators on a GPU), what did
    not fit, what failed."""
    rows = ranking(run, scenario)
    oom = [f"{r.allocator} ({r.oom_reason.replace('did not fit: ', '')})" for r in rows if r.oom]
    failed = [r.allocator for r in rows if r.failed]
    skipped = [r for r in rows if r.skipped == r.total and r.total]
    not_fit = ", ".join(oom) if oom else "everything that ran fit"
    ans = Answer(scenario, _memory_answer(rows), _time_answer(run, rows), not_fit)
    if failed:
        ans.failed = "failed: " + ", ".join(failed)
    if skipped and len(skipped) == len(rows):
        ans.memory = ans.time = ""
        ans.not_fit = "nothing ran: " + _group_reasons(run.cases_of(scenario))
    return ans


def _group_reasons(cases):
    """'reason (N cases); ...' for skipped cases, most frequent first."""
    counts = OrderedDict()
    for c in cases:
        if c.status == "skipped":
            counts[c.reason] = counts.get(c.reason, 0) + 1
    return "; ".join(f"{why} ({n} case{'s' if n > 1 else ''})"
                     for why, n in sorted(counts.items(), key=lambda kv: -kv[1]))


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
