#!/usr/bin/env python3
"""pluggable_contract_table.py - the markdown tables of a
scripts/gpu-pluggable-contract.sh run, from its summary.json (for the results'
README under results/nvidia-<gpu>/pluggable-contract/).

    pluggable_contract_table.py SUMMARY.json [-o FILE]
"""
import argparse
import json
import sys

MiB = 1 << 20


def cell(text):
    """Text safe inside a markdown table cell."""
    return str(text).replace("|", "/").replace("\n", " ")


def mib(n):
    return f"{n / MiB:.1f} MiB" if isinstance(n, (int, float)) else "—"


def verdict(name, c):
    control = name.endswith("-nohooks")
    if c.get("error"):
        return f"{'failed without the hooks' if control else 'error'}: {c['error']}"
    if control:
        return "passed without the hooks" if c.get("ok") else "failed without the hooks"
    return "pass" if c.get("ok") else "FAIL"


def detail(name, c):
    kind = c.get("check", "")
    if kind == "sidestream":
        return (f"record_stream {'delivered' if c.get('hooks') else 'not delivered'}; block reused while B pending: "
                f"{c.get('reused_while_pending')}; elements B read wrong: {c.get('corrupted_elements', '—')}"
                f" of {c.get('elements', '—')}")
    if kind == "graph":
        return (f"largest difference graph vs eager {c.get('max_abs_diff', '—')} over {c.get('replays', '—')} replays; reserved "
                f"{mib(c.get('reserved_before'))} → {mib(c.get('reserved_captured'))} captured → "
                f"{mib(c.get('reserved_after_release'))} after the graph is deleted; allocated "
                f"{mib(c.get('allocated_before'))} → {mib(c.get('allocated_after_del'))} with cuBLAS's workspaces → "
                f"{mib(c.get('allocated_after'))} without")
    if kind == "stats":
        rows = c.get("rows", {})
        same = sum(1 for r in rows.values() if r["torch"] == r["library"])
        return (f"{same} of {len(rows)} torch.cuda answers equal the library's; requested "
                f"{mib(c.get('requested_current'))} ≥ live tensors {mib(c.get('live_tensor_bytes'))}; "
                f"empty_cache {mib(c.get('reserved_before_empty_cache'))} → {mib(c.get('reserved_after_empty_cache'))}")
    if kind == "oom":
        caught = c.get("oom_caught") or [{}]
        huge = c.get("request_16TiB", {})
        return (f"largest batch {c.get('largest_batch', '—')}; caught {caught[0].get('type', 'nothing')} "
                f"(\"{caught[0].get('message', '')[:80]}…\"); 16 TiB: {huge.get('caught')}")
    if kind == "fraction":
        return f"over the fraction: \"{(c.get('refused_over_fraction') or 'not refused')[:80]}…\""
    if kind == "mempool":
        return (f"policy served {c.get('library_allocs', '—')} segments, {mib(c.get('library_requested'))}; "
                f"PyTorch's allocated {mib(c.get('torch_allocated'))}")
    return ""


def bench_rows(benches):
    lines = ["| allocator | threads | pairs/s (aggregate) | ns per pair (aggregate) | p50 ns | p99 ns |",
             "|---|---|---|---|---|---|"]
    for name, b in sorted(benches.items()):
        for t in b.get("threads", []):
            lines.append(f"| {name} ({b.get('allocator', '')}) | {t['threads']} | {t['pairs_per_s']:,.0f} | "
                         f"{1e9 / t['pairs_per_s']:.1f} | {t['p50_ns']:.0f} | {t['p99_ns']:.0f} |")
    single = [f"- {name}: the policy directly {b['direct_ns']:.1f} ns per pair, through the library from one "
              f"thread {b['library_ns']:.1f} ns (overhead {b['library_ns'] - b['direct_ns']:.1f} ns)"
              for name, b in sorted(benches.items()) if "direct_ns" in b and "library_ns" in b]
    single += [f"- {name}: PyTorch's CUDACachingAllocator from one thread {b['native_ns']:.1f} ns per pair"
               for name, b in sorted(benches.items()) if "native_ns" in b]
    return lines + [""] + single


def render(summary):
    checks = summary.get("checks", {})
    gpu = "; ".join(str(summary.get("gpu", "?")).splitlines())
    lines = [f"GPU: {gpu}", "",
             "| check | policy | hooks | result | what was seen |", "|---|---|---|---|---|"]
    order = ("sidestream", "graph", "stats", "oom", "fraction", "mempool")
    rank = {kind: i for i, kind in enumerate(order)}
    for name, c in sorted(checks.items(), key=lambda kv: (rank.get(kv[1].get("check"), len(order)), kv[0])):
        control = " (control)" if name.endswith("-nohooks") else ""
        lines.append(f"| {c.get('check', name)}{control} | `{c.get('policy', '?')}` | "
                     f"{'yes' if c.get('hooks', True) else 'no'} | {cell(verdict(name, c))} | {cell(detail(name, c))} |")
    benches = summary.get("bench", {})
    if benches:
        lines += ["", "Alloc+free pairs from 1 to 16 threads on one device, work between calls "
                  "(`cmb_pluggable_bench`, `cmb_torch_native_bench`):", ""] + bench_rows(benches)
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("summary")
    ap.add_argument("-o", "--output")
    args = ap.parse_args()
    try:
        with open(args.summary) as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{sys.argv[0]}: {args.summary}: {e}", file=sys.stderr)
        return 2
    text = render(summary)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
