#!/usr/bin/env python3
"""gpu_multi_summary.py - the Markdown summary of scripts/gpu-multi.sh.

    gpu_multi_summary.py RUNS_DIR MODE

RUNS_DIR holds multi-gpu-none/ and multi-gpu-mistakes/ (cumembench runs of
the multi-gpu scenario), bench/gpu<N>/ (the GPUS=all runs) and notes.txt.
Medians over repetitions; standard library only (the GPU host may have no
matplotlib). docs/scenarios.md says what every counter means.
"""
import csv
import json
import os
import statistics
import sys
from collections import defaultdict

MiB = float(1 << 20)
VERDICT = {0: "works", 1: "refused", 2: "corrupts"}


class Run:
    """One cumembench output directory: medians per case, labels, failures."""

    def __init__(self, path):
        self.path = path
        self.cells = defaultdict(lambda: defaultdict(list))
        self.info = {}  # case -> (allocator label, params dict)
        self.failed, self.skipped, self.labels, self.context = [], [], {}, {}
        csv_path = os.path.join(path, "results.csv")
        if not os.path.exists(csv_path):
            return
        with open(csv_path, newline="") as f:
            for r in csv.DictReader(f):
                self.row(r)
        try:
            with open(os.path.join(path, "results.json")) as f:
                data = json.load(f)
            self.context = data.get("context", {})
            for b in data.get("benchmarks", []):
                self.labels.setdefault(b.get("run_name", b.get("name")), b.get("label", ""))
        except (OSError, ValueError):
            pass

    def row(self, r):
        label = r["allocator"]
        if r.get("options") and r["options"] not in label:
            label += ":" + r["options"]
        if r.get("upstream") == "vmm" and "@" not in label:
            label += "@vmm"
        params = dict(kv.split("=", 1) for kv in r["params"].split(";") if "=" in kv)
        self.info.setdefault(r["case"], (label, params))
        if r["status"] == "failed":
            self.failed.append(f"{label} {r['params']}: {r['error']}")
        elif r["status"] == "skipped":
            self.skipped.append(f"{label}: {r['error']}")
        elif r["status"] in ("ok", "oom") and r["metric"]:
            try:
                self.cells[r["case"]][r["metric"]].append(float(r["value"]))
            except ValueError:
                pass

    def cases(self):
        """(case, label, params, medians) in the run's order."""
        for case, (label, params) in self.info.items():
            if case in self.cells:
                yield case, label, params, {k: statistics.median(v) for k, v in self.cells[case].items()}

    def note(self, case, prefix):
        """The part of a case's note that starts with prefix ('' when none)."""
        text = self.labels.get(case, "").partition(" note: ")[2]
        for part in text.split("; "):
            if part.startswith(prefix):
                return part
        return ""


def fmt(x, spec=".0f", scale=1.0):
    return "—" if x is None else format(x * scale, spec)


def mib(m, key):
    return fmt(m.get(key), ".0f", 1 / MiB)


def dedupe(items):
    return list(dict.fromkeys(items))


def holdings(runs):
    cases = [(run, c) for run in runs for c in run.cases()]
    if not cases:
        print("No multi-gpu case finished.\n")
        return
    n = int(max(m.get("ranks", 1) for _, (_, _, _, m) in cases))
    cols = [(r, d) for r in range(n) for d in range(n)]
    print("#### What each rank holds on each device, MiB (after its traffic was freed)\n")
    print("| allocator | mistake | " + " | ".join(f"rank {r} on device {d}" for r, d in cols) + " | "
          + " | ".join(f"device {d} in all" for d in range(n)) + " | others on device 0 |")
    print("|---|---|" + "---:|" * (len(cols) + n + 1))
    for run, (case, label, params, m) in cases:
        cells = [mib(m, f"r{r}_d{d}_bytes") for r, d in cols] + [mib(m, f"d{d}_bytes") for d in range(n)]
        print(f"| {label} | {params.get('mistake', '')} | " + " | ".join(cells) + f" | {mib(m, 'foreign_d0_bytes')} |")
    print("\nA rank's numbers add up the differences of every device's used memory across its own steps "
          "(the ranks step in turn); `device D in all` is measured directly. Largest gap between the two: "
          f"{fmt(max(m.get('sum_disagree_bytes', 0) for _, (_, _, _, m) in cases), '.1f', 1 / MiB)} MiB. "
          "Memory still used after every rank exited: "
          f"{fmt(max(m.get('unreturned_bytes', 0) for _, (_, _, _, m) in cases), '.1f', 1 / MiB)} MiB.\n")


def contexts(none, mistakes):
    print("#### Contexts and pools\n")
    print("| allocator | context MiB | context ms | slowest rank's init ms (ctx0 / pool0) | pool reserved MiB, "
          "traffic live | pool used MiB | pool kept after the frees MiB | device-0 pool after pool0, MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    by_mistake = defaultdict(dict)
    for _, label, params, m in mistakes.cases():
        by_mistake[label][params.get("mistake")] = m
    for _, label, _, m in none.cases():
        mm = by_mistake.get(label, {})
        init = " / ".join(fmt(mm.get(k, {}).get("init_ms_max"), ".0f") for k in ("ctx0", "pool0"))
        print(f"| {label} | {mib(m, 'context_bytes')} | {fmt(m.get('context_ms'), '.0f')} | {init} "
              f"| {mib(m, 'r0_pool_reserved_bytes')} | {mib(m, 'r0_pool_used_bytes')} "
              f"| {mib(m, 'r0_pool_cached_bytes')} | {mib(mm.get('pool0', {}), 'r1_stray_pool_reserved_bytes')} |")
    print("\nPool columns only where the allocator's blocks come from a cudaMemPool "
          "(cuPointerGetAttribute); `—` elsewhere.\n")


def cross_free(none):
    print("#### A block freed from another device's stream (rank 0: allocated on device 0, freed on a stream "
          "of device 1 while device 1 is current)\n")
    print("| allocator | verdict | refused | came back on device 0's stream | upstream misuse | words changed "
          "(check kernels) | what happened |")
    print("|---|---|---:|---:|---:|---:|---|")
    for case, label, _, m in none.cases():
        v = m.get("xfree_verdict")
        if v is None:
            continue
        print(f"| {label} | {VERDICT.get(int(v), v)} | {fmt(m.get('xfree_refused'))} | {fmt(m.get('xfree_reused'))} "
              f"| {fmt(m.get('xfree_misuse'))} | {fmt(m.get('xfree_changed_words'))} "
              f"| {none.note(case, 'cross-device free').replace('|', '/')} |")
    print()


def peer(none):
    print("#### Peer access to rank 0's pool (cudaMemPoolSetAccess for device 1)\n")
    print("| allocator | pool reserved when mapped MiB | first call µs | second call µs | added on device 0 MiB "
          "| added on device 1 MiB | device 1 read it back |")
    print("|---|---:|---:|---:|---:|---:|---|")
    skipped = []
    for case, label, _, m in none.cases():
        if m.get("peer_map_first_us") is None:
            why = none.note(case, "peer skipped") or none.note(case, "map skipped")
            skipped.append(f"{label} ({why.partition(': ')[2] or 'not run'})")
            continue
        ok = m.get("peer_read_ok")
        print(f"| {label} | {mib(m, 'peer_pool_reserved_bytes')} | {fmt(m.get('peer_map_first_us'), '.1f')} "
              f"| {fmt(m.get('peer_map_again_us'), '.1f')} | {mib(m, 'peer_added_d0_bytes')} "
              f"| {mib(m, 'peer_added_d1_bytes')} | {'yes' if ok == 1 else 'no' if ok == 0 else '—'} |")
    if skipped:
        print("\nNot mapped: " + "; ".join(dedupe(skipped)) + ".")
    print()


def cards(bench_dir):
    runs = sorted(d for d in os.listdir(bench_dir) if d.startswith("gpu")) if os.path.isdir(bench_dir) else []
    runs = [Run(os.path.join(bench_dir, d)) for d in runs]
    runs = [r for r in runs if r.info]
    print("#### GPUS=all: the same quick cases on every card\n")
    if not runs:
        print("No GPUS=all run finished.\n")
        return runs
    for r in runs:
        c = r.context
        print(f"- `{os.path.basename(r.path)}`: {c.get('gpu_name', c.get('mode', '?'))}, PCI {c.get('gpu_pci_bus', '—')}, "
              f"driver {c.get('driver_version', '—')}, CUDA runtime {c.get('cuda_runtime', '—')}")
    names = [os.path.basename(r.path) for r in runs]
    print("\n| scenario | allocator | params | " + " | ".join(f"time ms {n}" for n in names)
          + " | " + " | ".join(f"alloc p50 ns {n}" for n in names) + " | time ratio to the first |")
    print("|---|---|---|" + "---:|" * (2 * len(runs) + 1))
    for case, (label, params) in runs[0].info.items():
        ms = [{k: statistics.median(v) for k, v in r.cells.get(case, {}).items()} for r in runs]
        if not ms[0]:
            continue
        t = [m.get("time_s") for m in ms]
        ratio = t[-1] / t[0] if len(t) > 1 and t[0] and t[-1] else None
        short = ";".join(f"{k}={v}" for k, v in params.items() if k in ("n", "max_size", "dist", "streams"))
        print(f"| {case.split('/')[0]} | {label} | {short} | " + " | ".join(fmt(x, ".2f", 1e3) for x in t) + " | "
              + " | ".join(fmt(m.get("alloc_p50_ns"), ".0f") for m in ms) + f" | {fmt(ratio, '.3f')} |")
    print()
    return runs


def main():
    runs_dir, mode = sys.argv[1], sys.argv[2]
    none = Run(os.path.join(runs_dir, "multi-gpu-none"))
    mistakes = Run(os.path.join(runs_dir, "multi-gpu-mistakes"))
    c = none.context or mistakes.context
    print(f"<!-- generated by scripts/gpu-multi.sh; medians over repetitions -->\n")
    print(f"mode: {mode}; GPUs visible: {c.get('gpu_count', '—')}; {c.get('gpu_name', 'no GPU name')}; driver "
          f"{c.get('driver_version', '—')}; CUDA runtime {c.get('cuda_runtime', '—')}; cumembench "
          f"{c.get('cumembench_revision', '—')}\n")
    notes_path = os.path.join(runs_dir, "notes.txt")
    notes = open(notes_path).read().split("\n") if os.path.exists(notes_path) else []
    for n in filter(None, notes):
        print(f"- {n}")
    print()
    holdings([none, mistakes])
    contexts(none, mistakes)
    cross_free(none)
    peer(none)
    bench = cards(os.path.join(runs_dir, "bench"))
    problems = none.failed + mistakes.failed + [f for r in bench for f in r.failed]
    skipped = dedupe(none.skipped + mistakes.skipped + [s for r in bench for s in r.skipped])
    if problems:
        print("#### Failed cases\n")
        for p in problems:
            print(f"- {p}")
        print()
    if skipped:
        print("#### Skipped\n")
        for s in skipped:
            print(f"- {s}")
        print()


if __name__ == "__main__":
    main()
