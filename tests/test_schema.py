#!/usr/bin/env python3
"""test_schema.py - the result schema (harness/schema.def) is one: the CSV
header the binary writes is the one tools/cmb_schema.py reads from the same
file, every row has its columns, the allocator, options and impl columns
hold what the contract says, tools/results-table.py keeps two
configurations apart whose options hold '/', and a case name too long for
its buffer is refused before anything is written."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CMB_BIN") or os.path.join(SRC, "build", "cumembench")
sys.path.insert(0, os.path.join(SRC, "tools"))
import cmb_schema  # noqa: E402

TWO = ("torch-caching:roundup_power2_divisions=256=1/512=2/>=4,"
       "torch-caching:roundup_power2_divisions=256=1/512=8/>=4")


def run(out, allocators, *extra):
    args = [BIN, "--mode", "sim", "--scenario", "churn", "--allocator", allocators, "--param", "n=300",
            "--param", "max_size=1MiB", "--param", "checkerboard=false", "--repetitions", "2", "--quiet",
            "--timeline", "off", "--out", out] + list(extra)
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


class Schema(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        base = os.environ.get("CMB_TEST_TMP")
        if base:
            os.makedirs(base, exist_ok=True)
        cls.tmp = tempfile.mkdtemp(prefix="cmb-schema-", dir=base)
        cls.dir = os.path.join(cls.tmp, "r")
        p = run(cls.dir, TWO + ",buddy@sim,cuda-async,bfc,cuda")
        if p.returncode != 0:
            raise AssertionError(f"the run failed ({p.returncode}): {p.stderr}")
        cls.rows = list(cmb_schema.read_rows(cls.dir))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_header_is_the_schema(self):
        with open(os.path.join(self.dir, "results.csv")) as f:
            self.assertEqual(f.readline(), cmb_schema.HEADER)
        self.assertEqual(cmb_schema.COLUMNS[:13], "run_id gpu mode case scenario allocator upstream params "
                         "repetition status metric value error".split())
        self.assertEqual(cmb_schema.COLUMNS[13:], ["options", "impl"])

    def test_every_line_has_every_column(self):
        import csv
        with open(os.path.join(self.dir, "results.csv"), newline="") as f:
            lines = list(csv.reader(f))
        self.assertGreater(len(lines), 10)
        self.assertEqual({len(x) for x in lines}, {len(cmb_schema.COLUMNS)})

    def test_allocator_options_impl(self):
        seen = {(r["allocator"], r["options"], r["upstream"], r["impl"]) for r in self.rows}
        self.assertIn(("torch-caching", "roundup_power2_divisions=256=1/512=2/>=4", "sim", "emulation"), seen)
        self.assertIn(("torch-caching", "roundup_power2_divisions=256=1/512=8/>=4", "sim", "emulation"), seen)
        self.assertIn(("buddy", "", "sim", "suite"), seen)
        self.assertIn(("bfc", "", "sim", "emulation"), seen)
        self.assertIn(("cuda-async", "", "none", "real"), seen)  # skipped in sim: still named
        self.assertIn(("cuda", "", "sim", "real"), seen)  # cudaMalloc passed through (here the sim device)
        labels = {cmb_schema.label(r) for r in self.rows}
        self.assertEqual(labels, {"torch-caching:roundup_power2_divisions=256=1/512=2/>=4",
                                  "torch-caching:roundup_power2_divisions=256=1/512=8/>=4",
                                  "buddy@sim", "cuda-async", "bfc", "cuda"})
        for r in self.rows:  # the label is what the case name holds
            self.assertTrue(r["case"].startswith(f"churn/{cmb_schema.label(r)}/"), r["case"])

    def test_results_table_keeps_options_with_slashes_apart(self):
        p = subprocess.run([sys.executable, os.path.join(SRC, "tools", "results-table.py"), self.dir,
                            "--scenario", "churn", "--metric", "peak_reserved_bytes:raw",
                            "--allocators", TWO], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        body = [x for x in p.stdout.splitlines() if x.startswith("| torch-caching")]
        self.assertEqual(len(body), 2, p.stdout)
        self.assertTrue(body[0].startswith("| torch-caching:roundup_power2_divisions=256=1/512=2/>=4 |"), body[0])
        self.assertTrue(body[1].startswith("| torch-caching:roundup_power2_divisions=256=1/512=8/>=4 |"), body[1])
        self.assertIn("of 2 repetitions", p.stdout)

    def test_old_runs_read_the_same_labels(self):
        old = os.path.join(SRC, "results", "nvidia-h100", "quick")
        rows = list(cmb_schema.read_rows(old))
        self.assertTrue(all(r["options"] == "" and r["impl"] == "" for r in rows))
        self.assertTrue(all(cmb_schema.label(r) == r["allocator"] for r in rows))

    def test_a_name_too_long_is_refused(self):
        out = os.path.join(self.tmp, "long")
        # a file option whose value is good (a layout trace deep in directories): only the name is wrong.
        # The spec is 490 characters wherever the temporary directory is: under the 511 an allocator
        # name may have, over the case name's 511 with the scenario and its parameters
        pad = 490 - len("cmb:layout=" + os.path.join(self.tmp, "run.trace"))
        if pad < 2:
            self.skipTest("the temporary directory's path is too long for this test")
        parts = []
        while pad > 1:  # directories of at most 60 characters with their '/'
            parts.append("d" * (min(pad, 60) - 1) + "/")
            pad -= min(pad, 60)
        deep = os.path.join(self.tmp, "".join(parts))
        os.makedirs(deep, exist_ok=True)
        trace = os.path.join(deep, "run.trace")
        shutil.copy(os.path.join(SRC, "traces", "samples", "churn_small.trace"), trace)
        spec = "cmb:layout=" + trace
        self.assertLessEqual(abs(len(spec) - 490), 1, spec)
        p = run(out, spec)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("case name of", p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertFalse(os.path.exists(out))

    def test_results_json_reads_strict_and_old(self):
        """cmb_schema.read_json reads what the results store writes (strict
        JSON, null for a cv over zeros) and runs from before it (NaN), the
        same way: None."""
        doc = cmb_schema.read_json(self.dir)
        self.assertEqual(cmb_schema.read_context(self.dir).get("mode"), "sim")
        cv = [b for b in doc["benchmarks"] if b.get("aggregate_name") == "cv"]
        self.assertTrue(any(v is None for b in cv for v in b.values()))
        old = os.path.join(self.tmp, "old.json")
        with open(os.path.join(self.dir, "results.json")) as f, open(old, "w") as o:
            o.write(f.read().replace(": null", ": NaN"))
        self.assertEqual(cmb_schema.read_json(old), doc)


if __name__ == "__main__":
    unittest.main()
