#!/usr/bin/python3
"""report.py - turns cumembench result directories into one self-contained
HTML report (matplotlib figures embedded) and gnuplot quick-look plots.

    plots/report.py RUN_DIR [RUN_DIR ...] [-o report.html] [--plots DIR]
                    [--findings FILE | --no-findings] [--fleet JOB_DIR] [--tune FILE]

One directory: a report of that run. Several (one per GPU, driver or CUDA
version): the same, plus the runs side by side with ratios against the
first. The report ends with a Findings section rendered from
docs/findings.md (or --findings FILE); a report of sim runs only links to
docs/findings.md (the findings are GPU measurements). A directory with a
tune.json (`cumembench tune --out DIR`) adds that tune result's Pareto front;
a directory with only a tune.json makes a report of the tune result alone. Runs under an interpreter that has
matplotlib and markdown (Debian's python3-matplotlib and python3-markdown
are for /usr/bin/python3). docs/reports.md says what every figure and table
shows.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import matplotlib  # noqa: F401
except ImportError:
    sys.exit(f"report: {sys.executable} has no matplotlib; run the report with /usr/bin/python3 "
             "(Debian: apt-get install python3-matplotlib)")

from cmb_report import findings, fleet, gnuplot, html, tune_view  # noqa: E402
from cmb_report.results import ReportError, load_runs  # noqa: E402

DEFAULT_FINDINGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "findings.md")


def _slug(text):
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-") or "run"


def _parse(argv):
    ap = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", metavar="RUN_DIR", help="result directories (results.csv, results.json; "
                                                               "a tune.json of cumembench tune --out DIR too)")
    ap.add_argument("--tune", action="append", default=[], metavar="FILE",
                    help="a tune result (cumembench tune --json > FILE): its Pareto front, table and figure "
                         "(repeatable; docs/tune.md)")
    ap.add_argument("-o", "--out", help="the HTML report (default: RUN_DIR/report.html for one run, "
                                        "./cumembench-report.html for several)")
    ap.add_argument("--plots", help="directory for the gnuplot PNG/SVG plots and their data (default: beside "
                                    "the report, <report name>-plots/)")
    ap.add_argument("--no-gnuplot", action="store_true", help="only the HTML report")
    doc = ap.add_mutually_exclusive_group()
    doc.add_argument("--findings", metavar="FILE", help="Markdown rendered as the report's Findings section "
                                                        "(default: docs/findings.md of this tree, if there)")
    doc.add_argument("--no-findings", action="store_true", help="no Findings section")
    ap.add_argument("--fleet", metavar="JOB_DIR", help="a job directory of ci/examples/slurm-suite.sbatch: the "
                                                       "report opens with its nodes, GPUs and drivers side by side "
                                                       "and names its missing runs (docs/cluster.md)")
    ap.add_argument("-q", "--quiet", action="store_true", help="only errors")
    return ap.parse_args(argv)


def _findings_file(args):
    if args.no_findings:
        return None
    return args.findings or (DEFAULT_FINDINGS if os.path.isfile(DEFAULT_FINDINGS) else None)


def _write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _load(args):
    """The runs, and the tune results: --tune's files and every directory's
    tune.json; a directory with a tune.json and no results.csv is a tune
    result only."""
    tune_only = [p for p in args.runs if tune_view.found_in(p) and not os.path.exists(os.path.join(p, "results.csv"))]
    run_dirs = [p for p in args.runs if p not in tune_only]
    if not run_dirs and not tune_only and not args.tune:
        raise ReportError("no result directories given")
    runs = load_runs(run_dirs) if run_dirs else []
    tunes = [tune_view.load(p) for p in args.tune]
    tunes += [tune_view.load(p) for p in args.runs if tune_view.found_in(p)]
    return runs, tunes


def main(argv=None):
    args = _parse(argv)
    try:
        runs, tunes = _load(args)
        fleet_html = fleet.section(runs, args.fleet) if fleet.wanted(runs, args.fleet) else None
        first = runs[0].path if runs else os.path.dirname(tunes[0].path)
        out = args.out or (os.path.join(first, "report.html") if len(runs) + len(tunes) == 1 or len(runs) == 1
                           else "cumembench-report.html")
        out_dir = os.path.dirname(out) or "."
        doc = _findings_file(args)
        if doc and not args.findings and all(r.mode == "sim" for r in runs):
            doc_html = findings.link(doc, out_dir)  # the GPU findings: linked from a sim report, not inlined
        else:
            doc_html = findings.render(doc, out_dir) if doc else None
        os.makedirs(out_dir, exist_ok=True)
        page, n_images = html.render(runs, doc_html, tunes)
        if fleet_html:
            page = fleet.insert(page, fleet_html)
        _write_atomic(out, page)
        say = (lambda *a: None) if args.quiet else (lambda *a: print("report:", *a, file=sys.stderr))
        say(f"wrote {out} ({n_images} figures, {len(runs)} run{'s' if len(runs) != 1 else ''}"
            f"{f', {len(tunes)} tune result' + ('s' if len(tunes) > 1 else '') if tunes else ''}"
            f"{', findings from ' + doc if doc else ''})")
        if args.no_gnuplot:
            return 0
        plots = args.plots or os.path.join(out_dir, os.path.splitext(os.path.basename(out))[0] + "-plots")
        for run in runs:
            run_dir = plots if len(runs) == 1 else os.path.join(plots, _slug(run.label))
            images, left_out = gnuplot.render(run, run_dir)
            say(f"{run.label}: {len(images)} gnuplot files in {run_dir}")
            for why in left_out:
                say(f"{run.label}: no {why}")
    except (ReportError, fleet.FleetError, tune_view.TuneError) as e:
        print(f"report: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"report: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
