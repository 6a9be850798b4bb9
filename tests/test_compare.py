#!/usr/bin/env python3
"""test_compare.py - cumembench-compare on the fixture pairs of
tests/fixtures/regress (make-fixtures.py there says how each was made):
identical, slower by 1.5x, a larger peak, a missing case, a different GPU,
corrupted JSON; plus the filters, the slug and the exit statuses."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(SRC, "tools", "cumembench-compare")
FIX = os.path.join(SRC, "tests", "fixtures", "regress")


def compare(baseline, current, *args):
    """Runs the tool; returns (exit status, stdout, stderr, JSON summary or None)."""
    with tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "summary.json")
        p = subprocess.run([TOOL, os.path.join(FIX, baseline), os.path.join(FIX, current), "--json", summary]
                           + list(args), capture_output=True, text=True, timeout=120)
        data = None
        if os.path.exists(summary):
            with open(summary) as f:
                data = json.load(f)
        return p.returncode, p.stdout, p.stderr, data


def case(data, dist):
    return next(c for c in data["cases"] if "dist:%s/" % dist in c["name"])


def metric(entry, name, part="memory"):
    return next(m for m in entry[part] if m["metric"] == name)


class Output(unittest.TestCase):
    """The summary and the verdict first; only the cases that changed unless --all."""

    def test_summary_first_and_changes_only(self):
        rc, out, err, data = compare("base", "identical")
        lines = out.splitlines()
        self.assertEqual(lines[0], "cumembench-compare")
        self.assertTrue(lines[1].startswith("summary: 2 cases: 0 regressed"), lines[1])
        self.assertEqual(lines[2], "result: ok (exit 0)")
        self.assertNotIn("UNCHANGED", out)
        self.assertIn("(2 unchanged cases not listed: --all lists every case)", out)
        rc, out, err, data = compare("base", "identical", "--all")
        self.assertEqual(sum(1 for l in out.splitlines() if l.startswith("UNCHANGED ")), 2)
        self.assertNotIn("not listed", out)

    def test_a_regression_is_listed_under_the_summary(self):
        rc, out, err, data = compare("base", "slower")
        lines = out.splitlines()
        self.assertTrue(lines[1].startswith("summary: 2 cases: 2 regressed"), lines[1])
        self.assertEqual(lines[2], "result: REGRESSION (exit 1)")
        self.assertEqual(sum(1 for l in lines if l.startswith("REGRESSED ")), 2)

    def test_new_and_missing_cases_grouped_by_scenario(self):
        rc, out, err, data = compare("base", "missing")
        missing = [l for l in out.splitlines() if l.startswith("MISSING ")]
        self.assertTrue(missing and all(re.match(r"MISSING\s+\S+: \d+ cases? \(", l) for l in missing), out)
        rc, out, err, data = compare("base", "missing", "--all")
        self.assertTrue(any(re.match(r"MISSING\s+\S+/", l) for l in out.splitlines()), out)


class FixturePairs(unittest.TestCase):
    def test_identical(self):
        rc, out, err, data = compare("base", "identical")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(data["summary"]["unchanged"], 2)
        self.assertEqual(data["summary"]["regressed"], 0)
        self.assertEqual(data["exit_status"], 0)
        self.assertEqual(data["mode"], "sim")
        self.assertTrue(data["environment"]["same"])
        self.assertTrue(data["settings"]["host_time"])
        # sim: exact
        self.assertEqual(data["settings"]["tolerance"], 0)
        self.assertEqual(metric(case(data, "uniform"), "peak_reserved_bytes")["tolerance"], 0)
        t = metric(case(data, "uniform"), "real_time", "time")
        self.assertEqual(t["verdict"], "unchanged")
        self.assertEqual(t["repetitions"], [9, 9])
        self.assertIn("host-side bookkeeping", out)
        self.assertIn("result: ok (exit 0)", out)

    def test_slower_by_known_factor(self):
        rc, out, err, data = compare("base", "slower")
        self.assertEqual(rc, 1, out + err)
        self.assertEqual(data["summary"]["regressed"], 2)
        for dist in ("uniform", "bimodal"):
            c = case(data, dist)
            self.assertEqual(c["verdict"], "regressed")
            t = metric(c, "real_time", "time")
            self.assertEqual(t["verdict"], "regressed")
            self.assertAlmostEqual(t["relative_change"], 0.5, places=9)
            self.assertLess(t["p_value"], 0.001)   # 9 vs 9, no overlap
            # Holm over the 10 time tests (2 cases x 5 metrics)
            self.assertAlmostEqual(t["p_adjusted"], 10 * t["p_value"], places=12)
            self.assertTrue(t["optimal_repetitions"])
            self.assertTrue(all(m["verdict"] == "unchanged" for m in c["memory"]))
        self.assertIn("real_time (host)", out)
        self.assertIn("+50.00%", out)

    def test_slower_only_warns_with_time_warn(self):
        rc, out, err, data = compare("base", "slower", "--time", "warn")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(data["summary"]["time_warnings"], 2)
        self.assertIn("warning: time: real_time regressed", out)

    def test_slower_not_compared_with_time_off(self):
        rc, out, err, data = compare("base", "slower", "--time", "off")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(case(data, "uniform")["time"], [])

    def test_slower_without_correction(self):
        rc, out, err, data = compare("base", "slower", "--correction", "none")
        self.assertEqual(rc, 1, out + err)
        t = metric(case(data, "uniform"), "real_time", "time")
        self.assertEqual(t["p_adjusted"], t["p_value"])

    def test_slower_below_threshold(self):
        # +50% is significant, but not when only +60% counts
        rc, out, err, data = compare("base", "slower", "--time-threshold", "0.6")
        self.assertEqual(rc, 0, out + err)

    def test_larger_peak(self):
        rc, out, err, data = compare("base", "larger_peak")
        self.assertEqual(rc, 1, out + err)
        c = case(data, "uniform")
        self.assertEqual(c["verdict"], "regressed")
        regressed = {m["metric"] for m in c["memory"] if m["verdict"] == "regressed"}
        self.assertEqual(regressed, {"peak_reserved_bytes", "frag_ratio"})
        m = metric(c, "peak_reserved_bytes")
        self.assertEqual(m["change"], 64 << 20)
        self.assertEqual(case(data, "bimodal")["verdict"], "unchanged")
        self.assertEqual(data["regressed"], [c["name"]])
        self.assertIn("peak_reserved_bytes", out)
        self.assertIn("+64.00 MiB", out)

    def test_larger_peak_within_a_stated_tolerance(self):
        # 64 MiB on ~60 GiB is 0.1%: inside a 1% tolerance, and frag_ratio moves 0.001
        rc, out, err, data = compare("base", "larger_peak", "--tolerance", "0.01", "--ratio-tolerance", "0.01")
        self.assertEqual(rc, 0, out + err)

    def test_missing_case(self):
        rc, out, err, data = compare("base", "missing")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(data["summary"]["missing"], 1)
        self.assertEqual(case(data, "bimodal")["verdict"], "missing")
        self.assertIn("MISSING", out)
        rc, out, err, data = compare("base", "missing", "--fail-on-missing")
        self.assertEqual(rc, 1, out + err)

    def test_new_case(self):
        rc, out, err, data = compare("missing", "base")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(data["summary"]["new"], 1)
        self.assertEqual(case(data, "bimodal")["verdict"], "new")

    def test_different_gpu_is_flagged(self):
        rc, out, err, data = compare("different_gpu/base", "different_gpu/current")
        self.assertEqual(rc, 0, out + err)
        env = data["environment"]
        self.assertFalse(env["same"])
        self.assertTrue(env["cross_gpu"])
        self.assertTrue(env["cross_driver"])
        self.assertTrue(env["cross_cuda"])
        keys = {d["key"] for d in env["differences"]}
        self.assertTrue({"gpu_name", "driver_version", "cuda_runtime"} <= keys)
        self.assertIn("CROSS-ENVIRONMENT COMPARISON", out)
        self.assertEqual(data["mode"], "gpu")
        self.assertEqual(data["baseline"]["slug"], "nvidia-h100-80gb-hbm3")
        self.assertEqual(data["current"]["slug"], "nvidia-h200")
        # +1 MiB of peak is inside the GPU tolerance (2% and at least 2 MiB)
        m = metric(case(data, "uniform"), "peak_reserved_bytes")
        self.assertEqual(m["change"], 1 << 20)
        self.assertEqual(m["verdict"], "unchanged")
        self.assertEqual(m["tolerance"], max(0.02 * m["baseline"], 2 << 20))

    def test_different_gpu_refused_when_required_same(self):
        rc, out, err, data = compare("different_gpu/base", "different_gpu/current", "--require-same-env")
        self.assertEqual(rc, 2)
        self.assertIn("GPU differs", err)

    def test_gpu_tolerance_can_be_tightened(self):
        rc, out, err, data = compare("different_gpu/base", "different_gpu/current", "--tolerance", "0",
                                     "--bytes-slack", "0")
        self.assertEqual(rc, 1, out + err)
        m = metric(case(data, "uniform"), "peak_reserved_bytes")
        self.assertEqual(m["verdict"], "regressed")

    def test_corrupted_json(self):
        rc, out, err, data = compare("base", "corrupted")
        self.assertEqual(rc, 2)
        self.assertIsNone(data)
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertIn("corrupted/results.json: corrupted JSON", lines[0])
        self.assertIn("truncated", lines[0])


class FailedCases(unittest.TestCase):
    """A case recorded as failed (error_occurred, as the library records it)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        with open(os.path.join(FIX, "base", "results.json")) as f:
            data = json.load(f)
        ok = [b for b in data["benchmarks"] if "dist:uniform/" not in b["name"]]
        name = next(b["name"] for b in data["benchmarks"] if "dist:uniform/" in b["name"])
        data["benchmarks"] = ok + [{"name": name, "run_name": name, "run_type": "iteration", "error_occurred": True,
                                    "error_message": "case crashed (signal 11)", "iterations": 0}]
        self.failed = os.path.join(self.tmp.name, "failed")
        os.makedirs(self.failed)
        with open(os.path.join(self.failed, "results.json"), "w") as f:
            json.dump(data, f)

    def tearDown(self):
        self.tmp.cleanup()

    def test_case_that_now_fails_regresses(self):
        rc, out, err, data = compare("base", self.failed)
        self.assertEqual(rc, 1, out + err)
        c = case(data, "uniform")
        self.assertEqual(c["verdict"], "regressed")
        self.assertEqual(c["status"], {"baseline": "ok", "current": "failed"})
        self.assertEqual(data["summary"]["failed_current"], 1)
        self.assertIn("case crashed (signal 11)", out)

    def test_case_that_now_succeeds_improves(self):
        rc, out, err, data = compare(self.failed, "base")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(case(data, "uniform")["verdict"], "improved")


class UnusableInput(unittest.TestCase):
    def test_missing_directory(self):
        rc, out, err, _ = compare("base", "no-such-run")
        self.assertEqual(rc, 2)
        self.assertIn("no such file", err)

    def test_sim_against_gpu(self):
        rc, out, err, _ = compare("base", "different_gpu/current")
        self.assertEqual(rc, 2)
        self.assertIn("cannot compare a sim run", err)

    def test_not_benchmark_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name, text in (("empty.json", ""), ("object.json", "{}"), ("list.json", "[1, 2]"),
                               ("none.json", '{"benchmarks": []}')):
                path = os.path.join(tmp, name)
                with open(path, "w") as f:
                    f.write(text)
                p = subprocess.run([TOOL, os.path.join(FIX, "base"), path], capture_output=True, text=True)
                self.assertEqual(p.returncode, 2, name)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_no_case_in_common(self):
        # a run of other scenarios than the baseline's: nothing to compare, said so
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(FIX, "base", "results.json")) as f:
                data = json.load(f)
            for b in data["benchmarks"]:
                for key in ("name", "run_name"):
                    if key in b:
                        b[key] = "other-" + b[key]
            os.makedirs(os.path.join(tmp, "other"))
            with open(os.path.join(tmp, "other", "results.json"), "w") as f:
                json.dump(data, f)
            p = subprocess.run([TOOL, os.path.join(FIX, "base"), os.path.join(tmp, "other")],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertIn("the runs share no case", p.stderr)
            self.assertEqual(p.stdout, "")

    def test_bad_usage(self):
        p = subprocess.run([TOOL, os.path.join(FIX, "base")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr.splitlines(), ["cumembench-compare: error: BASELINE and CURRENT are required "
                                                 "(see cumembench-compare --help)"])


def run_tool(*args):
    return subprocess.run([TOOL] + list(args), capture_output=True, text=True, timeout=120)


class Usage(unittest.TestCase):
    """Usage errors: one line on stderr, exit 2, nothing compared (argparse's
    own error() prints the usage block above the message)."""

    def refused(self, args, expected=None, contains=None):
        p = run_tool(*args)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertEqual(p.stdout, "")
        self.assertTrue(lines[0].startswith("cumembench-compare: error: "), lines[0])
        self.assertTrue(lines[0].endswith(" (see cumembench-compare --help)"), lines[0])
        if expected is not None:
            self.assertEqual(lines[0], expected)
        if contains is not None:
            self.assertIn(contains, lines[0])
        return lines[0]

    def test_no_arguments(self):
        self.refused([], "cumembench-compare: error: BASELINE and CURRENT are required "
                         "(see cumembench-compare --help)")

    def test_one_run(self):
        self.refused([os.path.join(FIX, "base")], contains="BASELINE and CURRENT are required")

    def test_unknown_option(self):
        self.refused([os.path.join(FIX, "base"), os.path.join(FIX, "identical"), "--nosuch"],
                     "cumembench-compare: error: unrecognized arguments: --nosuch (see cumembench-compare --help)")

    def test_alpha_not_a_number(self):
        self.refused([os.path.join(FIX, "base"), os.path.join(FIX, "identical"), "--alpha", "abc"],
                     "cumembench-compare: error: argument --alpha: invalid float value: 'abc' "
                     "(see cumembench-compare --help)")

    def test_alpha_out_of_range(self):
        for value in ("-1", "0", "1", "1.5"):
            self.refused([os.path.join(FIX, "base"), os.path.join(FIX, "identical"), "--alpha", value],
                         "cumembench-compare: error: argument --alpha: must lie strictly between 0 and 1, "
                         "not %r (see cumembench-compare --help)" % value)
        for value in ("nan", "inf"):
            self.refused([os.path.join(FIX, "base"), os.path.join(FIX, "identical"), "--alpha", value],
                         contains="argument --alpha: expected a finite number, not %r" % value)

    def test_alpha_in_range_is_taken(self):
        rc, out, err, data = compare("base", "identical", "--alpha", "0.01")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(data["settings"]["alpha"], 0.01)

    def test_bad_tolerances(self):
        base, cur = os.path.join(FIX, "base"), os.path.join(FIX, "identical")
        for option, value, text in (("--time-threshold", "x", "invalid float value: 'x'"),
                                    ("--time-threshold", "-0.05", "must not be negative, not '-0.05'"),
                                    ("--tolerance", "-0.1", "must not be negative, not '-0.1'"),
                                    ("--ratio-tolerance", "inf", "expected a finite number, not 'inf'"),
                                    ("--bytes-slack", "2XB", "expected bytes such as")):
            self.refused([base, cur, option, value], contains="argument %s: %s" % (option, text))

    def test_other_usage_errors(self):
        base, cur = os.path.join(FIX, "base"), os.path.join(FIX, "identical")
        self.refused([base, cur, "--time", "bogus"], contains="argument --time: invalid choice: 'bogus'")
        self.refused([base, cur, "--filter-baseline", "x"],
                     contains="--filter-baseline and --filter-current go together")
        self.refused([base, cur, "--alpha"], contains="argument --alpha: expected one argument")

    def test_help_is_the_full_help(self):
        p = run_tool("--help")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        self.assertTrue(p.stdout.startswith("usage: cumembench-compare"), p.stdout)
        self.assertIn("--alpha ALPHA", p.stdout)
        self.assertIn("--ratio-tolerance ABS", p.stdout)
        self.assertGreater(len(p.stdout.splitlines()), 20)


class JsonOutput(unittest.TestCase):
    """--json FILE is checked before anything is compared; a write that still
    fails is one line, and FILE keeps what it held."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.base, self.cur = os.path.join(FIX, "base"), os.path.join(FIX, "identical")

    def tearDown(self):
        self.tmp.cleanup()

    def refused(self, path, expected=None, contains=None):
        p = run_tool(self.base, self.cur, "--json", path)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertEqual(p.stdout, "")  # refused before the comparison ran
        if expected is not None:
            self.assertEqual(lines[0], expected)
        if contains is not None:
            self.assertIn(contains, lines[0])

    def test_directory_does_not_exist(self):
        self.refused("/proc/nosuch/x.json",
                     "cumembench-compare: error: --json /proc/nosuch/x.json: directory /proc/nosuch does not exist")
        path = os.path.join(self.tmp.name, "nosuch", "summary.json")
        self.refused(path, "cumembench-compare: error: --json %s: directory %s does not exist"
                           % (path, os.path.dirname(path)))
        self.assertEqual(os.listdir(self.tmp.name), [])

    def test_path_is_a_directory(self):
        self.refused(self.tmp.name, "cumembench-compare: error: --json %s: names a directory, not a file"
                                    % self.tmp.name)
        self.refused(os.path.join(self.tmp.name, "new") + os.sep, contains="names a directory, not a file")
        self.assertEqual(os.listdir(self.tmp.name), [])

    def test_empty_path(self):
        self.refused("", "cumembench-compare: error: --json: empty file name (use '-' for stdout)")

    @unittest.skipIf(os.geteuid() == 0, "root writes anywhere")
    def test_directory_not_writable(self):
        folder = os.path.join(self.tmp.name, "ro")
        os.makedirs(folder)
        os.chmod(folder, 0o555)
        try:
            path = os.path.join(folder, "summary.json")
            self.refused(path, "cumembench-compare: error: --json %s: directory %s is not writable" % (path, folder))
        finally:
            os.chmod(folder, 0o755)

    def test_would_overwrite_an_input(self):
        run = os.path.join(self.tmp.name, "run")
        os.makedirs(run)
        with open(os.path.join(self.base, "results.json")) as f:
            text = f.read()
        with open(os.path.join(run, "results.json"), "w") as f:
            f.write(text)
        p = run_tool(self.base, run, "--json", os.path.join(run, "results.json"))
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertIn("would overwrite the run being compared", p.stderr)
        self.assertEqual(p.stdout, "")
        with open(os.path.join(run, "results.json")) as f:
            self.assertEqual(f.read(), text)

    def test_write_failure_is_one_line_and_keeps_the_old_summary(self):
        path = os.path.join(self.tmp.name, "summary.json")
        with open(path, "w") as f:
            f.write("previous summary\n")
        os.makedirs(path + ".tmp")  # the temporary file cannot be created
        p = run_tool(self.base, self.cur, "--json", path)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertTrue(lines[0].startswith("cumembench-compare: error: --json %s: cannot write the summary: "
                                            % path), lines[0])
        self.assertNotIn("Traceback", p.stderr)
        self.assertIn("result: ok (exit 0)", p.stdout)  # the report itself was printed
        with open(path) as f:
            self.assertEqual(f.read(), "previous summary\n")
        self.assertTrue(os.path.isdir(path + ".tmp"))


class Features(unittest.TestCase):
    def test_filters_pair_differently_named_cases(self):
        # as compare.py benchmarksfiltered: uniform in the baseline meets bimodal in the current run
        rc, out, err, data = compare("base", "base", "--filter-baseline", "dist:uniform",
                                     "--filter-current", "dist:bimodal")
        self.assertEqual(data["summary"]["cases"], 1, out + err)
        self.assertIn("[dist:uniform vs. dist:bimodal]", data["cases"][0]["name"])
        self.assertEqual(data["cases"][0]["verdict"], "regressed")  # the bimodal peak is not the uniform one

    def test_print_slug(self):
        for run, slug in (("base", "sim"), ("different_gpu/current", "nvidia-h200"),
                          ("different_gpu/base", "nvidia-h100-80gb-hbm3")):
            p = subprocess.run([TOOL, "--print-slug", os.path.join(FIX, run)], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout.strip(), slug)

    def test_json_to_stdout(self):
        p = subprocess.run([TOOL, os.path.join(FIX, "base"), os.path.join(FIX, "larger_peak"), "--json", "-"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        data = json.loads(p.stdout)
        self.assertEqual(data["summary"]["regressed"], 1)
        self.assertIn("REGRESSED", p.stderr)

    def test_compare_py_table(self):
        p = subprocess.run([TOOL, os.path.join(FIX, "base"), os.path.join(FIX, "slower"), "--show-compare-py"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("compare.py", p.stdout)
        self.assertIn("_pvalue", p.stdout)
        self.assertIn("+0.5000", p.stdout)

    def test_run_directory_or_file(self):
        p = subprocess.run([TOOL, os.path.join(FIX, "base", "results.json"), os.path.join(FIX, "identical")],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
