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
        # each case's line leads with its scenario's answer (its items go on where the line ends)
        self.assertRegex(p.stderr, r"\] churn cuda max_size:\S+  ok  churn peak reserved \S+ \S+ for \S+ \S+ requested  "
                                   r"churn frag 0\.000\n {6}checkerboard capacity ratio 1\.000")
        self.assertRegex(p.stderr, r"\] replay cuda  fits  min capacity \S+ \S+  peak reserved")

    def test_memory_ranked_by_the_smallest_gpu(self):
        # churn_small_rmm.csv: on the simulated 80 GiB device rmm-pool's pool (half the free memory) made it
        # look 15x worse than torch-caching; its smallest GPU is the smaller one
        out = os.path.join(self.tmp, "smallest-gpu")
        p = run(["--scenario", "replay", "--allocator", "torch-caching,rmm-pool", "--param",
                 "trace=" + os.path.join(SRC, "traces", "samples", "churn_small_rmm.csv"), "--repetitions", "1"], out)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = console_answers(p.stderr)["replay"]["memory"]
        self.assertRegex(got, r"^rmm-pool \(smallest GPU it fits on; next torch-caching 1\.0\dx\)$")
        self.assertEqual(got, A.answer(load_run(out), "replay").memory)

    def test_failed_allocations_in_a_phase_do_not_fit(self):
        # churn's checkerboard phase under arena and buddy fails an allocation: never "ok", never "fit";
        # contention allocates until a request fails (its measure): that is no misfit
        out = os.path.join(self.tmp, "phase")
        p = run(["--scenario", "churn,contention", "--allocator", "arena,buddy,bfc", "--param", "n=2000",
                 "--param", "max_size=1MiB", "--repetitions", "1"], out)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = console_answers(p.stderr)
        r = load_run(out)
        self.assertEqual(got["churn"]["not_fit"], "arena (1 allocations failed in a phase), buddy (1 allocations "
                                                  "failed in a phase)")
        self.assertTrue(got["churn"]["memory"].startswith("bfc ("), got["churn"]["memory"])
        self.assertEqual(got["contention"]["not_fit"], "everything that ran fit")
        self.assertNotIn("recommended      none", p.stderr.split("  contention", 1)[1])
        for scen in ("churn", "contention"):
            a = A.answer(r, scen)
            self.assertEqual((got[scen]["memory"], got[scen]["not_fit"]), (a.memory, a.not_fit), scen)

    def test_a_crashed_allocator_is_failed_not_a_misfit(self):
        # a plug-in killed by a signal ran nothing to the end: "(failed)" in the smallest-GPU line,
        # as in the report's, never "(did not fit)" beside "everything that ran fit"
        lib = os.environ.get("CMB_MISBEHAVING")
        if not lib:
            self.skipTest("CMB_MISBEHAVING (the misbehaving plug-in) not given")
        out = os.path.join(self.tmp, "crash")
        p = run(["--scenario", "leak-check", "--param", "iterations=10", "--repetitions", "1",
                 "--allocator", f"cmb,external:{lib}:mode=segv:at=3"], out)
        self.assertEqual(p.returncode, 1, p.stderr)  # a failed case fails the run
        line = next(x for x in p.stderr.splitlines() if "smallest GPU, time" in x)
        self.assertRegex(line, r"external:\S+ \(failed\)")
        self.assertNotIn("did not fit)", line)
        self.assertEqual(console_answers(p.stderr)["leak-check"]["not_fit"], "everything that ran fit")
        listed = lambda text: text.rsplit(" [", 1)[0]  # noqa: E731  (the cost file's label differs)
        self.assertEqual(listed(line.split("smallest GPU, time  ", 1)[1]),
                         listed(A.decide(load_run(out), "leak-check")[0]))

    def test_a_replay_that_does_not_fit_is_oom_and_not_ranked(self):
        # the case: the MLP sweep on a 1 GiB device under bfc and torch-caching
        out = os.path.join(self.tmp, "oom")
        p = run(["--scenario", "replay", "--allocator", "bfc,torch-caching,cuda", "--param", f"trace={MLP}",
                 "--param", "capacity=1GiB,8GiB"], out)
        self.assertEqual(p.returncode, 0, p.stderr)   # did not fit is an answer, not a failure
        self.assertRegex(p.stderr, r"\] replay bfc capacity:1GiB  did not fit: 27 allocations failed  min capacity")
        self.assertRegex(p.stderr, r"\] replay torch-caching capacity:1GiB  did not fit: 21 allocations failed")
        self.assertRegex(p.stderr, r"\] replay bfc capacity:8GiB  fits  min capacity")
        r = load_run(out)
        small = [c for c in r.cases.values() if "capacity=1GiB" in c.params]
        self.assertEqual({c.allocator: c.status for c in small}, {"bfc": "oom", "torch-caching": "oom",
                                                                   "cuda": "oom"})
        rows = {(row.allocator): row for row in A.ranking(r, "replay")}
        for a in ("bfc", "torch-caching"):
            self.assertEqual(rows[a].oom, 1, a)
        # the 1 GiB cases are nowhere in the memory comparison: every 4 GiB case fit, and only they count
        self.assertEqual(console_answers(p.stderr)["replay"]["not_fit"],
                         "bfc [capacity=1GiB] (27 allocations failed), torch-caching [capacity=1GiB] (21 allocations "
                         "failed), cuda [capacity=1GiB] (15 allocations failed)")
        self.assertEqual(A.answer(r, "replay").not_fit, console_answers(p.stderr)["replay"]["not_fit"])
        with open(os.path.join(out, "results.csv")) as f:
            oom_rows = [line for line in f if ",oom," in line and "capacity=1GiB" in line]
        self.assertTrue(oom_rows and all("did not fit: " in line for line in oom_rows))

    def test_a_resumed_run_counts_every_case(self):
        """--resume of a finished run runs nothing new: the counts of the whole run (from
        results.csv, as the report reads it) come before the answers."""
        out = os.path.join(self.tmp, "resumed")
        p = run(["--scenario", "replay,pinned", "--allocator", "bfc,cuda", "--param", f"trace={MLP}",
                 "--param", "capacity=3GiB", "--repetitions", "1"], out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("the whole run", p.stderr)
        p = subprocess.run([BIN, "--resume", out], capture_output=True, text=True, timeout=600, cwd=SRC)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = load_run(out)
        n = r.counts()
        m = re.search(r"the whole run \(with the part before --resume\): (\d+) cases: (.*)\n", p.stderr)
        self.assertTrue(m, p.stderr)
        self.assertEqual(int(m.group(1)), len(r.cases))
        words = {"ok": "ok", "partly failed": "partial", "did not fit": "oom", "failed": "failed", "skipped": "skipped"}
        got = {words[w]: int(k) for k, w in re.findall(r"(\d+) ([a-z ]+?)(?:,|$)", m.group(2))}
        self.assertEqual(got, {k: v for k, v in n.items() if v or k == "ok"})
        self.assertEqual(got, {"ok": 1, "oom": 1, "skipped": 2})
        self.assertIn("bfc (14 allocations failed)", console_answers(p.stderr)["replay"]["not_fit"])

    def test_nothing_ran_says_why_and_fails(self):
        for args, reason in ((["--scenario", "churn", "--param", "live_cap=1KiB"], "does not fit under live_cap"),
                             (["--scenario", "pinned"], "needs a GPU"),
                             (["--scenario", "churn", "--capacity", "1MiB", "--param", "max_size=64MiB"],
                              "does not fit")):
            out = os.path.join(self.tmp, "none-" + str(abs(hash(tuple(args)))))
            p = run(args, out)
            self.assertEqual(p.returncode, 1, f"{args}: {p.stderr}")
            m = re.search(r"nothing ran: all (\d+) cases were skipped \(no run directory written\):\n((?:  .*\n)+)",
                          p.stderr)
            self.assertTrue(m, p.stderr)
            lines = m.group(2).splitlines()
            self.assertTrue(any(reason in line for line in lines), lines)
            counts = [int(x) for line in lines for x in re.findall(r"\((\d+) cases?\)$", line)]
            self.assertEqual(sum(counts), int(m.group(1)), lines)   # grouped: every case counted once
            self.assertEqual(counts, sorted(counts, reverse=True))  # most frequent first
            self.assertFalse(os.path.exists(out), out)  # nothing written, not an empty run

    def test_quiet_run_still_says_why_nothing_ran(self):
        p = run(["--scenario", "pinned", "--quiet"], os.path.join(self.tmp, "quiet"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("nothing ran", p.stderr)
        self.assertNotIn("where to look next", p.stderr)


if __name__ == "__main__":
    unittest.main()
