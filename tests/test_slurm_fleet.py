#!/usr/bin/env python3
"""test_slurm_fleet.py - the fleet section of the report (plots/cmb_report/
fleet.py, report.py --fleet) and ci/examples/slurm-merge.sh, over synthetic
run directories and job directories: nodes, GPUs and drivers side by side,
mixed drivers and CUDA versions flagged (and nothing flagged where the runs
agree), missing runs named with the command that continues them, bad input
refused with exit 2 and nothing written. No Slurm needed (tests/test_slurm.sh
runs the real thing)."""
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("CMB_SRC") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "plots"))
from cmb_report import fleet  # noqa: E402
from cmb_report.results import load_runs  # noqa: E402

PYTHON = os.environ.get("CMB_PYTHON", "/usr/bin/python3")
HEADER = ["run_id", "gpu", "mode", "case", "scenario", "allocator", "upstream", "params", "repetition", "status",
          "metric", "value", "error"]
H100 = {"gpu_name": "NVIDIA H100 80GB HBM3", "driver_version": "580.159.04", "cuda_runtime": "13.0",
        "cuda_driver_api": "13.0", "cuda_toolkit_built_with": "13.0", "cumembench_revision": "913262bf963f",
        "mode": "gpu", "preset": "quick", "seed": "42"}


def has_matplotlib():
    return subprocess.run([PYTHON, "-c", "import matplotlib, markdown"], capture_output=True).returncode == 0


def make_run(path, host, device, cases=("a", "b"), torn=False, options=("--preset", "quick"), **context):
    """A run directory as cumembench writes one: results.csv (churn under
    each allocator in `cases`, two repetitions), results.json, run.args."""
    os.makedirs(path, exist_ok=True)
    ctx = dict(H100, host_name=host, gpu_device=str(device), gpu_uuid=f"GPU-{host}-{device}")
    ctx.update(context)
    run_id = os.path.basename(path)
    with open(os.path.join(path, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        for i, alloc in enumerate(cases):
            for rep in (0, 1):
                for metric, value in (("time_s", 0.01 * (i + 1 + rep)), ("peak_reserved_bytes", 2 ** 21 * (i + 2)),
                                      ("peak_requested_bytes", 2 ** 21)):
                    w.writerow([run_id, ctx["gpu_name"], ctx["mode"], f"churn/{alloc}/n:10", "churn", alloc, "cuda",
                                "n=10", rep, "ok", metric, value, ""])
    if torn:
        with open(os.path.join(path, "results.csv"), "a") as f:
            f.write(f"{run_id},x,gpu,churn/torn/n:10,churn,tor")
    with open(os.path.join(path, "results.json"), "w") as f:
        json.dump({"context": ctx, "benchmarks": []}, f)
    with open(os.path.join(path, "run.args"), "w") as f:
        f.write("cumembench-run-args 1\ncwd /x\n")
        for a in ("--mode", ctx["mode"], "--device", str(device), "--out", path, "--quiet") + tuple(options):
            f.write(f"arg {a}\n")
    return path


def make_job(root, layout):
    """A job directory of slurm-suite.sbatch: layout = {node: [status per GPU]}
    with status '0', '1' (a whole run), 'interrupted' (a partial run, no
    .status), another number or '' (a partial run with that .status),
    'not-started' (nothing), or None for a node whose step never started."""
    os.makedirs(os.path.join(root, "runs"))
    with open(os.path.join(root, "args"), "w") as f:
        f.write("--mode\ngpu\n--preset\nquick\n")
    with open(os.path.join(root, "nodes"), "w") as f:
        f.write("".join(n + "\n" for n in layout))
    with open(os.path.join(root, "sbatch-options"), "w") as f:
        f.write("--partition=gpu\n--gpus-per-node=2\n")
    rows = []
    for node, statuses in layout.items():
        if statuses is None:
            rows.append(["-", node, "-", "not-started", "-"])
            continue
        with open(os.path.join(root, "runs", node + ".gpus"), "w") as f:
            f.write(f"{len(statuses)}\n")
        for i, st in enumerate(statuses):
            run = os.path.join(root, "runs", f"{node}-gpu{i}")
            if st in ("0", "1"):
                make_run(run, node, i)
                with open(run + ".status", "w") as f:
                    f.write(st + "\n")
            elif st in ("interrupted", "") or st.isdigit():
                make_run(run, node, i, cases=("a",), torn=True)
                if st != "interrupted":  # killed, bad options, or a status file left empty
                    with open(run + ".status", "w") as f:
                        f.write(st + "\n")
            rows.append(["nvidia-h100" if st in ("0", "1") else "-", node, str(i), st, run])
    with open(os.path.join(root, "index.tsv"), "w") as f:
        f.write("slug\tnode\tgpu\tstatus\tdir\n" + "".join("\t".join(r) + "\n" for r in rows))
    return root


class Tmp(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cmb-fleet-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_dir(self, name, host, device, **kw):
        return make_run(os.path.join(self.tmp, name), host, device, **kw)


class Mixed(Tmp):
    def test_mixed_drivers_and_cuda_flagged_with_their_runs(self):
        runs = load_runs([self.run_dir("a", "n1", 0), self.run_dir("b", "n1", 1),
                          self.run_dir("c", "n2", 0, driver_version="575.57.08", cuda_runtime="12.9")])
        found = {what: groups for what, _, groups in fleet.mixed(runs)}
        self.assertEqual(set(found), {"drivers", "CUDA runtimes"})
        labels = [r.label for r in runs]
        self.assertEqual(found["drivers"], {"580.159.04": labels[:2], "575.57.08": labels[2:]})
        self.assertEqual(found["CUDA runtimes"], {"13.0": labels[:2], "12.9": labels[2:]})
        html = fleet.section(runs)
        self.assertIn("Mixed drivers: <b>580.159.04</b> on", html)
        self.assertIn("Mixed CUDA runtimes: <b>13.0</b> on", html)
        self.assertIn("not the GPU", html)
        self.assertNotIn("agree on", html)
        # the differing cells are marked in the table
        self.assertEqual(html.count("<td class='l worse'>575.57.08</td>"), 1)
        self.assertTrue(fleet.wanted(runs, None))

    def test_agreeing_runs_flag_nothing(self):
        runs = load_runs([self.run_dir("a", "n1", 0), self.run_dir("b", "n2", 0)])
        self.assertEqual(fleet.mixed(runs), [])
        html = fleet.section(runs)
        self.assertNotIn("Mixed", html)
        self.assertIn("agree on their drivers (580.159.04)", html)
        self.assertNotIn("worse", html)
        for node in ("n1", "n2"):
            self.assertIn(f"<td class='l'>{node}</td>", html)
        self.assertTrue(fleet.wanted(runs, None), "two hosts: the section is wanted")
        one_host = load_runs([self.run_dir("c", "n3", 0), self.run_dir("d", "n3", 1)])
        self.assertFalse(fleet.wanted(one_host, None), "one host, nothing mixed: no section")

    def test_options_device_and_out_do_not_count(self):
        runs = load_runs([self.run_dir("a", "n1", 0), self.run_dir("b", "n1", 1)])
        self.assertEqual(fleet.mixed(runs), [])
        other = load_runs([self.run_dir("c", "n1", 0), self.run_dir("d", "n1", 1, options=("--preset", "full"))])
        found = {what: groups for what, _, groups in fleet.mixed(other)}
        self.assertEqual(list(found), ["options"])
        self.assertEqual(sorted(found["options"]), ["--mode gpu --preset full", "--mode gpu --preset quick"])

    def test_one_gpu_in_two_runs(self):
        runs = load_runs([self.run_dir("a", "n1", 0), self.run_dir("b", "n1", 0)])
        found = fleet.mixed(runs)
        self.assertEqual([w for w, _, _ in found], ["runs on one GPU"])
        self.assertIn("GPU-n1-0", found[0][1])


class Job(Tmp):
    def test_missing_runs_named_with_the_command(self):
        job = make_job(os.path.join(self.tmp, "42"), {"n1": ["0", "1"], "n2": ["interrupted", "not-started"],
                                                      "n3": None})
        slots = fleet.read_index(job)
        self.assertEqual([s.name for s in slots if not s.finished], ["n2-gpu0", "n2-gpu1", "n3"])
        self.assertEqual(fleet.finished_cases(os.path.join(job, "runs", "n2-gpu0")), 1, "the torn line is no case")
        runs = load_runs([s.path for s in slots if s.finished])
        html = fleet.section(runs, job)
        self.assertIn("3 of 5 runs missing", html)
        self.assertIn("<b>n2-gpu0</b>: interrupted: it began and never ended (1 cases finished)", html)
        self.assertIn("<b>n2-gpu1</b>: never started", html)
        self.assertIn("<b>n3</b>: never started", html)
        cmd = f"CMB_RESUME={job} sbatch --nodes=2 --nodelist=n2,n3 --partition=gpu --gpus-per-node=2 {fleet.SBATCH}"
        self.assertEqual(fleet.resume_command(job, ["n2", "n3"]), cmd)
        self.assertIn(cmd, html)
        # one row per slot: node, GPU index, status
        for cells in ("<td class='l'>n2</td><td>0</td><td class='l'><b>n2-gpu0</b></td>"
                      "<td class='l missing'>interrupted</td>",
                      "<td class='l'>n3</td><td>-</td><td class='l'><b>n3</b></td><td class='l missing'>never started",
                      "<td class='l'>n1</td><td>1</td>"):
            self.assertIn(cells, html)

    def test_all_finished(self):
        job = make_job(os.path.join(self.tmp, "7"), {"n1": ["0", "0"], "n2": ["0", "0"]})
        runs = load_runs([s.path for s in fleet.read_index(job)])
        html = fleet.section(runs, job)
        self.assertIn("Every run of the job ended: 4 runs on 2 node(s) (n1, n2)", html)
        self.assertIn("NVIDIA H100 80GB HBM3 on 2 node(s) (n1, n2)", html)
        self.assertNotIn("missing", html)

    def test_bad_index(self):
        with self.assertRaisesRegex(fleet.FleetError, "no index.tsv"):
            fleet.read_index(self.tmp)
        with open(os.path.join(self.tmp, "index.tsv"), "w") as f:
            f.write("slug\thost\n")
        with self.assertRaisesRegex(fleet.FleetError, "expected the header"):
            fleet.read_index(self.tmp)

    def test_insert_before_contents(self):
        page = "<body><h1>x</h1><table></table>\n<nav>toc</nav>rest</body>"
        self.assertEqual(fleet.insert(page, "<h2>F</h2>"), "<body><h1>x</h1><table></table>\n<h2>F</h2><nav>toc</nav>"
                                                            "rest</body>")


@unittest.skipUnless(has_matplotlib(), f"{PYTHON} has no matplotlib and markdown (python3-matplotlib)")
class Report(Tmp):
    def report(self, *args):
        return subprocess.run([PYTHON, os.path.join(SRC, "plots", "report.py"), "-q", "--no-gnuplot", "--no-findings",
                               *args], capture_output=True, text=True)

    def test_fleet_section_opens_the_report(self):
        job = make_job(os.path.join(self.tmp, "9"), {"n1": ["0"], "n2": ["interrupted"]})
        out = os.path.join(self.tmp, "r.html")
        p = self.report("--fleet", job, "-o", out, os.path.join(job, "runs", "n1-gpu0"))
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            page = f.read()
        self.assertLess(page.index("<h2 id='fleet'>"), page.index("<nav>"))
        self.assertIn("1 of 2 runs missing", page)

    def test_mixed_drivers_in_make_report(self):
        a = self.run_dir("a", "vm", 0)
        b = self.run_dir("b", "vm", 1, driver_version="575.57.08")
        out = os.path.join(self.tmp, "r.html")
        p = self.report("-o", out, a, b)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            page = f.read()
        self.assertIn("Mixed drivers", page)
        self.assertIn("Across GPUs: side by side", page)

    def test_bad_fleet_writes_nothing(self):
        a = self.run_dir("a", "vm", 0)
        out = os.path.join(self.tmp, "new", "r.html")
        p = self.report("--fleet", self.tmp, "-o", out, a)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertIn("no index.tsv", p.stderr)
        self.assertFalse(os.path.exists(os.path.dirname(out)))


class Merge(Tmp):
    MERGE = os.path.join(SRC, "ci", "examples", "slurm-merge.sh")

    def merge(self, job, **env):
        e = dict(os.environ, PYTHON=PYTHON, CMB_REPORT_ARGS="--no-gnuplot --no-findings", **env)
        return subprocess.run([self.MERGE, job], capture_output=True, text=True, env=e)

    def job(self, layout):
        job = make_job(os.path.join(self.tmp, "5"), layout)
        os.remove(os.path.join(job, "index.tsv"))  # the merge writes it
        return job

    def index(self, job):
        with open(os.path.join(job, "index.tsv")) as f:
            return [line.rstrip("\n").split("\t") for line in f][1:]

    def test_missing_runs_exit_1(self):
        job = self.job({"n1": ["0", "1"], "n2": ["interrupted", "not-started"], "n3": None})
        p = self.merge(job)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual([r[1:4] for r in self.index(job)],
                         [["n1", "0", "0"], ["n1", "1", "1"], ["n2", "0", "interrupted"],
                          ["n2", "1", "not-started"], ["n3", "-", "not-started"]])
        self.assertIn("3 run(s) missing: n2-gpu0 (interrupted: it began and never ended); n2-gpu1 (never started); "
                      "n3 (its step never started)", p.stderr)
        # the command the report gives, word for word
        self.assertIn(f"continue them on their nodes: {fleet.resume_command(job, ['n2', 'n3'])}\n", p.stderr)
        links = sorted(os.path.relpath(p, job) for p in glob.glob(os.path.join(job, "by-gpu", "*", "*")))
        self.assertEqual(len(links), 2, links)
        self.assertTrue(all(os.path.basename(p).startswith("n1-") for p in links))
        if has_matplotlib():
            with open(os.path.join(job, "report.html")) as f:
                self.assertIn("3 of 5 runs missing", f.read())

    def test_killed_by_a_signal_is_interrupted(self):
        job = self.job({"n1": ["0", "137"], "n2": ["2"], "n3": [""]})
        p = self.merge(job)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual([r[3] for r in self.index(job)], ["0", "interrupted", "2", "interrupted"])
        self.assertIn("3 run(s) missing: n1-gpu1 (interrupted: killed by signal 9); n2-gpu0 (exit status 2: ", p.stderr)
        self.assertIn("n3-gpu0 (interrupted: its status file holds '')", p.stderr)
        self.assertIn(f"{fleet.resume_command(job, ['n1', 'n2', 'n3'])}\n", p.stderr)

    def test_complete_exit_0(self):
        job = self.job({"n1": ["0"], "n2": ["0"]})
        p = self.merge(job)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([r[3] for r in self.index(job)], ["0", "0"])
        self.assertNotIn("missing", p.stderr)

    def test_not_a_job(self):
        p = self.merge(self.tmp)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not a job directory", p.stderr)
        self.assertEqual(os.listdir(self.tmp), [])


class Scripts(unittest.TestCase):
    SCRIPTS = [os.path.join(SRC, p) for p in ("ci/examples/slurm-suite.sbatch", "ci/examples/slurm-merge.sh",
                                              "tests/test_slurm.sh")]

    def test_syntax_and_mode(self):
        for s in self.SCRIPTS:
            p = subprocess.run(["bash", "-n", s], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(os.access(s, os.X_OK), s)

    def test_shellcheck(self):
        if not shutil.which("shellcheck"):
            self.skipTest("shellcheck is not installed")
        p = subprocess.run(["shellcheck", "-s", "bash", *self.SCRIPTS], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
