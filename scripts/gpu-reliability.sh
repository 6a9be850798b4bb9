#!/bin/sh
# gpu-reliability.sh - the isolation and fault-injection checks that need a
# GPU. Builds nothing.
#
#   scripts/gpu-reliability.sh BUILD_DIR OUT_DIR
#
#  1. sticky/    a planted kernel writes through an unmapped address under
#                cuda, rmm-pool and cuda-async (hidden scenario
#                planted-fault, CMB_PLANTED_FAULTS=1): each of those cases
#                must fail with the CUDA error as its reason, and the churn
#                cases after them, each in a new process, must run clean;
#  2. orphan/    a case leaves a detached process holding 4 GiB for 20 s:
#                that case must show device_unreturned_bytes, the case after
#                it device_dirty_bytes (run on a dirty device);
#  3. faults-*/  every allocator that takes memory from an upstream, over
#                the real cuda/vmm upstream, under churn and replay while the
#                upstream fails every 3rd request or 30% at random: no case
#                fails except with a clean OOM, nothing leaks or overlaps,
#                CuPy and PyTorch's caching allocator retry.
# OUT_DIR/summary.txt collects the checks; CMB_SKIP_FAULTS=1 leaves part 3
# out. Exit status 0 when all hold.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "" "$@"
cd "$(dirname "$0")/.." || exit 2
check="python3 tests/support/results_check.py"
status=0
small="--param n=2000 --param max_size=64MiB --param dist=uniform --repetitions 2"

echo "== 1. sticky CUDA error planted under three allocators -> $out/sticky" >&2
CMB_PLANTED_FAULTS=1 "$bin" --mode gpu --scenario planted-fault,churn --allocator cuda,rmm-pool,cuda-async \
    --param kind=illegal-address $small --out "$out/sticky"
[ $? -eq 2 ] && exit 2

echo "== 2. a case leaves a process holding device memory -> $out/orphan" >&2
CMB_PLANTED_FAULTS=1 "$bin" --mode gpu --scenario planted-fault,churn --allocator cuda \
    --param kind=orphan --param hold=4GiB --param hold_s=20 $small --out "$out/orphan"
[ $? -eq 2 ] && exit 2
$check isolation "$out/sticky" "$out/orphan" >"$out/summary.txt" 2>&1 || status=1
sleep 25 # let the holders go before the next part

if [ "${CMB_SKIP_FAULTS:-0}" = 1 ]; then # part 3 off (a short device lease)
    cat "$out/summary.txt"
    exit $status
fi

# policies: every allocator --list does not mark [GPU only]
policies=$("$bin" --list | sed -n '/^allocators/,$p' | grep -v 'GPU only' | awk '/^  [a-z]/ { print $1 }' |
    paste -sd, -)
traces=traces/samples/churn_small.trace,traces/samples/churn_small_rmm.csv
dirs=
for fault in every=3 prob=0.3,seed=5; do
    d="$out/faults-$(echo "$fault" | tr -c 'a-z0-9\n' _)"
    echo "== 3. --fault $fault under $policies -> $d" >&2
    CMB_VERIFY=1 "$bin" --mode gpu --quiet --scenario churn,replay --allocator "$policies" --fault "$fault" \
        --param n=2000 --param max_size=64MiB --param dist=uniform --param fill=0.25 --param trace="$traces" \
        --repetitions 1 --out "$d"
    [ $? -eq 2 ] && exit 2
    dirs="$dirs $d"
done
echo "== fault injection over the GPU upstreams" >>"$out/summary.txt"
$check faults --retry cupy,torch-caching $dirs >>"$out/summary.txt" 2>&1 || status=1
cat "$out/summary.txt"
exit $status
