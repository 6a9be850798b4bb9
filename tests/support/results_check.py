#!/usr/bin/env python3
"""Checks of run directories (results.csv, results.json) for the reliability
tests. Standard library only.

  results_check.py once DIR [--cases N]
      both files are valid; every case is in each exactly once (one set of
      repetitions, at most one status row); with --cases, N cases in all.
  results_check.py faults [--summary FILE] [--retry NAME,...] DIR...
      fault-injection runs: every case ran (no failed case: each failure was
      a clean OOM), nothing leaked, no upstream misuse, no overlapping,
      misaligned or foreign block, statistics agree; every allocator met
      injected faults; the allocators named in --retry (when they ran)
      freed their cache and retried (oom_retries > 0).
  results_check.py soak [--summary FILE] [--min-ops N] [--rss-slack BYTES] DIR
      the same consistency checks, at least N operations in all, and the
      case process's resident memory did not grow from the first
      repetition to the last by more than the slack.
"""
import argparse
import collections
import csv
import json
import os
import sys

CLEAN_ZERO = ("leaked_bytes", "upstream_misuse", "verify_overlaps", "verify_misaligned", "verify_outside",
              "stats_disagree")


def load(d):
    with open(os.path.join(d, "results.json")) as f:
        doc = json.load(f)
    with open(os.path.join(d, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    return doc, rows


def metrics_by_rep(rows):
    """(case, repetition) -> {metric: value} for ok rows."""
    out = collections.defaultdict(dict)
    for r in rows:
        if r["status"] == "ok":
            out[(r["case"], r["repetition"])][r["metric"]] = float(r["value"])
    return out


def check_once(d, n_cases, problems):
    doc, rows = load(d)
    seen = collections.Counter()
    status_rows = collections.Counter()
    for r in rows:
        if r["repetition"]:
            seen[(r["case"], r["repetition"], r["metric"], r["status"])] += 1
        else:
            status_rows[r["case"]] += 1
    for k, n in seen.items():
        if n != 1:
            problems.append(f"{d}: CSV row {k} appears {n} times")
    for k, n in status_rows.items():
        if n != 1:
            problems.append(f"{d}: CSV status row of {k} appears {n} times")
    cases = {r["case"] for r in rows}
    entries = collections.Counter()
    for b in doc["benchmarks"]:
        key = (b["run_name"], b.get("aggregate_name", ""), b.get("repetition_index", -1),
               bool(b.get("error_occurred")))
        entries[key] += 1
    for k, n in entries.items():
        if n != 1:
            problems.append(f"{d}: JSON entry {k} appears {n} times")
    ran = {r["case"] for r in rows if r["status"] != "skipped"}
    in_json = {b["run_name"] for b in doc["benchmarks"]}
    if ran != in_json:
        problems.append(f"{d}: cases in the CSV but not the JSON: {sorted(ran - in_json)[:3]}; "
                        f"in the JSON but not the CSV: {sorted(in_json - ran)[:3]}")
    if n_cases is not None and len(cases) != n_cases:
        problems.append(f"{d}: {len(cases)} cases, expected {n_cases}")
    return len(cases)


def clean_oom(error):
    """A repetition that failed with a clean out-of-memory error (e.g. a pool
    whose initial reservation was refused) and left nothing behind."""
    return error.startswith("out of memory:") and "note:" not in error


def consistency(d, rows, problems, allow_oom=False):
    """Returns the number of repetitions that failed with a clean OOM."""
    for (case, rep), m in metrics_by_rep(rows).items():
        for k in CLEAN_ZERO:
            if m.get(k, 0) != 0:
                problems.append(f"{d}: {case} rep {rep}: {k} = {m[k]:g}")
    ooms = 0
    for r in rows:
        if r["status"] != "failed":
            continue
        if allow_oom and r["repetition"] and clean_oom(r["error"]):
            ooms += 1
        else:
            problems.append(f"{d}: {r['case']} failed: {r['error']}")
    return ooms


def faults(dirs, retry, summary, problems):
    per_alloc = collections.defaultdict(lambda: collections.Counter())
    n_cases = 0
    for d in dirs:
        doc, rows = load(d)
        consistency(d, rows, problems, allow_oom=True)
        for r in rows:
            if r["status"] == "failed" and clean_oom(r["error"]):
                a = per_alloc[r["case"].split("/")[1]]
                a["cases"] += 1
                a["oom_reps"] += 1
                a["injected"] += 1  # the refused request was an injected fault (nth/every=1)
        for (case, rep), m in metrics_by_rep(rows).items():
            alloc = case.split("/")[1]
            a = per_alloc[alloc]
            a["cases"] += 1
            a["injected"] += m.get("upstream_injected_faults", 0)
            a["failed_allocs"] += m.get("failed_allocs", 0)
            a["oom_retries"] += m.get("oom_retries", 0)
            a["allocs"] += m.get("allocs", 0)
            if "upstream_injected_faults" not in m:
                problems.append(f"{d}: {case}: no upstream_injected_faults counter (was --fault given?)")
        n_cases += len({r["case"] for r in rows if r["status"] == "ok"})
    for alloc, a in per_alloc.items():
        if a["injected"] == 0:
            problems.append(f"{alloc}: no injected fault was ever reached")
    for name in retry:
        if name in per_alloc and per_alloc[name]["oom_retries"] == 0:
            problems.append(f"{name}: never retried after an upstream failure (oom_retries 0)")
    head = ("allocator", "cases", "faults injected", "allocs served", "failed allocs (OOM)", "OOM at create",
            "oom retries")
    keys = ("cases", "injected", "allocs", "failed_allocs", "oom_reps", "oom_retries")
    fmt = "{:<18} {:>6} {:>16} {:>14} {:>20} {:>14} {:>12}"
    lines = [fmt.format(*head)]
    tot = collections.Counter()
    for alloc in sorted(per_alloc):
        a = per_alloc[alloc]
        tot.update(a)
        lines.append(fmt.format(alloc, *(int(a[k]) for k in keys)))
    lines.append(fmt.format("all", *(int(tot[k]) for k in keys)))
    text = "\n".join(lines) + "\n"
    if summary:
        with open(summary, "w") as f:
            f.write(text)
    print(text, end="")


def soak(d, min_ops, rss_slack, summary, problems):
    doc, rows = load(d)
    consistency(d, rows, problems)
    reps = metrics_by_rep(rows)
    ops = 0
    rss = collections.defaultdict(dict)
    lines = [f"{'case':<60} {'reps':>4} {'operations':>12} {'rss first':>12} {'rss last':>12}"]
    per_case = collections.defaultdict(lambda: [0, 0])
    for (case, rep), m in sorted(reps.items()):
        n = m.get("allocs", 0) + m.get("frees", 0)
        ops += n
        per_case[case][0] += 1
        per_case[case][1] += n
        if "host_rss_bytes" in m:
            rss[case][int(rep)] = m["host_rss_bytes"]
        else:
            problems.append(f"{d}: {case} rep {rep}: no host_rss_bytes (run with CMB_VERIFY=1)")
    for case, (n_reps, n_ops) in sorted(per_case.items()):
        r = rss.get(case, {})
        first = r[min(r)] if r else float("nan")
        last = r[max(r)] if r else float("nan")
        if r and last > first + rss_slack:
            problems.append(f"{d}: {case}: resident memory grew from {first:.0f} to {last:.0f} bytes")
        lines.append(f"{case[:60]:<60} {n_reps:>4} {int(n_ops):>12} {first / 2**20:>10.1f}Mi {last / 2**20:>10.1f}Mi")
    lines.append(f"total operations: {int(ops)}")
    if ops < min_ops:
        problems.append(f"{d}: {int(ops)} operations, fewer than {min_ops}")
    text = "\n".join(lines) + "\n"
    if summary:
        with open(summary, "w") as f:
            f.write(text)
    print(text, end="")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("once")
    p.add_argument("dir")
    p.add_argument("--cases", type=int)
    p = sub.add_parser("faults")
    p.add_argument("dirs", nargs="+")
    p.add_argument("--retry", default="")
    p.add_argument("--summary")
    p = sub.add_parser("soak")
    p.add_argument("dir")
    p.add_argument("--min-ops", type=int, default=0)
    p.add_argument("--rss-slack", type=int, default=1 << 20)
    p.add_argument("--summary")
    a = ap.parse_args()
    problems = []
    if a.cmd == "once":
        n = check_once(a.dir, a.cases, problems)
        print(f"{n} cases, each once")
    elif a.cmd == "faults":
        faults(a.dirs, [x for x in a.retry.split(",") if x], a.summary, problems)
    else:
        soak(a.dir, a.min_ops, a.rss_slack, a.summary, problems)
    for p in problems[:40]:
        print("PROBLEM:", p)
    if len(problems) > 40:
        print(f"PROBLEM: ... and {len(problems) - 40} more")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
