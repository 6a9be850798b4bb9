#!/usr/bin/env python3
"""test_contract_table.py - scripts/pluggable_contract_table.py renders a
scripts/gpu-pluggable-contract.sh summary (made up here: no GPU) into the
tables the results' README takes; and the GPU script refuses to run without
its build or a GPU, with one line."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("CMB_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TABLE = os.path.join(SRC, "scripts", "pluggable_contract_table.py")
SCRIPT = os.path.join(SRC, "scripts", "gpu-pluggable-contract.sh")

SUMMARY = {
    "gpu": "GPU X, 1.0, 1 MiB\ntorch 0.0",
    "checks": {
        "sidestream-bfc@cuda": {"check": "sidestream", "policy": "bfc@cuda", "hooks": True, "ok": True,
                                "reused_while_pending": False, "corrupted_elements": 0, "elements": 64},
        "sidestream-bfc@cuda-nohooks": {"check": "sidestream", "policy": "bfc@cuda", "hooks": False, "ok": False,
                                        "reused_while_pending": True, "corrupted_elements": 64, "elements": 64},
        "graph-cmb@vmm": {"check": "graph", "policy": "cmb@vmm", "ok": False, "error": "RuntimeError: a|b"},
    },
    "bench": {"library-sim": {"allocator": "torch-caching@sim", "direct_ns": 50.0, "library_ns": 70.0,
                              "threads": [{"threads": 1, "pairs_per_s": 4e6, "p50_ns": 80, "p99_ns": 120}]},
              "torch-native": {"allocator": "pytorch-native", "native_ns": 60.0,
                               "threads": [{"threads": 16, "pairs_per_s": 8e6, "p50_ns": 90, "p99_ns": 900}]}},
}


class Table(unittest.TestCase):
    def test_render(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(SUMMARY, f)
        try:
            r = subprocess.run([sys.executable, TABLE, f.name], capture_output=True, text=True, check=True)
        finally:
            os.remove(f.name)
        md = r.stdout
        self.assertIn("GPU: GPU X, 1.0, 1 MiB; torch 0.0", md)
        self.assertIn("| sidestream | `bfc@cuda` | yes | pass | record_stream delivered; block reused while B "
                      "pending: False; elements B read wrong: 0 of 64 |", md)
        self.assertIn("| sidestream (control) | `bfc@cuda` | no | failed without the hooks |", md)
        self.assertIn("error: RuntimeError: a/b", md)  # a '|' never breaks the table
        self.assertIn("| library-sim (torch-caching@sim) | 1 | 4,000,000 | 250.0 | 80 | 120 |", md)
        self.assertIn("| torch-native (pytorch-native) | 16 | 8,000,000 | 125.0 | 90 | 900 |", md)
        self.assertIn("overhead 20.0 ns", md)
        for line in md.splitlines():
            if line.startswith("| sidestream") or line.startswith("| graph"):
                self.assertEqual(line.count("|"), 6, line)

    def test_unreadable(self):
        r = subprocess.run([sys.executable, TABLE, "/nonexistent.json"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)

    def test_script_refuses(self):
        r = subprocess.run(["bash", SCRIPT], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage", r.stderr)
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, CMB_BUILD=os.path.join(d, "nothing"))
            r = subprocess.run(["bash", SCRIPT, os.path.join(d, "out")], capture_output=True, text=True, env=env)
            self.assertEqual(r.returncode, 2)
            self.assertIn("no build directory", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1)


if __name__ == "__main__":
    unittest.main()
