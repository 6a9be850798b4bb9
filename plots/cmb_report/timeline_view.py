"""The report's interactive memory timeline: one canvas per case with a
timeline, under the static figure. The samples of the timeline CSV are
kept as levels of detail: level 0 the samples themselves, each level above
buckets of two of the level below holding their maximum and minimum (so
every peak of the samples survives at every level, and the exact peaks the
harness records are marked). The page draws the coarsest level that still
gives about one bucket per pixel of the visible range: drag across the
canvas to zoom into a time range (operations), double-click to go back, click
a moment to read the sample there (requested, allocated, reserved, largest
free), the segments the allocator held from its upstream at the moment
recorded nearest to it (the harness's timelines/*.segments: each range with
its live blocks, the bytes they cover and the largest free gap, the
largest blocks drawn in place; see segments_data) and, for a replay, the
blocks live there read from the trace (KEYFRAMES moments, or the moments
with segments, the largest BLOCKS_SHOWN blocks of each with their size, age
and stream; see blocks_at). A URL fragment #tl=START,END[,CLICK] (fractions
of the run) does the same at load, for tests and links.

The data goes into the page as JSON, integers only (bytes and operation
indices), at most MAX_SAMPLES samples per case and SEGMENT_BUDGET bytes of
segments: a 10-million-event replay recorded with --timeline-points 131072
stays far below 20 MB (make bench-scale measures it)."""

import html
import json
import math
import os

from .results import read_timeline

MAX_SAMPLES = 1 << 20  # the harness's own bound (CMB_TIMELINE_MAX_POINTS)
MAX_CASES = 8

CSS = """
.tl-view{margin:.4em 0 1.2em 0}
.tl-view canvas{border:1px solid #bbb;cursor:crosshair;width:100%;max-width:1100px;height:260px}
.tl-view .tl-read{font-family:monospace;font-size:12px;min-height:1.3em;white-space:pre-wrap;max-height:24em;overflow:auto}
.tl-view canvas.tl-seg{cursor:default;height:150px;display:none}
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
    var cv = div.querySelector("canvas"), read = div.querySelector(".tl-read"), sc = div.querySelector("canvas.tl-seg");
    var sg = d.sg, sgOps = sg.m.map(function (m) { return m[0]; });
    var lv = pyramid(d), s = d, t0 = performance.now(), kfOps = (d.kf || []).map(function (k) { return k[0]; });
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
              ", reserved " + fmt(s.rs[i]) + ", largest free " + (s.lf[i] < 0 ? "?" : fmt(s.lf[i]));
      var at = s.op[i], seg;
      if (sg.m.length) { var j = nearest(sgOps, at); at = sgOps[j]; seg = segmentsAt(j, s.op[i]); }
      else { seg = "segments: " + sg.why; div.dataset.segCount = "-"; }
      read.textContent = t + "\n" + seg + "\n" + blocksAt(at); div.dataset.picked = s.op[i];
    }
    function nearest(a, op) {
      var j = Math.min(a.length - 1, lowerBound(a, op));
      if (j > 0 && op - a[j - 1] < a[j] - op) j--;
      return j;
    }
    function hex(a) { return "0x" + a.toString(16); }
    // the ranges held from the upstream at recorded moment j, the largest blocks drawn in them
    function segmentsAt(j, op) {
      var m = sg.m[j], f = m[6], b = m[7], rows = [], sum = 0, cov = 0, big = 0;
      for (var q = 0; q < f.length; q += 4) {
        var e = 3 * f[q], start = sg.base + sg.tab[e], size = sg.tab[e + 1], res = sg.tab[e + 2];
        sum += size; cov += f[q + 2]; big = Math.max(big, f[q + 3]);
        rows.push("  " + hex(start) + "  " + fmt(size) + ": " + f[q + 1] + " blocks cover " + fmt(f[q + 2]) +
                  " (" + (100 * f[q + 2] / size).toFixed(0) + "%), largest free gap " + fmt(f[q + 3]) +
                  (res < 0 ? "" : ", mapped in the reservation at " + hex(sg.base + res)));
      }
      drawSegments(m);
      var ds = div.dataset;
      ds.segOp = m[0]; ds.segCount = f.length / 4; ds.segBytes = sum; ds.segCovered = cov; ds.segReserved = m[3];
      ds.segRequested = m[2]; ds.segBlocks = m[4]; ds.segDrawn = b.length / 3;
      return "segments held at op " + m[0] + (m[0] === op ? "" : " (the nearest moment recorded, " + Math.abs(m[0] - op) +
             " ops away)") + (m[1] ? " [" + m[1] + "]" : "") + ": " + f.length / 4 + (f.length === 4 ? " segment, " : " segments, ") +
             fmt(sum) + " from the upstream; " + m[4] + " live blocks cover " + fmt(cov) + " of them" +
             (m[5] ? " (" + m[5] + " blocks lie in none)" : "") + ", the largest free gap " + fmt(big) +
             "; drawn below: each segment in address order, its " + (b.length / 3 < m[4] ? "largest " + b.length / 3 + " " : "") +
             "blocks in place\n" + rows.join("\n");
    }
    // segments side by side in address order, wrapped over rows, widths by bytes
    function drawSegments(m) {
      var f = m[6], b = m[7], w = sc.width = sc.clientWidth || 1100, rowsN = 6, rowH = 22, gap = 2;
      sc.style.display = "block"; sc.height = sc.clientHeight || 150;
      var g = sc.getContext("2d"), total = 0, n = f.length / 4;
      g.clearRect(0, 0, w, sc.height);
      for (var q = 0; q < f.length; q += 4) total += sg.tab[3 * f[q] + 1];
      var per = Math.max(1, total / Math.max(1, rowsN * w - n * (gap + 1))), x = 0, y = 0, spans = [];
      for (var k = 0; k < n; k++) { // each segment: one or more spans [segment, from byte, x, y, width]
        var left = sg.tab[3 * f[4 * k] + 1], from = 0;
        while (left > 0) {
          if (x >= w - 1) { x = 0; y++; }
          var px = Math.max(1, Math.min(w - x, left / per)), bytes = Math.min(left, px * per);
          spans.push([k, from, x, y, px, bytes]); from += bytes; left -= bytes; x += px;
        }
        x += gap;
      }
      spans.forEach(function (p) {
        g.fillStyle = "#eee"; g.fillRect(p[2], 4 + p[3] * rowH, p[4], rowH - 4);
        g.strokeStyle = "#999"; g.strokeRect(p[2] + .5, 4.5 + p[3] * rowH, p[4] - 1, rowH - 5);
      });
      g.fillStyle = d.color;
      b = b.slice();
      for (var q = 0, end = 0; q < b.length; q += 3) { // gaps back to offsets
        if (q === 0 || b[q] !== b[q - 3]) end = 0;
        b[q + 1] += end; end = b[q + 1] + b[q + 2];
      }
      for (var q = 0, s0 = 0; q < b.length; q += 3) {
        while (s0 < spans.length && (spans[s0][0] < b[q] || (spans[s0][0] === b[q] && spans[s0][1] + spans[s0][5] <= b[q + 1]))) s0++;
        for (var t = s0; t < spans.length && spans[t][0] === b[q] && spans[t][1] < b[q + 1] + b[q + 2]; t++) {
          var p = spans[t], lo = Math.max(b[q + 1], p[1]), hi = Math.min(b[q + 1] + b[q + 2], p[1] + p[5]);
          g.fillRect(p[2] + (lo - p[1]) / per, 6 + p[3] * rowH, Math.max(1, (hi - lo) / per), rowH - 8);
        }
      }
      g.fillStyle = "#000"; g.font = "11px sans-serif";
      g.fillText("op " + m[0] + ": " + n + " segments (grey: free), blocks in colour; 1 px = " + fmt(per), 6, sc.height - 6);
    }
    // the blocks live at the moment kept nearest to op (the largest first)
    function blocksAt(op) {
      if (!d.kf || !d.kf.length) { div.dataset.blocks = "-"; return "blocks: " + d.kf_why; }
      var j = Math.min(kfOps.length - 1, lowerBound(kfOps, op));
      if (j > 0 && op - kfOps[j - 1] < kfOps[j] - op) j--;
      var k = d.kf[j], f = k[4], n = f.length / 4, rows = [];
      for (var q = 0; q < f.length; q += 4)
        rows.push("  " + fmt(f[q]) + "  allocated at op " + f[q + 1] + " (" + (k[0] - f[q + 1]) + " ops before), stream " +
                  (f[q + 2] < 0 ? "?" : f[q + 2]) + ", trace id " + f[q + 3]);
      div.dataset.blocks = k[1]; div.dataset.blocksOp = k[0]; div.dataset.blocksExact = k[3]; div.dataset.blocksShown = n;
      return "blocks live at op " + k[0] + (k[0] === op ? "" : " (the nearest moment kept, " + Math.abs(k[0] - op) +
             " ops away)") + ": " + k[1] + " blocks, " + fmt(k[2]) + (k[3] ? "" : " - NOT the replay's: its requested " +
             "bytes differ here (an allocation failed before)") + (n ? "; the largest:\n" + rows.join("\n") : "") +
             (k[1] > n ? "\n  ... and " + (k[1] - n) + " more" : "");
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


# --- the segments at a moment ----------------------------------------------------------------

# The harness writes beside a timeline over an upstream (timelines/NAME.segments,
# harness/timeline_segments.c) up to 512 moments evenly spaced by operation, the
# reserved peak and the end: at each, every range the allocator held from its
# upstream (an allocation, or a run of mapped pages in a reservation) with the
# live blocks inside it (count, requested bytes, the largest gap none covers)
# and the largest 128 blocks placed (segment, offset, size).

SEGMENT_BUDGET = 2 << 20        # bytes of JSON per case for the segments: moments are thinned to fit
SEGMENT_BUDGET_VIEW = 4 << 20   # and for all cases of a scenario together
SEGMENT_KINDS = {"sample": "", "peak_reserved": "the reserved peak", "end": "the end"}


def read_segments(path):
    """The moments of a .segments file: [op, kind, requested, reserved, blocks,
    outside, [[start, size, reservation, blocks, covered, largest free]...],
    [[segment, offset, size]...]]; ValueError on a malformed file."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        if f.readline().rstrip("\n") != "# cumembench segments":
            raise ValueError(f"{path}: not a cumembench segments file")
        for lineno, line in enumerate(f, start=2):
            p = line.split()
            if not p or p[0].startswith("#"):
                continue
            try:
                if p[0] == "m" and len(p) == 9 and p[2] in SEGMENT_KINDS:
                    out.append([int(p[1]), p[2]] + [int(v) for v in p[3:7]] + [[], []])
                elif p[0] == "s" and len(p) == 7 and out:
                    out[-1][6].append([int(v) for v in p[1:]])
                elif p[0] == "b" and len(p) == 4 and out and int(p[1]) < len(out[-1][6]):
                    out[-1][7].append([int(v) for v in p[1:]])
                else:
                    raise ValueError
            except ValueError:
                raise ValueError(f"{path}: line {lineno}: malformed: {line.strip()[:80]}") from None
    return out


def _encode_moments(moments):
    """The moments as the page reads them: each segment once in a table
    (start from a base, size, reservation or -1), each moment [op, kind,
    requested, reserved, blocks, outside, [table index, blocks, covered,
    largest free]*, [segment, gap, size]*], a block's offset being its gap
    after the end of the block before it in its segment (0 for the first)."""
    base = min((g[0] for m in moments for g in m[6]), default=0)
    table, tab, enc = {}, [], []
    for m in moments:
        segs, blocks = [], []
        for start, size, res, n, covered, free in m[6]:
            key = (start, size, res)
            if key not in table:
                table[key] = len(table)
                tab += [start - base, size, res - base if res else -1]
            segs += [table[key], n, covered, free]
        seg, end = -1, 0
        for b in m[7]:  # by segment and offset: each offset as the gap after the block before
            if b[0] != seg:
                seg, end = b[0], 0
            blocks += [b[0], b[1] - end, b[2]]
            end = b[1] + b[2]
        enc.append([m[0], SEGMENT_KINDS[m[1]]] + m[2:6] + [segs, blocks])
    return base, tab, enc


def segments_data(path, budget=SEGMENT_BUDGET):
    """The page's segments of one case: {base, tab, m, of, why}; every
    k-th moment (the peak and the end always) when all would pass budget."""
    if not path or not os.path.isfile(path):
        return {"base": 0, "tab": [], "m": [], "of": 0,
                "why": "not recorded for this case (an allocator over an upstream records them with its timeline)"}
    try:
        moments = read_segments(path)
    except (OSError, ValueError) as e:
        return {"base": 0, "tab": [], "m": [], "of": 0, "why": f"could not be read: {e}"}
    step, size = 1, None
    while True:
        keep = [m for i, m in enumerate(moments) if i % step == 0 or m[1] != "sample"]
        base, tab, enc = _encode_moments(keep)
        size = len(json.dumps([tab, enc], separators=(",", ":")))
        if size <= budget or len(keep) <= 2 or step >= len(moments):
            break
        step = max(step + 1, math.ceil(step * size / budget))
    return {"base": base, "tab": tab, "m": enc, "of": len(moments), "why": ""}


# --- the blocks live at a moment ------------------------------------------------------------

# The timeline records bytes. The blocks live at a moment come from the
# replayed trace (the suite's format), replayed here as the replay scenario
# does (scenarios/replay.c): each allocation one operation, each free of a
# live block one, a pass's leftovers freed at its end. The replay does not
# record which allocations failed, so where the live bytes of the replayed
# trace differ from the timeline's requested bytes at a moment, the moment
# is marked as not reconstructed (an allocation failed before it). Where
# the harness recorded segments, the blocks are read at those moments, so
# a click shows both at one operation.

KEYFRAMES = 1024     # moments with their blocks, evenly spaced among the samples
BLOCKS_SHOWN = 48    # the largest blocks kept per moment (the count and bytes of all are kept)


def _args_cwd(run_path):
    """The directory the run was started in (run.args), or None."""
    try:
        with open(os.path.join(run_path, "run.args"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("cwd "):
                    return line[4:].rstrip("\n").replace("\\n", "\n").replace("\\\\", "\\")
    except OSError:
        pass
    return None


def _trace_file(run, case):
    p = case.param_dict().get("trace")
    if not p:
        return None
    for base in ([""] if os.path.isabs(p) else [_args_cwd(run.path), os.getcwd(), os.path.dirname(run.path)]):
        if base is None:
            continue
        full = os.path.join(base, p)
        if os.path.isfile(full):
            return full
    return None


def _events(path):
    """(op, id, size, stream) of the trace's allocations and frees."""
    with open(path, encoding="utf-8", errors="replace") as f:
        if f.readline().rstrip("\n") != "# cumembench-trace 1":
            return
        for line in f:
            c = line[:1]
            if c == "a" or c == "f":
                p = line.split()
                if len(p) == 5:
                    yield c, p[1], 0 if c == "f" else int(p[2]), p[3]


def _moment(op, live, requested):
    blocks = sorted(live.items(), key=lambda kv: (-kv[1][0], kv[1][1]))
    total = sum(v[0] for v in live.values())
    flat = []
    for ident, (size, born, stream) in blocks[:BLOCKS_SHOWN]:
        flat += [size, born, int(stream) if stream.isdigit() else -1, int(ident) if ident.isdigit() else ident]
    return [op, len(live), total, 1 if requested is None or requested == total else 0, flat]


def blocks_at(path, ops, requested, passes=1):
    """The live blocks at each operation of `ops` (sorted), replaying the
    trace at `path`: [op, count, bytes, exact, [size, allocated at op,
    stream, trace id]*]; None when the trace is not in the suite's format."""
    live, out, op, k = {}, [], 0, 0
    want = sorted(set(ops))
    if not want:
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        if f.readline().rstrip("\n") != "# cumembench-trace 1":
            return None
    for pass_ in range(max(1, passes)):
        for c, ident, size, stream in _events(path):
            if c == "a":
                op += 1
                live[ident] = (size, op, stream)
            elif ident in live:
                op += 1
                del live[ident]
            else:
                continue
            while k < len(want) and want[k] == op:
                out.append(_moment(op, live, requested.get(op)))
                k += 1
            if k == len(want):
                return out
        if pass_ + 1 < passes:
            for ident in list(live):   # the end of a pass frees what it left live
                op += 1
                del live[ident]
                while k < len(want) and want[k] == op:
                    out.append(_moment(op, live, requested.get(op)))
                    k += 1
    return out


def _keyframes(run, case, data):
    """The blocks at the moments with segments (a click shows both at one
    operation), or else at KEYFRAMES moments among the samples; the peaks too."""
    path = _trace_file(run, case) if case.scenario == "replay" else None
    if not path:
        return None, ("the blocks live at a moment are known for a replay of a trace in the suite's format; "
                      "this case has none")
    n = len(data["op"])
    if data["sg"]["m"]:
        pick = {m[0] for m in data["sg"]["m"]}
    else:
        pick = {data["op"][round(i * (n - 1) / (KEYFRAMES - 1))] for i in range(KEYFRAMES)} if n else set()
    pick.update(p[0] for p in data["peaks"])
    requested = dict(zip(data["op"], data["rq"]))
    try:
        passes = int(case.param_dict().get("passes", "1"))
        frames = blocks_at(path, sorted(pick), requested, passes)
    except (OSError, ValueError) as e:
        return None, f"the blocks could not be read from the trace: {e}"
    if frames is None:
        return None, "the trace is not in the suite's format: the blocks live at a moment are not known"
    return frames, ""


def view(run, scenario, colors):
    """The HTML of the scenario's interactive timelines on one run ('' when none)."""
    cases = [c for c in run.cases_of(scenario) if c.name in run.timelines][:MAX_CASES]
    if not cases:
        return ""
    out = [f"<style>{CSS}</style><script>{JS}</script>"]
    parts = []
    for c in cases:
        data = _case_data(run.timelines[c.name], colors.get(c.allocator) or "#1f77b4")
        data["sg"] = segments_data(os.path.splitext(run.timelines[c.name])[0] + ".segments",
                                   min(SEGMENT_BUDGET, SEGMENT_BUDGET_VIEW // len(cases)))
        data["kf"], data["kf_why"] = _keyframes(run, c, data)
        parts.append(f"<div class='tl-view' data-case='{html.escape(c.name, quote=True)}'>"
                     f"<div><b>{html.escape(c.allocator)}</b> {html.escape(c.params)}: reserved (colour) and "
                     "requested (grey), max and min of each bucket; dots: the exact peaks. Drag to zoom, "
                     "double-click to reset, click to read a moment: the segments held there and the blocks in them.</div>"
                     "<canvas width='1100' height='260'></canvas><div class='tl-read'></div>"
                     "<canvas class='tl-seg' width='1100' height='150'></canvas>"
                     f"<script type='application/json' class='tl-data'>{json.dumps(data, separators=(',', ':'))}"
                     "</script></div>\n")
    return "<details open><summary>memory over time, interactive</summary>" + "".join(out + parts) + "</details>\n"
