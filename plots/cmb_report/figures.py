"""The report's figures (matplotlib, Agg), each returned as PNG bytes.

Bars show the median over repetitions with a min-max whisker. A case that
failed, did not fit, was skipped or was not run gets a word where its bar
would be, never a zero-length bar. Every axis names its unit; every value
label lies inside its axes (labels that would cross the edge are drawn
inside their bar), and each PNG carries where its labels and axes are
(Png.meta), which the page's self-check verifies in the browser. One colour
per allocator, the same in every figure and every report."""

import io
import json
import math

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.layout_engine import ConstrainedLayoutEngine  # noqa: E402
from matplotlib.ticker import FuncFormatter, MultipleLocator  # noqa: E402

from . import analysis as A  # noqa: E402
from . import impl as I  # noqa: E402
from . import metrics as M  # noqa: E402
from .results import read_timeline  # noqa: E402

MAX_PANELS = 12
RUN_COLORS = ["#4363d8", "#f58231", "#3cb44b", "#e6194B", "#911eb4", "#9A6324", "#f032e6", "#808080"]
STATUS_COLORS = {"failed": "#c00000", "oom": "#a04000", "skipped": "#777777", "missing": "#777777", "na": "#999999"}
DPI = 90
# A qualitative palette of well-separated colours (Sasha Trubetskoy's "20
# distinct colours", the palest left out), strongest first: allocators take
# them in the registry's order, so each keeps its colour in every report.
PALETTE = ["#4363d8", "#e6194B", "#3cb44b", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9A6324", "#469990",
           "#800000", "#808000", "#000075", "#bfef45", "#a9a9a9", "#ffe119", "#fabed4", "#dcbeff", "#000000"]
LEGEND_RIGHT = 0.83
LOG_SPREAD = 8        # memory over time: a byte axis spanning more than this is drawn logarithmic   # figures with a legend keep the right of the figure for it

plt.rcParams.update({"font.size": 9, "axes.titlesize": 9, "axes.grid": True, "grid.alpha": 0.3,
                     "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": DPI})


class Png(bytes):
    """PNG bytes and `meta`: the image's size and, in its pixels, the box of
    every axes and of every value label with the axes it belongs to."""
    meta = None


def _darker(color, f=0.55):
    rgb = matplotlib.colors.to_rgb(color)
    return matplotlib.colors.to_hex(tuple(c * f for c in rgb))


def allocator_colors(names):
    """One colour per allocator: its place in the registry's order (then the
    rest by name); a real library the darker shade of its emulation's."""
    order = list(I.registry())
    rest = sorted(n for n in names if I.base_name(n) not in order and not I.base_name(n).startswith("real:"))
    out = {}
    for n in names:
        base = I.base_name(n)
        if base.startswith("real:") and base[5:] in order:
            out[n] = _darker(PALETTE[order.index(base[5:]) % len(PALETTE)])
        elif base in order:
            out[n] = PALETTE[order.index(base) % len(PALETTE)]
        else:
            i = len(order) + (rest.index(n) if n in rest else 0)
            out[n] = PALETTE[i % len(PALETTE)]
    return out


def _new_figure(width, height, legend=False, bottom=0.0):
    fig = plt.figure(figsize=(width, height), dpi=DPI)
    fig.set_layout_engine(ConstrainedLayoutEngine(rect=(0, bottom, LEGEND_RIGHT if legend else 1, 1 - bottom)))
    return fig


def _png(fig, labels=()):
    """The figure as PNG (nothing cropped: the layout keeps everything inside)
    with the boxes of its axes and value labels in Png.meta."""
    fig.canvas.draw()
    labels = _fit_labels(fig, labels)
    w, h = fig.canvas.get_width_height()
    axes = [ax for ax in fig.axes if ax.get_visible()]

    def box(bb):
        return [round(bb.x0, 1), round(h - bb.y1, 1), round(bb.x1, 1), round(h - bb.y0, 1)]

    renderer = fig.canvas.get_renderer()
    meta = {"w": w, "h": h, "axes": [box(ax.get_window_extent(renderer)) for ax in axes],
            "labels": [box(t.get_window_extent(renderer)) + [axes.index(t.axes)] for t in labels]}
    # the canvas is drawn already: encode its pixels rather than render it again
    buf = io.BytesIO()
    matplotlib.image.imsave(buf, np.asarray(fig.canvas.buffer_rgba()), format="png", dpi=DPI)
    plt.close(fig)
    out = Png(buf.getvalue())
    out.meta = json.dumps(meta, separators=(",", ":"))
    return out


def _fit_labels(fig, labels):
    """A value label that crosses its axes' right edge moves inside its bar's
    end, on a white box. Returns the labels."""
    renderer = fig.canvas.get_renderer()
    moved = False
    for t in labels:
        edge = t.axes.get_window_extent(renderer).x1
        if t.get_window_extent(renderer).x1 > edge - 1:
            x, y = t.get_position()
            t.set_position((t.bar_end if hasattr(t, "bar_end") else x, y))
            t.set_text(t.get_text().strip() + " ")
            t.set_horizontalalignment("right")
            t.set_bbox({"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 0.5})
            moved = True
    if moved:  # the layout is settled: redraw without laying it out again (and slowly) for a label
        fig.set_layout_engine("none")
        fig.canvas.draw()
    return list(labels)


UNIT_WORDS = {"bytes": "bytes, binary units", "s": "seconds", "ms": "milliseconds", "us": "microseconds",
              "ns": "nanoseconds", "ratio": "ratio", "count": "count", "1/s": "per second", "GB/s": "GB/s"}


def unit_word(metric):
    return UNIT_WORDS.get(M.metric(metric).unit, "value")


def _axis_formatter(metric):
    unit = M.metric(metric).unit
    scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}.get(unit)
    if unit == "bytes":
        return FuncFormatter(lambda v, _: M.fmt_bytes(v) if v >= 0 else "")
    if scale:
        return FuncFormatter(lambda v, _: M.fmt_seconds(v * scale) if v > 0 else "0")
    return None


def _binary_ticks(axis, vmax):
    """Byte axes: ticks at a power-of-two step, about five of them."""
    if vmax > 0:
        axis.set_major_locator(MultipleLocator(2.0 ** math.ceil(math.log2(vmax / 5))))


def shown_allocators(runs, scenario):
    """Allocators with a case that was not skipped in some run; the ones
    skipped everywhere are only listed (the tables show them)."""
    allocs = A.allocators(runs, scenario)
    ran = {c.allocator for r in runs for c in r.cases_of(scenario) if c.status != "skipped"}
    return [a for a in allocs if a in ran], [a for a in allocs if a not in ran]


def _legend(fig, axes):
    """One legend for all panels, each label once, right of the panels."""
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="upper left", bbox_to_anchor=(LEGEND_RIGHT + 0.005, 0.98),
                   fontsize=8, frameon=False)


def _grid(fig, n, ncols):
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return flat[:n]


def _log_scale_wanted(metric, values):
    unit = M.metric(metric).unit
    pos = [v for v in values if v > 0]
    return unit in ("s", "ms", "us", "ns", "1/s") and pos and max(pos) / min(pos) > 50


# --- bars per allocator ---------------------------------------------------------------------


def _bar_values(runs, scenario, metric, overlay):
    values = [c.stat(metric).median for r in runs for c in r.cases_of(scenario) if c.ran and c.stat(metric)]
    tops = [max(c.stat(metric).hi, c.stat(metric).median) for r in runs for c in r.cases_of(scenario)
            if c.ran and c.stat(metric)]
    if overlay:
        tops += [c.stat(overlay).median for r in runs for c in r.cases_of(scenario) if c.ran and c.stat(overlay)]
    return values, tops


def _bar_limits(ax, metric, values, tops, log):
    unit = M.metric(metric).unit
    if log:
        pos = [v for v in values if v > 0]
        ax.set_xscale("log")
        ax.set_xlim(min(pos) / 1.5, max(tops) * 1.5)
        return
    top = max(tops) if tops else 1.0
    low = min([0.0] + values)  # a negative value (a peak below what was requested) stays on the axis
    low = low * 1.25 if low < 0 else 0.0
    if unit == "ratio" and top <= 1.0:
        ax.set_xlim(low, 1.0)   # a ratio's scale ends at 1
        return
    ax.set_xlim(low, top * 1.12 if top > 0 else 1)
    if unit == "bytes":
        _binary_ticks(ax.xaxis, top * 1.12)


def _draw_bar(ax, run_i, n_runs, y, case, cell, metric, overlay, color, run_label, first):
    """One bar with its whisker, overlay tick and value label; the label."""
    bar_h = 0.8 / n_runs
    st = cell.stat
    ax.barh(y, st.median, height=bar_h * 0.9, color=color, hatch="//" if cell.partial else None,
            edgecolor="black" if cell.partial else "white", linewidth=0.3,
            label=run_label if first and n_runs > 1 else None)  # one run: the colours are the allocators
    if st.n > 1 and st.hi > st.lo:
        ax.errorbar(st.median, y, xerr=[[st.median - st.lo], [st.hi - st.median]], fmt="none", ecolor="black",
                    elinewidth=0.8, capsize=2)
    if overlay and case.stat(overlay):
        ax.plot([case.stat(overlay).median] * 2, [y - bar_h * 0.45, y + bar_h * 0.45], color="black", linewidth=2,
                label=M.metric(overlay).label if first and run_i == 0 else None)
    t = ax.text(max(st.hi, st.median, 0), y, " " + M.fmt_value(metric, st.median) + (" (partial)" if cell.partial
                                                                                     else ""),
                va="center", ha="left", fontsize=7)
    t.bar_end = max(st.median, 0) if st.median >= 0 else 0
    return t


def metric_bars(runs, scenario, metric, title, overlay=None, colors=None, note=""):
    """One panel per parameter set (at most MAX_PANELS): a horizontal bar per
    allocator and run, in the allocator's colour (one run) or the run's
    (several). `overlay` draws a second metric as a black tick on each bar
    (peak requested on the peak-reserved bars). None when no case has the
    metric."""
    psets = A.param_sets(runs, scenario)
    allocs, skipped = shown_allocators(runs, scenario)
    values, tops = _bar_values(runs, scenario, metric, overlay)
    if not values or not allocs:
        return None
    shown = psets[:MAX_PANELS]
    legend = len(runs) > 1 or bool(overlay)
    rows = math.ceil(len(shown) / min(2, len(shown)))
    height = rows * (1.0 + 0.16 * len(allocs) * len(runs) + 0.2 * len(allocs)) + 0.5
    fig = _new_figure(11, height, legend, bottom=0.3 / height if skipped else 0)
    axes = _grid(fig, len(shown), 2)
    log = _log_scale_wanted(metric, values)
    labels = []
    for ax, p in zip(axes, shown):
        for j, run in enumerate(runs):
            for i, a in enumerate(allocs):
                y = i - 0.4 + 0.8 / len(runs) * (j + 0.5)
                case = A.find(run, scenario, p, a)
                c = A.cell(case, metric)
                if c.kind != "value":
                    ax.text(0.005, y, c.text, transform=ax.get_yaxis_transform(), va="center", ha="left",
                            fontsize=7, style="italic", color=STATUS_COLORS[c.kind])
                    continue
                color = (colors or {}).get(a, RUN_COLORS[0]) if len(runs) == 1 else RUN_COLORS[j % len(RUN_COLORS)]
                labels.append(_draw_bar(ax, j, len(runs), y, case, c, metric, overlay, color, run.label, i == 0))
        ax.set_yticks(range(len(allocs)))
        ax.set_yticklabels(allocs)
        ax.set_ylim(len(allocs) - 0.5, -0.5)
        _bar_limits(ax, metric, values, tops, log)
        fmt = _axis_formatter(metric)
        if fmt:
            ax.xaxis.set_major_formatter(fmt)
        ax.set_title(A.short_params(p, psets), loc="left")
        ax.set_xlabel(f"{M.metric(metric).label} ({unit_word(metric)}; median, min-max whiskers"
                      f"{'; log scale' if log else ''})")
    if legend:
        _legend(fig, axes[:1])
    suffix = f" (first {MAX_PANELS} of {len(psets)} parameter sets)" if len(psets) > MAX_PANELS else ""
    fig.suptitle(f"{scenario}: {title}{suffix}{note}", x=0.01, ha="left", fontsize=10)
    if skipped:
        fig.text(0.01, 0.1 / height, "skipped in every run (not drawn): " + ", ".join(skipped), fontsize=7,
                 color="#777777", style="italic", va="bottom")
    return _png(fig, labels)


# --- lines over a parameter -------------------------------------------------------------------


def _series_over(runs, scenario, param, metric):
    """{(run, other params): {allocator: [(x, Stat)]}} for a numeric parameter."""
    out = {}
    for run in runs:
        for c in run.cases_of(scenario):
            pd = c.param_dict()
            if param not in pd or not c.ran or not c.stat(metric):
                continue
            x = A.param_value(pd[param])
            if x is None:
                continue
            rest = A.params_label(c.params, drop=(param,))
            out.setdefault((run.label, rest), {}).setdefault(c.allocator, []).append((x, c.stat(metric)))
    return out


def _lines_panel(ax, runs, scenario, param, metric, second, key, series, colors):
    for a, pts in series[key].items():
        pts.sort(key=lambda t: t[0])
        x = [p[0] for p in pts]
        ax.plot(x, [p[1].median for p in pts], marker="o", markersize=3, color=colors.get(a), label=a)
        ax.fill_between(x, [p[1].lo for p in pts], [p[1].hi for p in pts], color=colors.get(a), alpha=0.15)
        if second:
            case_pts = sorted(_series_over(runs, scenario, param, second).get(key, {}).get(a, []),
                              key=lambda t: t[0])
            if case_pts:
                ax.plot([p[0] for p in case_pts], [p[1].median for p in case_pts], linestyle="--",
                        color=colors.get(a), linewidth=0.8)
    ys = [p[1].median for pts in series[key].values() for p in pts]
    if second:
        ys += [p[1].median for pts in _series_over(runs, scenario, param, second).get(key, {}).values()
               for p in pts]
    return ys


def metric_lines(runs, scenario, param, metric, title, colors, second=None, xlabel=None):
    """y = metric (median, min-max band) against a numeric parameter, one line
    per allocator, one panel per run and other-parameter combination. A
    failed point is simply absent from its line (the tables say why)."""
    series = _series_over(runs, scenario, param, metric)
    series = {k: v for k, v in series.items() if any(len(pts) > 0 for pts in v.values())}
    xs = {x for v in series.values() for pts in v.values() for x, _ in pts}
    if len(xs) < 2:
        return None
    keys = list(series)[:MAX_PANELS]
    vary = set(A.varying_keys(A.param_sets(runs, scenario))) - {param}
    fig = _new_figure(11, 3.3 * math.ceil(len(keys) / min(2, len(keys))) + 0.4, legend=True)
    axes = _grid(fig, len(keys), 2)
    for ax, key in zip(axes, keys):
        ys = _lines_panel(ax, runs, scenario, param, metric, second, key, series, colors)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: M.fmt_bytes(v)))
        log = ys and min(ys) > 0 and max(ys) / min(ys) > 10
        if log:
            ax.set_yscale("log")
        fmt = _axis_formatter(metric)
        if fmt:
            ax.yaxis.set_major_formatter(fmt)
        run_label, rest = key
        rest = " ".join(kv for kv in rest.split() if kv.split("=", 1)[0] in vary)
        ax.set_title(f"{run_label}  {rest}".strip(), loc="left")
        ax.set_xlabel(f"{xlabel or param} (bytes, binary units; log scale)")
        ax.set_ylabel(M.metric(metric).label + (f" (dashed: {M.metric(second).label})" if second else "")
                      + f" ({unit_word(metric)}{'; log scale' if log else ''})")
    _legend(fig, axes)
    fig.suptitle(f"{scenario}: {title}", x=0.01, ha="left", fontsize=10)
    return _png(fig)


# --- memory over time ------------------------------------------------------------------------------


def _timeline_panel(ax, run, cases, p, colors):
    """Draws one parameter set's lines; returns every positive peak drawn."""
    first, peaks = True, []
    for c in cases:
        if c.params != p:
            continue
        tl = read_timeline(run.timelines[c.name])
        ops = tl["op"]
        req = [v if v is not None else math.nan for v in tl["requested_bytes"]]
        res = [v if v is not None else math.nan for v in tl["reserved_bytes"]]
        ax.plot(ops, req, color="0.55", linewidth=0.8, linestyle="--", label="requested" if first else None,
                zorder=1)
        first = False
        if not all(math.isnan(v) for v in res):
            ax.plot(ops, res, color=colors.get(c.allocator), linewidth=1.2, label=c.allocator, zorder=2)
            peaks.append(max(v for v in res if not math.isnan(v)))
        peaks += [max((v for v in req if not math.isnan(v)), default=0)]
        for k, (marker, series) in {"peak_reserved": ("^", res), "peak_requested": ("v", req)}.items():
            for i, kind in enumerate(tl["kind"]):
                if kind == k and not math.isnan(series[i]):
                    ax.plot(ops[i], series[i], marker=marker, markersize=5,
                            color=colors.get(c.allocator) if k == "peak_reserved" else "0.35", zorder=3)
    return [v for v in peaks if v > 0]


def timeline(run, scenario, colors):
    """Requested (gray) and reserved (colored) bytes against the operation
    index, one panel per parameter set, one line per allocator; the peaks
    are marked. Where one allocator holds over LOG_SPREAD times what another does, the
    byte axis is logarithmic so that every line stays readable."""
    cases = [c for c in run.cases_of(scenario) if c.name in run.timelines]
    if not cases:
        return None
    psets = A.param_sets([run], scenario)
    shown = [p for p in psets if any(c.params == p for c in cases)][:MAX_PANELS]
    fig = _new_figure(11, 3.4 * math.ceil(len(shown) / min(2, len(shown))) + 0.4, legend=True)
    axes = _grid(fig, len(shown), 2)
    for ax, p in zip(axes, shown):
        peaks = _timeline_panel(ax, run, cases, p, colors)
        log = peaks and max(peaks) / min(peaks) > LOG_SPREAD
        if log:
            ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: M.fmt_bytes(v) if v > 0 else "0"))
        ax.set_title(A.short_params(p, psets), loc="left")
        ax.set_xlabel("allocator operations (count)")
        ax.set_ylabel(f"bytes (binary units{'; log scale' if log else ''})")
    _legend(fig, axes)
    fig.suptitle(f"{scenario} on {run.label}: memory over time (requested dashed, reserved solid; "
                 f"triangles mark the peaks)", x=0.01, ha="left", fontsize=10)
    return _png(fig)


# --- across runs ----------------------------------------------------------------------------------


def ratio_bars(runs, scenario, metric, colors):
    """Per allocator: the geometric mean over parameter sets of (run / first
    run) for each later run, on a log axis; no bar where there is no pair."""
    gm = A.geomean_ratios(runs, scenario, metric)
    if not any(v for vals in gm.values() for v in vals):
        return None
    allocs = list(gm)
    fig = _new_figure(9, 1.2 + 0.22 * len(allocs) * (len(runs) - 1) + 0.2 * len(allocs))
    ax = fig.subplots()
    bar_h = 0.8 / (len(runs) - 1)
    labels = []
    for j, run in enumerate(runs[1:]):
        for i, a in enumerate(allocs):
            y = i - 0.4 + bar_h * (j + 0.5)
            v = gm[a][j]
            if v is None:
                ax.text(1.0, y, " no pair", va="center", fontsize=7, style="italic", color="#777777")
                continue
            ax.barh(y, v[0] - 1, left=1, height=bar_h * 0.9, color=RUN_COLORS[(j + 1) % len(RUN_COLORS)],
                    label=run.label if i == 0 else None)
            t = ax.text(max(v[0], 1), y, f" {v[0]:.2f}x", va="center", fontsize=7)
            t.bar_end = max(v[0], 1)
            labels.append(t)
    ax.axvline(1, color="black", linewidth=0.8)
    ax.set_xscale("log")
    vals = [v[0] for vs in gm.values() for v in vs if v]
    ax.set_xlim(min(0.5, min(vals) / 1.3), max(2.0, max(vals) * 1.5))
    ratio_fmt = FuncFormatter(lambda v, _: f"{v:g}x")
    ax.xaxis.set_major_formatter(ratio_fmt)
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}x" if f"{v:g}"[0] in "25" else ""))
    ax.set_yticks(range(len(allocs)))
    ax.set_yticklabels(allocs)
    ax.set_ylim(len(allocs) - 0.5, -0.5)
    ax.set_xlabel(f"{M.metric(metric).label}: ratio to {runs[0].label} (x, log scale; geometric mean over "
                  "parameter sets)")
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    ax.set_title(f"{scenario}: {M.metric(metric).label} relative to {runs[0].label}", loc="left")
    return _png(fig, labels)
