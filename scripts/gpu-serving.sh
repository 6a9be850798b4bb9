#!/bin/sh
# gpu-serving.sh - the serving scenario's GPU part (docs/scenarios.md, serving):
# the recorded serving workload, the ceiling predicted from it and verified by
# running, and the scenario itself on the GPU. Builds nothing; needs a GPU,
# PyTorch, and BUILD_DIR with cumembench and pluggable/libcmb_pluggable.so.
#
#   scripts/gpu-serving.sh BUILD_DIR OUT_DIR
#
# 1. OUT_DIR/record/: scripts/serving_server.py at utilization $CMB_SERVING_U0
#    (default 0.5) under PyTorch's default allocator with --record: the
#    snapshot, the run's report (record.json), and the snapshot converted to
#    the suite's trace (torch_serving.trace, the sample to commit as
#    traces/samples/torch_serving.trace).
# 2. OUT_DIR/predict/: scripts/serving_ceiling.py predict for torch-caching,
#    torch-expandable and cmb (sim replays of that one trace).
# 3. OUT_DIR/runs/: the real server at each prediction, +0.005 and +0.01 (and
#    -0.005, -0.01 when the prediction itself fails) under the native default,
#    native expandable_segments:True and cmb@vmm through libcmb_pluggable (its
#    decode eager: the library has no graph-pool hooks; the table's graphs
#    column says so).
# 4. OUT_DIR/ceiling.md: the table (scripts/serving_ceiling.py table), to
#    commit as results/<gpu>/serving/ceiling.md.
# 5. OUT_DIR/scenario/ and OUT_DIR/scenario-vmm/: cumembench --scenario serving
#    in GPU mode, quick preset on the whole GPU (capacity=0), every allocator,
#    then the policies over the vmm upstream.
# CMB_SERVING_PARTS (default "ceiling scenario") picks parts 1-4 (ceiling) and
# 5 (scenario), so the two can run in separate calls of under 10 minutes;
# CMB_SERVING_MODES (default "default:torch-caching expandable:torch-expandable
# cmb:cmb") the servers run at their predictions (MODE:replay policy).
# Every step logs to OUT_DIR/logs/; a failing step is recorded (logs/failures.txt)
# and the others still run. A real run is cut at CMB_SERVING_RUN_LIMIT s (120);
# none starts once CMB_SERVING_BUDGET s (540) could be passed. OUT_DIR/serving.tar.gz
# holds everything but the snapshot pickle (few files to bring back).
# Exit status: 2 on bad usage, 1 when a step failed, else 0.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "" "$@"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
py=${PYTHON:-python3}
u0=${CMB_SERVING_U0:-0.5}
run_limit=${CMB_SERVING_RUN_LIMIT:-120}
budget=${CMB_SERVING_BUDGET:-540} # seconds for the whole call: later runs are skipped past it
t0=$(date +%s)
lib="$build/pluggable/libcmb_pluggable.so"
mkdir -p "$out/logs" "$out/record" "$out/predict" "$out/runs" || exit 2
parts=${CMB_SERVING_PARTS:-ceiling scenario}
status=0
failed() { echo "gpu-serving: $*" | tee -a "$out/logs/failures.txt" >&2; status=1; }

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
    git -C "$root" rev-parse --short HEAD 2>&1
} >"$out/env.txt"

ceiling() {
# --- 1. record ---------------------------------------------------------------------------------
echo "== record at utilization $u0 (PyTorch default)" >&2
if env -u PYTORCH_CUDA_ALLOC_CONF timeout "$run_limit" "$py" "$here/serving_server.py" \
    --gpu-memory-utilization "$u0" --record "$out/record/serving.pickle" --report "$out/record/record.json" \
    >"$out/logs/record.log" 2>&1; then
    if "$py" "$root/traces/torch_snapshot_to_trace.py" --force "$out/record/serving.pickle" \
        "$out/record/torch_serving.trace" >"$out/logs/convert.log" 2>&1; then
        # say where the trace came from, after the format's header line
        desc="# recorded by scripts/serving_server.py --gpu-memory-utilization $u0 --record (defaults) on $(sed -n 3p "$out/env.txt"), $(sed -n 4p "$out/env.txt")"
        sed -i "1a $desc" "$out/record/torch_serving.trace"
    else
        failed "converting the snapshot failed (logs/convert.log)"
    fi
else
    failed "the recording run failed (logs/record.log): $(tail -1 "$out/logs/record.log")"
fi

# --- 2. predict --------------------------------------------------------------------------------------
if [ -s "$out/record/torch_serving.trace" ]; then
    for policy in torch-caching torch-expandable cmb; do
        echo "== predict $policy" >&2
        "$py" "$here/serving_ceiling.py" predict "$bin" "$out/record/torch_serving.trace" \
            "$out/record/record.json" "$policy" "$out/predict/$policy.json" >"$out/logs/predict-$policy.log" 2>&1 ||
            failed "predicting $policy failed (logs/predict-$policy.log): $(tail -1 "$out/logs/predict-$policy.log")"
    done
fi

# --- 3. run at the prediction ------------------------------------------------------------------------
predicted() { "$py" -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["predicted"])' "$1" 2>/dev/null; }
offset() { "$py" -c 'import sys; print("%.3f" % (float(sys.argv[1]) + float(sys.argv[2])))' "$1" "$2"; }

# run_server MODE UTIL: one real run; 0 when it served the whole stream
run_server() {
    mode=$1 u=$2
    log="$out/logs/run-$mode-$u.log" rep="$out/runs/$mode-$u.json"
    if [ $(($(date +%s) - t0)) -gt $((budget - run_limit)) ]; then
        failed "$mode at $u: not run, the time budget ($budget s) is spent"
        return 3
    fi
    echo "== $mode at $u" >&2
    case $mode in
    default) env -u PYTORCH_CUDA_ALLOC_CONF timeout "$run_limit" "$py" "$here/serving_server.py" \
        --gpu-memory-utilization "$u" --report "$rep" >"$log" 2>&1 ;;
    expandable) env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout "$run_limit" "$py" \
        "$here/serving_server.py" --gpu-memory-utilization "$u" --report "$rep" >"$log" 2>&1 ;;
    cmb) env -u PYTORCH_CUDA_ALLOC_CONF timeout "$run_limit" "$py" "$here/serving_server.py" \
        --gpu-memory-utilization "$u" --allocator cmb@vmm --lib "$lib" --report "$rep" >"$log" 2>&1 ;;
    esac
    rc=$?
    tail -1 "$log" >&2
    [ $rc -eq 124 ] && failed "$mode at $u: cut at ${run_limit} s"
    [ $rc -gt 1 ] && [ $rc -ne 124 ] && failed "$mode at $u: exit $rc (logs/run-$mode-$u.log)"
    return $rc
}

for pair in ${CMB_SERVING_MODES:-default:torch-caching expandable:torch-expandable cmb:cmb}; do
    mode=${pair%%:*} policy=${pair#*:}
    p=$(predicted "$out/predict/$policy.json") || p=
    if [ -z "$p" ]; then
        failed "no prediction for $policy: $mode not run"
        continue
    fi
    if [ "$mode" = cmb ] && [ ! -f "$lib" ]; then
        failed "$lib is missing: cmb not run"
        continue
    fi
    if run_server "$mode" "$p"; then
        run_server "$mode" "$(offset "$p" 0.005)"
        run_server "$mode" "$(offset "$p" 0.01)"
    else
        run_server "$mode" "$(offset "$p" -0.005)" || run_server "$mode" "$(offset "$p" -0.01)"
    fi
done

# --- 4. the table -------------------------------------------------------------------------------------
"$py" "$here/serving_ceiling.py" table "$out" >"$out/ceiling.md" 2>"$out/logs/table.log" ||
    failed "the table failed (logs/table.log)"
cat "$out/ceiling.md" >&2
}

# --- 5. the scenario on the GPU -------------------------------------------------------------------------
scenario() {
    limit=${CMB_SERVING_SCENARIO_LIMIT:-270}
    echo "== cumembench --scenario serving, GPU, quick preset on the whole GPU" >&2
    timeout "$limit" "$bin" --mode gpu --preset quick --scenario serving --param capacity=0 --allocator all \
        --out "$out/scenario" >"$out/logs/scenario.log" 2>&1 ||
        failed "the scenario run did not finish cleanly (logs/scenario.log): $(tail -1 "$out/logs/scenario.log")"
    vmm="torch-caching@vmm,torch-expandable@vmm,rmm-pool@vmm,arena@vmm,binning@vmm,bfc@vmm,cupy@vmm,buddy@vmm,cmb@vmm"
    echo "== the same, policies over vmm" >&2
    timeout "$limit" "$bin" --mode gpu --preset quick --scenario serving --param capacity=0 --allocator "$vmm" \
        --out "$out/scenario-vmm" >"$out/logs/scenario-vmm.log" 2>&1 ||
        failed "the vmm scenario run did not finish cleanly (logs/scenario-vmm.log): $(tail -1 "$out/logs/scenario-vmm.log")"
}

case " $parts " in *" ceiling "*) ceiling ;; esac
case " $parts " in *" scenario "*) scenario ;; esac
# written outside OUT_DIR, then moved in: tar must not read the directory it is writing into
tmp_tar=$(mktemp "${TMPDIR:-/tmp}/gpu-serving.XXXXXX") &&
    tar -C "$out" -czf "$tmp_tar" --exclude=./record/serving.pickle --exclude=./serving.tar.gz . &&
    mv "$tmp_tar" "$out/serving.tar.gz" || { rm -f "$tmp_tar"; failed "the archive failed"; }
echo "gpu-serving: outputs in $out ($(($(date +%s) - t0)) s)" >&2
exit $status
