#!/bin/sh
# gpu-memcheck.sh - compute-sanitizer's memcheck over the GPU scenarios:
# every scenario (quick preset, one repetition) under a few allocators, with
# every case process followed (--target-processes all). Builds nothing.
#
#   scripts/gpu-memcheck.sh BUILD_DIR OUT_DIR [cumembench options...]
#
# OUT_DIR receives run/ (the results), memcheck.PID.log (compute-sanitizer's
# report over the whole process tree) and memcheck-summary.txt: case
# processes followed, errors found (with the first lines of each report),
# and how the cases ended. Extra options go to
# cumembench (e.g. --scenario churn,replay or --allocator cuda). With
# CMB_MEMCHECK_SECONDS=N the run is interrupted after N seconds and keeps
# the cases it finished; CMB_MEMCHECK_ALLOCATORS=SPEC[,SPEC] replaces the
# allocators (e.g. cmb@vmm with --scenario churn,stream-async --param
# touch=true: kernels still writing ranges the policy moves). Exit status 0
# when memcheck found no error, 1 when it did, 2 on bad usage.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "[cumembench options...]" "$@"
shift 2
sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
[ -x "$sanitizer" ] || { echo "$0: compute-sanitizer not found (set COMPUTE_SANITIZER)" >&2; exit 2; }
cd "$(dirname "$0")/.." || exit 2

allocators=${CMB_MEMCHECK_ALLOCATORS:-}
if [ -z "$allocators" ]; then
    for a in cuda cuda-async cub rmm-pool torch-caching; do
        "$bin" --list | grep -q "^  $a " && allocators="${allocators:+$allocators,}$a"
    done
fi
start=$(date +%s)
# --report-api-errors no: a CUDA call that returns an error is the suite's
# business (every status is checked, and the capacity probe makes cudaMalloc
# fail on purpose); memcheck reports the memory accesses of kernels
"$sanitizer" --tool memcheck --report-api-errors no --target-processes all --print-limit 50 \
    --log-file "$out/memcheck.%p.log" \
    "$bin" --mode gpu --preset quick --scenario all --allocator "$allocators" --repetitions 1 \
    --case-timeout 1800 --out "$out/run" "$@" &
san=$!
# CMB_MEMCHECK_SECONDS: a time budget; then the run is interrupted (SIGINT to
# cumembench) and keeps the cases it finished
if [ -n "${CMB_MEMCHECK_SECONDS:-}" ]; then
    while kill -0 "$san" 2>/dev/null && [ $(( $(date +%s) - start )) -lt "$CMB_MEMCHECK_SECONDS" ]; do
        sleep 1
    done
    for p in $(pgrep -P "$san"); do
        kill -INT "$p" 2>/dev/null
    done
fi
wait "$san"
rc=$?
wall=$(( $(date +%s) - start ))

summary="$out/memcheck-summary.txt"
{
    echo "compute-sanitizer --tool memcheck --report-api-errors no --target-processes all over cumembench --mode gpu --preset quick"
    echo "scenarios: all; allocators: $allocators; extra options: $*"
    "$sanitizer" --version | tail -1
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
    echo "wall time: $wall s; cumembench exit status $rc"
    # one report covers the whole process tree; each case is a process
    procs=$(awk -F, 'NR > 1 && $10 != "skipped" { print $4 }' "$out/run/results.csv" 2>/dev/null | sort -u | wc -l)
    errors=$(cat "$out"/memcheck.*.log 2>/dev/null | sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' |
        awk '{ s += $1 } END { print s + 0 }')
    echo "case processes followed: $procs (and the environment probe); errors: $errors"
    if [ -f "$out/run/results.csv" ]; then
        echo "cases: $(cut -d, -f4,10 "$out/run/results.csv" | tail -n +2 | sort -u | cut -d, -f2 | sort | uniq -c |
            awk '{ printf "%s %s, ", $1, $2 }' | sed 's/, $//') (status rows per case and repetition)"
        echo "failed rows:"
        awk -F, 'NR > 1 && $10 == "failed" { print "  " $4 ": " $13 }' "$out/run/results.csv" | sort -u | head -20
    fi
    for f in "$out"/memcheck.*.log; do
        n=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$f" | tail -1)
        if [ "${n:-0}" != 0 ]; then
            echo "--- $f ($n errors)"
            grep -m 12 -E '=========  *(Invalid|Program hit|Address|Saved host|Host Frame|by thread|Access)' "$f"
        fi
    done
} >"$summary" 2>&1
cat "$summary"
[ "$(sed -n 's/^case processes followed: .*; errors: //p' "$summary")" = 0 ]
