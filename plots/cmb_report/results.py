"""Reading cumembench result directories: results.csv (the numbers, one row
per case, repetition and metric, plus one row per failed or skipped case),
results.json (the environment, from its context block) and timelines/*.csv
(memory over time); committed runs may hold results.csv.gz and
results.json.gz instead, read the same. Nothing here guesses: a case that failed, was skipped
or was not run stays so, and a metric a case did not report is absent."""

import csv
import gzip
import os
import statistics
import sys
from collections import OrderedDict
from dataclasses import dataclass, field

from . import impl as I

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import cmb_schema  # noqa: E402  (harness/schema.def, the columns of results.csv)

CSV_COLUMNS = cmb_schema.FIRST_COLUMNS  # every results.csv has these; newer runs append more (options, impl)
STATUSES = cmb_schema.STATUSES          # ok, oom (ran, did not fit), failed, skipped
TIMELINE_COLUMNS = ["op", "kind", "requested_bytes", "reserved_bytes"]


class ReportError(Exception):
    """Bad input: the message is one line for the user."""


@dataclass
class Stat:
    median: float
    lo: float   # min over repetitions
    hi: float   # max over repetitions
    n: int      # repetitions that reported it


@dataclass
class Case:
    name: str
    scenario: str
    allocator: str
    upstream: str
    params: str                                     # "k=v;k=v" as in results.csv
    reps: dict = field(default_factory=dict)        # repetition -> {metric: value}
    failed_reps: dict = field(default_factory=dict)  # repetition -> error
    errors: list = field(default_factory=list)      # case-level failures
    skipped: str = None                             # reason, when skipped
    options: str = ""                               # the allocator's options, verbatim
    impl: str = ""                                  # real, emulation or suite (impl.py)
    oom_reps: dict = field(default_factory=dict)    # repetition (None: the case) -> "did not fit: ..."

    @property
    def status(self):
        """skipped, failed, oom (ran, but its workload did not fit), partial
        (some repetitions failed) or ok."""
        if self.skipped is not None and not self.reps and not self.oom_reps:
            return "skipped"
        if self.oom_reps and not (self.errors or (self.failed_reps and not self.reps)):
            return "oom"
        if not self.reps:
            return "failed"
        if self.failed_reps or self.errors:
            return "partial"
        return "ok"

    @property
    def ran(self):
        """Finished with numbers that can be ranked: ok or partial (not oom)."""
        return self.status in ("ok", "partial")

    @property
    def reason(self):
        """Why the case failed, did not fit or was skipped, in one line."""
        if self.status == "skipped":
            return self.skipped
        if self.status == "oom":
            return oom_text(self.oom_reps.values())
        msgs = list(self.errors) + [f"repetition {r}: {e}" for r, e in sorted(self.failed_reps.items())]
        return "; ".join(m for m in msgs if m) or "failed without a message"

    @property
    def n_reps(self):
        return len(set(self.reps) | set(self.failed_reps) | {r for r in self.oom_reps if r is not None})

    def stat(self, metric):
        vals = [r[metric] for r in self.reps.values() if metric in r]
        if not vals:
            return None
        return Stat(statistics.median(vals), min(vals), max(vals), len(vals))

    def metrics(self):
        out = set()
        for r in self.reps.values():
            out.update(r)
        return out

    def param_dict(self):
        return OrderedDict(kv.split("=", 1) for kv in self.params.split(";") if "=" in kv)


def oom_text(errors):
    """One line for the repetitions that did not fit: their message when they
    agree, else the range of failed allocations."""
    errors = [e for e in errors if e] or ["did not fit"]
    if len(set(errors)) == 1:
        return errors[0]
    counts = sorted(int(w) for e in errors for w in e.split() if w.isdigit())
    if counts:
        return f"did not fit: {counts[0]}-{counts[-1]} allocations failed (over {len(errors)} repetitions)"
    return errors[0]


@dataclass
class Run:
    path: str
    run_id: str
    context: dict
    mode: str
    gpu: str
    cases: "OrderedDict[str, Case]"
    timelines: dict       # case name -> timeline csv path
    label: str = ""

    def scenarios(self):
        return list(OrderedDict.fromkeys(c.scenario for c in self.cases.values()))

    def cases_of(self, scenario):
        return [c for c in self.cases.values() if c.scenario == scenario]

    def counts(self):
        out = {"ok": 0, "partial": 0, "oom": 0, "failed": 0, "skipped": 0}
        for c in self.cases.values():
            out[c.status] += 1
        return out


# --- loading --------------------------------------------------------------------------


def existing(path):
    """path, or path.gz where only the compressed file is there (committed runs), or None."""
    if os.path.isfile(path):
        return path
    return path + ".gz" if os.path.isfile(path + ".gz") else None


def open_text(path):
    return gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")


def _read_csv(path):
    """(line number, row) of every row, read as tools/cmb_schema.py reads them (the rules of the
    C results store, harness/results.c)."""
    try:
        yield from cmb_schema.read_rows(path, numbered=True)
    except cmb_schema.SchemaError as e:
        raise ReportError(str(e)) from None


def _add_row(cases, path, lineno, row):
    c = cases.get(row["case"])
    if c is None:
        label = cmb_schema.label(row)
        c = cases[row["case"]] = Case(row["case"], row["scenario"], label, row["upstream"], row["params"],
                                      options=row.get("options", ""), impl=I.impl_of(label, row.get("impl", "")))
    status, rep = row["status"], row["repetition"]
    if status not in STATUSES:
        raise ReportError(f"{path}:{lineno}: status '{status}', expected {', '.join(STATUSES)}")
    if status == "skipped":
        c.skipped = row["error"]
        return
    if status == "failed":
        if rep == "":
            c.errors.append(row["error"])
        else:
            c.failed_reps[int(rep)] = row["error"]
        return
    try:
        rep = int(rep) if rep != "" else None
        value = float(row["value"]) if row["metric"] else None
    except ValueError:
        raise ReportError(f"{path}:{lineno}: value '{row['value']}' or repetition '{rep}' is not a number") from None
    if status == "oom":  # the case ran; its workload did not fit (numbers, if any, kept)
        c.oom_reps[rep] = row["error"] or c.oom_reps.get(rep, "")
        if value is None:
            return
    elif value is None or rep is None:
        raise ReportError(f"{path}:{lineno}: an ok row needs a metric, a value and a repetition")
    c.reps.setdefault(rep, {})[row["metric"]] = value


def read_timeline_case(path):
    """The case name in a timeline file's '# case:' comment, or None."""
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                return None
            if line.startswith("# case: "):
                return line[len("# case: "):].rstrip("\n")
    return None


def read_timeline(path):
    """Columns of a timeline CSV as lists; numbers as floats, unknown as None."""
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    reader = csv.reader(lines)
    header = next(reader, None) or []
    missing = [c for c in TIMELINE_COLUMNS if c not in header]
    if missing:
        raise ReportError(f"{path}: missing column(s) {', '.join(missing)} in the memory timeline")
    cols = {h: [] for h in header}
    for lineno, row in enumerate(reader, start=2):
        for h, v in zip(header, row):
            if h == "kind":
                cols[h].append(v)
                continue
            try:
                cols[h].append(float(v) if v != "" else None)
            except ValueError:
                raise ReportError(f"{path}: data line {lineno}: {h} '{v}' is not a number") from None
    return cols


def _timelines(path):
    out = {}
    tdir = os.path.join(path, "timelines")
    if not os.path.isdir(tdir):
        return out
    for name in sorted(os.listdir(tdir)):
        if name.endswith(".csv"):
            full = os.path.join(tdir, name)
            case = read_timeline_case(full)
            if case:
                out[case] = full
    return out


def load_run(path):
    path = os.path.normpath(path)
    csv_path = existing(os.path.join(path, "results.csv"))
    if not csv_path:
        raise ReportError(f"{path}: no results.csv here (not a cumembench result directory)")
    cases = OrderedDict()
    run_id = gpu = mode = ""
    for lineno, row in _read_csv(csv_path):
        run_id, gpu, mode = run_id or row["run_id"], gpu or row["gpu"], mode or row["mode"]
        _add_row(cases, csv_path, lineno, row)
    context = {}
    if existing(os.path.join(path, "results.json")):
        try:
            context = cmb_schema.read_context(path)  # as the results store reads it (harness/results.c)
        except cmb_schema.SchemaError as e:
            raise ReportError(str(e)) from None
    mode = context.get("mode", mode) or "unknown"
    return Run(path=path, run_id=run_id or os.path.basename(path), context=context, mode=mode,
               gpu=gpu or context.get("gpu_name", ""), cases=cases, timelines=_timelines(path))


def _base_label(run):
    if run.mode == "sim":
        return "sim"
    return run.context.get("gpu_name") or run.gpu or run.run_id


# What tells two runs of the same GPU model apart, in the order tried.
_DISTINGUISH = [
    lambda r: f"driver {r.context.get('driver_version', '?')}",
    lambda r: f"CUDA {r.context.get('cuda_runtime', '?')}",
    lambda r: f"GPU {r.context.get('gpu_device', '?')}",
    lambda r: r.run_id,
    lambda r: r.path,
]


def label_runs(runs):
    """Column titles: the GPU name (or 'sim'); runs that share one get the
    first fact that tells them apart: driver, CUDA runtime, device index,
    run id, directory."""
    base = [_base_label(r) for r in runs]
    labels = list(base)
    for name in set(base):
        group = [i for i, b in enumerate(base) if b == name]
        if len(group) < 2:
            continue
        for fact in _DISTINGUISH:
            vals = [fact(runs[i]) for i in group]
            if len(set(vals)) == len(vals):
                for i, v in zip(group, vals):
                    labels[i] = f"{name} ({v})"
                break
    for r, lab in zip(runs, labels):
        r.label = lab
    return runs


def load_runs(paths):
    if not paths:
        raise ReportError("no result directories given")
    return label_runs([load_run(p) for p in paths])
