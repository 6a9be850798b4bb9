#!/usr/bin/env bash
# gpu-fleet-node.sh - one multi-GPU host, every GPU: the suite run on all of
# them in turn and then concurrently (ci/examples/slurm-suite.sbatch outside
# Slurm, CMB_SEQUENTIAL=1 and 0), to measure what running them at once does
# to the numbers (docs/cluster.md). Builds nothing; needs two or more GPUs.
#
#   scripts/gpu-fleet-node.sh BUILD_DIR OUT_DIR [cumembench options...]
#
# Options default to --preset quick --scenario churn,fastpath --allocator
# cuda,cuda-async,torch-caching,rmm-pool,bfc,cupy --repetitions 9 --seed 42
# (9 repetitions: what the U test wants; the quick preset's churn and fastpath
# took 94 s for 15 allocators and 3 repetitions on an H100, so both passes on
# two GPUs should stay under 9 minutes). OUT_DIR receives
#   in-turn/manual/, concurrent/manual/   the two job directories (runs/<host>-gpu<N>,
#                                         index.tsv, report.html over their GPUs)
#   compare-gpu<N>.txt, .json             per GPU, concurrent against in turn
#                                         (tools/cumembench-compare: U test on
#                                         times, memory counters within the GPU
#                                         tolerance)
#   report.html                           every run of both passes side by side
#   summary.txt                           wall time of each pass, each GPU's comparison summary
# Exit status: 0 when both passes ran (whatever the comparison found), 1 when
# a pass lost a run, 2 on bad usage or fewer than two GPUs.
set -u

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
cmb_dirs "[cumembench options...]" "$@"
shift 2
(($#)) || set -- --preset quick --scenario churn,fastpath --allocator cuda,cuda-async,torch-caching,rmm-pool,bfc,cupy \
    --repetitions 9 --seed 42
cd "$(dirname "$0")/.." || exit 2 # replay's traces are named from the source tree
root=$PWD
python=${PYTHON:-/usr/bin/python3}

n=$("$bin" --probe-env | awk -F'\t' '$1 == "gpu_count" { print $2 }')
if [ -z "$n" ] || [ "$n" -lt 2 ]; then
    echo "$0: ${n:-no} GPU(s) visible; this compares runs on two or more GPUs of one host" >&2
    exit 2
fi
host=$(hostname -s)
status=0
: >"$out/summary.txt"

for pass in in-turn concurrent; do
    seq=0
    [ "$pass" = in-turn ] && seq=1
    rm -rf "${out:?}/$pass"
    t0=$SECONDS
    echo "== $pass: $n GPUs -> $out/$pass" >&2
    CMB_SEQUENTIAL=$seq CMB_MODE=gpu CMB_BIN=$bin CMB_DEST=$out/$pass PYTHON=$python \
        CMB_REPORT_ARGS="--no-gnuplot --no-findings" ci/examples/slurm-suite.sbatch "$@" || status=1
    echo "$pass: $n GPUs, $((SECONDS - t0)) s (the suite and its report)" >>"$out/summary.txt"
done

runs=()
for ((i = 0; i < n; i++)); do
    a=$out/in-turn/manual/runs/$host-gpu$i b=$out/concurrent/manual/runs/$host-gpu$i
    if [ ! -f "$a/results.csv" ] || [ ! -f "$b/results.csv" ]; then continue; fi
    runs+=("$a" "$b")
    "$root/tools/cumembench-compare" --time warn --json "$out/compare-gpu$i.json" "$a" "$b" \
        >"$out/compare-gpu$i.txt" 2>&1
    echo "GPU $i, concurrent against in turn: $(grep '^summary:' "$out/compare-gpu$i.txt" || echo 'no summary')" \
        >>"$out/summary.txt"
done
[ ${#runs[@]} -gt 0 ] && "$python" "$root/plots/report.py" -q --no-gnuplot --no-findings -o "$out/report.html" "${runs[@]}"
cat "$out/summary.txt" >&2
exit $status
