#!/usr/bin/env python3
"""test_report_model.py - how the report reads results (plots/cmb_report):
status oom (did not fit) shown as such and left out of rankings; sim
rankings on memory only; on a GPU only real allocators ranked on time, the
emulations' times labelled; old results.csv files (no options or impl
column) and new ones alike; every counter the scenarios and the harness
emit has its own definition."""
import csv
import glob
import os
import re
import sys
import tempfile
import unittest

SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "plots"))

from cmb_report import analysis as A  # noqa: E402
from cmb_report import impl as I  # noqa: E402
from cmb_report import metrics as M  # noqa: E402
from cmb_report.results import load_run  # noqa: E402

OLD = ["run_id", "gpu", "mode", "case", "scenario", "allocator", "upstream", "params", "repetition", "status",
       "metric", "value", "error"]
NEW = OLD + ["options", "impl"]


def write_run(tmp, name, header, rows):
    """rows: dicts of the columns (missing ones empty); returns the directory."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    with open(os.path.join(d, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow([r.get(h, "") for h in header])
    return d


def case_rows(mode, scenario, alloc, params, metrics, reps=3, status="ok", error="", impl=None, options=None):
    """The rows of a case whose every repetition reports `metrics`."""
    out = []
    for rep in range(reps):
        for m, v in metrics.items():
            row = dict(run_id="t", gpu="g", mode=mode, case=f"{scenario}/{alloc}/{params}", scenario=scenario,
                       allocator=alloc, upstream="sim", params=params, repetition=str(rep), status=status,
                       metric=m, value=repr(float(v)), error=error)
            if impl is not None:
                row["impl"] = impl
            if options is not None:
                row["options"] = options
            out.append(row)
    return out


class DidNotFit(unittest.TestCase):
    """The issue's 1 GiB replay: bfc and torch-caching did not fit; bfc
    served less and held less. Neither may rank first on memory."""

    def run_with(self, header, oom_with_values):
        rows = case_rows("sim", "replay", "rmm-pool", "trace=t", {"peak_reserved_bytes": 1000, "frag_ratio": 0.1,
                                                                  "peak_requested_bytes": 900, "replay_ooms": 0,
                                                                  "time_s": 5})
        rows += case_rows("sim", "replay", "cupy", "trace=t", {"peak_reserved_bytes": 1100, "frag_ratio": 0.2,
                                                               "peak_requested_bytes": 900, "replay_ooms": 0,
                                                               "time_s": 1})
        for alloc, n in (("bfc", 27), ("torch-caching", 21)):
            msg = f"did not fit: {n} allocations failed"
            if oom_with_values:
                rows += case_rows("sim", "replay", alloc, "trace=t", {"peak_reserved_bytes": 600, "frag_ratio": 0.0,
                                                                      "peak_requested_bytes": 600, "replay_ooms": n},
                                  status="oom", error=msg)
            else:  # numbers ok, then one case-level oom row
                rows += case_rows("sim", "replay", alloc, "trace=t", {"peak_reserved_bytes": 600, "replay_ooms": n})
                rows.append(dict(run_id="t", gpu="g", mode="sim", case=f"replay/{alloc}/trace=t", scenario="replay",
                                 allocator=alloc, upstream="sim", params="trace=t", repetition="", status="oom",
                                 error=msg))
        with tempfile.TemporaryDirectory() as tmp:
            return load_run(write_run(tmp, "r", header, rows))

    def check(self, run):
        cases = {c.allocator: c for c in run.cases.values()}
        self.assertEqual(cases["bfc"].status, "oom")
        self.assertEqual(cases["bfc"].reason, "did not fit: 27 allocations failed")
        self.assertEqual(cases["rmm-pool"].status, "ok")
        self.assertEqual(run.counts()["oom"], 2)
        rows = {r.allocator: r for r in A.ranking(run, "replay")}
        self.assertIsNone(rows["bfc"].rank)
        self.assertIsNone(rows["torch-caching"].rank)
        self.assertEqual(rows["rmm-pool"].rank, 1)
        self.assertEqual(rows["bfc"].oom, 1)
        self.assertEqual(A.cell(cases["bfc"], "peak_reserved_bytes").text, "did not fit")
        ans = A.answer(run, "replay")
        self.assertTrue(ans.memory.startswith("rmm-pool"), ans.memory)
        self.assertIn("bfc (27 allocations failed)", ans.not_fit)
        self.assertIn("torch-caching (21 allocations failed)", ans.not_fit)

    def test_old_csv_oom_rows_with_values(self):
        self.check(self.run_with(OLD, True))

    def test_new_csv_case_level_oom_row(self):
        self.check(self.run_with(NEW, False))


class ServedLess(unittest.TestCase):
    def test_an_allocator_that_served_less_is_not_best_on_memory(self):
        rows = case_rows("sim", "s", "a", "n=1", {"peak_reserved_bytes": 100, "peak_requested_bytes": 90})
        rows += case_rows("sim", "s", "b", "n=1", {"peak_reserved_bytes": 50, "peak_requested_bytes": 40})
        with tempfile.TemporaryDirectory() as tmp:
            run = load_run(write_run(tmp, "r", OLD, rows))
        self.assertTrue(A.answer(run, "s").memory.startswith("a "))
        rows = {r.allocator: r for r in A.ranking(run, "s")}
        self.assertEqual(rows["a"].scores["peak_reserved_bytes"][1], 1)
        self.assertIsNone(rows["b"].scores["peak_reserved_bytes"])
        self.assertEqual(rows["b"].served_less, 1)


class ScenarioCounters(unittest.TestCase):
    def test_churn_ranked_on_its_own_phase_not_the_checkerboard(self):
        # b holds less over the whole repetition (the checkerboard) but more in the churn itself
        rows = case_rows("sim", "churn", "a", "n=1", {"peak_reserved_bytes": 900, "peak_requested_bytes": 800,
                                                      "churn_peak_reserved_bytes": 100,
                                                      "churn_peak_requested_bytes": 90, "churn_frag_ratio": 0.1})
        rows += case_rows("sim", "churn", "b", "n=1", {"peak_reserved_bytes": 850, "peak_requested_bytes": 800,
                                                       "churn_peak_reserved_bytes": 300,
                                                       "churn_peak_requested_bytes": 90, "churn_frag_ratio": 0.7})
        with tempfile.TemporaryDirectory() as tmp:
            run = load_run(write_run(tmp, "r", OLD, rows))
        self.assertEqual([r.allocator for r in A.ranking(run, "churn")], ["a", "b"])
        self.assertEqual(A.answer(run, "churn").memory, "a (smallest churn peak reserved; next b 3.00x)")

    def test_batch_sweep_best_is_the_largest_batch(self):
        rows = case_rows("sim", "batch-sweep", "a", "n=1", {"max_batch": 64, "peak_reserved_bytes": 10})
        rows += case_rows("sim", "batch-sweep", "b", "n=1", {"max_batch": 128, "peak_reserved_bytes": 90})
        with tempfile.TemporaryDirectory() as tmp:
            run = load_run(write_run(tmp, "r", OLD, rows))
        self.assertEqual(A.answer(run, "batch-sweep").memory, "b (highest max_batch; next a 0.50x)")


class ModeRanks(unittest.TestCase):
    def test_sim_ranks_memory_only_without_time_tie_break(self):
        # the fast allocator holds more: in sim its time must not lift it
        rows = case_rows("sim", "replay", "cuda", "p=1", {"time_s": 0.001, "peak_reserved_bytes": 168,
                                                          "frag_ratio": 0.4, "peak_requested_bytes": 100})
        rows += case_rows("sim", "replay", "torch-expandable", "p=1", {"time_s": 0.5, "peak_reserved_bytes": 103,
                                                                       "frag_ratio": 0.03,
                                                                       "peak_requested_bytes": 100})
        with tempfile.TemporaryDirectory() as tmp:
            run = load_run(write_run(tmp, "r", OLD, rows))
        self.assertNotIn("time_s", A.ranked_metrics("sim"))
        ranked = A.ranking(run, "replay")
        self.assertEqual([r.allocator for r in ranked], ["torch-expandable", "cuda"])
        self.assertTrue(all("time_s" not in r.scores for r in ranked))
        self.assertIn("not ranked", A.answer(run, "replay").time)

    def test_sim_ties_broken_by_memory_then_name(self):
        rows = case_rows("sim", "s", "zz", "p=1", {"time_s": 9, "peak_reserved_bytes": 100, "frag_ratio": 0.1,
                                                   "peak_requested_bytes": 90})
        rows += case_rows("sim", "s", "aa", "p=1", {"time_s": 1, "peak_reserved_bytes": 100, "frag_ratio": 0.1,
                                                    "peak_requested_bytes": 90})
        with tempfile.TemporaryDirectory() as tmp:
            run = load_run(write_run(tmp, "r", OLD, rows))
        self.assertEqual([r.allocator for r in A.ranking(run, "s")], ["aa", "zz"])

    def test_gpu_ranks_time_of_real_allocators_only(self):
        rows = case_rows("gpu", "fastpath", "bfc", "size=1", {"time_s": 30e-9, "peak_reserved_bytes": 10})
        rows += case_rows("gpu", "fastpath", "cub", "size=1", {"time_s": 500e-9, "peak_reserved_bytes": 10})
        rows += case_rows("gpu", "fastpath", "real:torch-caching", "size=1", {"time_s": 400e-9,
                                                                              "peak_reserved_bytes": 10})
        with tempfile.TemporaryDirectory() as tmp:
            run = load_run(write_run(tmp, "r", OLD, rows))
        rows = {r.allocator: r for r in A.ranking(run, "fastpath")}
        self.assertEqual(rows["bfc"].impl, "emulation")
        self.assertIsNone(rows["bfc"].scores["time_s"][1])          # shown, not ranked
        self.assertEqual(rows["real:torch-caching"].scores["time_s"][1], 1)
        self.assertEqual(rows["cub"].scores["time_s"][1], 2)
        ans = A.answer(run, "fastpath")
        self.assertTrue(ans.time.startswith("real:torch-caching"), ans.time)
        self.assertIn(I.TIME_LABEL, ans.time)

    def test_impl_column_wins_over_the_registry(self):
        rows = case_rows("gpu", "fastpath", "bfc", "size=1", {"time_s": 30e-9}, impl="real", options="")
        with tempfile.TemporaryDirectory() as tmp:
            run = load_run(write_run(tmp, "r", NEW, rows))
        self.assertEqual(next(iter(run.cases.values())).impl, "real")

    def test_options_column_makes_the_label(self):
        rows = case_rows("sim", "churn", "torch-caching", "n=1", {"time_s": 1}, impl="emulation",
                         options="max_split_size=64MiB")
        with tempfile.TemporaryDirectory() as tmp:
            run = load_run(write_run(tmp, "r", NEW, rows))
        c = next(iter(run.cases.values()))
        self.assertTrue(c.allocator.startswith("torch-caching:max_split_size=64MiB"), c.allocator)
        self.assertEqual(c.options, "max_split_size=64MiB")


class Impl(unittest.TestCase):
    def test_registry_says_which_entries_emulate(self):
        reg = I.registry()
        self.assertGreater(len(reg), 10)
        self.assertEqual(I.impl_of("torch-caching"), "emulation")
        self.assertEqual(I.impl_of("torch-caching:max_split_size=64MiB@vmm"), "emulation")
        self.assertEqual(I.impl_of("cub-1g"), "real")
        self.assertEqual(I.impl_of("cuda-async-retain"), "real")
        self.assertEqual(I.impl_of("real:torch-caching"), "real")
        self.assertEqual(I.impl_of("buddy"), "suite")
        for name, emulates in reg.items():
            self.assertEqual(I.impl_of(name) == "emulation", bool(emulates), name)


# --- every counter has a definition ----------------------------------------------------

LITERAL = re.compile(r'(?:cmb_case_counter|put_counter|add_counter)\s*\(\s*\w+\s*,\s*"([a-z0-9_]+)"')
FORMATTED = re.compile(r'snprintf\s*\(\s*name\s*,\s*sizeof name\s*,\s*"([a-z0-9_%]+)"')


def emitted_counters():
    """Counter names in the sources: literal ones, and formatted ones with a
    sample value in place of each conversion."""
    names = set()
    for path in glob.glob(os.path.join(SRC, "scenarios", "*.c")) + glob.glob(os.path.join(SRC, "harness", "*.c")):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        names |= {(n, path) for n in LITERAL.findall(text)}
        # a formatted name: %d a number; %s each word of the file's string tables (one must give a
        # defined counter: the pattern exists)
        words = re.findall(r'"([a-z][a-z0-9_]*)"', " ".join(re.findall(r"static const char \*const \w+\[[^]]*\] = "
                                                                       r"\{[^}]*\}", text)))
        for fmt in FORMATTED.findall(text):
            cands = [re.sub(r"%s", w, fmt.replace("%d", "1")) for w in words or ["same"]] if "%s" in fmt else \
                [fmt.replace("%d", "1")]
            names.add((next((n for n in cands if M.defined(n)), cands[0]), path))
    return names


class Definitions(unittest.TestCase):
    def test_every_emitted_counter_has_its_own_definition(self):
        names = emitted_counters()
        self.assertGreater(len(names), 60)
        missing = sorted(f"{n} ({os.path.relpath(p, SRC)})" for n, p in names if not M.defined(n))
        self.assertEqual(missing, [], "counters without a definition in plots/cmb_report/metrics.py")

    def test_definitions_are_distinct(self):
        defs = {}
        for m in M.KNOWN:
            defs.setdefault(m.definition, []).append(m.name)
        shared = {d: n for d, n in defs.items() if len(n) > 1}
        self.assertEqual(shared, {}, "counters sharing one definition")

    def test_an_unknown_counter_is_flagged(self):
        self.assertFalse(M.defined("no_such_counter_bytes"))


if __name__ == "__main__":
    unittest.main()
