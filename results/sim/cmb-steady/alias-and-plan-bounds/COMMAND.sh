#!/bin/bash
# The model and the bound of README.md over the five sample traces and the three recordings no
# rule was chosen on (../../../nvidia-h200/cmb-unseen-programs/record/, as its sim/COMMAND.sh names
# them). From the repository root; OUT defaults to a temporary directory. Needs numpy (plan_bound.py).
set -eu
D=results/sim/cmb-steady/alias-and-plan-bounds
R=results/nvidia-h200/cmb-unseen-programs
T=${TMPDIR:-/tmp}/cmb-alias; mkdir -p $T; OUT=${OUT:-$T/out}; mkdir -p $OUT
gunzip -c $R/record/call1/gpt-torch-expandable.trace.gz > $T/torch_gpt.trace
gunzip -c $R/record/call2/moe-torch-expandable.trace.gz > $T/torch_moe.trace
gunzip -c $R/record/call2/unet-torch-expandable.trace.gz > $T/torch_unet.trace
S=traces/samples
TR="$S/torch_convnet.trace $S/torch_llm_decode.trace $S/torch_mlp_sweep_default.trace $S/torch_serving.trace
    $S/torch_transformer_sweep.trace $T/torch_gpt.trace $T/torch_moe.trace $T/torch_unet.trace"
# 1. aliases: handle size, which free handle, slack -> alias.md (100 passes)
echo "| trace | layout | handle pages | pick | slack | handles / peak requested, 1 pass | 100 passes | upstream calls a pass after the first | driver calls, 1 pass | 100 passes |" > $OUT/alias.md
echo "|---|---|---|---|---|---|---|---|---|---|" >> $OUT/alias.md
for v in "1 mru 0" "1 lru 0" "1 mru 0.02" "1 mru 0.08" "4 mru 0" "4 mru 0.01" "10 mru 0"; do set -- $v
    python3 $D/alias_model.py --handle-pages $1 --pick $2 --slack $3 --passes 100 $TR >> $OUT/alias.md
done
# 2. the free handle whose slots come back furthest ahead (20 passes: slower) -> belady.md
echo "| trace | layout | handle pages | pick | slack | handles / peak requested, 1 pass | 20 passes | upstream calls a pass after the first | driver calls, 1 pass | 20 passes |" > $OUT/belady.md
echo "|---|---|---|---|---|---|---|---|---|---|" >> $OUT/belady.md
python3 $D/alias_model.py --pick belady --slack 0.02 --passes 20 $S/torch_transformer_sweep.trace $T/torch_gpt.trace $T/torch_unet.trace >> $OUT/belady.md
# 3. a layout planned from the whole pass -> plan.txt
/usr/bin/python3 $D/plan_bound.py $TR > $OUT/plan.txt
# 4. aliases over the planned layout instead of best fit (20 passes) -> plan-alias.md
echo "| trace | layout | handle pages | pick | slack | handles / peak requested, 1 pass | 20 passes | upstream calls a pass after the first | driver calls, 1 pass | 20 passes |" > $OUT/plan-alias.md
echo "|---|---|---|---|---|---|---|---|---|---|" >> $OUT/plan-alias.md
for sl in 0 0.02; do
    /usr/bin/python3 $D/alias_model.py --layout plan --slack $sl --passes 20 $S/torch_mlp_sweep_default.trace $T/torch_unet.trace $T/torch_moe.trace >> $OUT/plan-alias.md
done
# 5. how much of each recording repeats an earlier stretch request for request -> repeats.txt
python3 $D/repeats.py $TR > $OUT/repeats.txt
