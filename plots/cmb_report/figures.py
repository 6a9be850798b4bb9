"""The report's figures (matplotlib, Agg), each returned as PNG bytes.

Bars show the median over repetitions with a min-max whisker. A case that
failed, was skipped or was not run gets a word where its bar would be,
never a zero-length bar."""

import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, MultipleLocator  # noqa: E402

from . import analysis as A  # noqa: E402
from . import metrics as M  # noqa: E402
from .results import read_timeline  # noqa: E402

MAX_PANELS = 12
RUN_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
STATUS_COLORS = {"failed": "#c00000", "oom": "#a04000", "skipped": "#777777", "missing": "#777777", "na": "#999999"}
DPI = 90

plt.rcParams.update({"font.size": 9, "axes.titlesize": 9, "axes.grid": True, "grid.alpha": 0.3,
                     "axes.spines.top": False, "axes.spines.right": False})


def allocator_colors(names):
    """One color per allocator, the same in every figure."""
    names = sorted(names)
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {a: cmap(i % cmap.N) for i, a in enumerate(names)}


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _axis_formatter(metric):
    unit = M.metric(metric).unit
    if unit == "bytes":
        return FuncFormatter(lambda v, _: M.fmt_bytes(v) if v >= 0 else "")
    if unit == "s":
        return FuncFormatter(lambda v, _: M.fmt_seconds(v) if v > 0 else "0")
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
    """One legend for all panels, each label once."""
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="upper right", fontsize=8, frameon=False)


def _grid(n, ncols, width, row_height):
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, row_height * nrows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _log_scale_wanted(metric, values):
    unit = M.metric(metric).unit
    pos = [v for v in values if v > 0]
    return unit in ("s", "ns", "1/s") and pos and max(pos) / min(pos) > 50


# --- bars per allocator ---------------------------------------------------------------------


def metric_bars(runs, scenario, metric, title, overlay=None, note=""):
    """One panel per parameter set (at most MAX_PANELS): a horizontal bar per
    allocator and run. `overlay` draws a second metric as a black tick on
    each bar (peak requested on the peak-reserved bars). None when no case
    has the metric."""
    psets = A.param_sets(runs, scenario)
    allocs, skipped = shown_allocators(runs, scenario)
    values = [c.stat(metric).median for r in runs for c in r.cases_of(scenario)
              if c.ran and c.stat(metric)]
    if not values or not allocs:
        return None
    shown = psets[:MAX_PANELS]
    per_panel = len(allocs) * len(runs)
    fig, axes = _grid(len(shown), 2, 11, 0.7 + 0.16 * per_panel + 0.2 * len(allocs))
    log = _log_scale_wanted(metric, values)
    unit = M.metric(metric).unit
    vmax = max(values + ([c.stat(overlay).median for r in runs for c in r.cases_of(scenario) if c.stat(overlay)]
                         if overlay else []))
    bar_h = 0.8 / len(runs)
    for ax, p in zip(axes, shown):
        for j, run in enumerate(runs):
            for i, a in enumerate(allocs):
                y = i - 0.4 + bar_h * (j + 0.5)
                case = A.find(run, scenario, p, a)
                c = A.cell(case, metric)
                if c.kind != "value":
                    ax.text(0.005, y, c.text, transform=ax.get_yaxis_transform(), va="center", ha="left",
                            fontsize=7, style="italic", color=STATUS_COLORS[c.kind])
                    continue
                st = c.stat
                ax.barh(y, st.median, height=bar_h * 0.9, color=RUN_COLORS[j % len(RUN_COLORS)],
                        hatch="//" if c.partial else None, edgecolor="black" if c.partial else "white",
                        linewidth=0.3, label=run.label if i == 0 else None)
                if st.n > 1 and st.hi > st.lo:
                    ax.errorbar(st.median, y, xerr=[[st.median - st.lo], [st.hi - st.median]], fmt="none",
                                ecolor="black", elinewidth=0.8, capsize=2)
                if overlay and case.stat(overlay):
                    ax.plot([case.stat(overlay).median] * 2, [y - bar_h * 0.45, y + bar_h * 0.45], color="black",
                            linewidth=2, label=M.metric(overlay).label if (i == 0 and j == 0) else None)
                ax.text(max(st.hi, st.median), y, " " + M.fmt_value(metric, st.median) + (" (partial)" if c.partial
                                                                                          else ""),
                        va="center", ha="left", fontsize=7)
        ax.set_yticks(range(len(allocs)))
        ax.set_yticklabels(allocs)
        ax.set_ylim(len(allocs) - 0.5, -0.5)
        if log:
            ax.set_xscale("log")
        else:
            top = max(vmax, 1.0) if unit == "ratio" else vmax
            ax.set_xlim(0, top * 1.3 if top > 0 else 1)
            if unit == "bytes":
                _binary_ticks(ax.xaxis, top * 1.3)
        fmt = _axis_formatter(metric)
        if fmt:
            ax.xaxis.set_major_formatter(fmt)
        ax.set_title(A.short_params(p, psets), loc="left")
        ax.set_xlabel(f"{M.metric(metric).label} (median, min-max{'; log scale' if log else ''})")
    if len(runs) > 1 or overlay:
        _legend(fig, axes[:1])
    suffix = f" (first {MAX_PANELS} of {len(psets)} parameter sets)" if len(psets) > MAX_PANELS else ""
    fig.suptitle(f"{scenario}: {title}{suffix}{note}", x=0.01, ha="left", fontsize=10)
    if skipped:
        fig.text(0.01, 0.0, "skipped in every run (not drawn): " + ", ".join(skipped), fontsize=7, color="#777777",
                 style="italic", va="top")
    fig.tight_layout(rect=(0, 0, 0.88 if (len(runs) > 1 or overlay) else 1, 0.97))
    return _png(fig)


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
    psets = A.param_sets(runs, scenario)
    vary = set(A.varying_keys(psets)) - {param}
    fig, axes = _grid(len(keys), 2, 11, 3.2)
    for ax, key in zip(axes, keys):
        for a, pts in series[key].items():
            pts.sort(key=lambda t: t[0])
            x = [p[0] for p in pts]
            y = [p[1].median for p in pts]
            ax.plot(x, y, marker="o", markersize=3, color=colors.get(a), label=a)
            ax.fill_between(x, [p[1].lo for p in pts], [p[1].hi for p in pts], color=colors.get(a), alpha=0.15)
            if second:
                case_pts = [(px, c) for px, c in _series_over(runs, scenario, param, second).get(key, {}).get(a, [])]
                case_pts.sort(key=lambda t: t[0])
                if case_pts:
                    ax.plot([p[0] for p in case_pts], [p[1].median for p in case_pts], linestyle="--",
                            color=colors.get(a), linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: M.fmt_bytes(v)))
        ys = [p[1].median for pts in series[key].values() for p in pts]
        if second:
            ys += [p[1].median for pts in _series_over(runs, scenario, param, second).get(key, {}).values()
                   for p in pts]
        if ys and min(ys) > 0 and max(ys) / min(ys) > 10:
            ax.set_yscale("log")
        fmt = _axis_formatter(metric)
        if fmt:
            ax.yaxis.set_major_formatter(fmt)
        run_label, rest = key
        rest = " ".join(kv for kv in rest.split() if kv.split("=", 1)[0] in vary)
        ax.set_title(f"{run_label}  {rest}".strip(), loc="left")
        ax.set_xlabel(xlabel or param)
        ax.set_ylabel(M.metric(metric).label + (f" (dashed: {M.metric(second).label})" if second else ""))
    _legend(fig, axes)
    fig.suptitle(f"{scenario}: {title}", x=0.01, ha="left", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.85, 0.96))
    return _png(fig)


# --- memory over time ------------------------------------------------------------------------------


def timeline(run, scenario, colors):
    """Requested (gray) and reserved (colored) bytes against the operation
    index, one panel per parameter set, one line per allocator; the peaks
    are marked."""
    cases = [c for c in run.cases_of(scenario) if c.name in run.timelines]
    if not cases:
        return None
    psets = A.param_sets([run], scenario)
    shown = [p for p in psets if any(c.params == p for c in cases)][:MAX_PANELS]
    fig, axes = _grid(len(shown), 2, 11, 3.3)
    gib = float(1 << 30)
    for ax, p in zip(axes, shown):
        first = True
        for c in cases:
            if c.params != p:
                continue
            tl = read_timeline(run.timelines[c.name])
            ops = tl["op"]
            req = [v / gib if v is not None else math.nan for v in tl["requested_bytes"]]
            res = [v / gib if v is not None else math.nan for v in tl["reserved_bytes"]]
            ax.plot(ops, req, color="0.55", linewidth=0.8, linestyle="--",
                    label="requested" if first else None, zorder=1)
            first = False
            if not all(math.isnan(v) for v in res):
                ax.plot(ops, res, color=colors.get(c.allocator), linewidth=1.2, label=c.allocator, zorder=2)
            for k, (marker, series) in {"peak_reserved": ("^", res), "peak_requested": ("v", req)}.items():
                for i, kind in enumerate(tl["kind"]):
                    if kind == k and not math.isnan(series[i]):
                        ax.plot(ops[i], series[i], marker=marker, markersize=5,
                                color=colors.get(c.allocator) if k == "peak_reserved" else "0.35", zorder=3)
        ax.set_title(A.short_params(p, psets), loc="left")
        ax.set_xlabel("allocator operations")
        ax.set_ylabel("GiB")
    _legend(fig, axes)
    fig.suptitle(f"{scenario} on {run.label}: memory over time (requested dashed, reserved solid; "
                 f"triangles mark the peaks)", x=0.01, ha="left", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.85, 0.96))
    return _png(fig)


# --- across runs ----------------------------------------------------------------------------------


def ratio_bars(runs, scenario, metric, colors):
    """Per allocator: the geometric mean over parameter sets of (run / first
    run) for each later run, on a log axis; no bar where there is no pair."""
    gm = A.geomean_ratios(runs, scenario, metric)
    if not any(v for vals in gm.values() for v in vals):
        return None
    allocs = list(gm)
    fig, ax = plt.subplots(figsize=(9, 0.8 + 0.22 * len(allocs) * (len(runs) - 1) + 0.2 * len(allocs)))
    bar_h = 0.8 / (len(runs) - 1)
    for j, run in enumerate(runs[1:]):
        for i, a in enumerate(allocs):
            y = i - 0.4 + bar_h * (j + 0.5)
            v = gm[a][j]
            if v is None:
                ax.text(1.0, y, " no pair", va="center", fontsize=7, style="italic", color="#777777")
                continue
            ax.barh(y, v[0] - 1, left=1, height=bar_h * 0.9, color=RUN_COLORS[(j + 1) % len(RUN_COLORS)],
                    label=run.label if i == 0 else None)
            ax.text(max(v[0], 1), y, f" {v[0]:.2f}x", va="center", fontsize=7)
    ax.axvline(1, color="black", linewidth=0.8)
    ax.set_xscale("log")
    vals = [v[0] for vs in gm.values() for v in vs if v]
    ax.set_xlim(min(0.5, min(vals) / 1.3), max(2.0, max(vals) * 1.3))
    ratio_fmt = FuncFormatter(lambda v, _: f"{v:g}x")
    ax.xaxis.set_major_formatter(ratio_fmt)
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}x" if f"{v:g}"[0] in "25" else ""))
    ax.set_yticks(range(len(allocs)))
    ax.set_yticklabels(allocs)
    ax.set_ylim(len(allocs) - 0.5, -0.5)
    ax.set_xlabel(f"{M.metric(metric).label}: ratio to {runs[0].label} (geometric mean over parameter sets)")
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    ax.set_title(f"{scenario}: {M.metric(metric).label} relative to {runs[0].label}", loc="left")
    fig.tight_layout()
    return _png(fig)
