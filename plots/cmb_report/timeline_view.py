"""The report's interactive memory timeline: one canvas per case with a
timeline, under the static figure. The samples of the timeline CSV are
kept as levels of detail: level 0 the samples themselves, each level above
buckets of two of the level below holding their maximum and minimum (so
every peak of the samples survives at every level, and the exact peaks the
harness records are marked). The page draws the coarsest level that still
gives about one bucket per pixel of the visible range: drag across the
canvas to zoom into a time range (operations), double-click to go back, click
a moment to read the sample there (requested, allocated, reserved, largest
free). A URL fragment #tl=START,END[,CLICK] (fractions of the run) does the
same at load, for tests and links. Segments and blocks at a moment are not
recorded by the timeline, and the view says so.

The data goes into the page as JSON, integers only (bytes and operation
indices), at most MAX_SAMPLES samples per case: a 10-million-event replay
recorded with --timeline-points 131072 stays far below 20 MB (make
bench-scale measures it)."""

import html
import json
import math

from .results import read_timeline

MAX_SAMPLES = 1 << 20  # the harness's own bound (CMB_TIMELINE_MAX_POINTS)
MAX_CASES = 8

CSS = """
.tl-view{margin:.4em 0 1.2em 0}
.tl-view canvas{border:1px solid #bbb;cursor:crosshair;width:100%;max-width:1100px;height:260px}
.tl-view .tl-read{font-family:monospace;font-size:12px;min-height:1.3em;white-space:pre-wrap}
"""

JS = r"""
(function () {
  function fmt(b) {
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return (i ? b.toFixed(2) : b.toFixed(0)) + " " + u[i];
  }
  // levels[0] = samples; each level above: pairs of the one below, max and min kept
  function pyramid(s) {
    var lv = [{op: s.op, hi_rs: s.rs, lo_rs: s.rs, hi_rq: s.rq, lo_rq: s.rq}];
    while (lv[lv.length - 1].op.length > 64) {
      var b = lv[lv.length - 1], n = Math.ceil(b.op.length / 2), c = {op: [], hi_rs: [], lo_rs: [], hi_rq: [], lo_rq: []};
      for (var i = 0; i < n; i++) {
        var j = 2 * i, k = Math.min(j + 1, b.op.length - 1);
        c.op.push(b.op[j]);
        c.hi_rs.push(Math.max(b.hi_rs[j], b.hi_rs[k])); c.lo_rs.push(Math.min(b.lo_rs[j], b.lo_rs[k]));
        c.hi_rq.push(Math.max(b.hi_rq[j], b.hi_rq[k])); c.lo_rq.push(Math.min(b.lo_rq[j], b.lo_rq[k]));
      }
      lv.push(c);
    }
    return lv;
  }
  function lowerBound(a, x) { var lo = 0, hi = a.length; while (lo < hi) { var m = (lo + hi) >> 1; if (a[m] < x) lo = m + 1; else hi = m; } return lo; }
  function setup(div) {
    if (div.dataset.bound) return; /* the script comes once per scenario section */
    div.dataset.bound = "1";
    var d = JSON.parse(div.querySelector("script.tl-data").textContent);
    var cv = div.querySelector("canvas"), read = div.querySelector(".tl-read");
    var lv = pyramid(d), s = d, t0 = performance.now();
    var full = [s.op[0], s.op[s.op.length - 1]], view = full.slice(), drag = null, drawn = 0, level = 0;
    var ymax = 0;
    for (var i = 0; i < s.rs.length; i++) ymax = Math.max(ymax, s.rs[i], s.rq[i]);
    ymax = ymax || 1;
    function X(op) { return (op - view[0]) / Math.max(1, view[1] - view[0]) * cv.width; }
    function Y(v) { return cv.height - 4 - v / ymax * (cv.height - 16); }
    function draw() {
      var w = cv.width = cv.clientWidth || 1100, g = cv.getContext("2d");
      cv.height = cv.clientHeight || 260;
      g.clearRect(0, 0, w, cv.height);
      var lo = lowerBound(s.op, view[0]), hi = lowerBound(s.op, view[1]) + 1;
      level = 0;
      while (level + 1 < lv.length && (hi - lo) / (1 << level) > 2 * w) level++;
      var L = lv[level], a = Math.max(0, (lo >> level) - 1), b = Math.min(L.op.length, (hi >> level) + 2);
      drawn = b - a;
      [["hi_rs", "lo_rs", d.color, 1.4], ["hi_rq", "lo_rq", "#888", 1]].forEach(function (k) {
        g.strokeStyle = k[2]; g.lineWidth = k[3]; g.beginPath();
        for (var i = a; i < b; i++) { var x = X(L.op[i]); if (i === a) g.moveTo(x, Y(L[k[0]][i])); else g.lineTo(x, Y(L[k[0]][i])); g.lineTo(x, Y(L[k[1]][i])); }
        g.stroke();
      });
      g.fillStyle = "#000";
      d.peaks.forEach(function (p) { if (p[0] >= view[0] && p[0] <= view[1]) { g.beginPath(); g.arc(X(p[0]), Y(p[1]), 3.5, 0, 7); g.fill(); } });
      g.font = "11px sans-serif";
      g.fillText("ops " + Math.round(view[0]) + " - " + Math.round(view[1]) + "   max " + fmt(ymax) + "   level " + level + " (" + drawn + " buckets)", 6, 12);
      div.dataset.view = Math.round(view[0]) + "," + Math.round(view[1]);
      div.dataset.drawn = drawn; div.dataset.level = level; div.dataset.levels = lv.length;
    }
    function pick(op) {
      var i = Math.min(s.op.length - 1, lowerBound(s.op, op));
      if (i > 0 && op - s.op[i - 1] < s.op[i] - op) i--;
      var t = "op " + s.op[i] + ": requested " + fmt(s.rq[i]) + ", allocated " + (s.al[i] < 0 ? "?" : fmt(s.al[i])) +
              ", reserved " + fmt(s.rs[i]) + ", largest free " + (s.lf[i] < 0 ? "?" : fmt(s.lf[i])) +
              " (segments and blocks at a moment are not recorded by the timeline)";
      read.textContent = t; div.dataset.picked = s.op[i];
    }
    function opAt(ev) { var r = cv.getBoundingClientRect(); return view[0] + (ev.clientX - r.left) / r.width * (view[1] - view[0]); }
    cv.addEventListener("mousedown", function (ev) { drag = opAt(ev); });
    cv.addEventListener("mouseup", function (ev) {
      var at = opAt(ev);
      if (drag !== null && Math.abs(at - drag) > (view[1] - view[0]) / 200) { view = [Math.min(at, drag), Math.max(at, drag)]; draw(); }
      else pick(at);
      drag = null;
    });
    cv.addEventListener("dblclick", function () { view = full.slice(); draw(); });
    var m = /#tl=([0-9.]+),([0-9.]+)(?:,([0-9.]+))?/.exec(location.hash);
    if (m) {
      var span = full[1] - full[0];
      view = [full[0] + parseFloat(m[1]) * span, full[0] + parseFloat(m[2]) * span];
    }
    draw();
    if (m && m[3] !== undefined) pick(view[0] + parseFloat(m[3]) * (view[1] - view[0]));
    var top = lv[lv.length - 1].hi_rs, tmax = 0;
    for (var q = 0; q < top.length; q++) tmax = Math.max(tmax, top[q]);
    div.dataset.topMax = tmax; /* the coarsest level still holds the highest reserved sample */
    div.dataset.ready = (performance.now() - t0).toFixed(0) + " ms";
  }
  function all() { document.querySelectorAll(".tl-view").forEach(setup); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", all); else all();
})();
"""


def _ints(values, missing=-1):
    return [missing if v is None or (isinstance(v, float) and math.isnan(v)) else int(v) for v in values]


def _case_data(path, color):
    tl = read_timeline(path)
    keep = [i for i, k in enumerate(tl["kind"]) if tl["op"][i] is not None][:MAX_SAMPLES]
    ops = [tl["op"][i] for i in keep]
    order = sorted(range(len(ops)), key=lambda j: ops[j])  # peaks and the end sit among the samples
    idx = [keep[j] for j in order]

    def col(name):
        c = tl.get(name) or [None] * len(tl["op"])
        return _ints([c[i] for i in idx])

    rs = [max(v, 0) for v in col("reserved_bytes")]
    rq = [max(v, 0) for v in col("requested_bytes")]
    peaks = [[int(tl["op"][i]), int(tl["reserved_bytes"][i] or 0)] for i in idx
             if tl["kind"][i] in ("peak_reserved", "peak_requested")]
    return {"op": _ints([tl["op"][i] for i in idx]), "rq": rq, "al": col("allocated_bytes"), "rs": rs,
            "lf": col("largest_free_bytes"), "peaks": peaks, "color": color}


def view(run, scenario, colors):
    """The HTML of the scenario's interactive timelines on one run ('' when none)."""
    cases = [c for c in run.cases_of(scenario) if c.name in run.timelines][:MAX_CASES]
    if not cases:
        return ""
    out = [f"<style>{CSS}</style><script>{JS}</script>"]
    parts = []
    for c in cases:
        data = _case_data(run.timelines[c.name], colors.get(c.allocator) or "#1f77b4")
        parts.append(f"<div class='tl-view' data-case='{html.escape(c.name, quote=True)}'>"
                     f"<div><b>{html.escape(c.allocator)}</b> {html.escape(c.params)}: reserved (colour) and "
                     "requested (grey), max and min of each bucket; dots: the exact peaks. Drag to zoom, "
                     "double-click to reset, click to read a moment.</div>"
                     f"<canvas width='1100' height='260'></canvas><div class='tl-read'></div>"
                     f"<script type='application/json' class='tl-data'>{json.dumps(data, separators=(',', ':'))}"
                     "</script></div>\n")
    return "<details open><summary>memory over time, interactive</summary>" + "".join(out + parts) + "</details>\n"
