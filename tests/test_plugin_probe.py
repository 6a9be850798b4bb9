#!/usr/bin/env python3
"""test_plugin_probe.py - external plug-ins are loaded and checked in a
short-lived probe process, never in cumembench's parent
(docs/reliability.md, "Plug-ins").

Hostile plug-ins built by the test build (tests/plugins/hostile_loader.c):
a constructor that segfaults, one that calls _exit(0), one that blocks
forever, a table for another ABI version, a create() that segfaults. Each
must end the run with one clear line and exit 2 within the probe's timeout,
before any case runs, and never kill or hang the parent; SIGINT and SIGTERM
still end a parent waiting on a blocked probe. A good plug-in whose
constructor records the process that loaded it runs end to end, and the
parent's pid is never among those processes."""
import atexit
import os
import signal
import subprocess
import shutil
import sys
import tempfile
import time
import unittest

BIN = os.environ.get("CMB_BIN", "build/cumembench")
SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TMP = os.environ.get("CMB_TEST_TMP")
if not TMP:  # run by hand: a directory of its own, removed at exit
    TMP = tempfile.mkdtemp(prefix="cmb-test-")
    atexit.register(shutil.rmtree, TMP, ignore_errors=True)
SAMPLE = os.environ.get("CMB_SAMPLE_PLUGIN")
V1 = os.environ.get("CMB_ABI_V1_PLUGIN")
TIMEOUT = 2  # CMB_PLUGIN_PROBE_TIMEOUT for these tests (the default is 10 s)
SMALL = ["--mode", "sim", "--quiet", "--scenario", "churn", "--param", "n=300", "--param", "max_size=2MiB",
         "--param", "dist=uniform", "--param", "checkerboard=true", "--param", "fill=0.5", "--capacity", "1GiB",
         "--repetitions", "1"]


def loader(name):
    path = os.environ.get("CMB_LOADER_" + name.upper())
    if not path:
        raise unittest.SkipTest("CMB_LOADER_%s not set (run through ctest)" % name.upper())
    return path


def env(**extra):
    e = dict(os.environ)
    e["CMB_PLUGIN_PROBE_TIMEOUT"] = str(TIMEOUT)
    e.update(extra)
    return e


def out_dir(name):
    d = os.path.join(TMP, name)
    subprocess.run(["rm", "-rf", d], check=True)
    return d


def run(args, timeout=30, **extra):
    """(exit status, stderr, seconds, pid); a parent still running after
    `timeout` s is killed and fails the test."""
    t0 = time.monotonic()
    p = subprocess.Popen([BIN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env(**extra), cwd=SRC)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError("cumembench %s still running after %d s" % (" ".join(args), timeout))
    return p.returncode, err, time.monotonic() - t0, p.pid


def witnessed(name):
    """The file the witness constructor (tests/plugins/hostile_loader.c)
    appends its process id to, emptied."""
    path = os.path.join(TMP, name + ".pids")
    os.makedirs(TMP, exist_ok=True)
    open(path, "w").close()
    return path


def pids_in(path):
    with open(path) as f:
        return [int(x) for x in f.read().split()]


def probes_alive(path):
    """Processes whose command line names `path` (a probe left behind)."""
    alive = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if path in cmd and "--probe-plugin" in cmd:
            alive.append(int(pid))
    return alive


class HostilePlugins(unittest.TestCase):
    def refused(self, name, expect, extra_args=(), limit=None):
        path = loader(name)
        d = out_dir("hostile-" + name)
        w = witnessed(name)
        rc, err, secs, pid = run(SMALL + ["--allocator", "cuda,external:" + path] + list(extra_args) + ["--out", d],
                                 CMB_PLUGIN_WITNESS=w)
        self.assertEqual(rc, 2, err)
        lines = [l for l in err.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, "not one line: %r" % err)
        line = lines[0]
        self.assertTrue(line.startswith("cumembench: ") and path in line, line)
        for word in expect:
            self.assertIn(word, line)
        self.assertLess(secs, (limit or TIMEOUT) + 5, line)
        self.assertFalse(os.path.exists(os.path.join(d, "results.csv")), "a case ran: " + line)
        self.assertEqual(probes_alive(path), [], "a probe outlived the parent")
        self.assertNotIn(pid, pids_in(w), "the parent ran the plug-in's code")
        return line

    def test_constructor_segfault(self):
        self.refused("ctor_segv", ["killed by signal 11", "while loading it"])

    def test_constructor_exit(self):
        self.refused("ctor_exit", ["ended the probe", "exit status 0", "while loading it"])

    def test_constructor_blocks(self):
        line = self.refused("ctor_block", ["did not answer within %d s" % TIMEOUT, "while loading it", "killed"])
        self.assertIn("CMB_PLUGIN_PROBE_TIMEOUT", line)

    def test_wrong_abi(self):
        # loaded (its constructor ran) in the probe only, then refused
        line = self.refused("abi_future", ["does not support allocator ABI version"])
        self.assertEqual(len(pids_in(os.path.join(TMP, "abi_future.pids"))), 1, line)

    def test_create_segfault(self):
        self.refused("create_segv", ["killed by signal 11", "creating an instance over the sim upstream"])

    def test_missing_file(self):
        rc, err, _, _ = run(SMALL + ["--allocator", "external:/nonexistent/libnone.so", "--out", out_dir("none")])
        self.assertEqual(rc, 2, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("cannot load external allocator /nonexistent/libnone.so", err)


class Signals(unittest.TestCase):
    def interrupt(self, sig):
        path = loader("ctor_block")
        d = out_dir("signal-%d" % sig)
        p = subprocess.Popen([BIN] + SMALL + ["--allocator", "external:" + path, "--out", d], cwd=SRC,
                             env=env(CMB_PLUGIN_PROBE_TIMEOUT="60"), stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while not probes_alive(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(probes_alive(path), "no probe started")
        time.sleep(0.3)
        p.send_signal(sig)
        try:
            _, err = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise AssertionError("the parent ignored signal %d while the probe blocked" % sig)
        self.assertEqual(p.returncode, 130, err)
        self.assertIn("interrupted", err)
        time.sleep(0.2)
        self.assertEqual(probes_alive(path), [], "the probe outlived the interrupted parent")
        self.assertFalse(os.path.exists(os.path.join(d, "results.csv")))

    def test_sigint(self):
        self.interrupt(signal.SIGINT)

    def test_sigterm(self):
        self.interrupt(signal.SIGTERM)


class RealPlugins(unittest.TestCase):
    """A real: plug-in is probed the same way; one that crashes or holds no
    table is unavailable with that reason (its cases skipped, docs/real.md),
    and the parent lives on."""

    def fake_real_dir(self, name):
        d = os.path.join(TMP, "real-" + name)
        os.makedirs(d, exist_ok=True)
        target = os.path.join(d, "libcmb_real_rmm.so")
        if os.path.lexists(target):
            os.unlink(target)
        os.symlink(loader(name), target)
        return d

    def test_list_survives_a_crashing_plugin(self):
        d = self.fake_real_dir("ctor_segv")
        w = witnessed("real-list")
        p = subprocess.run([BIN, "--list"], capture_output=True, text=True, cwd=SRC, timeout=60,
                           env=env(CUMEMBENCH_REAL_DIR=d, CMB_PLUGIN_WITNESS=w))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("NOT FOUND: real:rmm-pool (plug-in %s/libcmb_real_rmm.so): the plug-in crashed its probe "
                      "process (killed by signal 11" % d, p.stdout)
        self.assertIn("\nallocators (", p.stdout)

    def test_a_plugin_without_the_table_is_skipped(self):
        d = self.fake_real_dir("witness")
        w = witnessed("real-run")
        loud = [a for a in SMALL if a != "--quiet"]
        rc, err, _, pid = run(loud + ["--allocator", "cuda,real:rmm-pool", "--out", out_dir("real-run")],
                              CUMEMBENCH_REAL_DIR=d, CMB_PLUGIN_WITNESS=w)
        self.assertEqual(rc, 0, err)
        self.assertIn("skipping allocator real:rmm-pool", err)
        self.assertIn("holds no table of real:rmm-pool", err)
        self.assertGreaterEqual(len(pids_in(w)), 1)
        self.assertNotIn(pid, pids_in(w))


class GoodPlugins(unittest.TestCase):
    def test_runs_end_to_end_outside_the_parent(self):
        path = loader("witness")
        w = witnessed("witness")
        d = out_dir("witness")
        rc, err, _, pid = run(SMALL + ["--allocator", "cuda,external:" + path, "--out", d], timeout=120,
                              CMB_PLUGIN_WITNESS=w)
        self.assertEqual(rc, 0, err)
        with open(os.path.join(d, "results.csv")) as f:
            csv = f.read()
        self.assertIn("external:" + os.path.basename(path), csv)
        pids = pids_in(w)
        # the probe and the case's child loaded it; the parent never did
        self.assertGreaterEqual(len(pids), 2, pids)
        self.assertNotIn(pid, pids)

    def test_options_come_from_the_probe(self):
        # the plug-in's declared options (one with a tab and a newline in its
        # help) reach the parent through the probe's report
        path = loader("witness")
        rc, err, _, _ = run(SMALL + ["--allocator", "external:%s:colour=red" % path, "--out", out_dir("opt")])
        self.assertEqual(rc, 2, err)
        self.assertIn("colour", err)
        self.assertIn("tag", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_older_abi_and_sample(self):
        for path in (V1, SAMPLE):
            if not path:
                continue
            d = out_dir("good-" + os.path.basename(path))
            rc, err, _, _ = run(SMALL + ["--allocator", "external:" + path, "--out", d], timeout=120)
            self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
