"""The report's "Why it did not fit" section: the replays run with
CMB_EXPLAIN_OOM=1 that did not fit, explained as tools/explain_oom.py
prints them (the same data: explain_oom.explain), with the free bytes by
reason drawn as one bar. docs/explain.md says what each part means."""

import html
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import explain_oom as X  # noqa: E402

COLORS = {"other_pool": "#8c564b", "other_stream": "#1f77b4", "event_wait": "#9467bd", "oversize": "#ff7f0e",
          "not_contiguous": "#17becf", "too_small": "#d62728", "usable": "#2ca02c"}

CSS = """
.oom-bar{display:flex;height:1.4em;width:40em;max-width:100%;border:1px solid #999;margin:.3em 0}
.oom-bar span{display:block;height:100%}
.oom-case p.reason{word-break:break-all}
.oom-key span.sw{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 .8em;vertical-align:middle}
"""


def esc(text):
    return html.escape(str(text), quote=True)


def cases(runs):
    """(run, explained case) pairs of every run, in order."""
    out = []
    for r in runs:
        try:
            out += [(r, e) for e in X.explain(r.path)]
        except X.ExplainError:
            continue  # the run's own readers already said what is wrong with it
    return out


def _bar(e):
    total = sum(v for _k, _w, v in e["reasons"] if v)
    if not total:
        return "<p>No free bytes inside the reservation: every reserved byte was allocated.</p>\n"
    parts = "".join(f"<span style='width:{100.0 * v / total:.3f}%;background:{COLORS[k]}' title='{esc(w)}: "
                    f"{esc(X.size(v))}'></span>" for k, w, v in e["reasons"] if v)
    key = "".join(f"<span class='sw' style='background:{COLORS[k]}'></span>{esc(w)}: {esc(X.size(v))}"
                  for k, w, v in e["reasons"] if v)
    return f"<div class='oom-bar'>{parts}</div><div class='oom-key'>{key}</div>\n"


def _one(e):
    m = e["m"]
    what = e["error"] or "an allocation failed (the scenario went on)"
    out = [f"<h3>{esc(e['label'])}</h3>\n<p class='reason'>{esc(e['case'])}: {esc(what)}</p>\n"]
    rounded = f" (rounded to {X.size(m['oom_rounded_bytes'])})" if "oom_rounded_bytes" in m else ""
    out.append("<table>"
               f"<tr><td class='l'>first failed request</td><td>{esc(X.size(m['oom_request_bytes']) + rounded)} on "
               f"stream {int(m.get('oom_stream', 0))}"
               + (f" at event {int(m['oom_event'])}; no frame (the trace records none)" if "oom_event" in m else "")
               + "</td></tr>"
               f"<tr><td class='l'>reserved / allocated / requested</td><td>{esc(X.size(m.get('oom_reserved_bytes')))}"
               f" / {esc(X.size(m.get('oom_allocated_bytes')))} / {esc(X.size(m.get('oom_live_requested_bytes')))}"
               "</td></tr>"
               f"<tr><td class='l'>device free outside the allocator</td>"
               f"<td>{esc(X.size(m.get('oom_device_free_bytes')))}</td></tr>"
               f"<tr><td class='l'>largest free block</td><td>{esc(X.size(m.get('oom_largest_free_bytes')))}</td></tr>"
               "</table>\n")
    if e["reasons"] is None:
        out.append(f"<p>{esc(e['label'])} gives no account of its free memory.</p>\n")
    else:
        out.append("<p>Free inside the reservation, by the reason the request could not use it:</p>\n" + _bar(e))
    if e["pins"]:
        out.append("<table><tr><th>live block</th><th>allocated at event</th><th>age (events)</th></tr>"
                   + "".join(f"<tr><td>{esc(X.size(p['bytes']))}</td><td>{int(p['event'])}</td>"
                             f"<td>{int(p['age'])}</td></tr>" for p in e["pins"]) + "</table>\n")
    n = int(m.get("oom_failed_allocs", 1))
    if n > 1:
        out.append(f"<p>Then {n - 1} more failed ({esc(X.size(m['oom_failed_bytes'] - m['oom_request_bytes']))}), "
                   f"the largest {esc(X.size(m.get('oom_largest_failed_bytes')))}, the last at event "
                   f"{int(m.get('oom_last_event', 0))}.</p>\n")
    if e["others"]:
        out.append("<table><tr><th class='l'>same trace, same parameters</th><th class='l'>fits</th>"
                   "<th>peak reserved</th><th>to spare</th></tr>"
                   + "".join(f"<tr><td class='l'>{esc(o['label'])}</td><td class='l {'ok' if o['fits'] else 'oom'}'>"
                             f"{'fits' if o['fits'] else esc(o['error'] or 'did not fit')}</td>"
                             f"<td>{esc(X.size(o['peak_reserved']) if o['fits'] else '-')}</td>"
                             f"<td>{esc(X.size(o['spare']) if o['spare'] is not None else '-')}</td></tr>"
                             for o in e["others"]) + "</table>\n")
    return "<div class='oom-case'>" + "".join(out) + "</div>\n"


def section(runs):
    """The section's HTML, or None when no run has an explained failure."""
    found = cases(runs)
    if not found:
        return None
    parts = [f"<style>{CSS}</style><h2 id='explain-oom'>Why it did not fit</h2>\n<p>Cases run with "
             "CMB_EXPLAIN_OOM=1 whose allocation failed (replays that did not fit, leak-check's error path, "
             "contention's warm-up): the first failed allocation, the allocator's free bytes by the reason it could "
             "not use them and, for replays, the live blocks that pinned the most and the other allocators of the "
             "same run on the same trace (docs/explain.md).</p>\n"]
    for r, e in found:
        parts.append((f"<p><b>{esc(r.label)}</b></p>" if len(runs) > 1 else "") + _one(e))
    return "".join(parts)
