#!/bin/sh
# gpu-soak.sh - a soak on the GPU under the main allocators, MINUTES long
# (default 10.5): rounds of churn (three size distributions, every block
# written by a kernel) and replay of the sample traces, each round a run of
# its own with a new seed. When the time is up the round in flight is
# interrupted (SIGINT): it keeps its finished cases, as any interrupted run
# does. Every block is checked (CMB_VERIFY=1) and the device check runs
# between cases. Then every round is checked: no failed case, no leak, no
# upstream misuse, statistics consistent, no overlapping or misplaced
# block, and every case's device memory returned (device_unreturned_bytes
# and device_dirty_bytes 0).
#
#   scripts/gpu-soak.sh BUILD_DIR OUT_DIR [MINUTES]
#
# OUT_DIR/round-K/ holds each round's results; OUT_DIR/summary.txt the
# totals. Exit status 0 when every check holds.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "[MINUTES]" "$@"
seconds=$(awk -v m="${3:-10.5}" 'BEGIN { printf "%d", m * 60 }')
cd "$(dirname "$0")/.." || exit 2

# the main allocators this build has
allocators=
for a in cuda cuda-async cuda-async-retain cub rmm-pool arena bfc cupy torch-caching torch-expandable; do
    "$bin" --list | grep -q "^  $a " && allocators="${allocators:+$allocators,}$a"
done
traces=traces/samples/churn_small.trace,traces/samples/torch_mlp_sweep_default.trace
export CMB_VERIFY=1
start=$(date +%s)
end=$((start + seconds))
round=0
status=0
echo "gpu-soak: $seconds s under $allocators" >&2
while [ "$(date +%s)" -lt "$end" ]; do
    round=$((round + 1))
    "$bin" --mode gpu --quiet --scenario churn,replay --allocator "$allocators" --seed "$round" \
        --param n=20000 --param max_size=64MiB --param dist=uniform,loguniform,bimodal --param touch=true \
        --param trace="$traces" --repetitions 2 --case-timeout 600 --out "$out/round-$round" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do
        sleep 1
    done
    kill -0 "$pid" 2>/dev/null && kill -INT "$pid" # time is up: stop, keep the finished cases
    wait "$pid"
    rc=$?
    [ $rc -eq 2 ] && exit 2
    [ $rc -ne 0 ] && [ $rc -ne 130 ] && status=1
    echo "gpu-soak: round $round ended (exit $rc) at $(( $(date +%s) - start )) s" >&2
done
wall=$(( $(date +%s) - start ))
python3 tests/support/results_check.py gpusoak --wall "$wall" --summary "$out/summary.txt" "$out"/round-* || status=1
exit $status
