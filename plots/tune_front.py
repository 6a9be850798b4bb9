#!/usr/bin/env python3
"""tune_front.py - the figure of cumembench tune's Pareto front from its --json
(docs/tune.md): writes the table plots/tune.gp reads and runs gnuplot.

  plots/tune_front.py TUNE.json OUT.png
"""
import json
import os
import subprocess
import sys
import tempfile


def short(setting, width=44):
    s = setting.replace(":per_process_memory_fraction=1", "")
    return s if len(s) <= width else s[:width - 1] + "…"


def rows(d):
    """(role, GiB, ms, label): the front, labelled where the points are apart; then the marks."""
    out, last = [], None
    rec = (d.get("recommendation") or {}).get("setting")
    for c in d["front"]:
        gib, t = c["min_capacity_bytes"] / 2**30, c["predicted_alloc_time_per_pass_s"]
        if t is None:
            continue
        apart = last is None or abs(gib - last) > 0.08 * gib
        label = short(c["setting"]) if apart and c["setting"] != rec else ""  # the recommendation: below
        last = gib if apart else last
        out.append(("front", gib, t * 1e3, label))
    for role, c in (("recommended", d.get("recommendation")), ("recorded", d["recorded"])):
        if c and c["predicted_alloc_time_per_pass_s"] is not None:
            out.append((role, c["min_capacity_bytes"] / 2**30, c["predicted_alloc_time_per_pass_s"] * 1e3,
                        ("recorded: " if role == "recorded" else "recommended: ") + short(c["setting"])))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: tune_front.py TUNE.json OUT.png")
    d = json.load(open(sys.argv[1]))
    budget = (d.get("budget_bytes") or 0) / 2**30
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write("role,gib,ms,label\n")
        for role, gib, ms, label in rows(d):
            f.write("%s,%.4f,%.4f,%s\n" % (role, gib, ms, label.replace(",", ";")))
    title = "cumembench tune: %s (%d settings searched; time predicted from %s)" % (
        os.path.basename(d["input"]), d["candidates"], d["costs_file"] or "no cost file")
    try:
        subprocess.run(["gnuplot", "-c", os.path.join(os.path.dirname(os.path.abspath(__file__)), "tune.gp"),
                        f.name, sys.argv[2], title, "%.4f" % budget if budget else ""], check=True)
    finally:
        os.unlink(f.name)


if __name__ == "__main__":
    main()
