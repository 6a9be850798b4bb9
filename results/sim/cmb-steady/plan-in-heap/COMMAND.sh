#!/bin/bash
# The tables of README.md: plan_heap_model.py over the five sample traces and the three
# recordings no rule was chosen on (../../../nvidia-h200/cmb-unseen-programs/record/, named as
# its sim/COMMAND.sh names them; the held-out bert recording is not used). From the repository
# root; needs numpy (Debian's python3-numpy for /usr/bin/python3). OUT defaults to a temporary
# directory; two runs at a time.
set -eu
D=results/sim/cmb-steady/plan-in-heap
R=results/nvidia-h200/cmb-unseen-programs
T=${TMPDIR:-/tmp}/cmb-plan-in-heap; mkdir -p $T; OUT=${OUT:-$T/out}; mkdir -p $OUT
gunzip -c $R/record/call1/gpt-torch-expandable.trace.gz > $T/torch_gpt.trace
gunzip -c $R/record/call2/moe-torch-expandable.trace.gz > $T/torch_moe.trace
gunzip -c $R/record/call2/unet-torch-expandable.trace.gz > $T/torch_unet.trace
S=traces/samples
TR="$S/torch_convnet.trace $S/torch_llm_decode.trace $S/torch_mlp_sweep_default.trace $S/torch_serving.trace
    $S/torch_transformer_sweep.trace $T/torch_gpt.trace $T/torch_moe.trace $T/torch_unet.trace"
M="/usr/bin/python3 $D/plan_heap_model.py --passes 10"
one() {  # name, options...: one table row per trace, in TR's order
    local n=$1; shift
    for t in $TR; do $M "$@" $t; done > $OUT/$n.rows
}
one bestfit --no-plan --slack 0.01 &
# torch_moe is not run under the planner: the model's greedy layout is quadratic in the period, and
# on torch_moe, whose sizes follow its routing, it did not finish two passes in the time tried here.
TR="${TR/$T\/torch_moe.trace/}" one plan --slack 0.01 &
wait
TR="$S/torch_transformer_sweep.trace $T/torch_gpt.trace $T/torch_unet.trace" one plan-slack0.02 --slack 0.02 &
TR="$S/torch_transformer_sweep.trace $S/torch_mlp_sweep_default.trace $S/torch_convnet.trace" one plan-30 --slack 0.01 --passes 30
wait
TR="$S/torch_convnet.trace $S/torch_mlp_sweep_default.trace $S/torch_transformer_sweep.trace $T/torch_unet.trace" one plan-span --slack 0.01 --budget span
$M --per-pass --slack 0.01 $S/torch_llm_decode.trace $S/torch_mlp_sweep_default.trace $T/torch_gpt.trace $T/torch_unet.trace > $OUT/per-pass.txt
{
    echo "| trace | placement | slack | passes | mapped / peak requested, 1 pass | all passes | page maps / unmaps, 1 pass | maps in the 1st pass's 2nd half | maps / unmaps a pass after the 1st | in the last pass | served from a plan, 1st pass / last |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    cat $OUT/bestfit.rows $OUT/plan.rows $OUT/plan-slack0.02.rows $OUT/plan-30.rows $OUT/plan-span.rows
} > $OUT/model.md
echo "$OUT/model.md $OUT/per-pass.txt"
