#!/bin/bash
# Not cmb as committed: experiments.patch, applied at c7bc039 (cmb's code as at 0725d57), adds, read in grow():
#   CMB_HWM_FLOOR=N   the budget's peak need is at least N pages from the first allocation on (an oracle:
#                     N is the trace's own peak need after one pass, which CMB_HWM_PRINT prints)
#   CMB_PEAKFLOOR=1   the budget is at least the most pages held so far (an online rule: never take
#                     pages to stay under a level already reached)
#   CMB_HWM_PRINT=1   prints the peak need in pages, handles moved and budget counters when an instance closes
# Run from the root of a worktree with the patch applied, built as build/ (Release); the traces of
# ../../../nvidia-h200/cmb-unseen-programs/record/ (the torch-expandable recordings) gunzipped into $U
# as torch_gpt.trace, torch_moe.trace, torch_unet.trace. One pass each -> frontier.txt.
set -eu
OUT=${OUT:-/tmp/cmb-known-peak}; U=${U:-/tmp/cmb-unseen}; S=traces/samples
mkdir -p $OUT; : > $OUT/frontier.txt
m() { awk -F, 'NR>1 && ($11=="driver_calls"||$11=="peak_reserved_bytes"||$11=="peak_requested_bytes"){v[$11]=$12}
      END{printf "%.4f %d", v["peak_reserved_bytes"]/v["peak_requested_bytes"], v["driver_calls"]}' $1/results.csv; }
one() { d=$1; a=$2; t=$3; shift 3; rm -rf $OUT/$d; env "$@" build/cumembench --mode sim --scenario replay --param trace=$t \
        --param passes=1 --param find_min_capacity=false --allocator $a --timeline off --repetitions 1 --out $OUT/$d > $OUT/$d.log 2>&1; }
echo "# trace setting: reserved/requested after one pass, driver calls in the pass (torch-expandable's beside)" >> $OUT/frontier.txt
for t in $S/torch_convnet.trace $S/torch_llm_decode.trace $S/torch_mlp_sweep_default.trace $S/torch_serving.trace \
         $S/torch_transformer_sweep.trace $U/torch_gpt.trace $U/torch_unet.trace $U/torch_moe.trace; do
    n=$(basename $t .trace)
    one exp-$n torch-expandable $t; e=$(m $OUT/exp-$n)
    one base-$n cmb $t CMB_HWM_PRINT=1; f=$(grep -ho 'hwm_pages [0-9]*' $OUT/base-$n.log $OUT/base-$n/run.log 2>/dev/null | head -1 | cut -d' ' -f2)
    for c in 4 8 10 16 0; do
        one k-$n-$c cmb:chunk=$c $t; one o-$n-$c cmb:chunk=$c $t CMB_HWM_FLOOR=$f; one p-$n-$c cmb:chunk=$c $t CMB_PEAKFLOOR=1
        echo "$n chunk=$c: as is $(m $OUT/k-$n-$c) | peak need known ($f pages) $(m $OUT/o-$n-$c) | never under the most held $(m $OUT/p-$n-$c) | torch-expandable $e" >> $OUT/frontier.txt
    done
done
