#!/bin/bash
# gpu-real-vs-emulated.sh - every emulation beside its real original on a GPU
# (docs/real.md): builds the plug-ins that must be built there, runs the
# pairs, writes the comparison tables.
#
#   scripts/gpu-real-vs-emulated.sh BUILD_DIR OUT_DIR [PART]
#
# BUILD_DIR holds a built cumembench (with build/real/libcmb_real_rmm.so and
# the librmm.so / librapids_logger.so beside it where librmm was found at
# build time). On the GPU machine the script first builds real/torch and
# real/cupy into BUILD_DIR/real against that machine's python3 (its PyTorch
# and CuPy), then runs, each group as one cumembench run (one results
# directory, emulation and original side by side):
#   fastpath  sizes 512B, 64KiB, 2MiB, 64MiB, 1000 blocks live   (~2 min on an H100)
#   churn     the quick preset                                    (~2 min)
#   replay    traces/samples/torch_mlp_sweep_default.trace and
#             torch_transformer_sweep.trace                       (~1 min)
# PART is all (default), or one of fastpath, churn, replay (the build, about
# a minute, comes first in every part). Every case runs CMB_REPETITIONS
# repetitions (default 9; the tables give the median and min-max of them). A whole run should take 5-6 minutes;
# split it into parts if it comes near 9.
#
# OUT_DIR receives (at most 8 files, none deeper than one folder):
#   real-vs-emulated.md   one table per pair (scripts/real_vs_emulated.py)
#   list.txt              cumembench --list: which real allocators were found
#   build.log             the plug-ins' configure and build
#   <group>.tar.gz        each group's results directory (results.csv,
#                         results.json, run.log, timelines)
#   run.log               this script's own log
# Tables of several parts together, afterwards, anywhere:
#   scripts/real_vs_emulated.py OUT1/fastpath.tar.gz OUT2/churn.tar.gz ... -o table.md
#
# Exit status: 0 when every case ran or was skipped, 1 when a case failed,
# 2 on bad usage or no GPU. CMB_MODE=sim runs the same in sim mode, with no
# GPU (the real allocators are all skipped): the tests check the script so.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "[all|fastpath|churn|replay]" "$@"
part=${3:-all}
case $part in
all | fastpath | churn | replay) ;;
*) echo "$0: PART is all, fastpath, churn or replay, not '$part'" >&2; exit 2 ;;
esac

# Replay's sample traces are named relative to the source tree.
cd "$(dirname "$0")/.." || exit 2
src=$PWD
exec > >(tee -a "$out/run.log") 2>&1
t0=$SECONDS
say() { echo "== $* (at $((SECONDS - t0)) s)"; }

mode=${CMB_MODE:-gpu}
if [ "$mode" = gpu ]; then
    if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "$0: no GPU here (nvidia-smi -L fails)" >&2
        exit 2
    fi
    nvidia-smi -L
fi

# --- the plug-ins built here, against this machine's PyTorch and CuPy ----------------------------
say "building real/torch and real/cupy into $build/real"
py=$(python3 -c 'import sys; print(sys.executable)') # the interpreter, not a launcher
for lib in torch cupy; do
    {
        cmake -S "$src/real/$lib" -B "$build/real-$lib" -DCMAKE_BUILD_TYPE=Release \
            -DCMB_REAL_OUT="$build/real" -DCMB_REAL_PYTHON="$py" &&
            cmake --build "$build/real-$lib" -j"$(nproc)"
    } >>"$out/build.log" 2>&1 || echo "building real/$lib failed: see build.log (its allocators are skipped)"
done
grep -h "real:" "$out/build.log" | sort -u
"$bin" --list >"$out/list.txt" 2>&1
sed -n '/^real allocators/,$p' "$out/list.txt" | grep -E "^  real:|found|NOT FOUND"

# --- the pairs --------------------------------------------------------------------------------------
pairs="torch-caching torch-expandable rmm-pool arena binning cuda-async-retain cupy"
allocs=""
for a in $pairs; do
    allocs="$allocs${allocs:+,}$a,real:$a"
done
# the baseline: real:cupy's CPython call alone (docs/real.md)
allocs="$allocs,real:cupy:null_call=true"

reps=${CMB_REPETITIONS:-9}
status=0
run_group() { # NAME cumembench-options...
    local name=$1
    shift
    say "$name: $allocs"
    rm -rf "${out:?}/$name"
    "$bin" --mode "$mode" --allocator "$allocs" --out "$out/$name" --repetitions "$reps" "$@"
    local rc=$?
    [ $rc -eq 2 ] && { echo "$name: cumembench refused its input"; status=2; }
    [ $rc -eq 1 ] && status=$((status ? status : 1))
    tar -C "$out" -czf "$out/$name.tar.gz" "$name" && rm -rf "${out:?}/$name"
}

if [ "$part" = all ] || [ "$part" = fastpath ]; then
    run_group fastpath --scenario fastpath --preset quick --param size=512B,64KiB,2MiB,64MiB --param live=1000
fi
if [ "$part" = all ] || [ "$part" = churn ]; then
    run_group churn --scenario churn --preset quick
fi
if [ "$part" = all ] || [ "$part" = replay ]; then
    run_group replay --scenario replay --preset quick \
        --param trace=traces/samples/torch_mlp_sweep_default.trace,traces/samples/torch_transformer_sweep.trace
fi

say "tables"
runs=$(ls "$out"/*.tar.gz 2>/dev/null)
if [ -n "$runs" ]; then
    # shellcheck disable=SC2086
    python3 "$src/scripts/real_vs_emulated.py" $runs -o "$out/real-vs-emulated.md" && cat "$out/real-vs-emulated.md"
fi
say "done, exit $status"
exit $status
