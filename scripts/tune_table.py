#!/usr/bin/env python3
"""tune_table.py OUT_DIR - the table of scripts/gpu-tune.sh (tune.md and
tune.json in OUT_DIR): per program, the budget, the recorded and the
recommended setting, whether the recommendation ran without out of memory,
peak reserved predicted / measured, and the step time predicted / measured.

Step times: every process of a setting gives the median of its rounds' mean
step; the table gives the median over all rounds and the per-process
medians' range. The measured change (recommended - recorded) is set against
the predicted one: "yes" within max(25%, 1 ms); "no" outside it and told
apart by the processes (a two-sided exact Mann-Whitney U test of the
recommended setting's process medians against the recorded setting's moved
by the predicted change rejects at 0.05); "not resolved" outside it where
the processes do not tell them apart: the spread between processes of one
setting is larger than the difference (with 3 and 4 processes no order can
reach 0.05; 4 and 4 need every process on one side).

Reads CMB_TUNE_WORKLOADS and CMB_TUNE_ROUNDS as gpu-tune.sh sets them;
without them, every WORKLOAD.tune.json in OUT_DIR and the rounds found. The
processes are those found. With --verdict PROGRAM it prints that program's
verdict alone (yes, no, not resolved, or - where there is none yet) and
writes nothing: gpu-tune.sh runs one more pair of processes while it is
"not resolved"."""
import itertools
import json
import os
import statistics
import sys

out = None  # the directory read and written (main's argument)
ALPHA = 0.05


def u_test_p(a, b):
    """Two-sided exact Mann-Whitney U p-value (midranks for ties): the share
    of all splits of a + b into groups of their sizes whose U is at least as
    far from its mean as the observed one."""
    pooled = sorted(a + b)
    rank = {v: sum(i + 1 for i, w in enumerate(pooled) if w == v) / pooled.count(v) for v in pooled}
    ranks = [rank[v] for v in a + b]
    n1, n2 = len(a), len(b)
    mean = n1 * n2 / 2

    def dev(idx):
        return abs(sum(ranks[i] for i in idx) - n1 * (n1 + 1) / 2 - mean)

    obs = dev(range(n1))
    splits = list(itertools.combinations(range(n1 + n2), n1))
    return sum(dev(s) >= obs - 1e-9 for s in splits) / len(splits)


def verdict(d_pred, d_meas, tol, procs_old, procs_new):
    if None in (d_pred, d_meas):
        return "-", None
    if abs(d_pred - d_meas) <= tol:
        return "yes", None
    if len(procs_old) < 2 or len(procs_new) < 2:
        return "not resolved", None
    p = u_test_p(procs_new, [x + d_pred for x in procs_old])
    return ("**no**" if p < ALPHA else "not resolved"), p


def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except (OSError, ValueError):
        return None

def merged(name):
    """The steps of process `name` and of its further processes (name.p2, name.p3, ...), rounds in
    one list; "procs" the per-process medians of the rounds' mean step."""
    a = load(f"{name}.steps.json")
    if not a:
        return a
    a = dict(a, rounds=list(a.get("rounds") or []), procs=[])
    for p in range(1, 100):
        b = a if p == 1 else load(f"{name}.p{p}.steps.json")
        if b is None:
            break
        if p > 1:
            a["rounds"] += b.get("rounds") or []
        if b.get("rounds"):
            a["procs"].append(1e3 * statistics.median(sum(r) / len(r) for r in b["rounds"]))
    return a


def step_ms(steps):
    if not steps or not steps.get("rounds"):
        return None
    return 1e3 * statistics.median(sum(r) / len(r) for r in steps["rounds"])

def on_budget(ob, steps):
    """The recorded setting capped at the budget: out of memory (expected), ran, or how it failed."""
    if not ob:
        return "-"
    err = (steps or {}).get("error") or ob.get("error") or ""
    if "out of memory" in err.lower() or "OutOfMemory" in err:
        return "out of memory"
    return "ran" if ob["exit_status"] == 0 else "failed: " + err[:60].replace("|", "/")


def workload_row(wl):
    """The table row of program WL and its data (None where tune made no recommendation)."""
    t, rec, old, ob = (load(f"{wl}.{k}.json") for k in ("tune", "recommended", "recorded", "recorded-on-budget"))
    srec, sold = merged(f"{wl}.recommended"), merged(f"{wl}.recorded")
    srecord, sob = (load(f"{wl}.{k}.steps.json") for k in ("record", "recorded-on-budget"))
    if not t or not t.get("recommendation"):
        return None, f"| {wl} | no recommendation (see {wl}.tune.log) | | | | | | | |"
    steps_per_pass = (srecord or {}).get("steps", 0) * (1 + len((srecord or {}).get("rounds", [])))
    onb = t["recommendation_on_budget"]
    pred_peak = onb["peak_reserved_bytes"]
    meas_peak = rec["peak_reserved_bytes"] if rec else None
    t_old, t_new = t["recorded"]["predicted_alloc_time_per_pass_s"], onb["predicted_alloc_time_per_pass_s"]
    d_pred = (t_new - t_old) * 1e3 / steps_per_pass if steps_per_pass and None not in (t_old, t_new) else None
    m_old, m_new = step_ms(sold), step_ms(srec)
    d_meas = m_new - m_old if None not in (m_old, m_new) else None
    tol = max(0.25 * abs(d_meas), 1.0) if d_meas is not None else None
    peak_err = 100.0 * (meas_peak - pred_peak) / pred_peak if meas_peak else None
    ok_run = rec and rec["exit_status"] == 0 and not rec["error"] and not (srec or {}).get("error")
    row = {"budget_bytes": t["budget_bytes"], "recorded": t["recorded"]["setting"],
           "recorded_min_capacity_bytes": t["recorded"]["min_capacity_bytes"],
           "recommended": t["recommendation"]["setting"], "paste": t["recommendation"]["paste"],
           "recommended_min_capacity_bytes": t["recommendation"]["min_capacity_bytes"],
           "predicted_peak_reserved_bytes": pred_peak, "measured_peak_reserved_bytes": meas_peak,
           "peak_error_pct": peak_err, "ran_without_oom": bool(ok_run),
           "recorded_step_ms": m_old, "recommended_step_ms": m_new, "measured_delta_ms": d_meas,
           "predicted_delta_ms": d_pred, "tolerance_ms": tol, "steps_per_pass": steps_per_pass,
           "recorded_on_budget": ob and {"exit_status": ob["exit_status"], "error": (sob or {}).get("error")}}
    fmt = lambda v, f="%.2f": "-" if v is None else f % v
    p_old, p_new = (sold or {}).get("procs", []), (srec or {}).get("procs", [])
    within, p_u = verdict(d_pred, d_meas, tol, p_old, p_new)
    row.update(recorded_process_medians_ms=p_old, recommended_process_medians_ms=p_new,
               verdict=within.strip("*"), u_test_p=p_u)
    rng = lambda v: "-" if not v else f"{min(v):.1f}–{max(v):.1f} ({len(v)})"  # noqa: E731
    return row, (f"| {wl} | {t['budget_bytes'] / 2**30:.3f} | `{t['recorded']['setting']}` "
                f"{t['recorded']['min_capacity_bytes'] / 2**30:.3f} | `{t['recommendation']['setting']}` "
                f"{t['recommendation']['min_capacity_bytes'] / 2**30:.3f} | {'yes' if ok_run else '**no**'} | "
                f"{pred_peak / 2**20:.1f} / {fmt(meas_peak and meas_peak / 2**20, '%.1f')} ({fmt(peak_err, '%+.2f%%')}) | "
                f"{fmt(m_old)} / {fmt(m_new)} | {rng(p_old)} / {rng(p_new)} | {fmt(d_pred)} / {fmt(d_meas)} ({within}"
                f"{'' if p_u is None else f', p = {p_u:.3f}'}) | "
                f"{on_budget(ob, sob)} |")


def main(argv):
    global out
    if len(argv) not in (2, 4) or not os.path.isdir(argv[1]) or (len(argv) == 4 and argv[2] != "--verdict"):
        sys.exit("usage: tune_table.py OUT_DIR [--verdict PROGRAM] (the directory gpu-tune.sh wrote)")
    out = argv[1]
    if not os.path.isfile(os.path.join(out, "gpu.txt")):
        sys.exit(f"tune_table.py: {out} has no gpu.txt: not a directory gpu-tune.sh wrote")
    if len(argv) == 4:  # gpu-tune.sh asks whether one more pair of processes is needed
        row, _ = workload_row(argv[3])
        print(row["verdict"] if row else "-")
        return
    gpu = open(os.path.join(out, "gpu.txt")).read().strip().splitlines()
    rows, doc = [], {"gpu": gpu, "workloads": {}}
    found = sorted((f[:-len(".tune.json")] for f in os.listdir(out) if f.endswith(".tune.json")),
                   key=lambda w: (["transformer", "convnet", "llm-decode"] + [w]).index(w))  # gpu-tune.sh's order
    workloads = os.environ.get("CMB_TUNE_WORKLOADS", "").split() or found
    each = {}  # program -> (processes a side, rounds a process): they differ where calls were joined
    for wl in workloads:
        procs = len((merged(f"{wl}.recorded") or {}).get("procs", []))  # > CMB_TUNE_PROCS where pairs were added
        rounds = os.environ.get("CMB_TUNE_ROUNDS") or str(len((load(f"{wl}.recorded.steps.json") or {}).get("rounds", [])))
        each[wl] = (procs, rounds)
    if len(set(each.values())) <= 1:
        procs, rounds = next(iter(each.values()), (0, "0"))
        over = f"over {procs} processes of {rounds} rounds each"
    else:
        over = "over each program's processes (" + ", ".join(
            f"{wl} {p} of {r} rounds" for wl, (p, r) in each.items()) + ")"
    for wl in workloads:
        row, line = workload_row(wl)
        rows.append(line)
        if row:
            doc["workloads"][wl] = row
    with open(os.path.join(out, "tune.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(out, "tune.md"), "w") as f:
        f.write("# cumembench tune on a GPU: predicted against measured\n\n")
        f.write("GPU: " + "; ".join(gpu) + ". Made by `scripts/gpu-tune.sh`. Each program recorded under PyTorch's "
                "default, tuned under a budget (GiB) halfway between the smallest GPU any candidate fits and the "
                "one the recorded setting needs, then run under the recommendation capped at the budget. Peak "
                "reserved: predicted by the replay on a GPU of the budget / measured. Step: the median of the rounds' "
                f"mean steps {over} (the "
                "order alternating), recorded "
                "setting (no cap) / recommended (capped); beside it the range of the per-process medians (and how "
                "many processes ran). Δ step: predicted (the cost "
                "file's allocator time per pass on the budget minus the recorded setting's, per step) / measured; "
                "yes: within max(25%, 1 ms); **no**: outside it and told apart by the processes (a two-sided exact "
                "Mann-Whitney U test of the recommended setting's per-process medians against the recorded "
                "setting's moved by the predicted change, p < 0.05); not resolved: outside it, the processes not "
                "telling the two apart (the same setting's processes differ by more).\n\n")
        f.write("| program | budget GiB | recorded, smallest GPU GiB | recommended, smallest GPU GiB | ran, no OOM | "
                "peak reserved MiB pred / meas | step ms recorded / recommended | per-process medians ms recorded / "
                "recommended | Δ step ms pred / meas | recorded on the budget |\n|---|---|---|---|---|---|---|---|---|---|\n")
        f.write("\n".join(rows) + "\n")
    print(open(os.path.join(out, "tune.md")).read())


if __name__ == "__main__":
    main(sys.argv)
