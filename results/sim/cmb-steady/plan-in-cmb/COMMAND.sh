#!/bin/bash
# The step planner of ../plan-in-heap/ built into cmb (option plan; plan-in-cmb.patch on 6115bda),
# replayed in sim beside cmb and torch-expandable. From the repository root; OUT defaults to a
# temporary directory; two replays run at a time (about 15 minutes on 2 cores, after the build).
# The traces: the five samples and the three recordings no rule was chosen on
# (../../../nvidia-h200/cmb-unseen-programs/record/; the held-out bert recording is not used).
# Passes: 1 and 100, except serving (1 and 10) and torch_moe (1 only) under the layout planner,
# whose layouts take too long there (plan-counters.txt gives the host time they took).
set -eu
D=$PWD/results/sim/cmb-steady/plan-in-cmb
R=$PWD/results/nvidia-h200/cmb-unseen-programs
T=${TMPDIR:-/tmp}/cmb-plan-in-cmb; mkdir -p $T; OUT=${OUT:-$T/out}; mkdir -p $OUT
gunzip -c $R/record/call1/gpt-torch-expandable.trace.gz > $T/torch_gpt.trace
gunzip -c $R/record/call2/moe-torch-expandable.trace.gz > $T/torch_moe.trace
gunzip -c $R/record/call2/unet-torch-expandable.trace.gz > $T/torch_unet.trace
S=$PWD/traces/samples
W=$T/wt
if [ ! -x $W/build/cumembench ]; then
    git worktree add --detach $W 6115bda
    (cd $W && git apply $D/plan-in-cmb.patch && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null && cmake --build build -j2 --target cumembench > /dev/null)
fi
A=cmb,cmb:plan=layout,cmb:plan=repeat,torch-expandable
run() { # NAME TRACES PASSES ALLOCATORS: the planner's counters (CMB_PLAN_DEBUG) land in run.log
    rm -rf $OUT/$1
    CMB_PLAN_DEBUG=1 $W/build/cumembench --mode sim --scenario replay --param trace=$2 --param passes=$3 \
        --param find_min_capacity=false --allocator $4 --timeline off --repetitions 1 --out $OUT/$1 > $OUT/$1.log 2>&1
}
run a $S/torch_convnet.trace,$S/torch_mlp_sweep_default.trace,$S/torch_transformer_sweep.trace 1,100 $A &
run b $T/torch_gpt.trace,$T/torch_unet.trace 1,100 $A &
wait
run c $S/torch_llm_decode.trace 1,100 $A &
run d $S/torch_serving.trace 1,10 $A &
wait
run e $T/torch_moe.trace 1 $A &
run f $T/torch_moe.trace 100 cmb,cmb:plan=repeat,torch-expandable &
wait
# the 100-pass table (torch_moe's layout planner at one pass only), then serving at 1 and 10 passes
python3 scripts/cmb_steady_table.py $OUT/a/results.csv,$OUT/b/results.csv,$OUT/c/results.csv,$OUT/e/results.csv,$OUT/f/results.csv \
    | sed "s#$T/##g; s#$S/##g" > $OUT/replay.md
python3 - $OUT/d/results.csv >> $OUT/replay.md <<'PY'
import csv, statistics, sys
from collections import defaultdict
v = defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    if r["status"] != "ok":
        continue
    p = dict(kv.split("=", 1) for kv in r["params"].split(";"))
    v[(r["allocator"] + (":" + r["options"] if r["options"] else ""), p["passes"])][r["metric"]] = float(r["value"])
print("\n| serving (sim) | reserved/requested, 1 pass | 10 passes | upstream calls, 1 pass | 10 passes | per pass after the first | driver calls, 10 passes |")
print("|---|---|---|---|---|---|---|")
for a in sorted({k[0] for k in v}):
    one, ten = v[(a, "1")], v[(a, "10")]
    c = lambda x: x["upstream_allocs"] + x["upstream_frees"]
    print(f"| {a} | {one['peak_reserved_bytes'] / one['peak_requested_bytes']:.4f} | {ten['peak_reserved_bytes'] / ten['peak_requested_bytes']:.4f} "
          f"| {c(one):.0f} | {c(ten):.0f} | {(c(ten) - c(one)) / 9:.1f} | {ten['driver_calls']:.0f} |")
PY
for n in a b c d e f; do cat $OUT/$n/results.csv | sed 1d; done | sed "1i $(head -1 $OUT/a/results.csv)" | gzip -c > $OUT/results.csv.gz
for n in a b c d e f; do
    grep -E '^=== replay/cmb:plan|^plan:' $OUT/$n/run.log | sed "s#$T/##g; s#$S/##g; s#/capacity:0B/sync:true/find_min_capacity:false##; s#/op_latency:true##"
done > $OUT/plan-counters.txt
cp $OUT/replay.md $OUT/results.csv.gz $OUT/plan-counters.txt $D/
# the patch's tests in a CMB_DEBUG build (every structure validated each 4,096 operations) -> test-debug.txt
cmake -S $W -B $W/dbg -DCMAKE_BUILD_TYPE=Debug -DCMB_DEBUG=ON -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null
cmake --build $W/dbg -j2 --target test_policy_cmb > /dev/null
(cd $W && ./dbg/tests/test_policy_cmb > $D/test-debug.txt 2>&1; echo "rc $?" >> $D/test-debug.txt)
# plan=repeat under wider budgets (keep 0.02, 0.03; slack 0.02), beside cmb with keep 0.02 -> repeat-budget.md
rm -rf $OUT/g
$W/build/cumembench --mode sim --scenario replay --param trace=$S/torch_transformer_sweep.trace,$S/torch_mlp_sweep_default.trace,$S/torch_convnet.trace \
    --param passes=1,100 --param find_min_capacity=false --timeline off --repetitions 1 --out $OUT/g \
    --allocator cmb:plan=repeat:keep=0.02,cmb:plan=repeat:keep=0.03,cmb:plan=repeat:slack=0.02,cmb:keep=0.02 > $OUT/g.log 2>&1
python3 scripts/cmb_steady_table.py $OUT/g/results.csv | sed "s#$S/##g" | sed -n '1,/^$/p' > $D/repeat-budget.md
# plan=hint (a layout that keeps the places the stretch's blocks had where they are free) -> hint.md, hint-counters.txt
rm -rf $OUT/h
CMB_PLAN_DEBUG=1 $W/build/cumembench --mode sim --scenario replay \
    --param trace=$S/torch_transformer_sweep.trace,$S/torch_mlp_sweep_default.trace,$S/torch_convnet.trace,$T/torch_gpt.trace,$T/torch_unet.trace \
    --param passes=1,100 --param find_min_capacity=false --allocator cmb:plan=hint --timeline off --repetitions 1 --out $OUT/h > $OUT/h.log 2>&1
python3 scripts/cmb_steady_table.py $OUT/h/results.csv | sed "s#$S/##g; s#$T/##g" | sed -n '1,/^$/p' > $D/hint.md
grep -E '^=== replay/cmb:plan|^plan:' $OUT/h/run.log | sed "s#$T/##g; s#$S/##g; s#/capacity:0B/sync:true/find_min_capacity:false##; s#/op_latency:true##" > $D/hint-counters.txt
