"""The runs of a fleet side by side: which node, GPU, driver and CUDA version
each ran on, what differs between them that makes a comparison unfair
(drivers, CUDA versions, suite revisions, options), and, for a job of
ci/examples/slurm-suite.sbatch, which runs are missing and how to continue
them. The section opens the report; plots/report.py adds it for --fleet
JOB_DIR, or wherever the runs come from several hosts or disagree."""

import csv
import html
import os
from dataclasses import dataclass

from .results import existing, open_text

# Context keys that must agree for runs to compare like for like, with the
# words the warning uses. The first three are "mixed drivers or CUDA".
MIXED = [
    ("driver_version", "drivers", "a difference may come from the driver, not the GPU"),
    ("cuda_runtime", "CUDA runtimes", "a difference may come from the CUDA version, not the GPU"),
    ("cuda_driver_api", "CUDA driver APIs", "a difference may come from the CUDA version, not the GPU"),
    ("cuda_toolkit_built_with", "CUDA toolkits the suite was built with", "the suite was built differently"),
    ("cumembench_revision", "suite revisions", "the suite itself changed between runs"),
    ("mode", "modes", "simulated and measured numbers are not comparable"),
    ("preset", "presets", "the runs ran different cases"),
    ("seed", "seeds", "the runs drew different random sizes"),
]
# Options that differ between the runs of one job by design.
_OWN_OPTIONS = {"--device", "--out", "--resume"}
_OWN_FLAGS = {"--quiet"}
INDEX_COLUMNS = ["slug", "node", "gpu", "status", "dir"]
SBATCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "ci", "examples",
                      "slurm-suite.sbatch")


class FleetError(Exception):
    """Bad input: the message is one line for the user."""


@dataclass
class Slot:
    """One run a job meant to make: on which node and GPU, and how it ended."""
    node: str
    gpu: str        # the index on its node ("-": the node's step never started)
    status: str     # exit status, "interrupted" or "not-started"
    path: str       # the run directory ("-" where none)

    @property
    def name(self):
        return f"{self.node}-gpu{self.gpu}" if self.gpu != "-" else self.node

    @property
    def finished(self):
        return self.status in ("0", "1")


def esc(text):
    return html.escape(str(text), quote=True)


# --- reading ----------------------------------------------------------------------------


def read_index(job_dir):
    """The slots of a slurm-suite job, from JOB_DIR/index.tsv (slurm-merge.sh)."""
    path = os.path.join(job_dir, "index.tsv")
    if not os.path.isfile(path):
        raise FleetError(f"{job_dir}: no index.tsv (not a job directory of slurm-suite.sbatch; "
                         "ci/examples/slurm-merge.sh writes it)")
    with open(path, newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    if not rows or rows[0] != INDEX_COLUMNS:
        raise FleetError(f"{path}: expected the header {' '.join(INDEX_COLUMNS)}")
    slots = []
    for lineno, row in enumerate(rows[1:], start=2):
        if len(row) != len(INDEX_COLUMNS):
            raise FleetError(f"{path}:{lineno}: {len(row)} fields, expected {len(INDEX_COLUMNS)}")
        slots.append(Slot(node=row[1], gpu=row[2], status=row[3], path=row[4]))
    return slots


def finished_cases(run_dir):
    """Cases a run's results.csv holds (a run cut short may end in a torn line)."""
    path = existing(os.path.join(run_dir, "results.csv"))
    if not path:
        return 0
    cases = set()
    try:
        with open_text(path) as f:
            reader = csv.reader(f)
            header = next(reader, [])
            if "case" not in header:
                return 0
            col = header.index("case")
            for row in reader:
                if len(row) == len(header):
                    cases.add(row[col])
    except (OSError, csv.Error, EOFError):
        pass
    return len(cases)


def run_options(run):
    """The options a run was started with (run.args), less those that name its
    own device and directory; None where it has no run.args."""
    path = os.path.join(run.path, "run.args")
    if not os.path.isfile(path):
        return None
    args = []
    with open(path) as f:
        for line in f:
            if line.startswith("arg "):
                args.append(line[4:].rstrip("\n"))
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in _OWN_OPTIONS:
            skip = True
        elif a not in _OWN_FLAGS and a.split("=", 1)[0] not in _OWN_OPTIONS:
            out.append(a)
    return " ".join(out)


def resume_command(job_dir, nodes):
    """The command that continues a job's runs on `nodes`, as slurm-merge.sh
    prints it: the job's partition and GPUs per node repeated."""
    opts = []
    path = os.path.join(job_dir, "sbatch-options")
    if os.path.isfile(path):
        with open(path) as f:
            opts = [line.strip() for line in f if line.strip()]
    return " ".join([f"CMB_RESUME={job_dir}", "sbatch", f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}"]
                    + opts + [SBATCH])


# --- what differs -----------------------------------------------------------------------


def mixed(runs):
    """[(what, why, {value: [labels]})] for every MIXED key with several values
    among the runs that record it, then the options, then GPUs measured twice."""
    out = []
    for key, what, why in MIXED:
        groups = {}
        for r in runs:
            v = r.context.get(key)
            if v not in (None, ""):
                groups.setdefault(str(v), []).append(r.label)
        if len(groups) > 1:
            out.append((what, why, groups))
    groups = {}
    for r in runs:
        opts = run_options(r)
        if opts is not None:
            groups.setdefault(opts or "(defaults)", []).append(r.label)
    if len(groups) > 1:
        out.append(("options", "the runs ran different cases or settings", groups))
    uuids = {}
    for r in runs:
        u = r.context.get("gpu_uuid")
        if u:
            uuids.setdefault(u, []).append(r.label)
    for u, labels in uuids.items():
        if len(labels) > 1:
            out.append(("runs on one GPU", f"{u} ran {len(labels)} of the runs: at once, they shared it",
                        {u: labels}))
    return out


def _same(a, b):
    return os.path.realpath(a) == os.path.realpath(b)


def _node_of(run, slots):
    for s in slots:
        if s.path != "-" and _same(s.path, run.path):
            return s.node, s.gpu
    return run.context.get("host_name", "-"), run.context.get("gpu_device", "-")


def wanted(runs, job_dir):
    """Whether the report needs the section: a job's, or runs that came from
    several hosts or disagree on something in MIXED."""
    if job_dir:
        return True
    hosts = {r.context.get("host_name") for r in runs if r.context.get("host_name")}
    return len(runs) > 1 and (len(hosts) > 1 or bool(mixed(runs)))


# --- the section ------------------------------------------------------------------------

_COLUMNS = [("gpu_name", "GPU"), ("gpu_uuid", "UUID"), ("gpu_pci_bus", "PCI bus"), ("driver_version", "driver"),
            ("cuda_runtime", "CUDA runtime"), ("cuda_driver_api", "CUDA driver API"),
            ("cuda_toolkit_built_with", "built with CUDA"), ("cumembench_revision", "revision"),
            ("mode", "mode"), ("preset", "preset")]


def _row(node, gpu, label, status, ctx, counts, differs):
    cells = [f"<td class='l'>{esc(node)}</td><td>{esc(gpu)}</td><td class='l'><b>{esc(label)}</b></td>"]
    cls = "" if status == "finished" else "failed" if status.startswith("exit") else "missing"
    cells.append(f"<td class='l {cls}'>{esc(status)}</td>")
    for key, _ in _COLUMNS:
        v = ctx.get(key, "-") or "-"
        cells.append(f"<td class='l{' worse' if key in differs else ''}'>{esc(v)}</td>")
    cells.append(f"<td>{esc(counts)}</td>")
    return "<tr>" + "".join(cells) + "</tr>\n"


def _table(runs, slots, differs):
    head = ("<table><tr><th class='l'>node</th><th>GPU</th><th class='l'>run (column)</th><th class='l'>status</th>"
            + "".join(f"<th class='l'>{esc(t)}</th>" for _, t in _COLUMNS)
            + "<th title='ok / partial / failed / skipped'>cases</th></tr>\n")
    rows = []
    for r in runs:
        node, gpu = _node_of(r, slots)
        n = r.counts()
        ctx = dict(r.context)
        ctx.setdefault("gpu_name", "simulated" if r.mode == "sim" else r.gpu)
        rows.append(((node, gpu), _row(node, gpu, r.label, "finished", ctx,
                                       f"{n['ok']}/{n['partial']}/{n['failed']}/{n['skipped']}", differs)))
    for s in slots:
        if s.path != "-" and any(_same(s.path, r.path) for r in runs):
            continue
        status = {"interrupted": "interrupted", "not-started": "never started"}.get(s.status, f"exit {s.status}")
        if s.finished:
            status = f"finished (exit {s.status}), not in this report"
        cases = f"{finished_cases(s.path)} finished" if s.path != "-" else "-"
        rows.append(((s.node, s.gpu), _row(s.node, s.gpu, s.name, status, {}, cases, ())))
    rows.sort(key=lambda kv: (kv[0][0], int(kv[0][1]) if kv[0][1].isdigit() else -1))
    return head + "".join(r for _, r in rows) + "</table>\n"


def _mixed_html(found):
    out = []
    for what, why, groups in found:
        parts = "; ".join(f"<b>{esc(v)}</b> on {esc(', '.join(labels))}" for v, labels in groups.items())
        out.append(f"<p class='warn'>Mixed {esc(what)}: {parts}. {esc(why[0].upper() + why[1:])}.</p>\n")
    return "".join(out)


def _missing_html(slots, job_dir):
    lost = [s for s in slots if not s.finished]
    if not slots:
        return ""
    if not lost:
        nodes = sorted({s.node for s in slots})
        return (f"<p class='note'>Every run of the job ended: {len(slots)} runs on {len(nodes)} node(s) "
                f"({esc(', '.join(nodes))}).</p>\n")
    words = {"interrupted": "interrupted: it began and never ended", "not-started": "never started"}
    items = "".join(f"<li><b>{esc(s.name)}</b>: {esc(words.get(s.status, 'exit status ' + s.status))}"
                    f"{esc(f' ({finished_cases(s.path)} cases finished)') if s.path != '-' else ''}</li>\n"
                    for s in lost)
    cmd = resume_command(job_dir, sorted({s.node for s in lost}))
    return (f"<div class='warn'><b>{len(lost)} of {len(slots)} runs missing</b> from this report:<ul>\n{items}</ul>"
            f"Continue them on their nodes (finished cases are kept), then merge again:<br>"
            f"<code>{esc(cmd)}</code><br><code>ci/examples/slurm-merge.sh {esc(job_dir)}</code></div>\n")


def _models(runs, slots):
    models = {}
    for r in runs:
        name = r.context.get("gpu_name") or ("simulated device" if r.mode == "sim" else r.gpu or "?")
        models.setdefault(name, set()).add(_node_of(r, slots)[0])
    return "; ".join(f"{esc(m)} on {len(n)} node(s) ({esc(', '.join(sorted(n)))})" for m, n in models.items())


def section(runs, job_dir=None):
    """The fleet section's HTML: the runs (and a job's missing runs) one per
    row with their node, GPU, driver and CUDA version, then what differs."""
    slots = read_index(job_dir) if job_dir else []
    found = mixed(runs)
    differs = {key for key, what, _ in MIXED if any(w == what for w, _, _ in found)}
    out = ["<h2 id='fleet'>Fleet: nodes, GPUs and drivers</h2>\n",
           f"<p>{'Job directory <code>' + esc(job_dir) + '</code>. ' if job_dir else ''}One row per run; "
           "the run column names the run's column in the tables below. GPU models: "
           f"{_models(runs, slots) or '-'}. Values that differ between runs are in red.</p>\n",
           _missing_html(slots, job_dir), _mixed_html(found)]
    if not found and len(runs) > 1:
        same = [f"{what} ({runs[0].context[key]})" for key, what, _ in MIXED if runs[0].context.get(key)]
        out.append(f"<p class='note'>The finished runs agree on their {esc(', '.join(same + ['options']))}.</p>\n")
    out.append(_table(runs, slots, differs))
    return "".join(out)


def insert(page, fleet_html):
    """The page with the section after its header table (before the contents)."""
    at = page.find("<nav>")
    if at < 0:
        at = page.find("</body>")
    return page[:at] + fleet_html + page[at:]
