"""`cumembench tune` in the report: the Pareto front of each tune result as
a table and a figure (smallest GPU against predicted allocator time per
pass), the recorded setting and the recommendation marked, the budget a
line. A tune result is the JSON of `tune --out DIR` (DIR/tune.json, found
in any directory given to report.py) or of `tune --json` (report.py --tune
FILE); docs/tune.md."""

import html
import json
import os

from . import figures as F
from . import metrics as M
from .figures import plt  # noqa: F401  (Agg is set up there)

TUNE_FILE = "tune.json"
REQUIRED = ("input", "front", "recorded", "candidates")
CAND_KEYS = ("setting", "min_capacity_bytes", "peak_reserved_bytes", "frag_ratio", "upstream_calls",
             "predicted_alloc_time_per_pass_s")


class TuneError(Exception):
    pass


class Tune:
    def __init__(self, path, doc):
        self.path = path
        self.doc = doc
        self.label = os.path.basename(doc["input"])


def load(path):
    """A tune result from a tune.json (or a directory holding one)."""
    if os.path.isdir(path):
        path = os.path.join(path, TUNE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise TuneError(f"{path}: {e.strerror}")
    except ValueError as e:
        raise TuneError(f"{path}: not a tune result (cumembench tune --json): {e}")
    missing = [k for k in REQUIRED if not isinstance(doc, dict) or k not in doc]
    bad = [c for c in (doc.get("front") or []) + [doc.get("recorded") or {}]
           if not isinstance(c, dict) or any(k not in c for k in CAND_KEYS)] if not missing else []
    if missing or bad or not isinstance(doc["front"], list):
        raise TuneError(f"{path}: not a tune result (cumembench tune --json): "
                        + (f"no {', '.join(missing)}" if missing else "a setting without " + ", ".join(CAND_KEYS)))
    return Tune(path, doc)


def found_in(directory):
    """DIR/tune.json of a result directory, if any."""
    path = os.path.join(directory, TUNE_FILE)
    return path if os.path.isfile(path) else None


def esc(text):
    return html.escape(str(text), quote=True)


def _time(c):
    t = c.get("predicted_alloc_time_per_pass_s")
    return None if t is None else t


def time_label(doc):
    f = doc.get("costs_file")
    return f"predicted from {f[f.rfind('results/'):] if f and 'results/' in f else f}" if f else \
        "not predicted (no cost file)"


# --- the figure ---------------------------------------------------------------------------------


def figure(t):
    d = t.doc
    rec = d.get("recommendation")
    pts = [(c["min_capacity_bytes"], _time(c), c) for c in d["front"] if _time(c)]
    if not pts:
        return None
    fig = F._new_figure(9.5, 4.6)
    ax = fig.subplots()
    ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", color="#4363d8", markersize=5, linewidth=1,
            label=f"Pareto front ({len(pts)} of {d['candidates']} settings)", zorder=2)
    last, span = None, (max(p[0] for p in pts) - min(p[0] for p in pts)) or 1
    for x, y, c in pts:  # names where the points are apart (the table has every one)
        if c["setting"] != (rec or {}).get("setting") and (last is None or x - last > 0.22 * span):
            ax.annotate(_short(c["setting"], 34), (x, y), textcoords="offset points", xytext=(3, 5), fontsize=6,
                        color="#333333")
            last = x
    for role, c, style in (("recorded", d["recorded"], dict(marker="X", s=110, color="#e6194B")),
                           ("recommended", rec, dict(marker="*", s=300, color="#3cb44b"))):
        if c and _time(c):
            ax.scatter([c["min_capacity_bytes"]], [_time(c)], edgecolor="black", linewidth=1, zorder=4,
                       label=f"{role}: {_short(c['setting'], 60)}", **style)
    if d.get("budget_bytes"):
        ax.axvline(d["budget_bytes"], color="#777777", linestyle="--", linewidth=1,
                   label=f"budget {M.fmt_bytes(d['budget_bytes'])}")
    times = [p[1] for p in pts] + [_time(c) for c in (d["recorded"], rec) if c and _time(c)]
    if max(times) / min(times) > 20:
        ax.set_yscale("log")
    ax.xaxis.set_major_formatter(F.FuncFormatter(lambda v, _: M.fmt_bytes(v) if v >= 0 else ""))
    ax.yaxis.set_major_formatter(F.FuncFormatter(lambda v, _: M.fmt_seconds(v) if v > 0 else "0"))
    ax.set_xlabel("smallest GPU it fits on (sim replay)")
    ax.set_ylabel(f"allocator time per pass,\n{time_label(d)}", fontsize=8)
    ax.set_title(f"cumembench tune: {t.label}, objective {d.get('objective', '?')}")
    ax.margins(0.08)
    ax.legend(fontsize=7, loc="upper right", frameon=False)
    return F._png(fig)


def _short(setting, width=44):
    s = setting.replace(":per_process_memory_fraction=1", "")
    return s if len(s) <= width else s[:width - 3] + "..."


# --- the table and the section ----------------------------------------------------------------------


def _row(c, mark):
    t = _time(c)
    frag = c.get("frag_ratio")
    return (f"<tr><td class='l'>{esc(mark)}</td><td>{esc(M.fmt_bytes(c['min_capacity_bytes']))}</td>"
            f"<td>{esc(M.fmt_bytes(c['peak_reserved_bytes']))}</td>"
            f"<td>{'-' if frag is None else f'{frag:.3f}'}</td><td>{c['upstream_calls']}</td>"
            f"<td>{'-' if t is None else esc(M.fmt_seconds(t))}</td><td class='l'><code>{esc(c['setting'])}</code>"
            f"</td></tr>\n")


def _table(page, d):
    rec = (d.get("recommendation") or {}).get("setting")
    page.add("<div class='scroll'><table class='tune-front'><tr><th class='l'></th><th>smallest GPU</th>"
             "<th title='on an unlimited GPU'>peak reserved</th><th>fragmentation</th><th>upstream calls</th>"
             f"<th title='{esc(time_label(d))}'>allocator time per pass ({esc(time_label(d))})</th>"
             "<th class='l'>setting</th></tr>\n")
    page.add(_row(d["recorded"], "recorded"))
    for c in d["front"]:
        page.add(_row(c, "recommended" if c["setting"] == rec else "front"))
    page.add("</table></div>\n")
    on_budget = d.get("front_on_budget")
    if on_budget:  # what the recommendation was chosen by: each time on a GPU of the budget
        page.add(f"<p><small>On a GPU of the budget ({esc(M.fmt_bytes(d['budget_bytes']))}), the settings that "
                 "fit it, priced there (a garbage-collection threshold or a pool's limit acts only near the "
                 "capacity):</small></p>\n<div class='scroll'><table class='tune-front'><tr><th class='l'></th>"
                 "<th>smallest GPU</th><th>allocator time per pass there</th><th>unlimited</th>"
                 "<th class='l'>setting</th></tr>\n")
        for c in on_budget:
            tb, tu = c.get("predicted_alloc_time_per_pass_on_budget_s"), _time(c)
            page.add(f"<tr><td class='l'>{'recommended' if c['setting'] == rec else ''}</td>"
                     f"<td>{esc(M.fmt_bytes(c['min_capacity_bytes']))}</td>"
                     f"<td>{'-' if tb is None else esc(M.fmt_seconds(tb))}</td>"
                     f"<td>{'-' if tu is None else esc(M.fmt_seconds(tu))}</td>"
                     f"<td class='l'><code>{esc(c['setting'])}</code></td></tr>\n")
        page.add("</table></div>\n")


def _recommendation(page, d):
    rec = d.get("recommendation")
    budget = f"budget {M.fmt_bytes(d['budget_bytes'])}" if d.get("budget_bytes") else "no budget"
    if not rec:
        small = d.get("smallest_budget")
        page.add(f"<p class='warn'>Nothing fits the {esc(budget)}"
                 + (f"; the smallest budget any setting fits is {esc(M.fmt_bytes(small['min_capacity_bytes']))} "
                    f"(<code>{esc(small['setting'])}</code>)" if small else "") + ".</p>\n")
        return
    r0 = d["recorded"]
    page.add(f"<p><b>Recommended</b> (objective {esc(d.get('objective', '?'))}, {esc(budget)}): "
             f"<code>{esc(rec['setting'])}</code>: smallest GPU {esc(M.fmt_bytes(r0['min_capacity_bytes']))} "
             f"&rarr; {esc(M.fmt_bytes(rec['min_capacity_bytes']))} against the recorded setting "
             f"<code>{esc(r0['setting'])}</code>. Paste:</p>\n<pre>{esc(rec.get('paste', rec['setting']))}</pre>\n")


def section(page, tunes):
    """Every tune result: what was searched, the recommendation, the front's table and figure."""
    if not tunes:
        return
    page.add("<h2 id='tune'>Tune: the Pareto front</h2>\n<p><small>Each result of <code>cumembench tune</code> "
             "(docs/tune.md): the settings no other beats on both the smallest GPU and the allocator time. "
             "Memory from sim replays (exact); time predicted from the cost file, never measured.</small></p>\n")
    for t in tunes:
        d = t.doc
        page.add(f"<h3>{esc(t.label)}</h3>\n<p><small>{esc(d['input'])}: {d.get('events', '?')} events, "
                 f"{d['candidates']} settings searched in {d.get('seconds', 0):.1f} s ({d.get('replays', '?')} "
                 f"replays); recorded setting from {esc(d.get('recorded_from', '?'))}; {esc(t.path)}</small></p>\n")
        _recommendation(page, d)
        page.img(figure(t), f"tune front of {t.label}")
        _table(page, d)
