#!/bin/sh
# gpu-time-model.sh - the cost model checked on a GPU (docs/costs.md,
# "Validation"): three real programs (the transformer, ResNet-50 and LLM
# decode of the recorded sample traces) under six settings each (PyTorch's
# allocator natively, default and expandable_segments:True; torch-caching,
# cmb, cuda and rmm-pool through libcmb_pluggable.so), every step timed,
# three rounds after a warm-up; then the measured difference in step time
# against native PyTorch beside the difference the cost model predicts from
# the sim replay of the same traffic. Each setting runs in CMB_TM_PROCS
# processes (default "1 2": two, the second pass over the settings in the
# reverse order, so what varies between processes, such as the kernels a
# process chooses, is in the spread; odd passes forward, even ones reversed),
# CMB_TM_ROUNDS rounds each (default 5); CMB_TM_WORKLOADS picks the programs
# (default all three), CMB_TM_SETTINGS the settings (default all six; the
# first lib-torch-caching run records the trace the replays price, so keep it).
# lib-cmb-layout, not among the six, runs cmb:layout=THAT_TRACE@vmm through the
# library: cmb following a layout planned from the recorded round (docs/cmb.md);
# it needs the trace, so list it after lib-torch-caching and keep
# CMB_TM_PROCS's first process odd (forward order).
# Each step's host CPU time (the Python thread's) is kept beside its wall
# time (cpu_rounds in each process's JSON). A run split over
# several calls writes into one OUT_DIR each; `time_model.py table` over
# their logs together makes the table. Needs a GPU, PyTorch, torchvision and
# a cost file; builds nothing.
#
#   scripts/gpu-time-model.sh BUILD_DIR OUT_DIR COSTS_JSON
#
# COSTS_JSON: the card's cost file (scripts/gpu-calibrate.sh). OUT_DIR
# receives time-model.json and time-model.md (commit them under
# results/<gpu>/time-model/), logs/ (each process's output and JSON) and
# the recorded traces. Each process runs under a 75-second limit and no new
# one starts after CMB_TM_BUDGET seconds (default 450), so the whole stays
# near 8 minutes on an H100; a setting cut short is a row saying so.
# Exit status: 0 when every run finished, 1 when one failed, 2 bad usage.
set -u
. "$(dirname "$0")/lib.sh"
cmb_dirs "COSTS_JSON" "$@"
settings=${CMB_TM_SETTINGS:-native lib-torch-caching native-expandable lib-cmb lib-rmm-pool lib-cuda}
for s in $settings; do
    case $s in native | native-expandable | lib-torch-caching | lib-cmb | lib-cmb-layout | lib-cuda | lib-rmm-pool) ;;
    *) echo "$0: CMB_TM_SETTINGS: unknown setting $s (native native-expandable lib-torch-caching lib-cmb lib-cmb-layout lib-cuda lib-rmm-pool)" >&2; exit 2 ;;
    esac
done
case " $settings " in *" lib-cmb-layout "*)
    case "$out" in *[:@]*) echo "$0: lib-cmb-layout: OUT_DIR $out holds ':' or '@', which end a layout path in an allocator spec" >&2; exit 2 ;; esac ;;
esac
costs=${3:-}
[ -r "$costs" ] || { echo "$0: no cost file '$costs' (scripts/gpu-calibrate.sh makes one)" >&2; exit 2; }
costs=$(cd "$(dirname "$costs")" && pwd)/$(basename "$costs")
lib="$build/pluggable/libcmb_pluggable.so"
[ -r "$lib" ] || { echo "$0: $lib is missing (make build)" >&2; exit 2; }
py=${CMB_PYTHON:-python3}
"$py" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null ||
    { echo "$0: needs PyTorch and torchvision with a GPU ($py)" >&2; exit 2; }
work="$out/logs"
mkdir -p "$work"
budget=${CMB_TM_BUDGET:-450}
rounds=${CMB_TM_ROUNDS:-5}
procs=${CMB_TM_PROCS:-1 2}
workloads=${CMB_TM_WORKLOADS:-transformer convnet llm-decode}
start=$(date +%s)
rc=0

job() { # NAME WORKLOAD SETTING [--trace FILE]
    name=$1 wl=$2 setting=$3
    shift 3
    if [ $(($(date +%s) - start)) -ge "$budget" ]; then
        echo "skipped: budget of $budget s spent" >"$work/$name.log"
        return
    fi
    if [ "$setting" = lib-cmb-layout ] && [ ! -s "$work/$wl.trace" ]; then
        echo "skipped: no recorded trace $work/$wl.trace to lay out (lib-torch-caching records it first)" >"$work/$name.log"
        rc=1
        return
    fi
    case $setting in
    native) set -- env -u PYTORCH_CUDA_ALLOC_CONF "$py" scripts/time_model.py run "$@" ;;
    native-expandable) set -- env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$py" scripts/time_model.py run "$@" ;;
    lib-*) set -- env -u PYTORCH_CUDA_ALLOC_CONF "$py" scripts/time_model.py run --lib "$lib" \
        --policy "$(policy_of "$setting" "$wl")" "$@" ;;
    esac
    t0=$(date +%s)
    timeout 90 "$@" --workload "$wl" --rounds "$rounds" --out "$work/$name.json" >"$work/$name.log" 2>&1 || rc=1
    echo "$name: $(($(date +%s) - t0)) s" | tee -a "$work/times.txt"
}

policy_of() {
    case $1 in
    lib-torch-caching) echo torch-caching@cuda ;;
    lib-cmb) echo cmb@vmm ;;
    lib-cmb-layout) echo "cmb:layout=$work/$2.trace@vmm" ;; # the recorded round's own layout
    lib-cuda) echo cuda@cuda ;;
    lib-rmm-pool) echo rmm-pool@cuda ;;
    esac
}

reversed=
for s in $settings; do reversed="$s $reversed"; done
for p in $procs; do
    sfx= order=$settings
    [ "$p" = 1 ] || sfx=.p$p
    [ $((p % 2)) = 1 ] || order=$reversed
    for wl in $workloads; do
        for s in $order; do
            if [ "$s" = lib-torch-caching ] && [ ! -s "$work/$wl.trace" ]; then
                job "$wl-$s$sfx" "$wl" "$s" --trace "$work/$wl.trace" # the traffic the replays price
                cp "$work/$wl.trace" "$out/$wl.trace" 2>/dev/null || true
            else
                job "$wl-$s$sfx" "$wl" "$s"
            fi
        done
    done
done
"$py" scripts/time_model.py table --work "$work" --bin "$bin" --costs "$costs" --out "$out" || rc=1
echo "total: $(($(date +%s) - start)) s" | tee -a "$work/times.txt"
exit $rc
