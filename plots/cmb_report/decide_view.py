"""The answers as a figure: per run, one panel per scenario with a
recommendation, each allocator at its smallest GPU (x) and its allocator
time (y): predicted from the run's cost file in sim, measured on a GPU (real
allocators). The recommended allocator is a star; one that did not fit, or
whose time is far above the rest, is a hollow mark. The same numbers as the
answers block and table (analysis.decision, harness/rank.c)."""

import html
import math

from matplotlib.ticker import FuncFormatter, NullFormatter

from . import analysis as A
from . import figures as F
from . import metrics as M
from .figures import plt  # noqa: F401  (Agg is set up there)

MAX_PANELS = 12


def cost_file(run):
    """The cost file a sim run's times were predicted from (its context's
    costs_file), shortened to the repository's path; None when the run
    predates the record."""
    path = run.context.get("costs_file")
    if not path:
        return None
    return path[path.rfind("results/"):] if "results/" in path else path


def time_label(run):
    if run.mode == "gpu":
        return "measured allocator time (time_s, real allocators)"
    f = cost_file(run)
    if f == "none":
        return None  # no cost file: no time to draw
    return f"predicted from {f}" if f else "predicted (cost file not recorded in this run)"


def _x_of(scenario, d):
    """(what x is, key in an entry): the smallest GPU where the scenario
    searches one, else its own memory measure as the recommendation uses it."""
    if d.by_cap:
        return "smallest GPU it fits on", "cap"
    name, higher = A._memory_counter(scenario)
    return (f"{M.metric(name).label}{' (higher is better)' if higher else ''}, summed over parameter sets"), "mem"


def _panels(run, scenarios):
    out = []
    for s in scenarios:
        if s in ("fastpath", "multi-gpu") or not any(c.ran for c in run.cases_of(s)):
            continue
        d = A.decision(run, s)
        key = _x_of(s, d)[1]
        pts = [(k, e) for k, e in d.entries.items() if e["t"] == e["t"] and e["t"] > 0 and e[key] == e[key]]
        if pts:
            out.append((s, d, pts))
    return out[:MAX_PANELS]


def _draw(ax, scenario, d, pts, colors):
    xname, key = _x_of(scenario, d)
    higher = key == "mem" and A._memory_counter(scenario)[1]
    for k, e in pts:
        x = -e[key] if higher else e[key]
        color = colors.get(k.split(":")[0].split("@")[0], colors.get(k, "#555555"))
        odd = not e["fits"] or d.far[k]
        note = (" (failed)" if e["failed"] else " (did not fit)") if not e["fits"] else \
            " (far above the rest)" if d.far[k] else ""
        if k == d.recommended:
            ax.scatter([x], [e["t"]], marker="*", s=260, color=color, edgecolor="black", linewidth=1.2, zorder=4,
                       label=f"{k} (recommended)")
        else:
            ax.scatter([x], [e["t"]], s=55, facecolor="none" if odd else color, edgecolor=color, linewidth=1.5,
                       zorder=3, label=k + note)
    unit_bytes = key == "cap" or M.metric(A._memory_counter(scenario)[0]).unit == "bytes"
    if unit_bytes:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: M.fmt_bytes(v) if v >= 0 else ""))
    times = [e["t"] for _, e in pts]
    if max(times) > 20 * min(times):
        ax.set_yscale("log")
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: M.fmt_seconds(v) if v > 0 else "0"))
    ax.set_xlabel(xname)
    ax.set_title(f"{scenario}: recommended {d.recommended or 'none'}")
    ax.legend(fontsize=7, loc="best", frameon=False)


def figure(run, scenarios, colors):
    """PNG bytes, or None when no scenario of the run has an allocator time."""
    label = time_label(run)
    panels = _panels(run, scenarios) if label else []
    if not panels:
        return None
    ncols = min(2, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = F._new_figure(6.2 * ncols, 3.9 * nrows + 0.4)
    axes = F._grid(fig, len(panels), ncols)
    for ax, (s, d, pts) in zip(axes, panels):
        _draw(ax, s, d, pts, colors)
        ax.set_ylabel(label.replace(" from ", " allocator time\nfrom ", 1) if label.startswith("predicted from")
                      else label.replace(" (", "\n(", 1))
        ax.margins(0.1)
    fig.suptitle(f"{run.label}: each allocator's smallest GPU against its allocator time\n"
                 "star: recommended; hollow: did not fit, or far above the rest", fontsize=8)
    return F._png(fig)


def section(page, runs, scenarios, colors):
    """The figure under the answers table, per run."""
    for r in runs:
        png = figure(r, scenarios, colors)
        if png is None:
            continue
        page.add(f"<p id='answers-figure-{_slug(r.label)}'><small>{_esc(r.label)}: the answers as a figure. "
                 f"Allocator time: {_esc(time_label(r))}.</small></p>\n")
        page.img(png, f"smallest GPU and allocator time on {r.label}")


def _slug(text):
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")


def _esc(text):
    return html.escape(str(text), quote=True)
