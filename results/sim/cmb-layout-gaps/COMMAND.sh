#!/bin/bash
# cmb:layout's fallback, four variants tried in sim and kept as an experiment, not in cmb
# (layout-gaps.patch, against commit c214b5b; the variant is chosen by CMB_LAY_EXPERIMENT, and
# CMB_LAY_COUNTS=1 prints the layout's counters when an instance is destroyed):
#   gaps           a request without a place (no recorded allocation of its size within 16 ahead,
#                  or its place in use) takes the smallest free stretch of the mapped range that
#                  holds it (lay_gap), the heaps only what the range cannot hold
#   nearest        gaps, with the recorded allocation nearest the expected one either way
#                  (ahead on a tie), and a request of another size standing in for the expected
#                  one at its place where it fits there now (lay_stand_ins)
#   nearest-heaps  nearest's matching and stand-ins, the rest to the heaps as committed
#   giveup         gaps, and after the first request the range cannot hold no planned place is
#                  taken again: the range is a best-fit arena
# Each program replayed under the layout of its other recorded run, as results/sim/cmb-layout
# does (the committed behaviour's rows are there: replay.md), passes 1 and 100 with the smallest
# device found; gaps and nearest on moe at 100 passes without it (the gap walks made that search too slow to wait for).
# From the repository root; makes table.md and counters.txt.
set -eu
D=results/sim/cmb-layout-gaps
R=results/nvidia-h200/cmb-unseen-programs/record
T=${TMPDIR:-/tmp}/cmb-layout-gaps; mkdir -p $T/src $T/out
git worktree add -f $T/src c214b5b && (cd $T/src && git apply $OLDPWD/$D/layout-gaps.patch)
cmake -S $T/src -B $T/build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build $T/build -j2 --target cumembench >/dev/null
for p in gpt:call1 moe:call2 unet:call2 convnet:call1; do
    n=${p%%:*}; c=${p##*:}; m=$n; [ $n = convnet ] && m=resnet
    gunzip -c $R/$c/$n-torch-expandable.trace.gz > $T/torch_$m.trace
    gunzip -c $R/$c/$n-cmb.trace.gz > $T/cmbrun_$m.trace
done
S=traces/samples
run() { # VARIANT NAME TRACE LAYOUT PASSES FINDMIN
    CMB_LAY_EXPERIMENT=$1 CMB_LAY_COUNTS=1 $T/build/cumembench --mode sim --out $T/out/$1-$2-$5 --scenario replay \
        --param trace=$3 --param passes=$5 --param find_min_capacity=$6 --allocator "cmb:layout=$4" \
        --repetitions 1 --timeline off > $T/out/$1-$2-$5.log 2>&1
}
for v in gaps nearest nearest-heaps giveup; do
    run $v mlp $S/torch_mlp_sweep_expandable.trace $S/torch_mlp_sweep_default.trace 1,100 true
    for m in gpt unet resnet; do run $v $m $T/torch_$m.trace $T/cmbrun_$m.trace 1,100 true; done
done
for v in nearest-heaps giveup; do run $v moe $T/torch_moe.trace $T/cmbrun_moe.trace 1,100 true; done
for v in gaps nearest; do
    run $v moe $T/torch_moe.trace $T/cmbrun_moe.trace 1 true
    run $v moe $T/torch_moe.trace $T/cmbrun_moe.trace 100 false
done
python3 $D/table.py $T/out > $D/table.md
# the layout's counters on moe, one pass, each variant and the committed behaviour (off)
for v in off gaps nearest nearest-heaps giveup; do
    CMB_LAY_EXPERIMENT=$v CMB_LAY_COUNTS=1 $T/build/cumembench --mode sim --out $T/out/cnt-$v --scenario replay \
        --param trace=$T/torch_moe.trace --param passes=1 --allocator "cmb:layout=$T/cmbrun_moe.trace" \
        --repetitions 1 --timeline off > /dev/null 2>&1
    echo "$v: $(grep -h 'layout counters' $T/out/cnt-$v/run.log | head -1 | sed 's/ grows.*//')"
done > $D/counters.txt
