"""The self-contained HTML page: every figure is embedded as a base64 PNG,
the style sheet is inline, nothing is fetched."""

import base64
import datetime
import html
import json

from . import analysis as A
from . import decide_view as DV
from . import explain as X
from . import timeline_view as TV
from . import tune_view as TUNE
from . import figures as F
from . import metrics as M
from .impl import TIME_LABEL as IMPL_TIME_LABEL

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em auto; max-width: 1250px;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
h3 { margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0 1em 0; font-size: 0.85em; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: right; vertical-align: top; white-space: nowrap; }
td.reason { white-space: normal; min-width: 24em; }
td.wrap { white-space: normal; word-break: break-word; max-width: 40em; }
.scroll { overflow-x: auto; max-width: 100%; }
th { background: #f3f3f3; }
td.l, th.l { text-align: left; }
td.failed { background: #fde2e2; color: #a00000; font-weight: bold; }
td.skipped, td.missing { background: #f2f2f2; color: #777; font-style: italic; }
td.na { color: #999; font-style: italic; }
td.partial { background: #fff4d6; }
td.oom { background: #fde9d9; color: #8a3b00; font-weight: bold; }
td.bookkeeping { color: #777; }
td.better { color: #0a6b0a; font-weight: bold; }
td.worse { color: #b00000; font-weight: bold; }
tr.differs td { background: #fffbe6; }
.note { background: #eef5ff; border-left: 4px solid #5b9bd5; padding: 0.5em 0.8em; margin: 0.8em 0; }
.warn { background: #fff4d6; border-left: 4px solid #e0a800; padding: 0.5em 0.8em; margin: 0.8em 0; }
img { max-width: 100%; display: block; margin: 0.5em 0 1.2em 0; border: 1px solid #eee; }
dt { font-weight: bold; font-family: monospace; margin-top: 0.5em; }
dd { margin-left: 1.5em; }
small { color: #666; }
details > summary { cursor: pointer; font-weight: bold; margin: 0.5em 0; }
nav ul { columns: 2; }
.findings table { display: block; max-width: 100%; overflow-x: auto; }
.findings th, .findings td { white-space: normal; text-align: left; min-width: 4em; }
.findings code { background: #f3f3f3; padding: 0 0.2em; border-radius: 3px; font-size: 0.9em; }
.findings td code { word-break: break-word; }
.findings pre { background: #f6f8fa; border: 1px solid #e5e5e5; padding: 0.6em 0.8em; overflow-x: auto;
                line-height: 1.3; }
.findings pre code { background: none; padding: 0; font-size: inherit; }
.findings blockquote { border-left: 4px solid #ddd; margin: 0.8em 0; padding: 0 0.8em; color: #555; }
"""

# Records whether every image decoded and whether anything failed to load,
# as attributes of <body> that a headless browser's DOM dump shows.
SELF_CHECK = """
window.addEventListener('error', function (e) {
  var b = document.body, t = (e.target && e.target.tagName) || 'script';
  b.setAttribute('data-errors', (b.getAttribute('data-errors') || '') + t + ' ');
}, true);
window.addEventListener('load', function () {
  var imgs = document.images, ok = 0, labels = 0, outside = [];
  for (var i = 0; i < imgs.length; i++) {
    var im = imgs[i];
    if (im.complete && im.naturalWidth > 0) ok++;
    var meta = im.getAttribute('data-labels');
    if (!meta) continue;
    /* every value label inside its axes, as the figure was drawn */
    var m = JSON.parse(meta);
    if (m.w !== im.naturalWidth || m.h !== im.naturalHeight) outside.push(im.alt + ': size');
    m.labels.forEach(function (l) {
      var a = m.axes[l[4]];
      labels++;
      if (!a || l[0] < a[0] - 1 || l[1] < a[1] - 1 || l[2] > a[2] + 1 || l[3] > a[3] + 1)
        outside.push(im.alt + ' [' + l.slice(0, 4).join(',') + ']');
    });
  }
  document.body.setAttribute('data-images', ok + '/' + imgs.length);
  var ans = document.getElementById('answers-end');
  if (ans) document.body.setAttribute('data-answers-bottom', Math.round(ans.getBoundingClientRect().bottom));
  document.body.setAttribute('data-labels', labels + ' checked, ' + outside.length + ' outside');
  if (outside.length) document.body.setAttribute('data-labels-outside', outside.join('; '));
});
"""

STATUS_WORDS = [
    ("did not fit", "the case ran but its workload did not fit: some allocations failed (status oom). It is left "
                    "out of every ranking and figure; its numbers are in the tables, marked"),
    ("FAILED", "the case (or all its repetitions) failed: the reason is in the cell's tooltip and in the list of "
               "failures; no number is shown"),
    ("partial", "some repetitions failed: the value is over the repetitions that finished (shaded, hatched in "
                "figures)"),
    ("skipped", "the harness did not run the case (for example a GPU-only allocator in sim mode)"),
    ("not run", "the run has no such case (the scenario, allocator or parameter set was not part of that run)"),
    ("n/a", "the case ran but did not report this metric (e.g. an allocator without an upstream has no reserved "
            "bytes)"),
]


def esc(text):
    return html.escape(str(text), quote=True)


class Page:
    def __init__(self):
        self.parts = []
        self.n_images = 0

    def add(self, text):
        self.parts.append(text)

    def img(self, png, alt):
        if png is None:
            return
        self.n_images += 1
        data = base64.b64encode(png).decode("ascii")
        meta = getattr(png, "meta", None)
        labels = f' data-labels="{esc(meta)}"' if meta else ""
        self.add(f'<img alt="{esc(alt)}"{labels} src="data:image/png;base64,{data}">\n')

    def td(self, cell, extra=""):
        cls = cell.kind if cell.kind != "value" else ("partial" if cell.partial else "")
        cls = f"{cls} {extra}".strip()
        text = esc(cell.text) + (" &#9888;" if cell.partial else "")
        return f'<td class="{cls}" title="{esc(cell.title)}">{text}</td>'


def _slug(text):
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")


# --- sections ---------------------------------------------------------------------------


def _header(page, runs):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page.add(f"<h1>cumembench report</h1>\n<p><small>generated {esc(now)} from "
             f"{len(runs)} result director{'y' if len(runs) == 1 else 'ies'}</small></p>\n")
    page.add("<div class='scroll'><table><tr><th class='l'>column</th><th class='l'>directory</th><th class='l'>mode</th>"
             "<th class='l'>GPU</th><th class='l'>driver</th><th class='l'>CUDA runtime</th><th class='l'>preset</th>"
             "<th class='l'>revision</th><th class='l'>date</th><th>ok</th><th>partial</th>"
             "<th title='ran, but the workload did not fit: some allocations failed'>did not fit</th><th>failed</th>"
             "<th>skipped</th></tr>\n")
    for r in runs:
        c, n = r.context, r.counts()
        page.add(f"<tr><td class='l'><b>{esc(r.label)}</b></td><td class='l'>{esc(r.path)}</td>"
                 f"<td class='l'>{esc(r.mode)}</td><td class='l'>{esc(c.get('gpu_name', r.gpu) or '-')}</td>"
                 f"<td class='l'>{esc(c.get('driver_version', '-'))}</td>"
                 f"<td class='l'>{esc(c.get('cuda_runtime', '-'))}</td><td class='l'>{esc(c.get('preset', '-'))}</td>"
                 f"<td class='l'>{esc(c.get('cumembench_revision', '-'))}</td><td class='l'>{esc(c.get('date', '-'))}"
                 f"</td><td>{n['ok']}</td><td>{n['partial']}</td><td>{n['oom']}</td><td>{n['failed']}</td><td>{n['skipped']}</td></tr>\n")
    page.add("</table></div>\n")
    if any(r.mode == "sim" for r in runs):
        page.add("<p class='note'>Sim mode: peaks, fragmentation and capacity are exact over a simulated device; "
                 "times are the host-side bookkeeping cost only. GPU timings need a run on a GPU.</p>\n")
    fixtures = [r.label for r in runs if r.context.get("fixture")]
    if fixtures:
        page.add(f"<p class='warn'>{esc(', '.join(fixtures))}: synthetic test fixtures, not measurements.</p>\n")
    if len(runs) > 1:
        page.add(f"<p class='note'>Ratios compare each column with the first, <b>{esc(runs[0].label)}</b>: "
                 "value / first value.</p>\n")


def _answers(page, runs, scenarios):
    """The first screen: per run, one row per scenario: the best allocator
    for memory, the best for time (real allocators on a GPU), what did not
    fit; as the console prints at the end of a run."""
    page.add("<h2 id='answers'>Answers</h2>\n")
    for r in runs:
        if len(runs) > 1:
            page.add(f"<h3>{esc(r.label)}</h3>\n")
        timed = r.mode != "sim"  # sim times are host bookkeeping: no column for them
        page.add("<table class='answers'><tr><th class='l'>scenario</th><th class='l'>best for memory</th>"
                 + ("<th class='l'>best for time</th>" if timed else "")
                 + "<th class='l'>did not fit</th><th class='l'>smallest GPU, allocator time</th>"
                 "<th class='l'>recommended</th></tr>\n")
        for s in scenarios:
            if not r.cases_of(s):
                page.add(f"<tr><td class='l'><a href='#s-{_slug(s)}'>{esc(s)}</a></td>"
                         f"<td class='l missing' colspan='{2 + timed}'>not run on {esc(r.label)}</td></tr>\n")
                continue
            a = A.answer(r, s)
            if not a.memory:
                page.add(f"<tr><td class='l'>{esc(s)}</td><td class='l missing' colspan='{2 + timed}'>{esc(a.not_fit)}"
                         "</td></tr>\n")
                continue
            fit_cls = "oom" if a.not_fit != "everything that ran fit" else ""
            failed = f"<br><span class='failed'>failed: {esc(a.failed)}</span>" if a.failed else ""
            time = a.time.split("; emulations' times")[0]  # said once, under the table
            page.add(f"<tr><td class='l'><a href='#s-{_slug(s)}'>{esc(s)}</a></td><td class='l wrap'>"
                     f"{esc(a.memory)}</td>" + (f"<td class='l wrap'>{esc(time)}</td>" if timed else "") +
                     f"<td class='l wrap {fit_cls}'>{esc(a.not_fit)}{failed}</td>"
                     f"<td class='l wrap'>{esc(a.decide)}</td><td class='l wrap'>{esc(a.recommended)}</td></tr>\n")
        page.add("</table>\n")
        if not timed:
            page.add(f"<p><small>{esc(r.label)}: time is not ranked, sim times are host bookkeeping only (a GPU "
                     "run measures time).</small></p>\n")
    page.add("<p><small>Best for memory: the lowest geometric mean over the scenario's parameter sets of the "
             "scenario's memory counter divided by the best value of each set (churn: its own phase's peak; "
             "batch-sweep: the largest batch, higher is better); cases that did not fit, failed or served less are "
             f"not compared. Best for time: GPU runs only, real allocators only (an emulation's time is its "
             f"{esc(IMPL_TIME_LABEL)}). Figures follow, then the rankings and every number.</small></p>\n"
             "<div id='answers-end'></div>\n")


def _toc(page, runs, scenarios, findings):
    page.add("<nav><b>Contents</b><ul>\n<li><a href='#answers'>Answers</a></li>\n")
    for s in scenarios:
        page.add(f"<li><a href='#s-{_slug(s)}'>Scenario {esc(s)}</a></li>\n")
    page.add("<li><a href='#summary'>Rankings per scenario</a></li>\n")
    if len(runs) > 1:
        page.add("<li><a href='#compare'>Across GPUs: side by side</a></li>\n")
    page.add("<li><a href='#failures'>Failures and skips</a></li>\n<li><a href='#environment'>Environment</a></li>\n"
             "<li><a href='#definitions'>Metric definitions</a></li>\n")
    if findings:
        page.add("<li><a href='#findings'>Findings</a></li>\n")
    page.add("</ul></nav>\n")


def _score_text(metric, score):
    if metric in ("time_s", "peak_reserved_bytes"):
        return f"{score:.2f}x"
    return f"{score:.3f}"


RANK_HEADS = {
    "time_s": ("time vs best real", "GPU: geometric mean over parameter sets of median time / the best real "
               "allocator's median time; only real allocators are ranked"),
    "peak_reserved_bytes": ("peak reserved vs best", "geometric mean over parameter sets of median peak reserved / "
                            "best; cases that served less than the others are left out"),
    "frag_ratio": ("fragmentation (mean)", "mean over parameter sets of the median fragmentation ratio"),
    "capacity_ratio": ("capacity ratio (worst)", "lowest median capacity ratio over the parameter sets"),
}


def _rank_cell(metric, v):
    if v is None:
        return "<td class='na' title='no result for this metric'>-</td>"
    if v[1] is None:
        return (f"<td class='bookkeeping' title='{esc(IMPL_TIME_LABEL)}: an emulation or suite policy, not the "
                f"original library; its time is not ranked against real allocators'>{_score_text(metric, v[0])} "
                f"<small>{esc(IMPL_TIME_LABEL)}</small></td>")
    cls = "better" if v[1] == 1 else ""
    return f"<td class='{cls}'>{_score_text(metric, v[0])} <small>#{v[1]}</small></td>"


def _cases_text(r):
    if not r.total:
        return "not run", "missing"
    notes = [f"did not fit: {r.oom_reason.replace('did not fit: ', '')}" if r.oom == 1 else
             f"{r.oom} did not fit ({r.oom_reason})" if r.oom else "",
             f"{r.failed} failed" if r.failed else "", f"{r.partial} partial" if r.partial else "",
             f"{r.skipped} skipped" if r.skipped else "",
             f"served less in {r.served_less}: not ranked on memory there" if r.served_less else ""]
    notes = ", ".join(n for n in notes if n)
    text = f"{r.ok}/{r.total} ran" + (f": {notes}" if notes else "")
    cls = "oom" if r.rank is None and r.oom else "failed" if r.rank is None and r.failed else \
        "missing" if r.rank is None else "partial" if notes else ""
    return text, cls


def _ranking_table(page, run, scenario, all_allocators):
    rows = A.ranking(run, scenario, all_allocators)
    metrics = A.ranked_metrics(run.mode)
    page.add("<table><tr><th>rank</th><th class='l'>allocator</th>"
             + "".join(f"<th title='{esc(RANK_HEADS[m][1])}'>{esc(RANK_HEADS[m][0])}</th>" for m in metrics)
             + "<th class='l'>cases</th></tr>\n")
    for r in rows:
        cells = "".join(_rank_cell(m, r.scores.get(m)) for m in metrics)
        text, cls = _cases_text(r)
        page.add(f"<tr><td>{r.rank if r.rank is not None else '-'}</td><td class='l'>{esc(r.allocator)}"
                 f"{' <small>(' + esc(r.impl) + ')</small>' if r.impl and r.impl != 'real' else ''}</td>"
                 f"{cells}<td class='l {cls}'>{esc(text)}</td></tr>\n")
    page.add("</table>\n")


def _summary(page, runs, scenarios):
    sim = any(r.mode == "sim" for r in runs)
    page.add("<h2 id='summary'>Rankings per scenario</h2>\n"
             "<p>Rank = the mean of the allocator's ranks on the columns its run measures (ties broken by peak "
             "reserved in sim, by time on a GPU). <i>x vs best</i> is the geometric mean over the scenario's "
             "parameter sets of the allocator's median divided by the best allocator's median there (1.00x = best "
             "everywhere). Cases that <b>did not fit</b> (some allocations failed) are not ranked; cases that "
             "served less than the others are not ranked on memory; failed cases are left out and the cases "
             "column says so."
             + (" <b>Sim runs rank memory only</b>: their times are host bookkeeping." if sim else "")
             + f" On a GPU only real allocators are ranked on time; the time of an emulation (or of the suite's "
             f"own policies) is its <i>{esc(IMPL_TIME_LABEL)}</i>, shown without a rank.</p>\n")
    for s in scenarios:
        for r in runs:
            if not r.cases_of(s):
                page.add(f"<h3>{esc(s)} on {esc(r.label)}</h3><p class='warn'>not run on {esc(r.label)}</p>\n")
                continue
            if _nothing_ran(r, s):
                page.add(f"<p><b>{esc(s)}</b> on {esc(r.label)}: {esc(A.answer(r, s).not_fit)}</p>\n")
                continue
            page.add(f"<h3>{esc(s)} on {esc(r.label)}</h3>\n")
            _ranking_table(page, r, s, A.allocators(runs, s))


def _detail_table(page, run, scenario):
    cases = run.cases_of(scenario)
    if not cases:
        return
    metric_names = set()
    for c in cases:
        metric_names |= c.metrics()
    first = [m for m in M.DETAIL if m in metric_names]
    rest = [m for m in M.ordered(metric_names) if m not in first]
    cols = first + rest
    psets = A.param_sets([run], scenario)
    page.add(f"<details><summary>All numbers: {esc(scenario)} on "
             f"{esc(run.label)} ({len(cases)} cases; median [min - max] over repetitions)</summary>\n"
             "<div class='scroll'><table><tr>"
             "<th class='l'>parameters</th><th class='l'>allocator</th><th class='l'>upstream</th><th>reps</th>")
    for m in cols:
        page.add(f"<th title='{esc(M.metric(m).definition)}'>{esc(M.metric(m).label)}</th>")
    page.add("</tr>\n")
    for p in psets:
        for c in (c for c in cases if c.params == p):
            alloc_td = (f"<td class='l oom' title='{esc(c.reason)}'>{esc(c.allocator)}: {esc(c.reason)}</td>"
                        if c.status == "oom" else f"<td class='l'>{esc(c.allocator)}</td>")
            page.add(f"<tr><td class='l'>{esc(A.short_params(p, psets))}</td>{alloc_td}"
                     f"<td class='l'>{esc(c.upstream)}</td><td>{len(c.reps)}/{c.n_reps}</td>")
            if c.status in ("failed", "skipped"):
                cell = A.cell(c, cols[0] if cols else "time_s")
                page.add(f"<td class='l reason {cell.kind}' colspan='{max(len(cols), 1)}' title='{esc(c.reason)}'>"
                         f"{esc(cell.text)}: {esc(c.reason)}</td></tr>\n")
                continue
            page.add("".join(page.td(A.cell(c, m, oom_values=True)) for m in cols) + "</tr>\n")
    page.add("</table></div></details>\n")


def _nothing_ran(run, scenario):
    return all(c.status == "skipped" for c in run.cases_of(scenario))


def _scenario_section(page, runs, scenario, colors):
    ran = [r for r in runs if r.cases_of(scenario) and not _nothing_ran(r, scenario)]
    if not ran:  # one line: why nothing ran (e.g. a GPU-only scenario in sim mode)
        why = "; ".join(f"{r.label}: {A.answer(r, scenario).not_fit}" for r in runs if r.cases_of(scenario))
        page.add(f"<h2 id='s-{_slug(scenario)}'>Scenario {esc(scenario)}</h2>\n<p class='missing'>{esc(why)}</p>\n")
        return
    page.add(f"<h2 id='s-{_slug(scenario)}'>Scenario {esc(scenario)}</h2>\n")
    missing = [r.label for r in runs if not r.cases_of(scenario)]
    if missing:
        page.add(f"<p class='warn'>Not run on {esc(', '.join(missing))}: the figures leave that run out, the "
                 "tables show <i>not run</i>.</p>\n")
    all_runs, runs = runs, A.runs_with(runs, scenario)
    psets = A.param_sets(runs, scenario)
    keys = A.varying_keys(psets)
    fixed = [kv for kv in psets[0].split(";") if kv and kv.split("=", 1)[0] not in keys] if psets else []
    page.add(f"<p><small>{len(psets)} parameter set(s); fixed: {esc(' '.join(fixed) or '-')}</small></p>\n")

    cols = A.columns(scenario)
    sim = all(r.mode == "sim" for r in runs)
    size_param = next((p for p in M.SIZE_PARAMS if p in keys), None)
    if sim:  # sim times are host bookkeeping: in the tables, not drawn
        page.add("<p><small>Sim mode: times are host bookkeeping only, so they are not drawn (the tables below have "
                 "them).</small></p>\n")
    else:
        page.img(F.metric_bars(runs, scenario, "time_s", "time per repetition", colors=colors), f"{scenario} time")
    if sim:
        pass
    elif size_param:
        page.img(F.metric_lines(runs, scenario, size_param, "alloc_p50_ns",
                                f"allocation latency against {size_param} (p50 solid with min-max band, p99 dashed)",
                                colors, second="alloc_p99_ns"), f"{scenario} latency per size")
    else:
        page.img(F.metric_bars(runs, scenario, "alloc_p50_ns", "allocation latency p50", colors=colors),
                 f"{scenario} latency")
    peak = cols["peak_reserved_bytes"]
    req = A.requested_of(scenario, peak) or "peak_requested_bytes"
    page.img(F.metric_bars(runs, scenario, peak, f"{M.metric(peak).label} (bars) against {M.metric(req).label} "
                           "(black tick)", overlay=req, colors=colors), f"{scenario} peak")
    page.img(F.metric_bars(runs, scenario, cols["frag_ratio"], f"{M.metric(cols['frag_ratio']).label}: 1 - "
                           "requested/reserved at the peaks", colors=colors), f"{scenario} fragmentation")
    page.img(F.metric_bars(runs, scenario, "capacity_ratio", ("checkerboard " if scenario == "churn" else "")
                           + "capacity ratio (1 = all free memory usable in one block)", colors=colors),
             f"{scenario} capacity")
    batch = next((m for m in M.LARGEST_BATCH if m in _metrics_of(runs, scenario)), None)
    if batch:
        page.img(F.metric_bars(runs, scenario, batch, "largest batch that fits", colors=colors),
                 f"{scenario} largest batch")
    budget = next((p for p in M.BUDGET_PARAMS if p in keys), None)
    if budget and not sim:
        page.img(F.metric_lines(runs, scenario, budget, "time_s", f"time against the memory budget ({budget})",
                                colors, xlabel=f"{budget} (memory budget)"), f"{scenario} time versus budget")
    for r in runs:
        page.img(F.timeline(r, scenario, colors), f"{scenario} memory over time on {r.label}")
        page.add(TV.view(r, scenario, colors))
    for r in all_runs:
        _detail_table(page, r, scenario)


def _metrics_of(runs, scenario):
    out = set()
    for r in runs:
        for c in r.cases_of(scenario):
            out |= c.metrics()
    return out


def _ratio_td(metric, ratio):
    if ratio is None:
        return "<td class='missing' title='no value on one side'>-</td>"
    better = M.metric(metric).better
    cls = ""
    if better and abs(ratio - 1) > 0.05:
        good = ratio < 1 if better == "lower" else ratio > 1
        cls = "better" if good else "worse"
    return f"<td class='{cls}'>{ratio:.2f}x</td>"


def _compare(page, runs, scenarios, colors):
    page.add("<h2 id='compare'>Across GPUs: side by side</h2>\n"
             f"<p>One column per run (GPU, driver or CUDA version), the same scenario, parameters and allocator in a "
             f"row; <i>ratio</i> = that column's median / the first column's ({esc(runs[0].label)}). Green: better "
             "by more than 5 %, red: worse (by the metric's direction). A case missing from a run shows as "
             "<i>not run</i>, a failed one as FAILED: never as 0.</p>\n")
    for s in scenarios:
        page.add(f"<h3>{esc(s)}</h3>\n")
        ran = A.runs_with(runs, s)
        if len(ran) < 2:
            page.add(f"<p class='warn'>Only {esc(ran[0].label)} ran {esc(s)}: nothing to put side by side "
                     f"(not run on {esc(', '.join(r.label for r in runs if r not in ran))}).</p>\n")
            continue
        page.img(F.ratio_bars(runs, s, "time_s", colors), f"{s} time ratio across GPUs")
        page.img(F.ratio_bars(runs, s, "peak_reserved_bytes", colors), f"{s} peak ratio across GPUs")
        psets = A.param_sets(runs, s)
        for m in M.COMPARED:
            rows = A.compare(runs, s, m)
            if not rows:
                continue
            page.add(f"<details open><summary>{esc(M.metric(m).label)}</summary>\n<div class='scroll'><table><tr>"
                     "<th class='l'>parameters</th><th class='l'>allocator</th>"
                     + "".join(f"<th>{esc(r.label)}</th>" for r in runs)
                     + "".join(f"<th>ratio {esc(r.label)}</th>" for r in runs[1:]) + "</tr>\n")
            for row in rows:
                page.add(f"<tr><td class='l'>{esc(A.short_params(row.params, psets))}</td>"
                         f"<td class='l'>{esc(row.allocator)}</td>" + "".join(page.td(c) for c in row.cells)
                         + "".join(_ratio_td(m, x) for x in row.ratios) + "</tr>\n")
            page.add("</table></div></details>\n")


def _failures(page, runs):
    page.add("<h2 id='failures'>Failures and skips</h2>\n")
    rows = [(r, c) for r in runs for c in r.cases.values() if c.status != "ok"]
    if not rows:
        page.add("<p>Every case finished every repetition.</p>\n")
        return
    n = {k: sum(1 for _, c in rows if c.status == k) for k in ("oom", "failed", "partial", "skipped")}
    words = {"oom": "did not fit", "failed": "failed", "partial": "partial", "skipped": "skipped"}
    summary = ", ".join(f"{v} {words[k]}" for k, v in n.items() if v)
    # only skips (GPU-only cases in sim): folded, the answers already say why
    page.add(f"<details{'' if n['skipped'] == len(rows) else ' open'}><summary>{esc(summary)}</summary>\n"
             "<table><tr><th class='l'>run</th><th class='l'>case</th><th class='l'>status</th>"
             "<th class='l'>reason</th></tr>\n")
    for r, c in rows:
        page.add(f"<tr><td class='l'>{esc(r.label)}</td><td class='l'>{esc(c.name)}</td>"
                 f"<td class='l {c.status}'>{esc(c.status)}</td><td class='l reason'>{esc(c.reason)}</td></tr>\n")
    page.add("</table></details>\n")


def _environment(page, runs):
    page.add("<h2 id='environment'>Environment</h2>\n<details><summary>The context block of each run's "
             "results.json; rows that differ between runs are shaded</summary>\n<table><tr><th class='l'>key</th>"
             + "".join(f"<th class='l'>{esc(r.label)}</th>" for r in runs) + "</tr>\n")
    keys = []
    for r in runs:
        keys += [k for k in r.context if k not in keys]
    for k in keys:
        vals = [r.context.get(k) for r in runs]
        shown = ["-" if v is None else v if isinstance(v, str) else json.dumps(v) for v in vals]
        cls = " class='differs'" if len(runs) > 1 and len(set(shown)) > 1 else ""
        page.add(f"<tr{cls}><td class='l'>{esc(k)}</td>"
                 + "".join(f"<td class='l wrap'>{esc(v)}</td>" for v in shown) + "</tr>\n")
    if not keys:
        page.add("<tr><td class='l na' colspan='99'>no results.json: environment not recorded</td></tr>\n")
    page.add("</table></details>\n")


def _definitions(page, runs):
    present = set()
    for r in runs:
        for c in r.cases.values():
            present |= c.metrics()
    page.add("<h2 id='definitions'>Metric definitions</h2>\n<details><summary>Every number is the median over the "
             "case's repetitions; where there are several, <i>[min - max]</i> follows it (whiskers and bands in the "
             "figures). Sizes are in binary units (1 MiB = 2<sup>20</sup> bytes).</summary>\n<dl>\n")
    for name in M.ordered(present):
        m = M.metric(name)
        direction = {"lower": " Lower is better.", "higher": " Higher is better."}.get(m.better, "")
        page.add(f"<dt>{esc(name)}</dt><dd>{esc(m.definition)}{direction}</dd>\n")
    page.add("<dt>memory over time</dt><dd>The first repetition's requested, allocated and reserved bytes after "
             "allocator operations, sampled every k-th operation with k doubling so that at most a fixed number of "
             "samples (512 by default) are kept, plus the exact points where requested and reserved bytes peaked "
             "and the end state (timelines/*.csv in the result directory).</dd>\n</dl>\n<p>Words in place of "
             "numbers:</p>\n<dl>\n")
    for word, meaning in STATUS_WORDS:
        page.add(f"<dt>{esc(word)}</dt><dd>{esc(meaning)}</dd>\n")
    page.add("</dl></details>\n")


def render(runs, findings=None, tunes=()):
    """The page and its number of figures; findings: the Findings section's
    HTML, if any; tunes: tune results (tune_view), their fronts after the answers."""
    scenarios = A.scenarios(runs)
    colors = F.allocator_colors(A.allocators(runs))
    page = Page()
    if not runs:  # tune results only
        page.add("<h1>cumembench report</h1>\n")
        TUNE.section(page, tunes)
        return _page(page, "cumembench report: tune " + ", ".join(t.label for t in tunes))
    _header(page, runs)
    _answers(page, runs, scenarios)
    DV.section(page, runs, scenarios, colors)
    TUNE.section(page, tunes)
    _toc(page, runs, scenarios, findings)
    for s in scenarios:
        _scenario_section(page, runs, s, colors)
    explained = X.section(runs)
    if explained:
        page.add(explained)
    _summary(page, runs, scenarios)
    if len(runs) > 1:
        _compare(page, runs, scenarios, colors)
    _failures(page, runs)
    _environment(page, runs)
    _definitions(page, runs)
    if findings:
        page.add(findings)
    return _page(page, "cumembench report: " + ", ".join(r.label for r in runs))


def _page(page, title):
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{esc(title)}</title><style>{CSS}</style><script>{SELF_CHECK}</script></head>\n<body>\n"
            + "".join(page.parts) + "</body></html>\n"), page.n_images
