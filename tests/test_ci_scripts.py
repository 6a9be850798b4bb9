#!/usr/bin/env python3
"""test_ci_scripts.py - the CI scripts and the user-facing CI examples
(ci/, ci/examples/, .ci/run) parse: bash -n on every shell script,
shellcheck where it is installed, and the GitHub workflows load as YAML
with the structure GitHub expects. They cannot run here (no GPU, no
GitHub, no Slurm); this keeps them from rotting."""
import glob
import os
import shutil
import subprocess
import unittest

SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = sorted(glob.glob(os.path.join(SRC, "ci", "*.sh")) + glob.glob(os.path.join(SRC, "ci", "examples", "*.sbatch"))
                 + [os.path.join(SRC, ".ci", "run")])
WORKFLOWS = sorted(glob.glob(os.path.join(SRC, "ci", "examples", "*.yml")))


class Scripts(unittest.TestCase):
    def test_bash_syntax(self):
        self.assertTrue(SCRIPTS)
        for script in SCRIPTS:
            p = subprocess.run(["bash", "-n", script], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, "%s: %s" % (script, p.stderr))

    def test_executable(self):
        for script in SCRIPTS + [os.path.join(SRC, "tools", "cumembench-compare")]:
            self.assertTrue(os.access(script, os.X_OK), script + " is not executable")

    def test_shellcheck(self):
        if not shutil.which("shellcheck"):
            self.skipTest("shellcheck is not installed")
        for script in SCRIPTS:
            if script.endswith("install-deps.sh"):
                continue  # not part of regression tracking
            p = subprocess.run(["shellcheck", "-s", "bash", script], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, "%s:\n%s" % (script, p.stdout))


def fake_build(tmp):
    """A build directory whose cumembench only notes that it ran: a script that
    refuses its settings must not get that far."""
    fake = os.path.join(tmp, "build")
    os.mkdir(fake)
    with open(os.path.join(fake, "cumembench"), "w") as f:
        f.write("#!/bin/sh\necho ran >>\"$(dirname \"$0\")/ran\"\n")
    os.chmod(os.path.join(fake, "cumembench"), 0o755)
    return fake


class GpuScripts(unittest.TestCase):
    """scripts/gpu-*.sh run on a GPU only, but they parse here, and their
    bad settings are refused before anything runs (exit 2, one line)."""

    def test_sh_syntax(self):
        scripts = sorted(glob.glob(os.path.join(SRC, "scripts", "gpu-*.sh")))
        self.assertTrue(scripts)
        for script in scripts:
            with open(script) as f:
                shell = "bash" if "bash" in f.readline() else "sh"  # each by the shell it names
            p = subprocess.run([shell, "-n", script], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, "%s: %s" % (script, p.stderr))

    def test_cmb_steady_refuses_bad_settings(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            fake = fake_build(tmp)
            for env, says in ((dict(CMB_STEADY_TRACES="no_such.trace"), "no traces/samples/no_such.trace"),
                              (dict(CMB_STEADY_REPS="0"), "CMB_STEADY_REPS must be at least 1"),
                              (dict(CMB_STEADY_REPS="x"), "must be numbers"),
                              (dict(CMB_STEADY_FIRST_RUN="-1"), "must be numbers"),
                              (dict(CMB_STEADY_PARTS="bogus"), "expected replay and/or e2e"),
                              (dict(CMB_STEADY_PROGRAMS="transformer,bogus"), "unknown program 'bogus'"),
                              (dict(CMB_STEADY_PROGRAMS=","), "CMB_STEADY_PROGRAMS names no program"),
                              (dict(CMB_STEADY_MODES="cmb,bogus"), "unknown mode bogus")):
                p = subprocess.run(["sh", os.path.join(SRC, "scripts", "gpu-cmb-steady.sh"), fake,
                                    os.path.join(tmp, "out"), "--sim"], capture_output=True, text=True,
                                   env=dict(os.environ, **env), timeout=60)
                self.assertEqual(p.returncode, 2, (env, p.stderr))
                self.assertIn(says, p.stderr, env)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertFalse(os.path.exists(os.path.join(fake, "ran")), "the binary ran on a bad setting")

    def test_time_model_refuses_bad_settings(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            fake = fake_build(tmp)
            for out, env, says in (("out", dict(CMB_TM_SETTINGS="native lib-bogus"), "unknown setting lib-bogus"),
                                   ("o:ut", dict(CMB_TM_SETTINGS="lib-torch-caching lib-cmb-layout"),
                                    "which end a layout path")):
                p = subprocess.run(["sh", os.path.join(SRC, "scripts", "gpu-time-model.sh"), fake,
                                    os.path.join(tmp, out), "/nonexistent/costs.json"], capture_output=True,
                                   text=True, env=dict(os.environ, **env), timeout=60)
                self.assertEqual(p.returncode, 2, (env, p.stderr))
                self.assertIn(says, p.stderr, env)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertFalse(os.path.exists(os.path.join(fake, "ran")), "the binary ran on a bad setting")

    def test_program_lists_name_e2e_steady_programs(self):
        # every program the scripts accept is one e2e-steady.py can run, with a step count
        import importlib.util
        import re
        spec = importlib.util.spec_from_file_location("e2e_steady", os.path.join(SRC, "scripts", "e2e-steady.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for name in ("gpu-cmb-steady.sh", "gpu-cmb-ab.sh"):
            text = open(os.path.join(SRC, "scripts", name)).read()
            allowed = re.search(r'cmb_programs \S+ "([^"]+)"', text).group(1).split()
            self.assertTrue(allowed, name)
            for prog in allowed:
                self.assertIn(prog, mod.PROGRAMS, name)
                if name == "gpu-cmb-steady.sh":  # steps by program there (gpu-cmb-ab.sh: one count)
                    self.assertRegex(text, r"[ (|] ?%s[ )|][^;]*steps=" % prog, (name, prog))

    def test_cmb_ab_refuses_bad_settings(self):
        import tempfile
        script = os.path.join(SRC, "scripts", "gpu-cmb-ab.sh")
        with tempfile.TemporaryDirectory() as tmp:
            lib = os.path.join(tmp, "libcmb_pluggable.so")
            open(lib, "w").close()
            out = os.path.join(tmp, "out")
            for args, env, says in (([out], {}, "usage:"),
                                    ([out, "old"], {}, "expected NAME=LIB"),
                                    ([out, "a b=" + lib], {}, "expected NAME=LIB"),
                                    ([out, "native-expandable=" + lib], {}, "expected NAME=LIB"),
                                    ([out, "old=/nonexistent.so"], {}, "no library at"),
                                    ([out, "old=" + lib, "old=" + lib], {}, "'old' named twice"),
                                    ([out, "old=" + lib], dict(CMB_AB_RUNS="0"), "at least 1"),
                                    ([out, "old=" + lib], dict(CMB_AB_STEPS="x"), "must be numbers"),
                                    ([out, "old=" + lib], dict(CMB_AB_PROFILE="2"), "expected 0 or 1"),
                                    ([out, "old=" + lib], dict(CMB_AB_PROGRAMS="transformer,bogus"),
                                     "unknown program 'bogus'")):
                p = subprocess.run(["sh", script] + args, capture_output=True, text=True,
                                   env=dict(os.environ, **env), timeout=60)
                self.assertEqual(p.returncode, 2, (args, env, p.stderr))
                self.assertIn(says, p.stderr, (args, env))
                self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
                self.assertFalse(os.path.exists(out), "OUT_DIR made on a bad setting")


class Workflows(unittest.TestCase):
    def test_github_workflows(self):
        try:
            import yaml
        except ImportError:
            self.skipTest("PyYAML is not installed (python3-yaml)")
        self.assertEqual(len(WORKFLOWS), 2)
        for path in WORKFLOWS:
            with open(path) as f:
                wf = yaml.safe_load(f)
            on = wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as true
            self.assertTrue(on, path)
            self.assertTrue(wf.get("jobs"), path)
            for name, job in wf["jobs"].items():
                self.assertIn("runs-on", job, "%s: job %s" % (path, name))
                self.assertTrue(job.get("steps"), "%s: job %s" % (path, name))
                for step in job["steps"]:
                    self.assertTrue(("run" in step) != ("uses" in step), "%s: %s" % (path, step))
                runs = " ".join(step.get("run", "") for step in job["steps"])
                self.assertIn("make regress", runs, path)


if __name__ == "__main__":
    unittest.main(verbosity=2)
