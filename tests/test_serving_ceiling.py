#!/usr/bin/env python3
"""test_serving_ceiling.py - scripts/serving_ceiling.py without a GPU: the
verdict of the table ("prediction within 0.005" of the ceiling by running,
an interval [lo, hi)), the KV sizing against the server's own in the committed
first run (results/nvidia-h100/serving-run1), the capture window moved into a
held pool, and, where CMB_BIN names a built cumembench, a whole prediction
over a small trace whose ceiling is computed here by hand."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN1 = os.path.join(SRC, "results", "nvidia-h100", "serving-run1")
sys.path.insert(0, os.path.join(SRC, "scripts"))
import serving_ceiling as C  # noqa: E402
import serving_server as S  # noqa: E402

MIB = 1 << 20


def load(path):
    with open(path) as f:
        return json.load(f)


class Verdict(unittest.TestCase):
    def test_the_first_runs_predictions_were_too_high(self):
        # 0.994 against [0.984, 0.989): the ceiling is at most 0.988, 0.006 below
        self.assertEqual(C.verdict_of(0.994, 0.984, 0.989), "no")
        self.assertEqual(C.verdict_of(0.995, 0.985, 0.990), "no")

    def test_boundaries_in_thousandths(self):
        # ceiling in 0.984 .. 0.988: yes for p in [0.983, 0.989]
        self.assertEqual(C.verdict_of(0.983, 0.984, 0.989), "yes")
        self.assertEqual(C.verdict_of(0.989, 0.984, 0.989), "yes")
        self.assertEqual(C.verdict_of(0.986, 0.984, 0.989), "yes")
        self.assertEqual(C.verdict_of(0.993, 0.984, 0.989), "undecided")  # 0.988 is within, 0.984 is not
        self.assertEqual(C.verdict_of(0.982, 0.984, 0.989), "undecided")
        self.assertEqual(C.verdict_of(0.978, 0.984, 0.989), "no")
        self.assertEqual(C.verdict_of(0.979, 0.984, 0.989), "undecided")

    def test_open_and_missing_intervals(self):
        self.assertEqual(C.verdict_of(None, 0.984, 0.989), "n/a")
        self.assertEqual(C.verdict_of(0.99, None, None), "n/a")
        self.assertEqual(C.verdict_of(0.990, 0.996, None), "no")       # every run completed, far above
        self.assertEqual(C.verdict_of(0.992, 0.996, None), "undecided")
        self.assertEqual(C.verdict_of(0.996, None, 0.986), "no")       # every run failed: c <= 0.985
        self.assertEqual(C.verdict_of(0.990, None, 0.986), "undecided")

    def test_a_wide_bracket_cannot_say_yes(self):
        # [0.980, 0.992): c in 0.980 .. 0.991, no point within 0.005 of both ends
        for p in range(970, 1002):
            self.assertNotEqual(C.verdict_of(p / 1000, 0.980, 0.992), "yes")
        # [0.980, 0.991): 0.985 alone is within 0.005 of 0.980 .. 0.990
        self.assertEqual([p for p in range(970, 1002) if C.verdict_of(p / 1000, 0.980, 0.991) == "yes"], [985])


class CommittedRun(unittest.TestCase):
    def test_kv_sizing_is_the_servers(self):
        rec = load(os.path.join(RUN1, "record.json"))
        self.assertEqual(C.kv_layer_bytes(rec, round(rec["util"] * 1000)), rec["kv_layer_bytes"])
        n = 0
        for path in glob.glob(os.path.join(RUN1, "runs", "default-*.json")):
            r = load(path)  # the same weights and profile as the recording: the same sizing
            self.assertEqual(C.kv_layer_bytes(rec, round(r["util"] * 1000)), r["kv_layer_bytes"], path)
            n += 1
        self.assertEqual(n, 3)

    def test_capacity_left_to_the_allocator(self):
        # the replay's device: total - the largest non-torch use the recording measured
        rec = load(os.path.join(RUN1, "record.json"))
        non_torch = max(rec["non_torch"], rec["non_torch_peak"])
        self.assertEqual(rec["total"] - non_torch, load(os.path.join(RUN1, "predict", "torch-caching.json"))["capacity"])

    def test_the_table_of_the_first_run_says_no(self):
        out = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "serving_ceiling.py"), "table", RUN1],
                             capture_output=True, text=True, check=True).stdout
        rows = [ln for ln in out.splitlines() if ln.startswith("| PyTorch") and ln.count("|") == 5]
        self.assertEqual(len(rows), 2, out)
        for ln in rows:
            self.assertTrue(ln.rstrip().endswith("| no |"), ln)

    def test_a_recording_without_markers_is_refused(self):
        rec = load(os.path.join(RUN1, "record.json"))
        with self.assertRaises(SystemExit) as e:
            C.pin_capture(["# cumembench-trace 1"], rec)
        self.assertEqual(e.exception.code, 1)


def small_trace(pool_marks=True):
    m0, m1 = S.CAPTURE_MARKS
    lines = ["# cumembench-trace 1", f"a 1 {64 * MIB} 0 0", f"a 2 {224 * MIB} 0 1", f"a 3 {224 * MIB} 0 2"]
    if pool_marks:
        lines += [f"a 4 {m0} 0 3", "f 4 - 0 4"]
    lines += [f"a 5 {128 * MIB} 0 5", f"a 6 {MIB} 0 6", "f 5 - 0 7"]  # 6: a graph's output, kept
    if pool_marks:
        lines += [f"a 4 {m1} 0 8", "f 4 - 0 9"]
    for i in range(4):  # serving: eager steps
        lines += [f"a 7 {128 * MIB} 0 {10 + 2 * i}", f"f 7 - 0 {11 + 2 * i}"]
    return lines + ["f 6 - 0 20", ""]


def small_record(pool):
    return {"outcome": "completed", "util": 0.5, "total": 1024 * MIB, "weights": 64 * MIB, "profile_peak": 0,
            "non_torch": 0, "non_torch_peak": 64 * MIB, "graph_estimate": 0, "kv_block_bytes": 4 * MIB,
            "kv_layer_bytes": 224 * MIB, "args": {"layers": 2, "block_size": 16, "max_model_len": 16},
            "capture_marks": list(S.CAPTURE_MARKS), "graph_pool_private": pool}


class PinCapture(unittest.TestCase):
    def test_the_window_becomes_one_held_allocation(self):
        out = C.pin_capture(small_trace(), small_record(128 * MIB))
        allocs = [ln.split() for ln in out if ln.startswith("a ")]
        frees = [ln.split()[1] for ln in out if ln.startswith("f ")]
        self.assertEqual([int(a[2]) for a in allocs], [64 * MIB, 224 * MIB, 224 * MIB, 128 * MIB] + [128 * MIB] * 4)
        self.assertEqual(allocs[3][1], "8")  # a fresh id, never freed
        self.assertNotIn("8", frees)
        self.assertNotIn("6", frees)  # the graph output's free went with it
        self.assertNotIn("5", frees)

    def test_markers_twice_or_missing(self):
        with self.assertRaises(SystemExit):
            C.pin_capture(small_trace(pool_marks=False), small_record(0))
        doubled = small_trace()
        doubled.insert(5, f"a 9 {S.CAPTURE_MARKS[0]} 0 4")
        with self.assertRaises(SystemExit):
            C.pin_capture(doubled, small_record(0))


@unittest.skipUnless(os.environ.get("CMB_BIN"), "CMB_BIN (a built cumembench) not given")
class Predict(unittest.TestCase):
    """capacity 1024 - 64 MiB = 960 MiB; KV layer at u: L = 2 MiB x floor((1024 u - 64) / 4).
    Held pool of 128 MiB: 64 + 2 L + 128 + 128 <= 960, L <= 320 MiB, 160 blocks: u = 0.691.
    No pool: 64 + 2 L + 128 <= 960, L <= 384 MiB, 192 blocks: u = 0.816."""

    def predict(self, pool):
        d = tempfile.mkdtemp()
        try:
            trace, rec, out = (os.path.join(d, n) for n in ("t.trace", "rec.json", "p.json"))
            with open(trace, "w") as f:
                f.write("\n".join(small_trace()))
            with open(rec, "w") as f:
                json.dump(small_record(pool), f)
            p = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "serving_ceiling.py"), "predict",
                                os.environ["CMB_BIN"], trace, rec, "torch-caching", out], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            return load(out)["predicted"]
        finally:
            shutil.rmtree(d)

    def test_the_held_pool_lowers_the_ceiling_by_its_size(self):
        self.assertAlmostEqual(self.predict(128 * MIB), 0.691, places=6)
        self.assertAlmostEqual(self.predict(0), 0.816, places=6)


if __name__ == "__main__":
    unittest.main()
