#!/usr/bin/env python3
"""test_real_cli.py - the real allocators from the command line, no GPU
(docs/real.md): --list says which were found; an unknown or malformed option
of a real allocator exits 2 before anything runs; a missing or unloadable
plug-in and sim mode skip the allocator's cases with a reason while the
other cases run; scripts/gpu-real-vs-emulated.sh runs through in sim mode;
scripts/real_vs_emulated.py computes its table from known numbers."""
import atexit
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("CMB_BIN", "build/cumembench")
SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TMP = os.environ.get("CMB_TEST_TMP")
if not TMP:  # run by hand: a directory of its own, removed at exit
    TMP = tempfile.mkdtemp(prefix="cmb-test-")
    atexit.register(shutil.rmtree, TMP, ignore_errors=True)
RMM_BUILT = os.environ.get("CMB_REAL_RMM_BUILT") == "ON"
REALS = ["torch-caching", "torch-expandable", "rmm-pool", "arena", "binning", "cuda-async-retain", "cupy"]
RMM = ["rmm-pool", "arena", "binning", "cuda-async-retain"]

sys.path.insert(0, os.path.join(SRC, "scripts"))
import real_vs_emulated  # noqa: E402


def run(args, env=None, binary=BIN):
    e = dict(os.environ)
    e.pop("CUMEMBENCH_REAL_DIR", None)
    e.update(env or {})
    return subprocess.run([binary] + args, capture_output=True, text=True, env=e, cwd=SRC, timeout=300)


def listing(p):
    """{real:NAME: 'found: ...' or 'NOT FOUND: ...'}"""
    out, name = {}, None
    for line in p.stdout.splitlines():
        s = line.strip()
        if line.startswith("  real:"):
            name = s.split()[0]
        elif name and (s.startswith("found:") or s.startswith("NOT FOUND:")):
            out[name] = s
    return out


def rows(run_dir):
    with open(os.path.join(run_dir, "results.csv"), newline="") as f:
        return list(csv.DictReader(f))


class Relocated:
    """The binary alone in a directory (with its libbenchmark), so the
    build's real/ is not beside it."""

    def __init__(self, name):
        self.dir = os.path.join(TMP, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        shutil.copy2(BIN, self.dir)
        lib = os.path.join(os.path.dirname(BIN), "lib")
        if os.path.isdir(lib):
            shutil.copytree(lib, os.path.join(self.dir, "lib"))
        self.bin = os.path.join(self.dir, os.path.basename(BIN))


class Listing(unittest.TestCase):
    def test_list_names_every_real_allocator_and_whether_found(self):
        p = run(["--list"])
        self.assertEqual(p.returncode, 0, p.stderr)
        found = listing(p)
        self.assertEqual(sorted(found), sorted("real:" + r for r in REALS))
        for r in RMM:
            self.assertEqual(found["real:" + r].startswith("found:"), RMM_BUILT, found["real:" + r])
        for name, line in found.items():
            if line.startswith("NOT FOUND"):
                self.assertIn("install", line, name)  # says what to install
        self.assertIn("Python call", p.stdout)  # real:cupy says what its time includes

    def test_relocated_binary_finds_nothing_then_the_given_dir(self):
        r = Relocated("relocated")
        found = listing(run(["--list"], binary=r.bin))
        self.assertTrue(all(v.startswith("NOT FOUND") and "not built" in v for v in found.values()), found)
        if RMM_BUILT:
            env = {"CUMEMBENCH_REAL_DIR": "/nonexistent:" + os.path.join(os.path.dirname(BIN), "real")}
            found = listing(run(["--list"], env=env, binary=r.bin))
            for x in RMM:
                self.assertTrue(found["real:" + x].startswith("found:"), found)

    def test_unloadable_plugin_says_why(self):
        r = Relocated("unloadable")
        bad = os.path.join(r.dir, "real")
        os.makedirs(bad)
        for lib in ("libcmb_real_rmm.so", "libcmb_real_torch.so", "libcmb_real_cupy.so"):
            with open(os.path.join(bad, lib), "w") as f:
                f.write("not a shared library\n")
        found = listing(run(["--list"], binary=r.bin))
        for name, line in found.items():
            self.assertIn("cannot load", line, name)
            self.assertIn("install", line, name)


class BadInput(unittest.TestCase):
    def refused(self, alloc, *words):
        out = os.path.join(TMP, "refused")
        shutil.rmtree(out, ignore_errors=True)
        p = run(["--mode", "sim", "--scenario", "fastpath", "--allocator", alloc, "--out", out])
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)  # one line
        for w in words:
            self.assertIn(w, p.stderr)
        self.assertFalse(os.path.exists(out), "nothing may be written before a refusal")

    def test_unknown_option(self):
        self.refused("cupy,real:rmm-pool:foo=1", "unknown option 'foo'", "initial_pool_size")

    def test_unknown_option_of_a_missing_library(self):
        self.refused("real:torch-caching:max_split=1", "unknown option 'max_split'", "max_split_size_mb")

    def test_malformed_value(self):
        self.refused("real:torch-caching:max_split_size_mb=banana", "max_split_size_mb=banana", "whole number")
        self.refused("real:cupy:limit=lots", "limit=lots", "size")

    def test_unknown_real_name(self):
        self.refused("real:tensorflow", "unknown allocator 'real:tensorflow'")

    def test_no_upstream(self):
        self.refused("real:rmm-pool@vmm", "no @upstream")


class Skips(unittest.TestCase):
    def test_sim_skips_real_allocators_and_runs_the_rest(self):
        out = os.path.join(TMP, "sim-skips")
        shutil.rmtree(out, ignore_errors=True)
        p = run(["--mode", "sim", "--scenario", "fastpath", "--param", "size=512B", "--repetitions", "1",
                 "--allocator", "cupy,real:cupy,real:rmm-pool,real:torch-caching:max_split_size_mb=256", "--out", out])
        self.assertEqual(p.returncode, 0, p.stderr)
        by_alloc = {}
        for row in rows(out):
            label = row["allocator"] + (":" + row["options"] if row.get("options") else "")
            by_alloc.setdefault(label, set()).add((row["status"], row["error"]))
        self.assertEqual({s for s, _ in by_alloc["cupy"]}, {"ok"})
        for alloc in ("real:cupy", "real:rmm-pool", "real:torch-caching:max_split_size_mb=256"):
            (status, reason), = by_alloc[alloc]
            self.assertEqual(status, "skipped", alloc)
            self.assertTrue(reason, alloc)
            self.assertIn("skipping allocator " + alloc + ":", p.stderr)  # on screen too
        (_, reason), = by_alloc["real:rmm-pool"]
        self.assertIn("needs a GPU" if RMM_BUILT else "librmm", reason)

    def test_missing_plugin_reason_comes_before_the_sim_one(self):
        # the skip is decided before any GPU is asked for: a relocated binary
        # in sim mode gives the plug-in reason, not the sim one
        r = Relocated("missing-gpu")
        out = os.path.join(TMP, "missing")
        shutil.rmtree(out, ignore_errors=True)
        p = run(["--mode", "sim", "--scenario", "fastpath", "--param", "size=512B", "--repetitions", "1",
                 "--allocator", "real:rmm-pool", "--out", out], binary=r.bin)
        self.assertEqual(p.returncode, 1, p.stderr)  # nothing ran: the reason on screen, exit 1
        self.assertIn("nothing ran", p.stderr)
        self.assertIn("pip install librmm-cu13", p.stderr)
        self.assertIn("libcmb_real_rmm.so not built", p.stderr)
        self.assertFalse(os.path.exists(out))  # a run that runs nothing writes no directory


class GpuScript(unittest.TestCase):
    def test_script_runs_in_sim_mode(self):
        out = os.path.join(TMP, "gpu-script")
        shutil.rmtree(out, ignore_errors=True)
        build = os.path.dirname(BIN)
        env = dict(os.environ, CMB_MODE="sim")
        p = subprocess.run([os.path.join(SRC, "scripts", "gpu-real-vs-emulated.sh"), build, out, "replay"],
                           capture_output=True, text=True, env=env, timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
        files = sorted(os.listdir(out))
        self.assertEqual(files, ["build.log", "list.txt", "real-vs-emulated.md", "replay.tar.gz", "run.log"])
        with open(os.path.join(out, "real-vs-emulated.md")) as f:
            md = f.read()
        for r in REALS:
            self.assertIn("### %s beside real:%s" % (r, r), md)
        self.assertIn("torch_transformer_sweep.trace", md)
        self.assertIn("torch_mlp_sweep_default.trace", md)
        bad = subprocess.run([os.path.join(SRC, "scripts", "gpu-real-vs-emulated.sh"), build, out, "everything"],
                             capture_output=True, text=True, env=env)
        self.assertEqual(bad.returncode, 2)


class Table(unittest.TestCase):
    def test_pairs_medians_differences_and_ratios(self):
        d = os.path.join(TMP, "table-fixture")
        os.makedirs(d, exist_ok=True)
        head = "run_id,gpu,mode,case,scenario,allocator,upstream,params,repetition,status,metric,value,error\n"
        lines = [head]

        def put(scenario, alloc, params, metric, values):
            for rep, v in enumerate(values):
                lines.append("gpu0,h100,gpu,c,%s,%s,none,%s,%d,ok,%s,%s,\n" % (scenario, alloc, params, rep, metric, v))

        put("fastpath", "rmm-pool", "size=512B", "time_s", [50e-9, 60e-9, 70e-9])          # median 60 ns
        put("fastpath", "real:rmm-pool", "size=512B", "time_s", [600e-9, 610e-9, 590e-9])  # median 600 ns
        put("fastpath", "rmm-pool", "size=512B", "peak_reserved_bytes", [1 << 30] * 3)
        put("fastpath", "real:rmm-pool", "size=512B", "peak_reserved_bytes", [1 << 31] * 3)
        put("churn", "rmm-pool", "n=10", "alloc_p50_ns", [40, 40, 40])
        put("churn", "rmm-pool", "n=10", "free_p50_ns", [10, 10, 10])
        put("churn", "real:rmm-pool", "n=10", "alloc_p50_ns", [300, 300, 300])
        put("churn", "real:rmm-pool", "n=10", "free_p50_ns", [200, 200, 200])
        put("churn", "rmm-pool", "n=10", "upstream_allocs", [3, 3, 3])
        put("churn", "real:rmm-pool", "n=10", "upstream_allocs", [4, 4, 4])
        lines.append("gpu0,h100,gpu,c,replay,real:cupy,none,trace=t,,skipped,,,\"plug-in x not built (looked): y\"\n")
        put("replay", "cupy", "trace=t", "alloc_p50_ns", [5])
        with open(os.path.join(d, "results.csv"), "w") as f:
            f.writelines(lines)
        md = real_vs_emulated.render(real_vs_emulated.read_runs([d]))
        rmm = md.split("### rmm-pool beside real:rmm-pool")[1].split("###")[0]
        fast = next(line for line in rmm.splitlines() if line.startswith("| fastpath"))
        cells = [c.strip() for c in fast.strip("|").split("|")]
        self.assertEqual(cells[1], "1,073,741,824 (1.00 GiB)")
        self.assertEqual(cells[2], "2,147,483,648 (2.00 GiB)")
        self.assertEqual(cells[3], "+50.0%")  # (real - emulation) / real
        self.assertEqual(cells[6:9], ["60 (50–70)", "600 (590–610)", "10.0x"])
        churn = next(line for line in rmm.splitlines() if line.startswith("| churn"))
        cells = [c.strip() for c in churn.strip("|").split("|")]
        self.assertEqual(cells[4:9], ["3", "4", "50 (50–50)", "500 (500–500)", "10.0x"])
        cupy = md.split("### cupy beside real:cupy")[1]
        self.assertIn("real: skipped: plug-in x not built", cupy)


if __name__ == "__main__":
    unittest.main(verbosity=2)
