#!/usr/bin/env python3
"""test_tables.py - tools/results-table.py and tools/rankings.py, the two
tools every table of the README and docs/findings.md is regenerated with,
read back the committed full runs (results/nvidia-h{100,200}/full): the
medians, the spreads, the marks on partly failed cases and the rankings'
exclusions, checked against values computed here from the tidy CSV."""
import csv
import gzip
import os
import statistics
import subprocess
import sys
import unittest

SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H100 = os.path.join(SRC, "results", "nvidia-h100", "full")
H200 = os.path.join(SRC, "results", "nvidia-h200", "full")
ALLOCATORS = ("cuda cuda-async cuda-async-retain managed cub cub-1g torch-caching torch-expandable "
              "rmm-pool arena binning bfc bfc-prealloc cupy buddy").split()
REAL = "cuda cuda-async cuda-async-retain managed cub cub-1g".split()  # the rest emulate, or are the suite's


def tool(name, *args):
    p = subprocess.run([sys.executable, os.path.join(SRC, "tools", name)] + list(args),
                       capture_output=True, text=True, timeout=120, cwd=SRC)
    if p.returncode != 0:
        raise AssertionError(f"{name} {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p.stdout


def csv_values(run, scenario, allocator, param, metric):
    """The ok repetitions' values of one case, straight from results.csv.gz."""
    with gzip.open(os.path.join(run, "results.csv.gz"), "rt") as f:
        return [float(r["value"]) for r in csv.DictReader(f)
                if r["scenario"] == scenario and r["allocator"] == allocator and r["status"] == "ok"
                and r["metric"] == metric and param in r["params"].split(";")]


def row_of(table, allocator):
    for line in table.splitlines():
        if line.startswith(f"| {allocator} |"):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row for {allocator} in:\n{table}")


class ResultsTable(unittest.TestCase):
    def test_median_and_spread_match_the_csv(self):
        out = tool("results-table.py", H200, "--scenario", "fastpath", "--where", "size=2MiB",
                   "--metric", "time_s:ns", "--allocators", "bfc")
        vals = csv_values(H200, "fastpath", "bfc", "size=2MiB", "time_s")
        self.assertEqual(len(vals), 3)
        cell = row_of(out, "bfc")[1]
        self.assertTrue(cell.startswith(f"{statistics.median(vals) * 1e9:.2f}"), cell)
        if max(vals) > min(vals):
            self.assertIn(f"({min(vals) * 1e9:.2f}–{max(vals) * 1e9:.2f})", cell)
        self.assertIn("NVIDIA H200", out)

    def test_pivot_median_only(self):
        out = tool("results-table.py", H100, "--scenario", "fastpath", "--columns", "size",
                   "--pivot", "size", "--metric", "time_s:ns", "--median-only")
        cells = row_of(out, "cuda")
        self.assertEqual(len(cells), 5)  # allocator + 4 sizes of the full preset
        self.assertNotIn("(", "".join(cells))

    def test_partly_failed_cases_are_marked(self):
        out = tool("results-table.py", H100, "--scenario", "leak-check", "--where", "variant=leak",
                   "--metric", "peak_reserved_bytes:GiB", "--allocators", "cuda,cub-1g")
        self.assertNotIn("†", row_of(out, "cuda")[1])
        self.assertIn("†", row_of(out, "cub-1g")[1])
        self.assertRegex(out, r"† cub-1g: 2 of 3 repetitions failed, the figure is over the other 1: out of memory")


class Rankings(unittest.TestCase):
    def test_every_scenario_ranked_per_gpu(self):
        out = tool("rankings.py", H200, H100)
        self.assertIn("### NVIDIA H200: `", out)
        self.assertIn("### NVIDIA H100 80GB HBM3: `", out)
        for scenario in ("churn", "replay", "stream-async", "shared-mem", "gemm-chunked", "batch-sweep",
                         "leak-check", "pinned", "contention", "fastpath"):
            self.assertEqual(sum(1 for l in out.splitlines() if l.startswith(f"| {scenario} |")), 2, scenario)

    def fastest(self, group, column):
        out = tool("rankings.py", H200)
        line = next(l for l in out.splitlines() if l.startswith("| fastpath |"))
        fastest = line.split("|")[column].strip().split(" ")[0]
        sizes = ("size=512B", "size=64KiB", "size=2MiB", "size=64MiB")
        med = {a: [statistics.median(csv_values(H200, "fastpath", a, s, "time_s")) for s in sizes]
               for a in group}
        best = [min(m[i] for m in med.values()) for i in range(len(sizes))]
        score = {a: statistics.geometric_mean([v / b for v, b in zip(m, best)]) for a, m in med.items()}
        self.assertEqual(fastest, min(score, key=score.get))

    def test_fastest_real_allocator_is_the_smallest_geometric_mean_among_real_ones(self):
        self.fastest(REAL, 4)

    def test_emulations_times_are_apart_and_labelled(self):
        self.fastest([a for a in ALLOCATORS if a not in REAL], 5)
        out = tool("rankings.py", H200)
        self.assertIn("fastest emulation: policy bookkeeping (not the original's cost)", out)
        for line in out.splitlines():
            if line.startswith("| ") and not line.startswith("| scenario"):
                real_cell = line.split("|")[4]
                self.assertFalse(any(a in real_cell.replace("cub-1g", "").split() for a in ALLOCATORS
                                     if a not in REAL), line)

    def test_sim_runs_rank_no_time(self):
        sim = os.path.join(SRC, "results", "sim", "fastpath")
        if not os.path.isdir(sim):
            self.skipTest("no committed sim run")
        out = tool("rankings.py", sim)
        self.assertIn("sim mode: times are host bookkeeping, not ranked", out)
        self.assertNotIn("fastest", out)

    def test_allocators_that_served_less_are_left_out(self):
        out = tool("rankings.py", H100)
        self.assertRegex(out, r"- churn: left out of the ranking, served less than the others .*: .*arena")


class CmbSteadyTable(unittest.TestCase):
    """scripts/cmb_steady_table.py over the committed GPU run of issue 26,
    made in three calls (replay-a, replay-b, replay-c with churn): the runs read as one, the goals found for
    allocators named with their upstream (cmb@vmm), the committed replay.md
    what the script makes of them."""
    RUN = os.path.join(SRC, "results", "nvidia-h200", "cmb-steady-vmm")

    def table(self):
        csvs = ",".join(os.path.join(self.RUN, d, "results.csv") for d in ("replay-a", "replay-b", "replay-c"))
        p = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "cmb_steady_table.py"), csvs,
                            os.path.join(self.RUN, "churn", "results.csv")],
                           capture_output=True, text=True, timeout=120, cwd=SRC)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_committed_table_is_regenerated(self):
        with open(os.path.join(self.RUN, "replay.md")) as f:
            self.assertEqual(self.table(), f.read())

    def test_runs_joined_and_goals_found(self):
        out = self.table()
        self.assertIn("| torch_transformer_sweep.trace | cmb@vmm |", out)  # replay-b
        self.assertIn("| torch_convnet.trace | cmb@vmm |", out)  # replay-a
        self.assertIn("| reserved/requested, 100 passes <= 1.02 | torch_serving.trace | 1.0057 |", out)  # replay-c
        self.assertIn("| cmb@vmm | max_size=64MiB |", out)  # churn
        goals = [ln for ln in out.splitlines() if ln.startswith("| reserved/requested, 1 pass <= 1.015 |")]
        self.assertEqual(len(goals), 6, out)  # every torch_* trace measured, cmb@vmm counted as cmb

    def test_time_median_and_ratio(self):
        def times(d, allocator, passes):
            with open(os.path.join(self.RUN, d, "results.csv"), newline="") as f:
                return [float(r["value"]) for r in csv.DictReader(f) if r["allocator"] == allocator
                        and r["metric"] == "time_s" and r["status"] == "ok" and f"passes={passes}" in r["params"]]
        cmb, exp = times("replay-b", "cmb", 100), times("replay-b", "torch-expandable", 100)
        self.assertEqual((len(cmb), len(exp)), (3, 3))
        row = next(ln for ln in self.table().splitlines()
                   if ln.startswith("| torch_transformer_sweep.trace | cmb@vmm |") and "[" in ln)
        cells = [c.strip() for c in row.strip("|").split("|")]
        self.assertTrue(cells[3].startswith(f"{statistics.median(cmb):.4f} "), row)
        self.assertEqual(cells[5], f"{statistics.median(cmb) / statistics.median(exp):.2f}")


class TuneTable(unittest.TestCase):
    """scripts/tune_table.py: the committed GPU tune runs' tables are what it
    makes of their files, and its verdict on a step-time change."""

    def script(self):
        import importlib.util
        spec = importlib.util.spec_from_file_location("tune_table", os.path.join(SRC, "scripts", "tune_table.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    def test_committed_tables_are_regenerated(self):
        import shutil
        import tempfile
        for run in ("tune", "tune-4procs", "tune-budget", "tune-f19f853"):
            src = os.path.join(SRC, "results", "nvidia-h200", run)
            with tempfile.TemporaryDirectory() as tmp:
                work = os.path.join(tmp, run)
                shutil.copytree(src, work)
                p = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "tune_table.py"), work],
                                   capture_output=True, text=True, timeout=120)
                self.assertEqual(p.returncode, 0, p.stderr)
                for name in ("tune.md", "tune.json"):
                    with open(os.path.join(work, name)) as a, open(os.path.join(src, name)) as b:
                        self.assertEqual(a.read(), b.read(), f"{run}/{name}")

    def test_joined_calls_say_each_programs_counts(self):
        """A directory joined from two calls (LLM decode in 8 processes of 3 rounds, the others in
        4 of 5) says each program's counts, not one count for all."""
        with open(os.path.join(SRC, "results", "nvidia-h200", "tune-f19f853", "tune.md")) as f:
            text = f.read()
        self.assertIn("(transformer 4 of 5 rounds, convnet 4 of 5 rounds, llm-decode 8 of 3 rounds)", text)
        with open(os.path.join(SRC, "results", "nvidia-h200", "tune-budget", "tune.md")) as f:
            self.assertIn("over 4 processes of 5 rounds each", f.read())

    def test_verdict_of_one_program(self):
        """--verdict, what gpu-tune.sh asks before running one more pair of processes."""
        for run, wl, want in (("tune-budget", "llm-decode", "not resolved"), ("tune", "transformer", "yes"),
                              ("tune-f19f853", "llm-decode", "yes"), ("tune", "no-such-program", "-")):
            p = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "tune_table.py"),
                                os.path.join(SRC, "results", "nvidia-h200", run), "--verdict", wl],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual((p.returncode, p.stdout.strip()), (0, want), p.stderr)

    def test_bad_input_one_line(self):
        for script, arg in (("tune_table.py", SRC), ("cmb_steady_table.py", os.path.join(SRC, "no-such.csv"))):
            p = subprocess.run([sys.executable, os.path.join(SRC, "scripts", script), arg],
                               capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0, script)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertEqual(p.stdout, "", script)

    def test_u_test_exact(self):
        u = self.script().u_test_p
        self.assertAlmostEqual(u([1, 2, 3, 4], [5, 6, 7, 8]), 2 / 70)  # every process on one side
        self.assertAlmostEqual(u([1, 2, 3], [5, 6, 7, 8]), 2 / 35)  # 3 and 4: never under 0.05
        self.assertAlmostEqual(u([1, 2, 3, 4], [1, 2, 3, 4]), 1.0)
        self.assertAlmostEqual(u([1, 2, 3, 5], [4, 6, 7, 8]), 4 / 70)  # one pair crossed

    def test_verdict(self):
        v = self.script().verdict
        self.assertEqual(v(0.5, 0.9, 1.0, [60, 61], [61, 62])[0], "yes")  # within 1 ms
        # 10 ms slower than predicted, every process apart: a miss
        self.assertEqual(v(0.0, 10.0, 2.5, [60, 61, 60.5, 61.5], [70, 71, 70.5, 71.5])[0], "**no**")
        # 6 ms apart on average, but one setting's processes spread over 12 ms: not told apart
        self.assertEqual(v(0.0, -6.0, 1.5, [67, 71, 80, 76], [69, 63, 70])[0], "not resolved")


class E2eTable(unittest.TestCase):
    """scripts/e2e-steady.py table: the committed real-program tables of
    cmb-park-after (and of a few more runs) are what it makes of their runs, and its step-by-step
    ratios and sums are those of the JSON files."""
    RUN = os.path.join(SRC, "results", "nvidia-h200", "cmb-park-after")

    def table(self, part):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "e2e.md")
            p = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "e2e-steady.py"), "table", "--work",
                                os.path.join(self.RUN, part, "e2e"), "--out", out],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                return f.read()

    def test_committed_tables_are_regenerated(self):
        for part in ("variants", "ab", "worker/call-1", "worker/call-2",
                     os.path.join("..", "..", "nvidia-h100", "cmb-cost-model"),
                     os.path.join("..", "..", "nvidia-h100", "cmb-profile"),
                     os.path.join("..", "cmb-unseen-programs", "steady-gu"),
                     os.path.join("..", "cmb-unseen-programs", "steady-moe"),
                     os.path.join("..", "cmb-chunk-e2e")):
            with open(os.path.join(self.RUN, part, "e2e.md")) as f:
                self.assertEqual(self.table(part), f.read(), part)

    def test_step_ratio_and_new_shape_sums(self):
        import json

        def steps(mode):
            runs = []
            for r in (1, 2, 3):
                with open(os.path.join(self.RUN, "ab", "e2e", f"transformer-{mode}-{r}.json")) as f:
                    runs.append(json.load(f)["steps"])
            return runs
        nat, new = steps("native-expandable"), steps("cmb-new")
        want = statistics.median(r[1]["ms"] for r in new) / statistics.median(r[1]["ms"] for r in nat)
        out = self.table("ab")
        row = next(ln for ln in out.splitlines() if ln.startswith("| 1 | seq200* |"))
        self.assertEqual(row.split("|")[4].split()[0], f"{want:.3f}")  # the columns: cmb-new, cmb-old
        sums = [sum(s["ms"] for s in r[1:] if not s["repeat"]) for r in new]
        rows = [ln for ln in out.splitlines() if ln.startswith("| cmb-new | ")]
        self.assertIn(f"{statistics.median(sums):.2f} [{min(sums):.2f}-{max(sums):.2f}]", rows[-1])

    def test_half_against_half(self):
        import json
        nat = []
        for r in (1, 2, 3):
            with open(os.path.join(self.RUN, "ab", "e2e", f"transformer-native-expandable-{r}.json")) as f:
                nat.append(json.load(f)["steps"])
        n = min(len(r) for r in nat)
        worst, sums = [], []
        for one in range(3):  # three runs: each against the other two
            rest = [nat[j] for j in range(3) if j != one]
            w = 0.0
            for i in range(1, n):
                q = nat[one][i]["ms"] / statistics.median(r[i]["ms"] for r in rest)
                w = max(w, q, 1 / q)
            worst.append(w)
            s = lambda r: sum(x["ms"] for x in r[1:n] if not x["repeat"])  # noqa: E731
            q = s(nat[one]) / statistics.median(s(r) for r in rest)
            sums.append(max(q, 1 / q))
        out = self.table("ab").split("transformer, step by step")[1]
        row = next(ln for ln in out.splitlines() if ln.startswith("| native expandable, half its runs"))
        cells = [c.strip() for c in row.split("|")]
        self.assertIn("(3 splits)", cells[1])
        self.assertEqual(cells[3], f"{statistics.median(sums):.3f} [{min(sums):.3f}-{max(sums):.3f}]")
        self.assertEqual(cells[4], f"{statistics.median(worst):.3f} [{min(worst):.3f}-{max(worst):.3f}]")
        self.assertGreater(min(worst), 1.0)  # halves of real runs never agree to the microsecond

    def test_steps_over_the_goal(self):
        """A step over 1.03x is (over) only where native's own halves lie closer at that step."""
        import glob
        import itertools
        import json
        import tempfile
        work = os.path.join(SRC, "results", "nvidia-h200", "cmb-e2e-noise", "call2", "e2e-transformer")
        load = lambda m: [json.load(open(f))["steps"] for f in sorted(glob.glob(os.path.join(work, f"transformer-{m}-*.json")))]  # noqa: E501,E731
        nat, cmb = load("native-expandable"), load("cmb")
        n = min(len(r) for r in nat + cmb)
        med = lambda g, i: statistics.median(r[i]["ms"] for r in g)  # noqa: E731
        want, over = {}, 0
        for i in range(1, n):
            spread = 0.0
            for a in itertools.combinations(range(len(nat)), len(nat) // 2):
                if 0 not in a:
                    continue
                x, y = med([nat[j] for j in a], i), med([nat[j] for j in range(len(nat)) if j not in a], i)
                spread = max(spread, x / y, y / x)
            q = med(cmb, i) / med(nat, i)
            want[i] = "" if q <= 1.03 else (" (over)" if q > spread else " (spread)")
            over += want[i] == " (over)"
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "e2e.md")
            subprocess.run([sys.executable, os.path.join(SRC, "scripts", "e2e-steady.py"), "table", "--work", work,
                            "--out", out], check=True, capture_output=True, timeout=120)
            text = open(out).read()
        for i, mark in want.items():
            row = next(ln for ln in text.splitlines() if ln.startswith(f"| {i} | "))
            cell = row.split("|")[4].split()
            self.assertEqual(" ".join(cell[1:]), mark.strip(), (i, cell))
        self.assertGreater(over, 0)  # the committed run has steps cmb is slower on beyond native's spread
        row = next(ln for ln in text.splitlines() if ln.startswith("| cmb | "))
        self.assertIn(f"| {over}, ", row)


if __name__ == "__main__":
    unittest.main(verbosity=2)
