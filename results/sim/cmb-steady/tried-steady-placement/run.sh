#!/bin/bash
# Replays the PyTorch sample traces at 1 and 100 passes under cmb with the
# experimental switches of experiments.patch (environment variables, read by
# that patch only), one directory per configuration, trace and pass count.
# usage: run.sh BUILD OUT   (BUILD: a build of the patched tree)
set -eu
BUILD=$1; OUT=$2
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
TRACES="torch_convnet torch_llm_decode torch_mlp_sweep_default torch_serving torch_transformer_sweep"
mkdir -p "$OUT"
one() { # config env spec trace passes
    local d="$OUT/$1/$4-$5"
    rm -rf "$d"
    env $2 CMB_DBG_GROW=1 "$BUILD/cumembench" --mode sim --scenario replay --allocator "$3" \
        --param trace="$ROOT/traces/samples/$4.trace" --param passes="$5" --param find_min_capacity=false \
        --repetitions 1 --out "$d" >/dev/null 2>&1 || echo "run.sh: $1 $4 $5 failed" >&2
}
config() { # name env spec [traces]
    local t
    for t in ${4:-$TRACES}; do
        one "$1" "$2" "$3" "$t" 1 &
        one "$1" "$2" "$3" "$t" 100
        wait
    done
}
config base "X=1" cmb
# where each large block goes, pass by pass (ALLOC lines), 4 passes
d="$OUT/placements/torch_transformer_sweep-4"; rm -rf "$d"
CMB_DBG_ALLOC=1 "$BUILD/cumembench" --mode sim --scenario replay --allocator cmb \
    --param trace="$ROOT/traces/samples/torch_transformer_sweep.trace" --param passes=4 --param find_min_capacity=false \
    --repetitions 1 --out "$d" >/dev/null 2>&1 || echo "run.sh: placements failed" >&2
config recall "CMB_RECALL=1" cmb
config low-tie "CMB_LOW_TIE=1" cmb
config no-reclaim-steady "CMB_NORECLAIM_STEADY=1" cmb
for c in 8 16 32; do config steady-chunk-$c "CMB_STEADY_CHUNK=$c" cmb torch_transformer_sweep; done
config ff-steady "CMB_FIRST_FIT=1" cmb
config ff-steady-no-reclaim "CMB_FIRST_FIT=1 CMB_NORECLAIM_STEADY=1" cmb
for k in 0.011 0.012 0.013 0.014 0.019 0.025; do
    config ff-steady-keep$k "CMB_FIRST_FIT=1" cmb:keep=$k torch_transformer_sweep
done
config ff-steady-keep0.015 "CMB_FIRST_FIT=1" cmb:keep=0.015
config ff-steady-recall-keep0.015 "CMB_FIRST_FIT=1 CMB_RECALL=1" cmb:keep=0.015
config ff-steady-top-steady "CMB_FIRST_FIT=1 CMB_TOP_RECLAIM=1 CMB_TOP_STEADY=1" cmb
config ff-steady-top-steady-keep0.015 "CMB_FIRST_FIT=1 CMB_TOP_RECLAIM=1 CMB_TOP_STEADY=1" cmb:keep=0.015
config ff-always "CMB_FIRST_FIT=1 CMB_FF_ALWAYS=1" cmb
config ff-always-keep0.015 "CMB_FIRST_FIT=1 CMB_FF_ALWAYS=1" cmb:keep=0.015
config ff-always-no-reclaim-steady "CMB_FIRST_FIT=1 CMB_FF_ALWAYS=1 CMB_NORECLAIM_STEADY=1" cmb
config ff-always-top "CMB_FIRST_FIT=1 CMB_FF_ALWAYS=1 CMB_TOP_RECLAIM=1" cmb
config ff-always-top-steady "CMB_FIRST_FIT=1 CMB_FF_ALWAYS=1 CMB_TOP_RECLAIM=1 CMB_TOP_STEADY=1" cmb
