#!/usr/bin/env python3
"""test_regress_injected.py - a deliberately injected regression is caught.

The sample plug-in (examples/plugin) is built twice: as shipped (256 B
rounding) and with its default changed to 4 KiB rounding
(build/tests/injected-round4k/, same file name, so its cases have the same
names). The sim suite runs under each; `make regress` and
cumembench-compare must fail the 4 KiB run and name the counters that
grew, and pass a rerun of the unchanged plug-in. The same holds when the
rounding is an option (round=256 against round=4096, paired with
--filter-baseline/--filter-current), and for the make baseline / make
regress round trip through ci/baseline.sh and ci/regress.sh."""
import json
import os
import shutil
import subprocess
import unittest

SRC = os.environ["CMB_SRC"]
BIN = os.environ["CMB_BIN"]
PLUGIN = os.environ["CMB_SAMPLE_PLUGIN"]
PLUGIN_4K = os.environ["CMB_SAMPLE_PLUGIN_ROUND4K"]
TMP = os.environ["CMB_TEST_TMP"]
TOOL = os.path.join(SRC, "tools", "cumembench-compare")
BUILD = os.path.dirname(BIN)

# Small and fast: the churn scenario's quick grid with 2000 allocations, 3
# repetitions. Memory decides here; host times of two runs differ by noise,
# so the runs that must pass compare them with --time warn (the fixture
# pairs of test_compare.py test the time verdicts).
SUITE = ["--mode", "sim", "--scenario", "churn", "--param", "n=2000", "--seed", "42", "--repetitions", "3",
         "--quiet"]
# The counters 4 KiB rounding must move: every live block grows.
MUST_REGRESS = {"peak_allocated_bytes"}


def run_suite(out, allocator):
    shutil.rmtree(out, ignore_errors=True)
    p = subprocess.run([BIN] + SUITE + ["--allocator", allocator, "--out", out], capture_output=True, text=True,
                       timeout=300)
    if p.returncode != 0:
        raise AssertionError("cumembench failed (%d): %s" % (p.returncode, p.stderr))
    return out


def make_regress(baseline, current, compare_args=""):
    summary = os.path.join(TMP, "make-regress.json")
    if os.path.exists(summary):
        os.remove(summary)
    p = subprocess.run(["make", "--no-print-directory", "-C", SRC, "regress", "BUILD=" + BUILD,
                        "BASELINE=" + baseline, "CURRENT=" + current, "SUMMARY=" + summary,
                        "COMPARE_ARGS=" + compare_args], capture_output=True, text=True, timeout=300)
    with open(summary) as f:
        return p, json.load(f)


def regressed_counters(summary):
    out = {}
    for case in summary["cases"]:
        if case["verdict"] == "regressed":
            out[case["name"]] = {m["metric"] for m in case["memory"] if m["verdict"] == "regressed"}
    return out


class InjectedRegression(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(TMP, exist_ok=True)
        cls.base = run_suite(os.path.join(TMP, "baseline"), "external:" + PLUGIN)
        cls.rerun = run_suite(os.path.join(TMP, "rerun"), "external:" + PLUGIN)
        cls.round4k = run_suite(os.path.join(TMP, "round4k"), "external:" + PLUGIN_4K)

    def test_make_regress_catches_4k_rounding(self):
        p, summary = make_regress(self.base, self.round4k)
        self.assertNotEqual(p.returncode, 0, p.stdout)  # make's own status is 2 on any failure
        self.assertEqual(summary["exit_status"], 1)
        self.assertIn("REGRESSION (exit 1)", p.stdout)
        regressed = regressed_counters(summary)
        self.assertEqual(len(regressed), summary["summary"]["cases"], p.stdout)  # every case
        for name, counters in regressed.items():
            self.assertIn("external:libcmb_sample_plugin.so/", name)
            self.assertTrue(MUST_REGRESS <= counters, (name, counters))
        # the table names the counters
        self.assertIn("peak_allocated_bytes", p.stdout)
        self.assertIn("REGRESSED", p.stdout)

    def test_tool_exit_status_is_1(self):
        p = subprocess.run([TOOL, self.base, self.round4k], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        p = subprocess.run([os.path.join(SRC, "ci", "regress.sh"), "--only-changes"], capture_output=True,
                           text=True, env=dict(os.environ, BASELINE=self.base, CURRENT=self.round4k))
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)

    def test_identical_run_passes(self):
        p, summary = make_regress(self.base, self.rerun, "--time warn")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(summary["exit_status"], 0)
        self.assertEqual(summary["summary"]["regressed"], 0)
        self.assertEqual(summary["summary"]["unchanged"], summary["summary"]["cases"])
        self.assertEqual(summary["mode"], "sim")

    def test_rounding_as_an_option(self):
        base = run_suite(os.path.join(TMP, "opt-256"), "external:%s:round=256" % PLUGIN)
        cur = run_suite(os.path.join(TMP, "opt-4096"), "external:%s:round=4096" % PLUGIN)
        # different case names: without pairing not one case is in both runs,
        # which is unusable input, not "no regression"
        p = subprocess.run([TOOL, base, cur, "--json", "-"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("the runs share no case", p.stderr)
        # paired as compare.py's benchmarksfiltered pairs them
        p, summary = make_regress(base, cur, "--filter-baseline round=256 --filter-current round=4096")
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual(summary["exit_status"], 1)
        regressed = regressed_counters(summary)
        self.assertEqual(len(regressed), summary["summary"]["cases"])
        for name, counters in regressed.items():
            self.assertIn("[round=256 vs. round=4096]", name)
            self.assertTrue(MUST_REGRESS <= counters, (name, counters))

    def test_baseline_round_trip(self):
        """make baseline, then make regress without CURRENT (it reruns the suite
        with the baseline's arguments), through the scripts behind them."""
        results = os.path.join(TMP, "results")
        shutil.rmtree(results, ignore_errors=True)
        # a development tree may hold uncommitted sources: the refusal is tested below
        env = dict(os.environ, BIN=BIN, MODE="sim", RESULTS=results, CMB_BASELINE_DIRTY_OK="1",
                   BASELINE_ARGS=" ".join(SUITE[:-1] + ["--allocator", "external:" + PLUGIN]))
        p = subprocess.run([os.path.join(SRC, "ci", "baseline.sh")], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        baseline = os.path.join(results, "sim", "baseline")
        self.assertEqual(sorted(os.listdir(baseline)), ["args", "results.json"])
        env.pop("BASELINE_ARGS")
        p = subprocess.run([os.path.join(SRC, "ci", "regress.sh"), "--time", "warn"], capture_output=True, text=True,
                           env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        runs = os.listdir(os.path.join(results, "runs"))
        self.assertEqual(len(runs), 1)
        self.assertTrue(os.path.exists(os.path.join(results, "runs", runs[0], "regress.json")))
        # the policy changes; the baseline does not: caught
        p = subprocess.run([os.path.join(SRC, "ci", "regress.sh")], capture_output=True, text=True,
                           env=dict(env, CURRENT=self.round4k))
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)


    def test_baseline_refuses_uncommitted_sources(self):
        """ci/baseline.sh in a repository whose sources changed stops before running anything; a
        change under results/ alone does not count, and CMB_BASELINE_DIRTY_OK=1 lets it through."""
        repo = os.path.join(TMP, "dirty-repo")
        shutil.rmtree(repo, ignore_errors=True)
        os.makedirs(os.path.join(repo, "ci"))
        os.makedirs(os.path.join(repo, "results"))
        shutil.copy(os.path.join(SRC, "ci", "baseline.sh"), os.path.join(repo, "ci", "baseline.sh"))
        for f, text in (("policy.c", "int x;\n"), ("results/old.txt", "a\n")):
            with open(os.path.join(repo, f), "w") as fh:
                fh.write(text)
        git = ["git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"]
        for cmd in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
            subprocess.run(git + cmd, check=True, capture_output=True)
        env = dict(os.environ, BIN=os.path.join(repo, "no-binary"), MODE="sim", RESULTS=os.path.join(TMP, "r"))
        env.pop("CMB_BASELINE_DIRTY_OK", None)
        script = os.path.join(repo, "ci", "baseline.sh")
        with open(os.path.join(repo, "results", "old.txt"), "w") as fh:
            fh.write("b\n")
        p = subprocess.run([script], capture_output=True, text=True, env=env)
        self.assertNotIn("sources differ", p.stderr)   # results/ is not a source (it stops later: no binary)
        with open(os.path.join(repo, "policy.c"), "w") as fh:
            fh.write("int y;\n")
        p = subprocess.run([script], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("the sources differ from the commit", p.stderr)
        self.assertIn("policy.c", p.stderr)
        p = subprocess.run([script], capture_output=True, text=True, env=dict(env, CMB_BASELINE_DIRTY_OK="1"))
        self.assertNotIn("sources differ", p.stderr)
        self.assertIn("is not built", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
