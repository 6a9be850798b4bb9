#!/usr/bin/env python3
"""Checks of run directories (results.csv, results.json) for the reliability
tests. Standard library only.

  results_check.py once DIR [--cases N] [--killed]
      both files are valid; every case is in each exactly once (one set of
      repetitions, at most one status row); with --cases, N cases in all;
      with --killed, the JSON may hold one case more than the CSV, the last
      (the run was killed between that case's two writes).
  results_check.py faults [--summary FILE] [--retry NAME,...] DIR...
      fault-injection runs: every case ran (no failed case: each failure was
      a clean OOM), nothing leaked, no upstream misuse, no overlapping,
      misaligned or foreign block, statistics agree; every allocator met
      injected faults; the allocators named in --retry (when they ran)
      freed their cache and retried (oom_retries > 0).
  results_check.py isolation STICKY_DIR ORPHAN_DIR
      the GPU runs of scripts/gpu-reliability.sh: every planted
      illegal-address case failed with the CUDA error and every case after
      it ran clean; the orphan case left memory that the device check
      reported (device_unreturned_bytes) and the next case ran on a dirty
      device (device_dirty_bytes).
  results_check.py gpusoak [--wall SECONDS] [--summary FILE] DIR...
      the rounds of scripts/gpu-soak.sh: the consistency checks of every
      round, every case's device memory returned (device_unreturned_bytes
      and device_dirty_bytes 0), and the totals per allocator.
  results_check.py soak [--summary FILE] [--min-ops N] [--heap-slack BYTES] DIR
      the same consistency checks, at least N operations in all, and the
      case process's heap (bytes held from malloc after each repetition's
      teardown) did not grow from the first repetition to the last by more
      than the slack.
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


def check_once(d, n_cases, problems, killed=False):
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
    if killed and doc["benchmarks"] and in_json - ran == {doc["benchmarks"][-1]["run_name"]}:
        in_json = ran  # killed between the case's JSON and CSV writes: --resume removes it
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


def soak(d, min_ops, heap_slack, summary, problems):
    """Host memory: host_heap_growth_bytes of every repetition after the
    first (the first may fill caches) must stay within the slack."""
    doc, rows = load(d)
    consistency(d, rows, problems)
    reps = metrics_by_rep(rows)
    ops = 0
    per_case = collections.defaultdict(lambda: {"reps": 0, "ops": 0, "secs": 0.0, "growth": 0.0, "heap": []})
    for (case, rep), m in sorted(reps.items(), key=lambda kv: (kv[0][0], int(kv[0][1]))):
        n = m.get("allocs", 0) + m.get("frees", 0)
        ops += n
        c = per_case[case]
        c["reps"] += 1
        c["ops"] += n
        c["secs"] += m.get("time_s", 0)
        if "host_heap_growth_bytes" not in m:
            problems.append(f"{d}: {case} rep {rep}: no host_heap_growth_bytes (run with CMB_VERIFY=1)")
            continue
        c["heap"].append(m["host_heap_bytes"])
        if int(rep) > 0:
            c["growth"] += m["host_heap_growth_bytes"]
    fmt = "{:<48} {:>4} {:>12} {:>9} {:>12} {:>22}"
    lines = [fmt.format("case", "reps", "operations", "seconds", "heap (B)", "heap growth after rep 0")]
    for case, c in sorted(per_case.items()):
        if c["growth"] > heap_slack:
            problems.append(f"{d}: {case}: the host heap grew by {c['growth']:.0f} bytes over repetitions 1..")
        parts = case.split("/")
        short = "/".join(parts[:2] + [p for p in parts[2:] if p.startswith("dist:")])
        heap = f"{c['heap'][-1]:.0f}" if c["heap"] else "?"
        lines.append(fmt.format(short[:48], c["reps"], int(c["ops"]), f"{c['secs']:.1f}", heap,
                                f"{c['growth']:.0f}"))
    lines.append(f"total operations: {int(ops)} in {len(per_case)} cases")
    if ops < min_ops:
        problems.append(f"{d}: {int(ops)} operations, fewer than {min_ops}")
    text = "\n".join(lines) + "\n"
    if summary:
        with open(summary, "w") as f:
            f.write(text)
    print(text, end="")


def cases_in_order(rows):
    order = []
    for r in rows:
        if not order or order[-1] != r["case"]:
            order.append(r["case"])
    return order


def isolation(sticky, orphan, problems):
    doc, rows = load(sticky)
    reps = metrics_by_rep(rows)
    order = cases_in_order(rows)
    planted = [c for c in order if c.startswith("planted-fault/")]
    others = [c for c in order if not c.startswith("planted-fault/")]
    if not planted or not others:
        problems.append(f"{sticky}: expected planted-fault and churn cases, got {order}")
    for c in planted:
        errs = [r["error"] for r in rows if r["case"] == c and r["status"] == "failed"]
        if not errs or "illegal memory access" not in errs[0]:
            problems.append(f"{sticky}: {c}: expected a failure with the illegal address, got {errs[:1]}")
        else:
            print(f"sticky error isolated: {c.split('/')[1]}: {errs[0][:110]}")
    for c in others:
        ok = [m for (case, _), m in reps.items() if case == c]
        failed = [r for r in rows if r["case"] == c and r["status"] == "failed"]
        if failed or not ok:
            problems.append(f"{sticky}: {c}: did not run clean after the sticky error: {failed[:1]}")
        for m in ok:
            if m.get("device_dirty_bytes", -1) != 0 or m.get("device_unreturned_bytes", -1) != 0:
                problems.append(f"{sticky}: {c}: device not clean: {m.get('device_dirty_bytes')}, "
                                f"{m.get('device_unreturned_bytes')}")
    print(f"{len(planted)} planted cases failed alone; {len(others)} cases after them ran clean")

    doc, rows = load(orphan)
    reps = metrics_by_rep(rows)
    order = cases_in_order(rows)
    if len(order) < 2 or not order[0].startswith("planted-fault/"):
        problems.append(f"{orphan}: expected the orphan case first, got {order}")
        return
    hold = [m for (case, _), m in reps.items() if case == order[0]]
    nxt = [m for (case, _), m in reps.items() if case == order[1]]
    unreturned = max((m.get("device_unreturned_bytes", 0) for m in hold), default=0)
    dirty = max((m.get("device_dirty_bytes", 0) for m in nxt), default=0)
    held = max((m.get("planted_hold_bytes", 0) for m in hold), default=0)
    if not held or unreturned < held / 2:
        problems.append(f"{orphan}: the orphan case held {held:.0f} B but device_unreturned_bytes is {unreturned:.0f}")
    if not held or dirty < held / 2:
        problems.append(f"{orphan}: the case after the orphan shows device_dirty_bytes {dirty:.0f}")
    print(f"memory left by a case: {unreturned / 2**30:.2f} GiB reported as not returned; the next case "
          f"reported as run on a dirty device ({dirty / 2**30:.2f} GiB above the start)")


def gpusoak(dirs, wall, summary, problems):
    per_alloc = collections.defaultdict(collections.Counter)
    for d in dirs:
        doc, rows = load(d)
        consistency(d, rows, problems)
        for (case, rep), m in metrics_by_rep(rows).items():
            a = per_alloc[case.split("/")[1]]
            a["reps"] += 1
            a["ops"] += m.get("allocs", 0) + m.get("frees", 0)
            a["failed_allocs"] += m.get("failed_allocs", 0)
            a["seconds"] += m.get("time_s", 0)
            a["device_leak_max"] = max(a["device_leak_max"], m.get("device_leak_bytes", 0))
            for k in ("device_unreturned_bytes", "device_dirty_bytes"):
                if m.get(k, 0) != 0:
                    problems.append(f"{d}: {case} rep {rep}: {k} = {m[k]:.0f}")
            if "device_dirty_bytes" not in m:
                problems.append(f"{d}: {case}: no device check (device_dirty_bytes missing)")
    fmt = "{:<18} {:>6} {:>12} {:>12} {:>11} {:>22}"
    lines = [fmt.format("allocator", "reps", "operations", "failed (OOM)", "scenario s", "max device_leak_bytes")]
    tot = collections.Counter()
    for alloc in sorted(per_alloc):
        a = per_alloc[alloc]
        for k in ("reps", "ops", "failed_allocs", "seconds"):
            tot[k] += a[k]
        lines.append(fmt.format(alloc, int(a["reps"]), int(a["ops"]), int(a["failed_allocs"]), f"{a['seconds']:.0f}",
                                int(a["device_leak_max"])))
    lines.append(fmt.format("all", int(tot["reps"]), int(tot["ops"]), int(tot["failed_allocs"]),
                            f"{tot['seconds']:.0f}", ""))
    lines.append(f"{len(dirs)} rounds" + (f", {wall} s of wall time" if wall else ""))
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
    p.add_argument("--killed", action="store_true",
                   help="the run was killed: the JSON may hold one more case, the last, than the CSV")
    p = sub.add_parser("faults")
    p.add_argument("dirs", nargs="+")
    p.add_argument("--retry", default="")
    p.add_argument("--summary")
    p = sub.add_parser("isolation")
    p.add_argument("sticky")
    p.add_argument("orphan")
    p = sub.add_parser("gpusoak")
    p.add_argument("dirs", nargs="+")
    p.add_argument("--wall", type=int)
    p.add_argument("--summary")
    p = sub.add_parser("soak")
    p.add_argument("dir")
    p.add_argument("--min-ops", type=int, default=0)
    p.add_argument("--heap-slack", type=int, default=0)
    p.add_argument("--summary")
    a = ap.parse_args()
    problems = []
    if a.cmd == "once":
        n = check_once(a.dir, a.cases, problems, a.killed)
        print(f"{n} cases, each once")
    elif a.cmd == "isolation":
        isolation(a.sticky, a.orphan, problems)
    elif a.cmd == "gpusoak":
        gpusoak(a.dirs, a.wall, a.summary, problems)
    elif a.cmd == "faults":
        faults(a.dirs, [x for x in a.retry.split(",") if x], a.summary, problems)
    else:
        soak(a.dir, a.min_ops, a.heap_slack, a.summary, problems)
    for p in problems[:40]:
        print("PROBLEM:", p)
    if len(problems) > 40:
        print(f"PROBLEM: ... and {len(problems) - 40} more")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
