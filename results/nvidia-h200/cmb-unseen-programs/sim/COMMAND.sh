#!/bin/bash
# Sim replays of the three recordings no policy was tuned on (the torch-expandable@vmm recordings
# of record/: GPT-style decoder, mixture of experts, U-Net), named torch_gpt, torch_moe, torch_unet.
# Run from the repository root with a build of main (build/cumembench); OUT defaults to a temporary directory.
set -eu
R=results/nvidia-h200/cmb-unseen-programs
T=${TMPDIR:-/tmp}/cmb-unseen; mkdir -p $T; OUT=${OUT:-$T/out}
gunzip -c $R/record/call1/gpt-torch-expandable.trace.gz > $T/torch_gpt.trace
gunzip -c $R/record/call2/moe-torch-expandable.trace.gz > $T/torch_moe.trace
gunzip -c $R/record/call2/unet-torch-expandable.trace.gz > $T/torch_unet.trace
TR=$T/torch_gpt.trace,$T/torch_moe.trace,$T/torch_unet.trace
# 1. cmb beside PyTorch's two allocators (emulations), one pass and 100, smallest device too -> replay.md, base-results.csv.gz
build/cumembench --mode sim --scenario replay --param trace=$TR --param passes=1,100 --param find_min_capacity=true \
    --allocator cmb,torch-expandable,torch-caching --timeline off --repetitions 1 --out $OUT/base
python3 scripts/cmb_steady_table.py $OUT/base/results.csv > $OUT/replay.md
# 2. what keep (the budget's widening once steady) buys -> keep.md, keep-results.csv.gz
build/cumembench --mode sim --scenario replay --param trace=$TR --param passes=1,100 --param find_min_capacity=false \
    --allocator cmb:keep=0.02,cmb:keep=0.03,cmb:keep=0.05,cmb:keep=0.1 --timeline off --repetitions 1 --out $OUT/keep
python3 scripts/cmb_steady_table.py $OUT/keep/results.csv > $OUT/keep.md
# 3. a placement that never moves pages (../../sim/cmb-steady/placement-bound/bound.py) -> bound.txt
python3 results/sim/cmb-steady/placement-bound/bound.py $T/torch_gpt.trace $T/torch_moe.trace $T/torch_unet.trace > $OUT/bound.txt
# 4. the budget variants of ../../sim/cmb-steady/tried-budget-order-and-shortfall (its experiments.patch,
#    applied in a separate worktree at 6261e90 or later, built as build-exp) -> exp*.md, exp*-results.csv.gz
if [ -x build-exp/cumembench ]; then
    for v in "33 CMB_EXP2=33 CMB_X33=0" "30 CMB_EXP2=30" "20 CMB_EXP2=20" "21 CMB_EXP2=21"; do set -- $v; n=$1; shift
        env "$@" build-exp/cumembench --mode sim --scenario replay --param trace=$TR --param passes=1,100 \
            --param find_min_capacity=false --allocator cmb --timeline off --repetitions 1 --out $OUT/exp$n
        python3 scripts/cmb_steady_table.py $OUT/exp$n/results.csv > $OUT/exp$n.md
    done
fi
# 5. each recording replayed under the policy it ran under: the replay's peak reserved against the
#    peak the library measured in the program (record/*/NAME.json) -> exact.txt
for j in $R/record/call*/*-cmb.json $R/record/call*/*-torch-expandable.json; do
    n=$(basename $j .json); pol=${n#*-}
    gunzip -c ${j%.json}.trace.gz > $T/$n.trace
    build/cumembench --mode sim --scenario replay --param trace=$T/$n.trace --param passes=1 --param find_min_capacity=false \
        --allocator $pol --timeline off --repetitions 1 --out $OUT/exact-$n > /dev/null 2>&1
    python3 - $j $OUT/exact-$n/results.csv $n >> $OUT/exact.txt <<'PY'
import csv, json, sys
measured = json.load(open(sys.argv[1]))["reserved_peak"]
sim = [int(float(r["value"])) for r in csv.DictReader(open(sys.argv[2])) if r["metric"] == "peak_reserved_bytes"][0]
print(f"{sys.argv[3]}: measured {measured:,} B, replayed {sim:,} B, {'exact' if sim == measured else 'DIFFERENT'}")
PY
done
