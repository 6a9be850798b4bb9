#!/bin/sh
# gpu-e2e.sh - real programs under the suite's policies through
# libcmb_pluggable.so, beside the sim replay's prediction for the same
# traffic. Builds nothing; needs a GPU, PyTorch and/or CuPy.
#
#   scripts/gpu-e2e.sh BUILD_DIR OUT_DIR [torch] [cupy] [bench]   (default: all three)
#
# torch  the transformer of scripts/record_torch_transformer.py (its sweep,
#        then timed steps at one length) natively (PyTorch's own allocator,
#        default and expandable_segments:True) and under each policy below
#        through the library, each in its own process; out-of-memory probes
#        (native, NULL return, raise) under a 1 GiB cap; three more policies;
#        then the table. CMB_E2E_TORCH_POLICIES, CMB_E2E_TORCH_EXTRA,
#        CMB_E2E_CUPY_POLICIES, CMB_E2E_OOM_POLICY, CMB_E2E_OOM_MODES and
#        CMB_E2E_BENCH_PAIRS replace the defaults (the CPU smoke test,
#        tests/pluggable/test_gpu_e2e_smoke.py, runs @sim policies with
#        stand-ins for PyTorch and CuPy).
# cupy   chunked FFTs and a GEMM loop under CuPy's own pool (its requests
#        recorded with a memory hook) and under four policies; the table.
# bench  the library's lock and bookkeeping cost per alloc+free pair, 1 to
#        16 threads (host side, over the sim upstream).
#
# OUT_DIR receives at most 7 files: e2e-torch.json/.md, e2e-cupy.json/.md
# (predicted against real peak reserved, native against the library, step
# times, the OOM probes), bench-pluggable.json, traces.tar.xz (every
# recorded trace) and logs.tar.gz (each process's output, its JSON, the
# replays' results). Every job runs under a time limit, and jobs stop being
# started once CMB_E2E_BUDGET seconds (default 420) have passed, so one
# invocation stays under 9 minutes; a job cut short or crashed is a row of
# the table saying so. Exit status: 0 when every job ran, 1 when one failed,
# 2 on bad usage.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "[torch] [cupy] [bench]" "$@"
shift 2
parts=${*:-torch cupy bench}
for p in $parts; do
    case $p in torch | cupy | bench) ;; *) echo "$0: unknown part '$p' (torch, cupy, bench)" >&2; exit 2 ;; esac
done
cd "$(dirname "$0")/.." || exit 2
lib="$build/pluggable/libcmb_pluggable.so"
[ -f "$lib" ] || { echo "$0: $lib is missing: build first (make build)" >&2; exit 2; }
py=${PYTHON:-python3}
job_limit=${CMB_E2E_TIMEOUT:-150}
budget=${CMB_E2E_BUDGET:-420}
t0=$(date +%s)
work="$out/work"
rm -rf "$work"
mkdir -p "$work/runs" "$work/traces" "$work/logs" "$work/replay" || exit 2
status=0

# The policies the transformer runs under (by default cmb too, when the
# registry has it), then, after the out-of-memory probes, the extra ones; CuPy's.
if [ -n "${CMB_E2E_TORCH_POLICIES:-}" ]; then
    TORCH_POLICIES=$CMB_E2E_TORCH_POLICIES
else
    TORCH_POLICIES="torch-caching@cuda torch-expandable@vmm rmm-pool@cuda arena@cuda
binning@cuda bfc@cuda cupy@cuda buddy@cuda"
    "$bin" --list 2>/dev/null | grep -qE '^  cmb +' && TORCH_POLICIES="$TORCH_POLICIES cmb@vmm"
fi
TORCH_EXTRA=${CMB_E2E_TORCH_EXTRA:-"torch-caching:max_split_size_mb=128@cuda rmm-pool@vmm cuda@cuda"}
CUPY_POLICIES=${CMB_E2E_CUPY_POLICIES:-"cupy@cuda rmm-pool@cuda bfc@cuda torch-caching@cuda"}
OOM_POLICY=${CMB_E2E_OOM_POLICY:-bfc@cuda}
OOM_MODES=${CMB_E2E_OOM_MODES:-"null raise"}
OOM_CAP=1073741824
BENCH_PAIRS=${CMB_E2E_BENCH_PAIRS:-500000}

slug() {
    printf '%s' "$1" | tr -c 'A-Za-z0-9.=-' '_'
}

# run_job NAME COMMAND... : the command's output goes to logs/NAME.log, its
# exit status to runs/NAME.status (124: cut at the time limit).
run_job() {
    name=$1
    shift
    left=$((budget - ($(date +%s) - t0)))
    if [ "$left" -le 20 ]; then
        echo "== $name: skipped, the time budget ($budget s) is spent" >&2
        echo "skipped" >"$work/runs/$name.status"
        status=1
        return 0
    fi
    limit=$job_limit
    [ "$left" -lt "$limit" ] && limit=$left
    echo "== $name (limit $limit s)" >&2
    start=$(date +%s)
    timeout -k 10 "$limit" "$@" >"$work/logs/$name.log" 2>&1
    rc=$?
    echo "$rc" >"$work/runs/$name.status"
    echo "   exit $rc after $(($(date +%s) - start)) s: $(tail -n 1 "$work/logs/$name.log" | cut -c1-160)" >&2
    [ "$rc" -ne 0 ] && status=1
    return 0
}

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    "$py" -c 'import sys; print("python", sys.version.split()[0])'
    "$py" -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' 2>&1 | tail -n 1
    "$py" -c 'import cupy; print("cupy", cupy.__version__)' 2>&1 | tail -n 1
    git rev-parse HEAD 2>/dev/null
    echo "library: $lib"
    ldd "$lib" 2>&1
} >"$work/logs/env.txt"

torch_policies() {
    for p in $1; do
        name=torch-$(slug "$p")
        run_job "$name" env -u PYTORCH_CUDA_ALLOC_CONF "$py" scripts/e2e-torch.py run --policy "$p" --lib "$lib" \
            --trace "$work/traces/$name.trace" --out "$work/runs/$name.json"
    done
}

torch_part() {
    for conf in default expandable_segments:True; do
        name=torch-native-$(slug "$conf")
        if [ "$conf" = default ]; then
            run_job "$name" env -u PYTORCH_CUDA_ALLOC_CONF "$py" scripts/e2e-torch.py run --out "$work/runs/$name.json"
        else
            run_job "$name" env PYTORCH_CUDA_ALLOC_CONF="$conf" "$py" scripts/e2e-torch.py run \
                --out "$work/runs/$name.json"
        fi
    done
    torch_policies "$TORCH_POLICIES"
    run_job torchoom-native "$py" scripts/e2e-torch.py oom --mode native --capacity "$OOM_CAP" \
        --out "$work/runs/torchoom-native.json"
    for mode in $OOM_MODES; do
        run_job "torchoom-$mode" "$py" scripts/e2e-torch.py oom --mode "$mode" --policy "$OOM_POLICY" --lib "$lib" \
            --capacity "$OOM_CAP" --out "$work/runs/torchoom-$mode.json"
    done
    torch_policies "$TORCH_EXTRA"
    "$py" scripts/e2e-torch.py table --work "$work" --bin "$bin" --out "$out" --kind torch \
        >"$work/logs/torch-table.log" 2>&1 || { echo "torch table failed: see logs/torch-table.log" >&2; status=1; }
}

cupy_part() {
    run_job cupy-native-pool "$py" scripts/e2e-cupy.py run --native --trace "$work/traces/cupy-native-pool.trace" \
        --out "$work/runs/cupy-native-pool.json"
    for p in $CUPY_POLICIES; do
        name=cupy-$(slug "$p")
        run_job "$name" "$py" scripts/e2e-cupy.py run --policy "$p" --lib "$lib" \
            --trace "$work/traces/$name.trace" --out "$work/runs/$name.json"
    done
    "$py" scripts/e2e-torch.py table --work "$work" --bin "$bin" --out "$out" --kind cupy \
        >"$work/logs/cupy-table.log" 2>&1 || { echo "cupy table failed: see logs/cupy-table.log" >&2; status=1; }
}

bench_part() {
    run_job bench "$build/pluggable/cmb_pluggable_bench" --allocator torch-caching@sim --pairs "$BENCH_PAIRS" \
        --threads 1,2,4,8,16 --json "$out/bench-pluggable.json"
}

for p in $parts; do
    "${p}_part"
done

# What comes back: the tables, the bench, two archives.
if ls "$work/traces/"*.trace >/dev/null 2>&1; then
    if command -v xz >/dev/null; then
        tar -C "$work" -cf - traces | xz -9 -T0 >"$out/traces.tar.xz"
    else
        tar -C "$work" -czf "$out/traces.tar.gz" traces
    fi
fi
tar -C "$work" -czf "$out/logs.tar.gz" logs runs replay
rm -rf "$work"
for f in "$out"/e2e-*.md; do
    [ -f "$f" ] && cat "$f"
done
echo "gpu-e2e: $(($(date +%s) - t0)) s, outputs in $out" >&2
exit $status
