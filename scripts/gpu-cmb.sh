#!/bin/sh
# gpu-cmb.sh - the suite's own allocator, cmb, measured on a GPU beside the
# allocators it is compared with (docs/cmb.md). Builds nothing.
#
#   scripts/gpu-cmb.sh BUILD_DIR OUT_DIR [--sim]
#
# On a GPU (the default): cmb over the vmm upstream (cmb@vmm, and cmb with
# 8 MiB pages, a quarter of the upstream calls) beside torch-expandable@vmm,
# torch-caching, bfc and rmm-pool:
#   OUT_DIR/summary.md  the tables of docs/cmb.md from the three runs:
#     churn     churn, quick preset (random phase, checkerboard, capacity probe)
#     fastpath  fastpath at 512 B, 64 KiB, 2 MiB and 64 MiB, 9 repetitions
#     replay    replay of every traces/samples/*.trace, 3 repetitions
#   OUT_DIR/runs.tar.gz the three runs' directories (results.json, results.csv,
#                       run.args, run.log), packed so the output stays 3 files
#   OUT_DIR/log.txt     everything the runs printed
# With --sim: the same runs in sim mode under every policy that runs there
# (docs/cmb.md's sim tables are made this way), plus each trace's smallest
# device (find_min_capacity). On a GPU each run has a share of 7.5 minutes
# (churn 140 s, fastpath 140 s, replay 170 s; CMB_GPU_CMB_LIMITS="C F R"
# sets other shares, as scripts/gpu-cmb-e2e.sh does): a run cut there keeps
# the cases it finished, and the summary says it was cut. Exit status: 0 when
# every case ran, 1 when some case failed or a run was cut, 2 on bad usage or
# no GPU.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "[--sim]" "$@"
shift 2
mode=gpu
if [ "${1:-}" = --sim ]; then
    mode=sim
elif [ $# -gt 0 ]; then
    echo "$0: unknown option $1 (expected --sim)" >&2
    exit 2
fi

# the sample traces are named relative to the source tree
cd "$(dirname "$0")/.." || exit 2
traces=$(ls traces/samples/*.trace | paste -sd, -)
[ -n "$traces" ] || { echo "$0: no traces/samples/*.trace" >&2; exit 2; }

if [ $mode = gpu ]; then
    allocators="cmb@vmm,cmb:page=8MiB@vmm,torch-expandable@vmm,torch-caching,bfc,rmm-pool"
    find_min=false
    limits=${CMB_GPU_CMB_LIMITS:-"140 140 170"}
    echo "$limits" | grep -qE '^ *[1-9][0-9]* +[1-9][0-9]* +[1-9][0-9]* *$' ||
        { echo "$0: CMB_GPU_CMB_LIMITS='$limits': expected three numbers of seconds (churn fastpath replay)" >&2; exit 2; }
else
    limits="3600 3600 3600"
    # every policy --list does not mark [GPU only], and cmb with 8 MiB pages
    allocators=$("$bin" --list | sed -n '/^allocators/,$p' | grep -v 'GPU only' | awk '/^  [a-z]/ { print $1 }' |
        paste -sd, -),cmb:page=8MiB
    find_min=true
fi
log="$out/log.txt"
: >"$log"
status=0
start=$(date +%s)

run() { # NAME SECONDS cumembench-args...
    name=$1
    limit=$2
    shift 2
    echo "== $name ($mode, at most $limit s): $*" | tee -a "$log" >&2
    timeout --kill-after=15 "$limit" "$bin" --mode $mode --case-timeout 120 --out "$out/$name" "$@" >>"$log" 2>&1
    rc=$?
    echo "   exit $rc after $(($(date +%s) - start)) s" | tee -a "$log" >&2
    [ $rc -eq 2 ] && { tail -5 "$log" >&2; exit 2; }
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "$name" >>"$out/cut.txt"
    [ $rc -ne 0 ] && status=1
    return 0
}

rm -f "$out/cut.txt"
# shellcheck disable=SC2086 # three numbers
set -- $limits
run churn "$1" --scenario churn --preset quick --allocator "$allocators" --repetitions 3 --timeline off
# the fast path with cmb's fast bins off too: the cost of its tree path
nobins=cmb:fast_bins=false
[ $mode = gpu ] && nobins=$nobins@vmm
run fastpath "$2" --scenario fastpath --param size=512B,64KiB,2MiB,64MiB --allocator "$allocators,$nobins" \
    --repetitions 9
run replay "$3" --scenario replay --param trace="$traces" --param find_min_capacity=$find_min \
    --allocator "$allocators" --repetitions 3 --timeline off

python3 - "$out" "$mode" >"$out/summary.md" <<'EOF'
"""Markdown tables of the three runs: medians over repetitions, spread for fastpath."""
import csv, os, re, statistics, sys
from collections import defaultdict

sys.path.insert(0, "tools")
import cmb_schema  # noqa: E402 - the labels every table of the suite uses: name[:options][@upstream]

out, mode = sys.argv[1], sys.argv[2]
MiB = 1 << 20


def load(name):
    """{(label, params-without-allocator): {metric: [values]}} and the labels in run order."""
    path = os.path.join(out, name, "results.csv")
    cells, labels, failed = defaultdict(lambda: defaultdict(list)), [], []
    if not os.path.exists(path):
        return cells, labels, [f"{name}: no results.csv"]
    for r in csv.DictReader(open(path, newline="")):
        label = cmb_schema.label(r)
        if label not in labels:
            labels.append(label)
        if r["status"] not in ("ok", "oom"):
            if r["status"] == "failed":
                failed.append(f"{name} {label} {r['params']}: {r['error']}")
            continue
        try:
            cells[(label, r["params"])][r["metric"]].append(float(r["value"]))
        except ValueError:
            pass
    return cells, labels, failed


def param(params, key):
    for kv in params.split(";"):
        k, _, v = kv.partition("=")
        if k == key:
            return v
    return ""


def med(cell, metric):
    v = cell.get(metric)
    return statistics.median(v) if v else None


def fmt(x, spec):
    return "—" if x is None else format(x, spec)


notes = []
if os.path.exists(os.path.join(out, "cut.txt")):
    for name in open(os.path.join(out, "cut.txt")).read().split():
        notes.append(f"{name}: the run reached its time limit; the tables hold the cases it finished")
timing = ("host bookkeeping in sim: the policy's own cost, no GPU call" if mode == "sim"
          else "GPU run: the allocator's calls, CUDA included")
print(f"<!-- generated by scripts/gpu-cmb.sh ({mode}); medians over repetitions -->\n")

cells, labels, failed = load("replay")
notes += failed
traces = sorted({param(p, "trace") for (_, p) in cells})
names = [os.path.basename(t).replace(".trace", "") for t in traces]
for title, cell_of in (
        ("replay: peak reserved / peak requested", lambda c: fmt(
            med(c, "peak_reserved_bytes") / med(c, "peak_requested_bytes")
            if med(c, "peak_reserved_bytes") and med(c, "peak_requested_bytes") else None, ".4f")
            + (" (did not fit)" if med(c, "replay_ooms") else "")),
        ("replay: smallest device that fits the trace, MiB (sim: find_min_capacity)",
         lambda c: fmt(med(c, "min_capacity_bytes") and med(c, "min_capacity_bytes") / MiB, ".0f"))):
    if "smallest" in title and mode != "sim":
        continue
    print(f"#### {title}\n")
    print("| allocator | " + " | ".join(f"`{n}`" for n in names) + " |")
    print("|---|" + "---:|" * len(names))
    for label in labels:
        row = []
        for t in traces:
            c = next((c for (l, p), c in cells.items() if l == label and param(p, "trace") == t), None)
            row.append(cell_of(c) if c else "—")
        print(f"| {label} | " + " | ".join(row) + " |")
    print()
for t in traces:
    print(f"#### replay of `{os.path.basename(t)}`\n")
    print("| allocator | peak requested MiB | peak reserved MiB | reserved / requested | smallest device MiB "
          "| upstream calls | time s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label in labels:
        for (l, p), c in cells.items():
            if l != label or param(p, "trace") != t:
                continue
            req, res = med(c, "peak_requested_bytes"), med(c, "peak_reserved_bytes")
            calls = None
            if med(c, "upstream_allocs") is not None:
                calls = med(c, "upstream_allocs") + (med(c, "upstream_frees") or 0)
            ooms = med(c, "replay_ooms")
            ratio = res / req if req and res else None
            mark = f" ({ooms:.0f} allocations did not fit)" if ooms else ""
            print(f"| {label}{mark} | {fmt(req and req / MiB, '.1f')} | {fmt(res and res / MiB, '.1f')} "
                  f"| {fmt(ratio, '.4f')} | {fmt(med(c, 'min_capacity_bytes') and med(c, 'min_capacity_bytes') / MiB, '.0f')} "
                  f"| {fmt(calls, '.0f')} | {fmt(med(c, 'time_s'), '.3f')} |")
    print()

cells, labels, failed = load("churn")
notes += failed
points = sorted({p for (_, p) in cells}, key=lambda p: (param(p, "n"), param(p, "max_size")))
for p in points:
    print(f"#### churn, n={param(p, 'n')}, max_size={param(p, 'max_size')}, {param(p, 'dist')}, then the checkerboard\n")
    print("| allocator | random phase: reserved / requested | capacity_ratio after the checkerboard "
          "| upstream calls | time of the random phase s |")
    print("|---|---:|---:|---:|---:|")
    for label in labels:
        c = cells.get((label, p))
        if not c:
            continue
        req, res = med(c, "churn_peak_requested_bytes"), med(c, "churn_peak_reserved_bytes")
        calls = None
        if med(c, "upstream_allocs") is not None:
            calls = med(c, "upstream_allocs") + (med(c, "upstream_frees") or 0)
        print(f"| {label} | {fmt(res / req if req and res else None, '.4f')} | {fmt(med(c, 'capacity_ratio'), '.4f')} "
              f"| {fmt(calls, '.0f')} | {fmt(med(c, 'time_s'), '.4f')} |")
    print()

cells, labels, failed = load("fastpath")
notes += failed
def nbytes(text):
    m = re.fullmatch(r"([0-9.]+)\s*([KMGT]?)i?B?", text)
    return float(m.group(1)) * 1024 ** "_KMGT".index(m.group(2) or "_") if m else 0


sizes = sorted({param(p, "size") for (_, p) in cells}, key=nbytes)
print(f"#### fastpath: ns per allocate + free pair of a cached block, 1000 mixed blocks live ({timing})\n")
print("| allocator | " + " | ".join(sizes) + " |")
print("|---|" + "---:|" * len(sizes))
base = {}
for s in sizes:
    for (l, p), c in cells.items():
        if l.split("@")[0] == "bfc" and param(p, "size") == s and c.get("time_s"):
            base[s] = statistics.median(c["time_s"])
for label in labels:
    row = []
    for s in sizes:
        c = next((c for (l, p), c in cells.items() if l == label and param(p, "size") == s), None)
        if not c or not c.get("time_s"):
            row.append("—")
            continue
        v = sorted(c["time_s"])
        m = statistics.median(v)
        cell = f"{m * 1e9:.1f} [{v[0] * 1e9:.1f}–{v[-1] * 1e9:.1f}]"
        if s in base and label.split("@")[0] != "bfc":
            cell += f" ({m / base[s]:.2f}x bfc)"
        row.append(cell)
    print(f"| {label} | " + " | ".join(row) + " |")
print("\nmedian [min–max] over the repetitions.\n")
if notes:
    print("#### cases that failed\n")
    for n in notes:
        print(f"- {n}")
EOF
[ $? -ne 0 ] && status=1
runs=$(cd "$out" && ls -d churn fastpath replay 2>/dev/null)
# shellcheck disable=SC2086 # the run names are plain words
[ -n "$runs" ] && tar -czf "$out/runs.tar.gz" -C "$out" $runs && (cd "$out" && rm -rf $runs cut.txt)
echo "== done in $(($(date +%s) - start)) s: $out/summary.md" | tee -a "$log" >&2
exit $status
