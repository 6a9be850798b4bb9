#!/usr/bin/env python3
"""test_result_files.py - the result files survive what docs/reliability.md
says they survive, through the results store (harness/results.c):

  - two writers of one --out at the same time (two fresh runs, a run and a
    --resume of it): the second is refused at once with the holder's pid,
    and the first one's files hold every case once;
  - a full disk while a case is appended (a file-size limit, RLIMIT_FSIZE
    with SIGXFSZ ignored, makes the writes fail part-way as ENOSPC does):
    the run stops with the reason, both files stay valid, and --resume
    after the space is back finishes the run with every case once;
  - --resume refuses what it must not keep: a NUL byte and garbage in
    results.csv, a run.args of another configuration (other cases, another
    seed);
  - results.json is strict JSON (no NaN) with repetitions >= 2;
  - an --out path longer than 767 characters is refused before anything runs.
"""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("CMB_BIN") or os.path.join(SRC, "build", "cumembench")
MISBEHAVING = os.environ.get("CMB_MISBEHAVING", "")
CHECK = os.path.join(SRC, "tests", "support", "results_check.py")
SMALL = ["--mode", "sim", "--quiet", "--scenario", "churn", "--param", "n=300", "--param", "max_size=2MiB",
         "--param", "dist=uniform", "--param", "checkerboard=false", "--capacity", "1GiB", "--timeline", "off"]


def run(*args, preexec=None, timeout=300):
    return subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=timeout, preexec_fn=preexec)


def strict_json(path):
    """The file as a strict JSON parser reads it: NaN and Infinity refused."""
    def refuse(name):
        raise ValueError(f"{path}: {name} is not JSON")
    with open(path) as f:
        return json.load(f, parse_constant=refuse)


def check_once(d, cases):
    p = subprocess.run([sys.executable, CHECK, "once", d, "--cases", str(cases)], capture_output=True, text=True)
    if p.returncode:
        raise AssertionError(f"{d}: {p.stdout}{p.stderr}")


class ResultFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        base = os.environ.get("CMB_TEST_TMP")
        if base:
            os.makedirs(base, exist_ok=True)
        cls.tmp = tempfile.mkdtemp(prefix="cmb-results-", dir=base)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def out(self, name):
        return os.path.join(self.tmp, name)

    # --- 1. two writers ---------------------------------------------------------------------------------

    def slow_run(self, d):
        """A run that holds its directory for eight seconds or more (a case that hangs until its timeout)."""
        if not MISBEHAVING:
            self.skipTest("CMB_MISBEHAVING (the misbehaving plug-in) not given")
        return subprocess.Popen([BIN] + SMALL + ["--allocator", f"cuda,external:{MISBEHAVING}:mode=hang,rmm-pool",
                                                 "--case-timeout", "8", "--out", d],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait_for(self, path):
        for _ in range(200):
            if os.path.exists(path):
                return
            time.sleep(0.05)
        self.fail(f"{path} never appeared")

    def test_a_second_writer_is_refused_with_the_holders_pid(self):
        d = self.out("two")
        first = self.slow_run(d)
        self.wait_for(os.path.join(d, "run.args"))
        t0 = time.monotonic()
        fresh = run(*SMALL, "--allocator", "cuda", "--out", d)
        resumed = run("--resume", d, "--quiet")
        waited = time.monotonic() - t0
        self.assertIsNone(first.poll(), "the first run ended before the others tried: they did not overlap")
        _, err = first.communicate(timeout=120)
        self.assertEqual(first.returncode, 1, err)  # the hung case failed (timeout); the others ran
        for p in (fresh, resumed):
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(f"being written by another cumembench (pid {first.pid})", p.stderr)
        self.assertLess(waited, 6, "the second writer waited instead of being refused at once")
        check_once(d, 3)

    def test_two_fresh_runs_started_together_leave_one_run(self):
        d = self.out("together")
        args = [BIN] + SMALL + ["--allocator", "cuda,rmm-pool,bfc", "--repetitions", "2", "--out", d]
        ps = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=300) for p in ps]
        codes = sorted(p.returncode for p in ps)
        self.assertEqual(codes, [0, 2], outs)
        refused = outs[[p.returncode for p in ps].index(2)][1]
        self.assertTrue("being written by another cumembench" in refused or "already holds results" in refused,
                        refused)
        check_once(d, 3)

    # --- 2. a full disk ---------------------------------------------------------------------------------

    def test_a_full_disk_mid_append_keeps_the_files_resumable(self):
        full = self.out("nospace-full")
        args = SMALL + ["--allocator", "cuda,rmm-pool,bfc,torch-caching,cub", "--repetitions", "3"]
        p = run(*args, "--out", full)
        self.assertEqual(p.returncode, 0, p.stderr)
        size = os.path.getsize(os.path.join(full, "results.json"))
        limit = size // 2 + 1000  # about half way: the write of the third case runs out of room

        def no_room():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG, as with ENOSPC
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        d = self.out("nospace")
        p = run(*args, "--out", d, preexec=no_room)
        self.assertNotEqual(p.returncode, 0, "the run did not meet the limit")
        self.assertIn("cannot append to", p.stderr)
        self.assertIn("the files hold every case before this one", p.stderr)
        doc = strict_json(os.path.join(d, "results.json"))  # valid on disk, the failed case undone
        self.assertLess(len(doc["benchmarks"]), 5 * 6)
        r = run("--resume", d)  # the space is back
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("dropped", r.stderr)  # nothing to repair: the failed append was undone
        check_once(d, 5)
        strict_json(os.path.join(d, "results.json"))

    def test_a_torn_json_tail_is_cut_and_the_case_runs_again(self):
        d = self.out("torn-json")
        p = run(*SMALL, "--allocator", "cuda,rmm-pool", "--repetitions", "2", "--out", d)
        self.assertEqual(p.returncode, 0, p.stderr)
        path = os.path.join(d, "results.json")
        # a crash in the middle of the last case's append: its CSV rows not yet written,
        # its JSON entries cut mid-key (the closing gone)
        with open(os.path.join(d, "results.csv")) as f:
            lines = f.readlines()
        last = lines[-1].split(",")[3]
        with open(os.path.join(d, "results.csv"), "w") as f:
            f.writelines(line for line in lines if line.split(",")[3] != last)
        with open(path, "r+") as f:
            text = f.read()
            f.truncate(text.rindex('"peak_reserved_bytes"') + 7)
        r = run("--resume", d)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1 finished cases kept", r.stderr)
        check_once(d, 2)
        strict_json(path)

    # --- 7. what resume must refuse ---------------------------------------------------------------------

    def finished_run(self, name, *extra, allocator="cuda"):
        d = self.out(name)
        p = run(*SMALL, "--allocator", allocator, *extra, "--out", d)
        self.assertEqual(p.returncode, 0, p.stderr)
        return d

    def test_resume_refuses_a_nul_byte_and_garbage(self):
        d = self.finished_run("nul")
        with open(os.path.join(d, "results.csv"), "ab") as f:
            f.write(b"\0garbage,,,,\n")
        with open(os.path.join(d, "results.csv"), "rb") as f:
            before = f.read()
        r = run("--resume", d)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("NUL byte", r.stderr)
        with open(os.path.join(d, "results.csv"), "rb") as f:
            self.assertEqual(f.read(), before, "refused, yet changed")

    def test_resume_refuses_a_row_that_does_not_parse(self):
        d = self.finished_run("garbage")
        with open(os.path.join(d, "results.csv"), "a") as f:
            f.write('a,"b\n')
        r = run("--resume", d)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("does not parse", r.stderr)

    def test_resume_refuses_the_run_args_of_another_configuration(self):
        d = self.finished_run("mine")
        other = self.finished_run("other", allocator="rmm-pool")
        shutil.copy(os.path.join(other, "run.args"), os.path.join(d, "run.args"))
        r = run("--resume", d)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("does not plan", r.stderr)
        seeded = self.finished_run("seeded")
        with open(os.path.join(seeded, "run.args"), "a") as f:
            f.write("arg --seed\narg 7\n")
        r = run("--resume", seeded)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("seed 42", r.stderr)

    # --- 8, 9. strict JSON, a long --out --------------------------------------------------------------

    def test_results_json_is_strict_with_repetitions(self):
        d = self.finished_run("strict", "--repetitions", "3")
        doc = strict_json(os.path.join(d, "results.json"))
        cv = [b for b in doc["benchmarks"] if b.get("aggregate_name") == "cv"]
        self.assertTrue(cv)
        self.assertTrue(any(v is None for b in cv for v in b.values()), "no cv over zeros: the test proves nothing")

    def test_a_too_long_out_is_refused_before_anything_runs(self):
        d = os.path.join(self.tmp, "long", *(["d" * 99] * 8))
        self.assertGreater(len(d), 767)
        r = run(*SMALL, "--allocator", "cuda", "--out", d)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--out", r.stderr)
        self.assertIn("767", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "long")), "something was written")


if __name__ == "__main__":
    unittest.main(verbosity=2)
