"""What the report computes from the runs: cells (a value with its spread,
or why there is none), the ranking of allocators per scenario, and the
side-by-side comparison of runs (one column per GPU, ratios against the
first)."""

import math
from collections import OrderedDict
from dataclasses import dataclass

from . import headlines as H
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


def columns(scenario):
    """{ranked column: the counter behind it}: the scenario's own where its
    headline names one (churn: the churn phase's peak and fragmentation, not
    the checkerboard's)."""
    h = H.of(scenario)
    return {"time_s": "time_s",
            "peak_reserved_bytes": h.memory if h.memory.endswith("peak_reserved_bytes") else "peak_reserved_bytes",
            "frag_ratio": h.frag, "capacity_ratio": "capacity_ratio"}


def requested_of(scenario, memory):
    """The requested peak behind a memory counter, or "" when there is none."""
    h = H.of(scenario)
    return h.requested if memory == h.memory else "peak_requested_bytes" if memory.endswith("_bytes") else ""


def _served_less(cases, requested="peak_requested_bytes"):
    """{(params, allocator)} of finished cases whose peak requested is more
    than SERVED_TOL below the highest of their parameter set: they served
    less (their allocations failed and the scenario went on), so their
    smaller peak is no merit."""
    top, out = {}, set()
    if not requested:
        return out
    for c in cases:
        st = c.stat(requested) if c.ran else None
        if st:
            top[c.params] = max(top.get(c.params, 0), st.median)
    for c in cases:
        st = c.stat(requested) if c.ran else None
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
    """{allocator: score} and the allocators competing for a rank on the
    column m (its counter: columns())."""
    lower = M.metric(m).better != "higher"
    timed = m == "time_s" and run.mode != "sim"
    counter = columns(scenario)[m]
    competing = {c.allocator for c in cases if not timed or c.impl == "real"}
    if not competing & {c.allocator for c in cases if c.ran}:
        competing = set()  # no real allocator timed: times shown, none ranked

    def value(p, a):
        c = find(run, scenario, p, a)
        if not c or not c.ran or (m in MEMORY_METRICS and (p, a) in short):
            return None
        st = c.stat(counter)
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
    bookkeeping, not the original's cost). Ties: sim by peak reserved, a GPU by time,
    then by name. Allocators without any rank come last; those of
    all_allocators the run has no case of (total 0) after them."""
    cases = run.cases_of(scenario)
    psets = _union(c.params for c in cases)
    allocs = _union([c.allocator for c in cases] + list(all_allocators))
    rows = _rows(run, scenario, cases, allocs)
    short = _served_less(cases, requested_of(scenario, columns(scenario)["peak_reserved_bytes"]))
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
    decide: str = ""       # each allocator's smallest GPU and allocator time (docs/costs.md)
    recommended: str = ""  # harness/rank.c's choice, with why


def failed_in_phase(case, scenario):
    """An allocation failed in some phase of a case that finished (churn's
    checkerboard under arena or buddy): it did not fit. Not where failing is
    the measure (a higher-is-better memory measure: contention, batch-sweep).
    As harness/answer.c's failed_in_phase."""
    st = case.stat("failed_allocs")
    return case.ran and not H.of(scenario).memory_higher and bool(st) and st.median > 0


def did_not_fit(case, scenario):
    return case.status == "oom" or failed_in_phase(case, scenario)


def ranks_by_capacity(run, scenario):
    """Every case that ran found its smallest GPU (replay's min capacity):
    "best for memory" ranks by it. As harness/answer.c's ranks_by_capacity."""
    ran = [c for c in run.cases_of(scenario) if c.ran and not failed_in_phase(c, scenario)]
    return bool(ran) and all(c.stat("min_capacity_bytes") for c in ran)


def best(run, scenario, counter, higher=False, requested="", real_only=False):
    """(the best allocators, the runner-up, its score / the best's) on one
    counter: per allocator the geometric mean over the parameter sets of
    value / the set's best value, over its cases that ran (not oom), did not
    serve less than the others (on `requested`) and, with real_only, are
    real allocators. As harness/answer.c computes it for the console."""
    cases = run.cases_of(scenario)
    short = _served_less(cases, requested)

    def value(c):
        if not c.ran or failed_in_phase(c, scenario) or (c.params, c.allocator) in short or \
                (real_only and c.impl != "real"):
            return None
        st = c.stat(counter)
        return st.median if st else None

    tops = {}
    for c in cases:
        v = value(c)
        if v is not None:
            tops[c.params] = v if c.params not in tops else max(tops[c.params], v) if higher else \
                min(tops[c.params], v)
    logs = OrderedDict()
    for c in cases:
        v = value(c)
        if v is None:
            continue
        top = tops[c.params]
        r = (1.0 if v == 0 else math.inf) if top == 0 else v / top
        acc = logs.setdefault(c.allocator, [0.0, 0, False, False])
        acc[0] += math.log(r) if 0 < r < math.inf else 0
        acc[1] += 1
        acc[2] |= r == 0
        acc[3] |= r == math.inf
    scores = OrderedDict((a, 0.0 if z else math.inf if i else math.exp(s_ / n)) for a, (s_, n, z, i) in logs.items())
    if not scores:
        return [], None, None

    def better(x, y):
        return x > y * (1 + TIE_TOL) if higher else x < y * (1 - TIE_TOL)

    top = next(iter(scores.values()))
    for v in scores.values():
        top = v if better(v, top) else top
    winners = [a for a, v in scores.items() if not better(top, v)]
    rest = [(a, v) for a, v in scores.items() if better(top, v)]
    nxt = None
    for a, v in rest:
        nxt = (a, v) if nxt is None or better(v, nxt[1]) else nxt
    return winners, (nxt[0] if nxt else None), (nxt[1] / top if nxt and top > 0 else None)


TIE_TOL = 1e-9


def _best_text(found, what):
    winners, nxt, ratio = found
    if not winners:
        return None
    more = f"; next {nxt}" + (f" {ratio:.2f}x" if ratio is not None and math.isfinite(ratio) else "") if nxt else ""
    return " = ".join(winners) + f" ({what}{more})"


def memory_what(counter, higher):
    if counter.endswith("peak_reserved_bytes"):
        return "smallest " + counter[:-len("peak_reserved_bytes")].replace("_", " ") + "peak reserved"
    return f"{'highest' if higher else 'lowest'} {counter}"


def _memory_answer(run, scenario):
    h = H.of(scenario)
    if h.memory == "-":  # a time-only scenario
        return f"not ranked: {scenario} measures time only"
    if ranks_by_capacity(run, scenario):
        text = _best_text(best(run, scenario, "min_capacity_bytes", False, h.requested), "smallest GPU it fits on")
    else:
        text = _best_text(best(run, scenario, h.memory, h.memory_higher, h.requested),
                          memory_what(h.memory, h.memory_higher))
    if not text and any(did_not_fit(c, scenario) for c in run.cases_of(scenario)):
        return "none: no allocator that ran fit"
    return text or f"no allocator finished with {h.memory} to compare"


def _time_answer(run, scenario):
    if run.mode == "sim":
        return "not ranked: sim times are host bookkeeping only (a GPU run measures time)"
    text = _best_text(best(run, scenario, "time_s", real_only=True), "fastest real allocator") or \
        "no real allocator was timed"
    if any(c.ran and c.impl != "real" for c in run.cases_of(scenario)):
        text += f"; emulations' times: {IMPL_TIME_LABEL}, not ranked"
    return text


def _case_name(case, cases):
    """The allocator, with the parameters that differ between the scenario's
    cases when there are several sets: 'bfc [capacity=1GiB]'."""
    vary = [kv for kv in case.params.split(";") if "=" in kv and
            len({c.param_dict().get(kv.split("=", 1)[0], "") for c in cases}) > 1]
    return case.allocator + (f" [{' '.join(vary)}]" if vary else "")


def _oom_item(case, cases):
    if case.status != "oom":  # failed_in_phase
        return f"{_case_name(case, cases)} ({case.stat('failed_allocs').median:.0f} allocations failed in a phase)"
    counts = sorted(int(w) for e in case.oom_reps.values() for w in (e or "").split() if w.isdigit())
    if not counts:
        return _case_name(case, cases)
    n = f"{counts[0]}" if counts[0] == counts[-1] else f"{counts[0]}-{counts[-1]}"
    return f"{_case_name(case, cases)} ({n} allocations failed)"


def answer(run, scenario):
    """Best for memory, best for time (real allocators on a GPU), what did
    not fit, what failed: the lines harness/answer.c prints at the end of a
    run, computed the same way."""
    cases = run.cases_of(scenario)
    if all(c.status == "skipped" for c in cases):
        return Answer(scenario, "", "", "not run: " + _group_reasons(cases))
    oom = [_oom_item(c, cases) for c in cases if did_not_fit(c, scenario)]
    ans = Answer(scenario, _memory_answer(run, scenario), _time_answer(run, scenario),
                 ", ".join(oom) if oom else "everything that ran fit")
    failed = [_case_name(c, cases) for c in cases if c.status == "failed"]
    if failed:
        ans.failed = ", ".join(failed)
    if scenario not in ("fastpath", "multi-gpu"):
        ans.decide, ans.recommended = decide(run, scenario)
    return ans


RANK_BUDGET, RANK_FAR = 0.05, 10.0  # as harness/rank.h


def _per_request(label):
    return label == "cuda" or label.startswith(("cuda@", "cuda:"))


@dataclass
class Decision:
    """Per allocator (label) of a scenario in one run: fits, smallest GPU
    (cap, NaN where the scenario searches none), memory (the scenario's
    measure summed over its parameter sets, negated where higher is better),
    time (t, NaN when unknown) and far (more than RANK_FAR x the median);
    the recommended label (None) and how it was chosen."""
    entries: "OrderedDict"
    far: dict
    recommended: object
    by_cap: bool
    timed: bool
    gpu: bool


def decision(run, scenario):
    """The numbers behind decide(): harness/rank.c's recommendation."""
    gpu = run.mode == "gpu"
    ents = OrderedDict()
    for c in run.cases_of(scenario):
        if c.status == "skipped":  # not run here (a GPU-only allocator in sim)
            continue
        label = c.allocator + (f":{c.options}" if c.options and ":" not in c.allocator else "")
        e = ents.setdefault(label, {"fits": True, "failed": False, "cap": 0.0, "mem": 0.0, "t": 0.0})
        st = lambda m: (c.stat(m).median if c.stat(m) else float("nan"))  # noqa: E731
        fa = st("failed_allocs")
        e["fits"] &= c.status == "ok" and not (fa > 0 and not _memory_counter(scenario)[1])
        e["failed"] |= c.status in ("failed", "partial")  # crashed or errored: not "did not fit"
        cap = st("min_capacity_bytes")
        e["cap"] = float("nan") if cap != cap or e["cap"] != e["cap"] else max(e["cap"], cap)
        mem_name, higher = _memory_counter(scenario)
        e["mem"] += -st(mem_name) if higher else st(mem_name)
        e["t"] += (st("time_s") if (c.impl or "real") == "real" else float("nan")) if gpu \
            else st("predicted_alloc_time_s")
    times = sorted(e["t"] for e in ents.values() if e["t"] == e["t"])
    med = (times[len(times) // 2] if len(times) % 2 else (times[len(times) // 2 - 1] + times[len(times) // 2]) / 2) \
        if times else 0
    far = {k: e["t"] == e["t"] and med > 0 and e["t"] > RANK_FAR * med for k, e in ents.items()}
    ok = {k: e for k, e in ents.items() if e["fits"] and not _per_request(k) and not far[k]}
    by_cap = all(e["cap"] == e["cap"] for e in ok.values())
    timed = [e["t"] for e in ok.values() if e["t"] == e["t"]]
    limit = min(timed) * (1 + RANK_BUDGET) if timed else float("inf")
    cands = [(e["cap"] if by_cap else e["mem"], k) for k, e in ok.items()
             if (not timed or (e["t"] == e["t"] and e["t"] <= limit)) and (e["cap"] if by_cap else e["mem"]) ==
             (e["cap"] if by_cap else e["mem"])]
    return Decision(ents, far, min(cands)[1] if cands else None, by_cap, bool(timed), gpu)


def decide(run, scenario):
    """(each allocator's smallest GPU and time, the recommendation) as
    harness/answer.c's decide_lines and harness/rank.c compute them: per
    allocator over the parameter sets, it fits when every case is ok with
    no failed allocation; smallest GPU the largest over the sets; time the
    sum (predicted_alloc_time_s in sim, time_s of real allocators on a GPU)."""
    d = decision(run, scenario)
    items = []
    for k, e in d.entries.items():
        cap = "" if e["cap"] != e["cap"] else (f" {e['cap'] / 2**30:.2f} GiB" if e["cap"] >= 2**30
                                              else f" {e['cap'] / 2**20:.1f} MiB")
        t = "" if e["t"] != e["t"] else f" {_seconds(e['t'])}"
        items.append(k + cap + t + (" (far above the rest)" if d.far[k] else "") +
                     ("" if e["fits"] else " (failed)" if e["failed"] else " (did not fit)"))
    label = "measured allocator time" if d.gpu else (
        "predicted" if d.timed else "no cost file: time not predicted")
    rec = (d.recommended + (" (smallest GPU" if d.by_cap else " (least memory") +
           (", time within 5% of the fastest)" if d.timed else "; time unknown, cuda per request excluded)")) \
        if d.recommended else "none: no allocator fit within the time budget"
    return ", ".join(items) + f" [{label}]", rec


def _seconds(v):
    return f"{v:.3g} s" if v >= 1 else f"{v * 1e3:.3g} ms" if v >= 1e-3 else f"{v * 1e6:.3g} us"


def _memory_counter(scenario):
    """(the scenario's memory counter, higher is better), as answer.c's memory_counters."""
    h = H.of(scenario)
    return h.memory, h.memory_higher


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
