"""The columns of results.csv, read from harness/schema.def (the one
description of the result schema; the C side generates the CSV header from
the same file), and the helpers every Python reader shares: read_rows()
reads a results.csv or results.csv.gz, old runs included, read_json() and
read_context() read results.json as the C side's results store does (NaN of
older runs as None), and label() names an allocator configuration the way
case names do.

    import cmb_schema
    for row in cmb_schema.read_rows("results/runs/x"):
        print(cmb_schema.label(row), row["metric"], row["value"])
"""
import csv
import gzip
import json
import os
import re

SCHEMA_DEF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness", "schema.def")
_LINE = re.compile(r'^CMB_COLUMN\(\s*(\w+)\s*,\s*(\w+)\s*,\s*"((?:[^"\\]|\\.)*)"\s*\)\s*$')


class SchemaError(Exception):
    """A results.csv this version cannot read: the message is one line."""


def _parse(path=SCHEMA_DEF):
    cols, docs = [], {}
    with open(path) as f:
        for lineno, line in enumerate(f, start=1):
            line = line.strip()
            if not line.startswith("CMB_COLUMN"):
                continue
            m = _LINE.match(line)
            if not m:
                raise SchemaError(f"{path}:{lineno}: not CMB_COLUMN(ID, name, \"doc\"): {line}")
            cols.append(m.group(2))
            docs[m.group(2)] = m.group(3)
    if not cols:
        raise SchemaError(f"{path}: no columns")
    return cols, docs


COLUMNS, DOCS = _parse()
HEADER = ",".join(COLUMNS) + "\n"
# The columns every results.csv has had; later ones are appended (schema.def).
FIRST_COLUMNS = COLUMNS[:13]
STATUSES = ("ok", "oom", "failed", "skipped")


def results_csv(path):
    """The results.csv of a run directory (or the file itself), or its .gz."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.csv")
    if os.path.isfile(path):
        return path
    if os.path.isfile(path + ".gz"):
        return path + ".gz"
    raise SchemaError(f"{path}: no such file (expected a run directory holding results.csv)")


def results_json(path):
    """The results.json of a run directory (or the file itself), or its .gz."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    if os.path.isfile(path):
        return path
    if os.path.isfile(path + ".gz"):
        return path + ".gz"
    raise SchemaError(f"{path}: no such file (expected a run directory holding results.json)")


def read_json(path):
    """A run's results.json as the results store (harness/results.c) reads it:
    strict JSON, where runs written before the store hold NaN or Infinity
    (Google Benchmark's reporter wrote them) those read as None, as the
    store's null does."""
    path = results_json(path)
    try:
        with _open(path) as f:
            doc = json.load(f, parse_constant=lambda name: None)
    except (OSError, EOFError, ValueError) as e:
        raise SchemaError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise SchemaError(f"{path}: not a cumembench results.json (no \"benchmarks\" list)")
    return doc


def read_context(path):
    """The "context" block of a run's results.json: the environment and configuration."""
    ctx = read_json(path).get("context")
    return ctx if isinstance(ctx, dict) else {}


def _open(path):
    return gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")


def read_rows(path, numbered=False):
    """Every row of a run's results.csv as a dict by column name (with
    numbered, (line number, row) pairs). A run written before a column was
    appended reads it as "" (an older run's allocator column held
    name[:options][@upstream]: label() still gives the same label). The
    rules are the C reader's (harness/results.c): the header is a prefix
    of schema.def's columns, at least the first thirteen, and every row
    has the header's fields."""
    path = results_csv(path)
    with _open(path) as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            raise SchemaError(f"{path}: empty file, expected the header {','.join(FIRST_COLUMNS)},...")
        missing = [c for c in FIRST_COLUMNS if c not in header]
        if missing:
            raise SchemaError(f"{path}: missing column(s) {', '.join(missing)}; a cumembench results.csv has "
                              f"{','.join(FIRST_COLUMNS)},...")
        if header[:len(FIRST_COLUMNS)] != FIRST_COLUMNS:
            raise SchemaError(f"{path}: not a cumembench results.csv (its header is not {','.join(FIRST_COLUMNS)},...)")
        unknown = [c for c in header if c not in COLUMNS]
        if unknown:
            raise SchemaError(f"{path}: column(s) {', '.join(unknown)} unknown to harness/schema.def "
                              "(written by a newer cumembench?)")
        for lineno, fields in enumerate(reader, start=2):
            if not fields:
                continue
            if len(fields) != len(header):
                raise SchemaError(f"{path}:{lineno}: {len(fields)} fields, the header has {len(header)}")
            row = dict.fromkeys(COLUMNS, "")
            row.update(zip(header, fields))
            yield (lineno, row) if numbered else row


def params(row):
    """The params column as a dict, in order: "n=1000;dist=uniform"."""
    return dict(kv.split("=", 1) for kv in row["params"].split(";") if "=" in kv)


def _name_params(row):
    """The parameters as the case name spells them: n:1000/dist:uniform."""
    return "/".join(k + ":" + v for k, v in params(row).items())


def label(row):
    """The allocator configuration as case names spell it:
    name[:options][@upstream], @upstream only where the user chose one
    (torch-caching:max_split_size_mb=64, cmb@vmm, real:rmm-pool). Read from
    the allocator, options and upstream columns; the case name only tells
    whether the upstream was chosen. A run written before the options
    column holds the whole label in its allocator column: the same answer."""
    base = row["allocator"] + (":" + row["options"] if row.get("options") else "")
    chosen = base + "@" + row.get("upstream", "")
    tail = _name_params(row)
    return chosen if row.get("case", "") == row.get("scenario", "") + "/" + chosen + ("/" + tail if tail else "") \
        else base


def key(row):
    """What tells two configurations of a run apart: (label, params)."""
    return (label(row), row["params"])
