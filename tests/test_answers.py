#!/usr/bin/env python3
"""test_answers.py - what a run says when it ends (harness/answer.c): the
answer table per scenario agrees, line for line, with the report's
(plots/cmb_report/analysis.py) on the same results; each case's console line
leads with its scenario's answer; a run in which nothing ran says why,
grouped by reason, and exits 1."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CMB_BIN") or os.path.join(SRC, "build", "cumembench")
sys.path.insert(0, os.path.join(SRC, "plots"))

from cmb_report import analysis as A  # noqa: E402
from cmb_report.results import load_run  # noqa: E402

MLP = os.path.join(SRC, "traces", "samples", "torch_mlp_sweep_default.trace")


def run(args, out):
    return subprocess.run([BIN, "--mode", "sim", "--out", out] + args, capture_output=True, text=True,
                          timeout=600, cwd=SRC)


def console_answers(stderr):
    """{scenario: {"memory": ..., "time": ..., "not_fit": ..., "failed": ..., "not_run": ...}}"""
    out, scen = {}, None
    keys = {"best for memory": "memory", "best for time": "time", "did not fit": "not_fit", "failed": "failed"}
    block = stderr.split("cumembench: answers", 1)[1].split("cumembench: where to look next", 1)[0]
    for line in block.splitlines()[1:]:
        m = re.match(r"  (\S*)\s+(best for memory|best for time|did not fit|failed|not run:)\s+(.*)$", line)
        if not m:
            continue
        scen = m.group(1) or scen
        if m.group(2) == "not run:":
            out.setdefault(scen, {})["not_run"] = "not run: " + m.group(3)
        else:
            out.setdefault(scen, {})[keys[m.group(2)]] = m.group(3)
    return out


class Answers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cmb-answers-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_console_table_agrees_with_the_report(self):
        out = os.path.join(self.tmp, "mixed")
        p = run(["--scenario", "churn,replay,batch-sweep,leak-check,contention,pinned",
                 "--allocator", "bfc,torch-caching,torch-expandable,rmm-pool,cuda,cupy,buddy",
                 "--param", "n=2000", "--param", f"trace={MLP}", "--repetitions", "2"], out)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        got = console_answers(p.stderr)
        r = load_run(out)
        for scen in r.scenarios():
            a = A.answer(r, scen)
            if a.not_fit.startswith("not run:"):
                self.assertEqual(got[scen].get("not_run"), a.not_fit, scen)
                continue
            self.assertEqual(got[scen]["memory"], a.memory, scen)
            self.assertEqual(got[scen].get("time", a.time if r.mode == "gpu" else None),
                             a.time if r.mode == "gpu" else None, scen)
            self.assertEqual(got[scen]["not_fit"], a.not_fit, scen)
        self.assertNotIn("time", got["churn"])  # sim: time is not ranked, the header says so once
        self.assertIn("time is not ranked", p.stderr)
        self.assertIn("smallest churn peak reserved", got["churn"]["memory"])
        self.assertIn("highest max_batch", got["batch-sweep"]["memory"])
        self.assertIn("needs a GPU", got["pinned"]["not_run"])
        self.assertIn("where to look next: make report RUNS=" + out, p.stderr)
        self.assertIn("docs/scenarios.md", p.stderr)
        # each case's line leads with its scenario's answer
        self.assertRegex(p.stderr, r"churn/cuda/\S+  ok  churn peak reserved \S+ \S+ for \S+ \S+ requested  churn "
                                   r"frag 0\.000  checkerboard capacity ratio 1\.000")
        self.assertRegex(p.stderr, r"replay/cuda/\S+  fits  min capacity \S+ \S+  peak reserved")

    def test_nothing_ran_says_why_and_fails(self):
        for args, reason in ((["--scenario", "churn", "--param", "live_cap=1KiB"], "does not fit under live_cap"),
                             (["--scenario", "pinned"], "needs a GPU"),
                             (["--scenario", "churn", "--capacity", "1MiB", "--param", "max_size=64MiB"],
                              "does not fit")):
            out = os.path.join(self.tmp, "none-" + str(abs(hash(tuple(args)))))
            p = run(args, out)
            self.assertEqual(p.returncode, 1, f"{args}: {p.stderr}")
            m = re.search(r"nothing ran: all (\d+) cases were skipped:\n((?:  .*\n)+)", p.stderr)
            self.assertTrue(m, p.stderr)
            lines = m.group(2).splitlines()
            self.assertTrue(any(reason in line for line in lines), lines)
            counts = [int(x) for line in lines for x in re.findall(r"\((\d+) cases?\)$", line)]
            self.assertEqual(sum(counts), int(m.group(1)), lines)   # grouped: every case counted once
            self.assertEqual(counts, sorted(counts, reverse=True))  # most frequent first

    def test_quiet_run_still_says_why_nothing_ran(self):
        p = run(["--scenario", "pinned", "--quiet"], os.path.join(self.tmp, "quiet"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("nothing ran", p.stderr)
        self.assertNotIn("where to look next", p.stderr)


if __name__ == "__main__":
    unittest.main()
