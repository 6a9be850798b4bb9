#!/bin/bash
# Not cmb as committed: experiments.patch, applied at 27f3469 (cmb's code as at 0725d57), read once a process:
#   CMB_XBIG=N      a growth that raises the peak need maps the pages its block covers wholly in handles of up
#                   to N pages (chunk's 4 elsewhere)
#   CMB_XSPLIT=1    before a block is placed over part of a handle longer than chunk lying wholly in a free
#                   block whose frees are known complete, that handle is unmapped and its pages mapped again in
#                   chunk-sized handles (a 2 MiB handle for a page the block shares), so the block pins no more
#                   than with chunk-sized handles; CMB_XSPLIT=2 also where the frees are not known complete (a
#                   bound: on a GPU that would wait for the old work or fault)
#   (CMB_XNONE=1 sets nothing: cmb as committed.) Prints "cmb-x big B splits S skipped K hwm H" at close.
# Run from the root of a worktree with the patch applied, built as build/ (Release) -> lazy-split.txt; counters.txt: the transformer alone with --repetitions 1, passes 1 and 100, the line printed at close
set -eu
OUT=${OUT:-/tmp/cmb-lazy-split}; mkdir -p $OUT; : > $OUT/lazy-split.txt
m() { awk -F, 'NR>1 && ($11=="driver_calls"||$11=="peak_reserved_bytes"||$11=="peak_requested_bytes"){v[$11]=$12}
      END{printf "%.4f %d", v["peak_reserved_bytes"]/v["peak_requested_bytes"], v["driver_calls"]}' $1/results.csv; }
for t in torch_convnet torch_mlp_sweep_default torch_llm_decode torch_transformer_sweep; do
  for v in "CMB_XNONE=1" "CMB_XBIG=16" "CMB_XBIG=16 CMB_XSPLIT=1" "CMB_XBIG=16 CMB_XSPLIT=2"; do
    for P in 1 100; do d=$OUT/$t-$(echo $v | tr ' =' '__')-$P; rm -rf $d
      env $v build/cumembench --mode sim --scenario replay --param trace=traces/samples/$t.trace --param passes=$P \
          --param find_min_capacity=false --allocator cmb --timeline off --out $d > $d.log 2>&1
      echo "$t $v passes=$P: $(m $d)" >> $OUT/lazy-split.txt
    done
  done
done
