#!/usr/bin/env python3
"""test_check_layers.py - tools/check_layers.py finds each kind of include
that reaches up (planted in a small tree), passes a clean one, and the
source tree itself is clean (the CI check that keeps the rooms apart)."""
import os
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(SRC, "tools", "check_layers.py")


def run(root):
    return subprocess.run([sys.executable, TOOL, root], capture_output=True, text=True, timeout=120)


def plant(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


CLEAN = {
    "common/cmb_x.h": "int x;\n",
    "allocators/a.c": '#include "../common/cmb_x.h"\n#include <stdio.h>\n',
    "harness/h.h": '#include "../allocators/a.h"\n',
    "allocators/a.h": "",
    "scenarios/s.c": '#include "scenario.h"\n#include "../allocators/a.h"\n',
    "scenarios/scenario.h": "",
    "pluggable/p.c": '#include "../allocators/a.h"\n',
    "pluggable/CMakeLists.txt": "add_library(p ${CMAKE_SOURCE_DIR}/allocators/a.c)\n",
}


class Planted(unittest.TestCase):
    def test_clean_tree_passes(self):
        with tempfile.TemporaryDirectory() as root:
            plant(root, CLEAN)
            p = run(root)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_each_violation_is_named(self):
        bad = dict(CLEAN)
        bad.update({
            "common/up.c": '#include "../allocators/a.h"\n',
            "allocators/b.c": '#include "../harness/h.h"\n',
            "scenarios/t.c": '#include "../harness/h.h"\n',
            "pluggable/q.c": '#include "../harness/h.h"\n',
            "pluggable/CMakeLists.txt": "add_library(p ${CMAKE_SOURCE_DIR}/harness/h.c)\n",
            "harness/h.c": "",
            "real/r.c": '#include "../scenarios/scenario.h"\n',
        })
        with tempfile.TemporaryDirectory() as root:
            plant(root, bad)
            p = run(root)
            self.assertEqual(p.returncode, 1)
            for where in ("common/up.c", "allocators/b.c", "scenarios/t.c", "pluggable/q.c",
                          "pluggable/CMakeLists.txt", "real/r.c"):
                self.assertIn(where, p.stdout)
            self.assertEqual(len(p.stdout.strip().splitlines()), 6, p.stdout)

    def test_not_a_tree(self):
        with tempfile.TemporaryDirectory() as root:
            self.assertEqual(run(root).returncode, 2)


class SourceTree(unittest.TestCase):
    def test_the_tree_reaches_only_down(self):
        p = run(SRC)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
