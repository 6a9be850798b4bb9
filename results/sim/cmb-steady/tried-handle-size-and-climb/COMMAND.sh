#!/bin/bash
# Experiments, not cmb as committed: experiments.patch, applied at 2dcdae4 (cmb's code as at a925a7f),
# is ../tried-budget-order-and-shortfall/experiments.patch (CMB_EXP2, CMB_HWMLOG) plus, read once a process:
#   CMB_BIGD=D, CMB_BIGM=M   a growth of n pages maps handles of up to max(chunk, min(n / D, M)) pages
#   CMB_REMAPLOG=1           prints at exit how many handles (and pages) were mapped into address space
#                            mapped before, and how many into address space never mapped
#   CMB_CLIMB=1              placement takes never-mapped address space only where nothing else fits
#   CMB_CLIMB=K (K >= 2)     placement counts each never-mapped page K times
# Run from the root of a worktree with the patch applied, built as build/ (Release); traces of
# ../../../nvidia-h200/cmb-unseen-programs/ unpacked as that directory's sim/COMMAND.sh does, in $U.
set -eu
OUT=${OUT:-/tmp/cmb-climb}; U=${U:-/tmp/cmb-unseen}; S=traces/samples
mkdir -p $OUT
five=$S/torch_convnet.trace,$S/torch_llm_decode.trace,$S/torch_mlp_sweep_default.trace,$S/torch_transformer_sweep.trace,$S/torch_serving.trace
run() { n=$1; t=$2; shift 2; env "$@" build/cumembench --mode sim --scenario replay --param trace=$t --param passes=1,100 \
    --param find_min_capacity=false --allocator cmb --timeline off --repetitions 1 --out $OUT/$n > /dev/null 2>&1
    python3 scripts/cmb_steady_table.py $OUT/$n/results.csv > $OUT/$n.md; }
# 1. handle size by growth size, the five sample traces -> bigd-D-M.md (bigd-0-16 is cmb as committed)
for v in "0 16" "4 16" "8 16" "16 16" "8 8"; do set -- $v; run bigd-$1-$2 $five CMB_BIGD=$1 CMB_BIGM=$2; done
# 2. where growths map: address space mapped before or never, passes 1 and 11 -> remap.txt
for t in $S/torch_convnet.trace $S/torch_llm_decode.trace $S/torch_mlp_sweep_default.trace $S/torch_transformer_sweep.trace \
         $U/torch_gpt.trace $U/torch_moe.trace $U/torch_unet.trace; do
    for P in 1 11; do rm -rf $OUT/r; CMB_REMAPLOG=1 build/cumembench --mode sim --scenario replay --param trace=$t --param passes=$P \
        --param find_min_capacity=false --allocator cmb --timeline off --repetitions 1 --out $OUT/r > /dev/null 2>&1
        echo "$(basename $t) passes=$P: $(grep -o 'REMAP.*' $OUT/r/run.log)" >> $OUT/remap.txt; done
done
# 3. placement kept in address space mapped before -> climb-K.md
six=$U/torch_gpt.trace,$U/torch_unet.trace,$S/torch_transformer_sweep.trace,$S/torch_convnet.trace,$S/torch_mlp_sweep_default.trace,$S/torch_llm_decode.trace
for c in 1 2 4; do run climb-$c $six CMB_CLIMB=$c; done
