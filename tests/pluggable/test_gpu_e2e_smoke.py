#!/usr/bin/env python3
"""test_gpu_e2e_smoke.py - scripts/gpu-e2e.sh end to end on a machine with no
GPU: stand-ins for PyTorch and CuPy (tests/pluggable/fake/) run the same
scripts, the policies run over the sim upstream through the real library,
then the real replays and tables. What the GPU run will do is thereby tried
before it costs GPU time: every job, the out-of-memory probes, the tables,
the archives, at most 8 files back. Over sim, the library and the replay are
the same policy on the same calls, so every prediction must be exact.

Environment (CTest): CMB_BUILD (the build directory), CMB_SRC, CMB_TEST_TMP."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("CMB_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("CMB_BUILD", os.path.join(SRC, "build"))
TMP = os.environ.get("CMB_TEST_TMP") or tempfile.gettempdir()
FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake")
LIB = os.path.join(BUILD, "pluggable", "libcmb_pluggable.so")


@unittest.skipUnless(os.path.exists(LIB), f"{LIB} is not built")
class GpuE2eSmoke(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = tempfile.mkdtemp(dir=TMP, prefix="e2e-smoke-")
        env = dict(os.environ, PYTHONPATH=FAKE + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   PYTHON=sys.executable, CMB_PLUGGABLE_ALLOW_SIM="1",
                   CMB_E2E_TORCH_POLICIES="torch-caching@sim bfc@sim arena:arena_size=4GiB@sim",
                   CMB_E2E_TORCH_EXTRA="rmm-pool:initial_pool_size=256MiB@sim",
                   CMB_E2E_CUPY_POLICIES="cupy@sim buddy:pool_size=8GiB@sim", CMB_E2E_OOM_POLICY="bfc@sim",
                   CMB_E2E_OOM_MODES="null", CMB_E2E_BENCH_PAIRS="20000", CMB_E2E_BUDGET="300")
        for k in ("CMB_ALLOCATOR", "CMB_TRACE", "CMB_CAPACITY", "PYTORCH_CUDA_ALLOC_CONF"):
            env.pop(k, None)
        cls.proc = subprocess.run([os.path.join(SRC, "scripts", "gpu-e2e.sh"), BUILD, cls.out, "torch", "cupy", "bench"],
                                 capture_output=True, text=True, env=env, timeout=900)

    def load(self, name):
        with open(os.path.join(self.out, name)) as f:
            return json.load(f)

    def test_exit_and_files(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr[-4000:])
        files = sorted(os.listdir(self.out))
        self.assertLessEqual(len(files), 8, files)
        for name in ("e2e-torch.json", "e2e-torch.md", "e2e-cupy.json", "e2e-cupy.md", "bench-pluggable.json",
                     "logs.tar.gz"):
            self.assertIn(name, files)
        self.assertTrue({"traces.tar.xz", "traces.tar.gz"} & set(files), files)
        self.assertNotIn("work", files)

    def test_torch_predictions_exact(self):
        summary = self.load("e2e-torch.json")
        lib = [r for r in summary["runs"] if r.get("mode") == "library"]
        self.assertEqual(sorted(r["policy"] for r in lib),
                         ["arena:arena_size=4GiB@sim", "bfc@sim", "rmm-pool:initial_pool_size=256MiB@sim",
                          "torch-caching@sim"])
        for r in lib:
            self.assertFalse(r["oom"], r)
            self.assertGreater(r["reserved_peak"], 0)
            self.assertEqual(r["predicted_reserved_peak"], r["reserved_peak"], r["policy"])
            self.assertEqual(r["predicted_requested_peak"], r["requested_peak"], r["policy"])
            self.assertEqual(r["prediction_error_pct"], 0.0)
            self.assertEqual(r["timed"]["steps"], 20)
            self.assertEqual(len(r["sweep"]["times_ms"]), 24)
        native = {r["conf"] or "default": r for r in summary["runs"] if r.get("mode") == "native"}
        self.assertEqual(sorted(native), ["default", "expandable_segments:True"])
        (c,) = summary["native_vs_library"]
        self.assertEqual((c["native"], c["policy"]), ("default", "torch-caching@sim"))
        self.assertIsNotNone(c["step_time_overhead_pct"])

    def test_oom_probes(self):
        probes = {p["mode"]: p for p in self.load("e2e-torch.json")["oom_probes"]}
        self.assertEqual(sorted(probes), ["native", "null"])
        self.assertEqual(probes["native"]["outcome"], "raised")
        self.assertTrue(probes["native"]["is_torch_oom"])
        self.assertEqual(probes["null"]["outcome"], "raised")  # the stand-in fails on the NULL it was given
        self.assertIn("NULL", probes["null"]["message"])
        self.assertEqual(probes["null"]["cuda_after"], "ok")

    def test_cupy(self):
        summary = self.load("e2e-cupy.json")
        runs = {r.get("policy") or "native": r for r in summary["runs"]}
        self.assertEqual(sorted(runs), ["buddy:pool_size=8GiB@sim", "cupy@sim", "native"])
        for policy in ("cupy@sim", "buddy:pool_size=8GiB@sim"):
            self.assertEqual(runs[policy]["prediction_error_pct"], 0.0, policy)
        # The pool's own requests, recorded by the memory hook, replay under the cupy emulation.
        self.assertGreater(runs["native"]["predicted_reserved_peak"], 0)
        (c,) = summary["native_vs_library"]
        self.assertEqual((c["native"], c["policy"]), ("pool", "cupy@sim"))

    def test_bench(self):
        b = self.load("bench-pluggable.json")
        self.assertEqual([t["threads"] for t in b["threads"]], [1, 2, 4, 8, 16])
        self.assertFalse(b["failed"])
        self.assertGreater(b["direct_ns"], 0)
        self.assertGreater(b["library_ns"], 0)
        for t in b["threads"]:
            self.assertGreater(t["pairs_per_s"], 0)
            self.assertGreaterEqual(t["p99_ns"], t["p50_ns"])

    def test_markdown(self):
        with open(os.path.join(self.out, "e2e-torch.md")) as f:
            md = f.read()
        self.assertIn("| bfc@sim | no |", md)
        self.assertIn("+0.00%", md)
        self.assertIn("CUDA runtime libraries mapped in a library run", md)


if __name__ == "__main__":
    unittest.main()
