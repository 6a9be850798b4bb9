#!/usr/bin/env python3
"""test_snapshot_cli.py - a PyTorch snapshot met on the command line: the
replay's `--param trace=snapshot.pickle` is refused with one line naming the
exact converter command, and that command, run as written, makes the trace
the line names, which then replays; the converter says what it wrote and
keeps an existing output unless --force is given."""
import os
import pickle
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("CMB_BIN", "build/cumembench")
SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONVERTER = os.path.join(SRC, "traces", "torch_snapshot_to_trace.py")

SNAPSHOT = {"device_traces": [[
    {"action": "alloc", "addr": 4096, "size": 1 << 20, "stream": 0, "time_us": 1},
    {"action": "alloc", "addr": 8 << 20, "size": 512, "stream": 0, "time_us": 2},
    {"action": "free_completed", "addr": 4096, "size": 1 << 20, "stream": 0, "time_us": 3},
]]}


class Snapshot(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.pickle = os.path.join(self.tmp, "run.pickle")
        with open(self.pickle, "wb") as f:
            pickle.dump(SNAPSHOT, f)

    def converter(self, *args):
        return subprocess.run([sys.executable, CONVERTER] + list(args), capture_output=True, text=True)

    def test_replay_names_the_converter(self):
        p = subprocess.run([BIN, "--mode", "sim", "--scenario", "replay", "--param", "trace=" + self.pickle],
                           capture_output=True, text=True, cwd=self.tmp)
        self.assertEqual(p.returncode, 2, p.stderr)
        lines = [l for l in p.stderr.splitlines() if "PyTorch memory snapshot" in l]
        self.assertEqual(len(lines), 1, p.stderr)
        m = re.search(r"convert it first with '([^']*)', then give --param trace=(\S+)", lines[0])
        self.assertIsNotNone(m, lines[0])
        trace = os.path.join(self.tmp, "run.trace")
        self.assertEqual(m.group(2), trace)
        self.assertFalse(os.path.exists(trace))
        # the command as written does it
        c = subprocess.run(shlex.split(m.group(1)), capture_output=True, text=True, cwd=self.tmp)
        self.assertEqual(c.returncode, 0, c.stderr)
        self.assertTrue(os.path.exists(trace))
        r = subprocess.run([BIN, "--mode", "sim", "--quiet", "--scenario", "replay", "--allocator", "cuda",
                            "--param", "trace=" + trace, "--out", os.path.join(self.tmp, "o")],
                           capture_output=True, text=True, cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_converter_says_what_it_wrote_and_keeps_outputs(self):
        out = os.path.join(self.tmp, "x.trace")
        p = self.converter(self.pickle, out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("wrote %s (2 allocations, 1 frees, 0 alive at start)" % out, p.stdout)
        with open(out, "w") as f:
            f.write("mine\n")
        p = self.converter(self.pickle, out)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr, "torch_snapshot_to_trace: %s exists: give --force to overwrite it\n" % out)
        with open(out) as f:
            self.assertEqual(f.read(), "mine\n")
        p = self.converter("--force", self.pickle, out)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            self.assertTrue(f.read().startswith("# cumembench-trace 1"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
