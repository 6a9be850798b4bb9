#!/usr/bin/env python3
"""test_gendocs.py - tools/gendocs.py, the docs' generated blocks: a stale
block fails --check naming its file, line and command; writing brings it
current; a failing command fails the run and leaves its block as it was;
broken markers are refused. Then the real thing: every generated block in
README.md and docs/ is what its command prints now (the CI check)."""
import os
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(SRC, "tools", "gendocs.py")


def gendocs(*args):
    return subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True, timeout=900)


class Planted(unittest.TestCase):
    def page(self, text):
        fd, path = tempfile.mkstemp(suffix=".md")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.addCleanup(os.remove, path)
        return path

    def test_stale_block_fails_then_write_fixes_it(self):
        path = self.page("intro\n<!-- BEGIN generated: printf 'a\\nb\\n' -->\nold\n<!-- END generated -->\nend\n")
        p = gendocs("--check", path)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(":2: stale block", p.stderr)
        self.assertIn("printf", p.stderr)
        with open(path) as f:
            self.assertIn("old\n", f.read())  # --check changes nothing
        self.assertEqual(gendocs(path).returncode, 0)
        with open(path) as f:
            self.assertEqual(f.read(), "intro\n<!-- BEGIN generated: printf 'a\\nb\\n' -->\na\nb\n"
                                       "<!-- END generated -->\nend\n")
        self.assertEqual(gendocs("--check", path).returncode, 0)

    def test_failing_command_keeps_the_block(self):
        path = self.page("<!-- BEGIN generated: echo half; exit 3 -->\nkept\n<!-- END generated -->\n")
        p = gendocs(path)
        self.assertEqual(p.returncode, 1)
        self.assertIn("exit 3", p.stderr)
        with open(path) as f:
            self.assertIn("kept\n", f.read())

    def test_broken_markers(self):
        for text in ("<!-- BEGIN generated: echo x -->\nno end\n",
                     "<!-- END generated -->\n",
                     "<!-- BEGIN generated: echo x -->\n<!-- BEGIN generated: echo y -->\n<!-- END generated -->\n"):
            p = gendocs("--check", self.page(text))
            self.assertEqual(p.returncode, 2, text)

    def test_build_dir_substitution(self):
        path = self.page("<!-- BEGIN generated: echo build/cumembench -->\n<!-- END generated -->\n")
        env = dict(os.environ, CMB_BUILD_DIR="/elsewhere")
        p = subprocess.run([sys.executable, TOOL, path], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(path) as f:
            self.assertIn("/elsewhere/cumembench\n", f.read())


class Committed(unittest.TestCase):
    def test_every_block_is_current(self):
        p = gendocs("--check")
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
