#!/bin/sh
# gpu-multi.sh - several GPUs in one host (docs/scenarios.md, multi-gpu):
# the multi-gpu scenario under the allocators a distributed job uses, then
# the quick suite on every GPU as `make bench GPUS=all` runs it (churn and
# stream-async only, to stay within the time), reported side by side.
# Builds nothing.
#
#   scripts/gpu-multi.sh BUILD_DIR OUT_DIR
#
# Environment: CMB_MODE=sim runs it all in sim mode (its CPU test; the
# simulated devices and the policies only), PYTHON the interpreter of the
# HTML report (default /usr/bin/python3; without matplotlib the report is
# left out, said in log.txt).
# Time: at most about 6 minutes on two H200s: multi-gpu 110 s (no mistake,
# 3 repetitions) + 90 s (the two mistakes, 1 repetition), GPUS=all 170 s;
# a run cut at its limit keeps the cases it finished and the summary says so.
# OUT_DIR afterwards holds five files:
#   summary.md         the tables: what each rank holds on each device, the
#                      contexts and pools, the cross-device free per
#                      allocator, peer access, and both cards side by side
#   multi-gpu.tar.gz   the two multi-gpu runs (results.json, results.csv,
#                      run.log, run.args)
#   bench.tar.gz       the GPUS=all runs (gpu0/, gpu1/) and report.html
#   environment.txt    cumembench --version, --probe-env of each GPU,
#                      nvidia-smi -L, topo -m (the NVLink between the cards)
#   log.txt            everything the runs printed
# Exit status: 0 when every case ran, 1 when some case failed or a run was
# cut, 2 on bad usage or no GPU. Fewer than two GPUs: the scenario's
# single-GPU parts run, and summary.md says the rest was skipped and why.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "" "$@"
[ $# -eq 2 ] || { echo "$0: unexpected argument $3" >&2; exit 2; }
mode=${CMB_MODE:-gpu}
case $mode in
gpu | sim) ;;
*) echo "$0: CMB_MODE must be gpu or sim, not '$mode'" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.." || exit 2

runs=$out/runs
log=$out/log.txt
notes=$runs/notes.txt
rm -rf "$runs" "$out/summary.md" "$out/multi-gpu.tar.gz" "$out/bench.tar.gz"
mkdir -p "$runs" || exit 2
: >"$log"
: >"$notes"
status=0
start=$(date +%s)

probe() { # DEVICE KEY
    timeout 60 "$bin" --probe-env --device "$1" 2>/dev/null | awk -F'\t' -v k="$2" '$1 == k { print $2 }'
}

{
    echo "## cumembench --version"
    timeout 30 "$bin" --version
    for d in 0 1 2 3; do
        echo "## cumembench --probe-env --device $d"
        timeout 60 "$bin" --probe-env --device $d
    done
    for q in "-L" "topo -m" "--query-gpu=index,name,pci.bus_id,memory.total,memory.used,driver_version --format=csv"; do
        echo "## nvidia-smi $q"
        # shellcheck disable=SC2086 # the words of one query
        timeout 30 nvidia-smi $q
    done
} >"$out/environment.txt" 2>&1

if [ "$mode" = gpu ]; then
    n=$(probe 0 gpu_count)
    if [ -z "$n" ] || [ "$n" -eq 0 ]; then
        echo "$0: no CUDA GPU is visible ($(probe 0 no_gpu_reason)); CMB_MODE=sim runs the script on the CPU" >&2
        rm -rf "$runs"
        exit 2
    fi
    [ "$n" -lt 2 ] && echo "only $n GPU visible: the multi-gpu scenario ran its single-GPU parts; the mistakes," \
        "the cross-device free and peer access need two GPUs and were skipped; GPUS=all ran on one GPU" >>"$notes"
    allocators="cuda,cuda-async,cuda-async-retain,cub,rmm-pool,torch-caching,cmb@vmm"
    gpus=all
else
    allocators="cuda,torch-caching,rmm-pool,cmb"
    gpus="0 1"
fi

run() { # NAME SECONDS cumembench-args...
    name=$1
    limit=$2
    shift 2
    echo "== $name ($mode, at most $limit s): $*" | tee -a "$log" >&2
    timeout --kill-after=15 "$limit" "$bin" --mode "$mode" --out "$runs/$name" "$@" >>"$log" 2>&1
    rc=$?
    echo "   exit $rc after $(($(date +%s) - start)) s" | tee -a "$log" >&2
    if [ $rc -eq 2 ]; then
        tail -5 "$log" >&2
        exit 2
    fi
    [ $rc -eq 124 ] || [ $rc -eq 137 ] || [ $rc -eq 130 ] && echo "$name reached its time limit ($limit s);" \
        "the tables hold the cases it finished" >>"$notes"
    [ $rc -ne 0 ] && status=1
    return 0
}

run multi-gpu-none 110 --scenario multi-gpu --preset quick --param mistake=none --allocator "$allocators" \
    --repetitions 3 --case-timeout 90
run multi-gpu-mistakes 90 --scenario multi-gpu --preset quick --param mistake=ctx0,pool0 \
    --allocator "$allocators" --repetitions 1 --case-timeout 90

# make bench GPUS=all: ci/bench.sh, one run per GPU into bench/gpu<N>, one report
echo "== GPUS=$gpus ci/bench.sh (at most 170 s)" | tee -a "$log" >&2
GPUS=$gpus OUT=$runs/bench REPORT=$runs/bench/report.html PYTHON=${PYTHON:-/usr/bin/python3} \
    timeout --kill-after=15 170 ci/bench.sh "$build" --mode "$mode" --preset quick --scenario churn,stream-async \
    --allocator "$allocators" --repetitions 3 --case-timeout 60 --timeline off >>"$log" 2>&1
rc=$?
echo "   exit $rc after $(($(date +%s) - start)) s" | tee -a "$log" >&2
[ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "GPUS=$gpus reached its time limit (170 s)" >>"$notes"
[ $rc -ne 0 ] && status=1
[ -f "$runs/bench/report.html" ] || echo "no HTML report of the GPUS=$gpus runs (log.txt says why)" >>"$notes"

python3 "$(pwd)/scripts/gpu_multi_summary.py" "$runs" "$mode" >"$out/summary.md" 2>>"$log" || {
    echo "$0: the summary could not be made (log.txt)" >&2
    status=1
}
(cd "$runs" && tar czf "$out/multi-gpu.tar.gz" multi-gpu-* 2>>"$log")
[ -d "$runs/bench" ] && (cd "$runs" && tar czf "$out/bench.tar.gz" bench 2>>"$log")
rm -rf "$runs"
echo "gpu-multi: $(($(date +%s) - start)) s, exit $status; $out/summary.md" >&2
exit $status
