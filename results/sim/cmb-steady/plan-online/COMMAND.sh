#!/bin/bash
# An online step planner inside cmb (option plan), tried and not merged: plan-online.patch (and
# plan-online-desync.patch, the same with served blocks that outlive their plan stopping the
# serving) applied to 2d84337, each built in a worktree of its own. From the repository root; OUT
# defaults to a temporary directory. The traces: the five samples and the three recordings no rule
# was chosen on (../../../nvidia-h200/cmb-unseen-programs/sim/COMMAND.sh names them).
set -eu
D=$PWD/results/sim/cmb-steady/plan-online
R=results/nvidia-h200/cmb-unseen-programs
T=${TMPDIR:-/tmp}/cmb-plan-online; mkdir -p $T; OUT=${OUT:-$T/out}; mkdir -p $OUT
gunzip -c $R/record/call1/gpt-torch-expandable.trace.gz > $T/torch_gpt.trace
gunzip -c $R/record/call2/moe-torch-expandable.trace.gz > $T/torch_moe.trace
gunzip -c $R/record/call2/unet-torch-expandable.trace.gz > $T/torch_unet.trace
S=$PWD/traces/samples
TR=$S/torch_convnet.trace,$S/torch_llm_decode.trace,$S/torch_mlp_sweep_default.trace,$S/torch_serving.trace
TR=$TR,$S/torch_transformer_sweep.trace,$T/torch_gpt.trace,$T/torch_moe.trace,$T/torch_unet.trace
for v in no-desync desync; do
    p=$D/plan-online.patch; [ $v = desync ] && p=$D/plan-online-desync.patch
    W=$T/wt-$v; git worktree add --detach $W 2d84337
    (cd $W && git apply $p && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null &&
        cmake --build build -j2 --target cumembench > /dev/null)
    # 1. one pass and 100 under cmb with the planner, beside cmb and torch-expandable; the planner's
    #    counters (CMB_PLAN_DEBUG, printed by the patch when an instance closes) land in run.log
    CMB_PLAN_DEBUG=1 $W/build/cumembench --mode sim --scenario replay --param trace=$TR --param passes=1,100 \
        --param find_min_capacity=false --allocator cmb,cmb:plan=true,torch-expandable --timeline off \
        --repetitions 1 --out $OUT/$v
    grep -B1 '^plan:' $OUT/$v/run.log | grep -v '^--$' | sed "s#$T/##; s#$S/##" > $OUT/plan-counters-$v.txt
done
# both variants in one table (their cmb:plan=true rows told apart in the options column) -> replay.md
python3 - $OUT <<'PY'
import csv, sys
out = sys.argv[1]
rows = []
for v in ("desync", "no-desync"):
    r = csv.DictReader(open(f"{out}/{v}/results.csv"))
    fields = r.fieldnames
    for row in r:
        if row["allocator"] == "cmb" and row.get("options") == "plan=true":
            row["options"] = f"plan=true ({v.replace('-', ' ')})"
        elif v == "no-desync":
            continue
        rows.append(row)
w = csv.DictWriter(open(f"{out}/results.csv", "w", newline=""), fieldnames=fields)
w.writeheader()
w.writerows(rows)
PY
python3 scripts/cmb_steady_table.py $OUT/results.csv | sed "s#$T/##" > $OUT/replay.md
gzip -c $OUT/results.csv > $OUT/results.csv.gz
# 2. the planner alone: how much of each trace it serves, and each layout's span -> coverage.txt
W=$T/wt-no-desync
gcc -O2 -I$W -o $T/coverage $D/coverage.c $W/allocators/cmb_plan.c $W/common/cmb_hashmap.c $W/common/cmb_units.c \
    $W/traces/trace_load.c $W/traces/trace_reader.c -lm
for f in ${TR//,/ }; do
    $T/coverage $f 1 | sed "s#$T/##; s#$S/#traces/samples/#"
    $T/coverage $f 2 | grep -v '^  layout' | sed "s#$T/##; s#$S/#traces/samples/#"
done > $OUT/coverage.txt
