#!/usr/bin/env python3
"""explain_oom.py - why a replay did not fit (or why leak-check's or
contention's allocation failed), from a run made with CMB_EXPLAIN_OOM=1
(docs/explain.md).

    tools/explain_oom.py RUN_DIR [--case SUBSTRING]

For every case that carries the oom_* counters (replays that did not fit;
leak-check's first error path; contention's warm-up where it stopped): the
first failed request, what the allocator reserved and allocated, its free
bytes by the reason the request could not use them; for a replay, the live
blocks that pinned the most, the later failures summed, and which other
allocators of the same run replayed the same trace with the same parameters
and capacity and fitted, with how much to spare. plots/report.py shows the same in the
HTML report (plots/cmb_report/explain.py renders it from explain()).
Exit status: 0, 1 when no case of the run has an explanation, 2 bad input.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmb_schema  # noqa: E402

# cmb_free_reason (allocators/cmb_allocator.h), in its order, as the counters name them.
REASONS = [
    ("other_pool", "in the other size pool (small vs large)"),
    ("other_stream", "cached for another stream"),
    ("event_wait", "waiting on events of streams that used it"),
    ("oversize", "above max_split_size, not split for a smaller request"),
    ("not_contiguous", "mapped pages, but not next to each other"),
    ("too_small", "free blocks smaller than the request"),
    ("usable", "free blocks that would serve it"),
]
PINS = 3


class ExplainError(Exception):
    """Bad input: one line for the user."""


def size(n):
    """Bytes as the suite's output writes them (1024-based units)."""
    if n is None:
        return "?"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def _capacity(run_dir):
    """The run's sim device size (results.json context), or None."""
    for name in ("results.json", "results.json.gz"):
        path = os.path.join(run_dir, name)
        if os.path.isfile(path):
            opener = __import__("gzip").open if name.endswith(".gz") else open
            with opener(path, "rt") as f:
                ctx = json.load(f).get("context", {})
            v = ctx.get("sim_capacity_bytes")
            return float(v) if v not in (None, "") else None
    return None


def _cases(run_dir):
    """case name -> {label, params, status, error, metrics of the first repetition}"""
    cases = {}
    for row in cmb_schema.read_rows(run_dir):
        if row["status"] not in ("ok", "oom"):
            continue
        c = cases.setdefault(row["case"], {"label": cmb_schema.label(row), "params": row["params"],
                                           "scenario": row["scenario"],
                                           "status": "ok", "error": "", "m": {}, "rep": None})
        if row["status"] == "oom":
            c["status"], c["error"] = "oom", row["error"] or c["error"]
        if not row["metric"]:
            continue
        rep = row["repetition"]
        if c["rep"] is None:
            c["rep"] = rep
        if rep == c["rep"]:
            c["m"][row["metric"]] = float(row["value"])
    return cases


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _capacity_of(case, run_capacity):
    """The case's device: its capacity parameter ("11.5GiB"), or the run's when 0."""
    cap = cmb_schema.params({"params": case["params"]}).get("capacity", "0B")
    for unit in sorted(UNITS, key=len, reverse=True):
        if cap.endswith(unit):
            try:
                v = float(cap[:-len(unit)]) * UNITS[unit]
            except ValueError:
                return None
            return run_capacity if v == 0 else v
    return None


def explain(run_dir):
    """Every explained case of a run: a list of dicts (the report renders the
    same data). Raises ExplainError on unreadable input."""
    try:
        cases = _cases(run_dir)
        run_capacity = _capacity(run_dir)
    except (OSError, ValueError, cmb_schema.SchemaError) as e:
        raise ExplainError(f"{run_dir}: {e}") from None
    out = []
    for name, c in cases.items():
        m = c["m"]
        if "oom_request_bytes" not in m:
            continue
        cap = _capacity_of(c, run_capacity)
        others = []
        for oname, o in cases.items() if c["scenario"] == "replay" else ():
            if oname == name or o["params"] != c["params"] or o["scenario"] != c["scenario"]:
                continue
            peak = o["m"].get("peak_reserved_bytes")
            others.append({"label": o["label"], "fits": o["status"] == "ok", "peak_reserved": peak,
                           "spare": cap - peak if cap is not None and peak is not None and o["status"] == "ok"
                           else None, "error": o["error"]})
        others.sort(key=lambda o: (not o["fits"], -(o["spare"] or 0)))
        reasons = [(key, what, m.get(f"oom_free_{key}_bytes")) for key, what in REASONS]
        pins = [{"bytes": m[f"oom_pin{i}_bytes"], "event": m.get(f"oom_pin{i}_event"),
                 "age": m.get(f"oom_pin{i}_age_events")} for i in range(1, PINS + 1) if f"oom_pin{i}_bytes" in m]
        out.append({"case": name, "label": c["label"], "error": c["error"], "capacity": cap, "m": m,
                    "reasons": reasons if all(r[2] is not None for r in reasons) else None,
                    "pins": pins, "others": others})
    return out


def text(e):
    """One explained case as the lines the terminal shows."""
    m = e["m"]
    get = m.get
    lines = [f"{e['case']}", f"  {e['error'] or 'an allocation failed (the scenario went on)'}"]
    rounded = f" (rounded to {size(get('oom_rounded_bytes'))})" if "oom_rounded_bytes" in m else ""
    where = f" at event {int(get('oom_event'))}; no frame (the trace records none)" if "oom_event" in m else ""
    lines.append(f"  first failure: {size(get('oom_request_bytes'))}{rounded} on stream {int(get('oom_stream', 0))}"
                 f"{where}")
    reserved, allocated = get("oom_reserved_bytes"), get("oom_allocated_bytes")
    free = reserved - allocated if reserved is not None and allocated is not None else None
    lines.append(f"  reserved {size(reserved)}, allocated {size(allocated)} (requested {size(get('oom_live_requested_bytes'))}), "
                 f"free inside the reservation {size(free)}; the device had {size(get('oom_device_free_bytes'))} more")
    if e["capacity"] and get("oom_request_bytes") > e["capacity"]:
        lines.append(f"  the request alone is larger than the device ({size(e['capacity'])})")
    if e["reasons"] is None:
        lines.append(f"  free bytes by reason: {e['label']} gives no account of its free memory")
    else:
        lines.append(f"  free but unusable, by reason (largest free block {size(get('oom_largest_free_bytes'))}):")
        for _key, what, v in e["reasons"]:
            if v:
                lines.append(f"    {size(v):>12}  {what}")
    if e["pins"]:
        lines.append("  live blocks that pin the most:")
        for p in e["pins"]:
            lines.append(f"    {size(p['bytes']):>12}  allocated at event {int(p['event'])}, "
                         f"{int(p['age'])} events before the failure")
    n = int(get("oom_failed_allocs", 1))
    if n > 1:
        lines.append(f"  the rest: {n - 1} more failed ({size(get('oom_failed_bytes') - get('oom_request_bytes'))}), "
                     f"the largest {size(get('oom_largest_failed_bytes'))}, the last at event "
                     f"{int(get('oom_last_event', 0))}")
    if e["others"]:
        cap = f" on {size(e['capacity'])}" if e["capacity"] else ""
        lines.append(f"  the other allocators of this run, same trace and parameters{cap}:")
        for o in e["others"]:
            if o["fits"]:
                spare = f", {size(o['spare'])} to spare" if o["spare"] is not None else ""
                lines.append(f"    {o['label']:<28} fits, peak reserved {size(o['peak_reserved'])}{spare}")
            else:
                lines.append(f"    {o['label']:<28} {o['error'] or 'did not fit'}")
    elif e["m"].get("oom_event") is not None:
        lines.append("  no other allocator of this run replayed the same trace: run it with --allocator all to compare")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="explain_oom.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", metavar="RUN_DIR")
    ap.add_argument("--case", help="only cases whose name contains this")
    args = ap.parse_args(argv)
    try:
        found = [e for e in explain(args.run) if not args.case or args.case in e["case"]]
    except ExplainError as e:
        print(f"explain_oom: {e}", file=sys.stderr)
        return 2
    if not found:
        print(f"explain_oom: {args.run}: no case carries an explanation (run it with "
              "CMB_EXPLAIN_OOM=1; docs/explain.md)", file=sys.stderr)
        return 1
    print("\n\n".join(text(e) for e in found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
