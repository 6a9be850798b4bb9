#!/bin/sh
# sim-soak.sh - a long soak in sim mode: churn under every allocator that
# runs in sim mode, three size distributions, three repetitions each, with
# every block checked (CMB_VERIFY=1: no overlap, alignment, inside the
# upstream's memory) and glibc's per-thread cache off (so the host heap
# count is exact); then checks that statistics stayed consistent
# (stats_disagree, upstream_misuse, leaked_bytes all 0), that no case failed
# and that the case processes' host heap did not grow from one repetition
# to the next (host_heap_growth_bytes 0 after the first).
#
#   scripts/sim-soak.sh BUILD_DIR OUT_DIR [N]
#
# N: allocations per churn case (default 800000: with 8 allocators about
# 116 million operations, 3 minutes on one core). OUT_DIR receives the run
# (results.json, results.csv, run.log) and summary.txt. Memory results are
# machine-independent; times are not. Exit status 0 when every check holds.
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 BUILD_DIR OUT_DIR [allocations per case]" >&2
    exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || { echo "$0: no such build directory: $1" >&2; exit 2; }
bin="$build/cumembench"
[ -x "$bin" ] || { echo "$0: $bin is missing: build first (make build)" >&2; exit 2; }
out=$2
n=${3:-800000}
min_ops=${CMB_SOAK_MIN_OPS:-100000000}
src=$(cd "$(dirname "$0")/.." && pwd)

export CMB_VERIFY=1
export GLIBC_TUNABLES=glibc.malloc.tcache_count=0
start=$(date +%s)
"$bin" --mode sim --quiet --scenario churn --allocator all --param n="$n" --param max_size=16MiB \
    --param dist=uniform,loguniform,bimodal --repetitions 3 --case-timeout 3600 --out "$out"
rc=$?
[ $rc -eq 2 ] && exit 2
python3 "$src/tests/support/results_check.py" soak --min-ops "$min_ops" --summary "$out/summary.txt" "$out"
check=$?
echo "wall time: $(( $(date +%s) - start )) s on $(nproc) cores of $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)" \
    >>"$out/summary.txt"
tail -1 "$out/summary.txt"
[ $rc -eq 0 ] && [ $check -eq 0 ]
