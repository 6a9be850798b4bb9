#!/bin/bash
# gpu-pluggable-contract.sh - libcmb_pluggable keeps PyTorch's contract on a
# GPU (docs/pluggable.md): record_stream, CUDA graphs, statistics, out of
# memory, memory fraction, MemPool; and its cost from 1 to 16 threads beside
# PyTorch's own allocator driven the same way.
#
#   scripts/gpu-pluggable-contract.sh OUT_DIR
#
# Uses the build in $CMB_BUILD (default .gpu-build: build/pluggable copied
# there, see docs/pluggable.md) and builds, on the GPU machine, against its
# python3's PyTorch: pluggable/torch (libcmb_torch_oom.so, the shim that
# throws c10::OutOfMemoryError, and cmb_torch_native_bench, PyTorch's
# CUDACachingAllocator called from C++ threads). Then, each check in its own
# process under a time limit (scripts/pluggable_contract.py):
#   sidestream  bfc@cuda and torch-caching@cuda, with the hooks and without
#               (the control: a kernel on stream B still reading a block that
#               stream A reuses; a pattern check counts what B read wrong)
#   graph       a small MLP captured and replayed under torch-caching@cuda,
#               cmb@vmm, rmm-pool@cuda, bfc@cuda; torch-caching@cuda without
#               the hooks (the control)
#   stats       torch.cuda's statistics against the library's counters (the e2e
#               program's transformer)
#   oom         a batch-size search catching torch.OutOfMemoryError under a
#               2 GiB capacity and a 16 TiB request (torch-caching@cuda,
#               rmm-pool@cuda)
#   fraction    set_per_process_memory_fraction(0.05) (torch-caching@cuda)
#   mempool     torch.cuda.MemPool over bfc@cuda's segments
#   bench       cmb_pluggable_bench (torch-caching over sim and over cuda, and
#               over cuda with 16 MiB thread caches, CMB_THREAD_CACHE) and
#               cmb_torch_native_bench: 1, 2, 4, 8, 16 threads, the same ring
#               of sizes and the same work between calls
# A whole run should take 4-5 minutes and never 8: each check has
# CMB_CONTRACT_TIMEOUT seconds (60), no check starts after CMB_CONTRACT_BUDGET
# seconds (300; a check not run is a row saying so), each bench has 40 s and
# none starts after the budget.
#
# OUT_DIR receives: summary.json (every check's JSON, the benches'), summary.md
# (the tables: scripts/pluggable_contract_table.py summary.json), build.log,
# run.log, and logs/ (each process's output and JSON).
# Exit status: 0 when every check passed (the controls without hooks do not
# count), 1 when one failed, 2 on bad usage or no GPU.
set -u

if [ $# -ne 1 ]; then
    echo "usage: $0 OUT_DIR   (build: \$CMB_BUILD, default .gpu-build)" >&2
    exit 2
fi
cd "$(dirname "$0")/.." || exit 2
src=$PWD
build=$(cd "${CMB_BUILD:-.gpu-build}" 2>/dev/null && pwd) || {
    echo "$0: no build directory ${CMB_BUILD:-.gpu-build} (copy build/pluggable there: docs/pluggable.md)" >&2
    exit 2
}
lib="$build/pluggable/libcmb_pluggable.so"
[ -f "$lib" ] || { echo "$0: $lib is missing" >&2; exit 2; }
mkdir -p "$1/logs" || exit 2
out=$(cd "$1" && pwd)
exec > >(tee -a "$out/run.log") 2>&1
py=${PYTHON:-python3}
budget=${CMB_CONTRACT_BUDGET:-300}
limit=${CMB_CONTRACT_TIMEOUT:-60}
t0=$SECONDS
say() { echo "== $* (at $((SECONDS - t0)) s)"; }
export CMB_PLUGGABLE_LIB="$lib"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "$0: no GPU here (nvidia-smi -L fails)" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' | tee -a "$out/gpu.txt" || {
    echo "$0: $py cannot import torch" >&2
    exit 2
}

# --- the PyTorch side, built here ------------------------------------------------------------
say "building pluggable/torch against this machine's PyTorch"
{
    cmake -S "$src/pluggable/torch" -B "$build/torch-shim" -DCMAKE_BUILD_TYPE=Release \
        -DCMB_PLUGGABLE_LIB="$lib" -DCMB_TORCH_PYTHON="$(command -v "$py")" &&
        cmake --build "$build/torch-shim" -j"$(nproc)"
} >"$out/build.log" 2>&1 || echo "building pluggable/torch failed (see build.log): out of memory is a RuntimeError, no native bench"
ls -l "$build/pluggable/libcmb_torch_oom.so" "$build/pluggable/cmb_torch_native_bench" 2>&1 | sed 's/^/   /'

# --- the checks ------------------------------------------------------------------------------
status=0
run_check() { # NAME CHECK POLICY [args...]
    local name=$1
    shift
    if [ $((SECONDS - t0)) -ge "$budget" ]; then
        echo "{\"check\": \"$1\", \"policy\": \"$2\", \"ok\": false, \"error\": \"not run: budget of $budget s spent\"}" \
            >"$out/logs/$name.json"
        status=1
        return
    fi
    say "$name"
    timeout -k 10 "$limit" "$py" "$src/scripts/pluggable_contract.py" "$@" --json "$out/logs/$name.json" \
        >"$out/logs/$name.log" 2>&1
    local rc=$?
    tail -1 "$out/logs/$name.log"
    if [ ! -s "$out/logs/$name.json" ]; then
        echo "{\"check\": \"$1\", \"policy\": \"$2\", \"ok\": false, \"error\": \"exit status $rc (timeout: 124)\"}" \
            >"$out/logs/$name.json"
    fi
    # a control without the hooks failing is what it shows, not a failure
    case $name in *-nohooks) ;; *) [ $rc -eq 0 ] || status=1 ;; esac
}

# The controls are expected to fail: they show what the hooks prevent.
for p in bfc@cuda torch-caching@cuda; do
    run_check "sidestream-$p" sidestream "$p"
    run_check "sidestream-$p-nohooks" sidestream "$p" --no-hooks
done
for p in torch-caching@cuda cmb@vmm rmm-pool@cuda bfc@cuda; do
    run_check "graph-$p" graph "$p"
done
run_check "graph-torch-caching@cuda-nohooks" graph torch-caching@cuda --no-hooks
run_check "stats-torch-caching@cuda" stats torch-caching@cuda
run_check "oom-torch-caching@cuda" oom torch-caching@cuda --capacity $((2 << 30))
run_check "oom-rmm-pool@cuda" oom rmm-pool@cuda --capacity $((2 << 30))
run_check "fraction-torch-caching@cuda" fraction torch-caching@cuda
run_check "mempool-bfc@cuda" mempool bfc@cuda

# --- the thread benchmark ----------------------------------------------------------------------
pairs=${CMB_CONTRACT_PAIRS:-200000}
bench() { # NAME COMMAND...
    local name=$1
    shift
    say "bench $name"
    timeout -k 5 40 "$@" --pairs "$pairs" --threads 1,2,4,8,16 --json "$out/logs/bench-$name.json" \
        >"$out/logs/bench-$name.log" 2>&1 || {
        echo "bench $name failed: see logs/bench-$name.log"
        status=1
    }
    tail -8 "$out/logs/bench-$name.log"
}
if [ $((SECONDS - t0)) -lt "$budget" ]; then
    CMB_PLUGGABLE_ALLOW_SIM=1 bench library-sim "$build/pluggable/cmb_pluggable_bench" --allocator torch-caching@sim
    bench library-cuda "$build/pluggable/cmb_pluggable_bench" --allocator torch-caching@cuda
    [ $((SECONDS - t0)) -lt "$budget" ] &&
        CMB_THREAD_CACHE=16MiB bench library-cuda-tcache "$build/pluggable/cmb_pluggable_bench" --allocator torch-caching@cuda
    if [ -x "$build/pluggable/cmb_torch_native_bench" ]; then
        bench torch-native "$build/pluggable/cmb_torch_native_bench"
    fi
fi

# --- summary -----------------------------------------------------------------------------------
say "summary"
"$py" - "$out" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"unreadable: {e}"}
checks = {os.path.basename(p)[:-5]: load(p) for p in sorted(glob.glob(f"{out}/logs/*.json"))
          if not os.path.basename(p).startswith("bench-")}
benches = {os.path.basename(p)[6:-5]: load(p) for p in sorted(glob.glob(f"{out}/logs/bench-*.json"))}
with open(f"{out}/gpu.txt") as f:
    gpu = f.read().strip()
with open(f"{out}/summary.json", "w") as f:
    json.dump({"gpu": gpu, "checks": checks, "bench": benches}, f, indent=1)
EOF
"$py" "$src/scripts/pluggable_contract_table.py" "$out/summary.json" | tee "$out/summary.md"
say "done (exit status $status)"
exit $status
