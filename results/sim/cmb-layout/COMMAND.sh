#!/bin/bash
# cmb:layout in sim (commit 5654c7c): each trace replayed once and 100 times (and its smallest
# device found) under cmb, torch-expandable, torch-caching, cmb with the layout of the very trace,
# and, where a second recorded run of the same program exists, cmb with the layout of that other
# run: the MLP sweep's two recordings (traces/samples), and the gpt, moe, unet and ResNet-50
# (e2e-steady.py's convnet) programs recorded twice in ../../nvidia-h200/cmb-unseen-programs/record
# (under torch-expandable@vmm and under cmb@vmm; the held-out bert recording is not used).
# From the repository root, with build/cumembench; OUT defaults to a temporary directory.
# Makes replay.md (scripts/cmb_steady_table.py over the nine runs), results-*.csv.gz and moe-runs.txt.
set -eu
D=results/sim/cmb-layout
R=results/nvidia-h200/cmb-unseen-programs/record
T=${TMPDIR:-/tmp}/cmb-layout; mkdir -p $T; OUT=${OUT:-$T/out}; mkdir -p $OUT
for p in gpt:call1 moe:call2 unet:call2 convnet:call1; do
    n=${p%%:*}; c=${p##*:}; m=$n; [ $n = convnet ] && m=resnet
    gunzip -c $R/$c/$n-torch-expandable.trace.gz > $T/torch_$m.trace
    gunzip -c $R/$c/$n-cmb.trace.gz > $T/cmbrun_$m.trace
done
S=traces/samples
one() { # TRACE OTHER NAME
    a="cmb,torch-expandable,torch-caching,cmb:layout=$1"; [ -n "$2" ] && a="$a,cmb:layout=$2"
    build/cumembench --mode sim --out $OUT/$3 --scenario replay --param trace=$1 --param passes=1,100 \
        --param find_min_capacity=true --allocator "$a" --repetitions 1 --timeline off > $OUT/$3.log 2>&1
}
one $S/torch_convnet.trace "" convnet
one $S/torch_llm_decode.trace "" decode
one $S/torch_mlp_sweep_expandable.trace $S/torch_mlp_sweep_default.trace mlp
one $S/torch_serving.trace "" serving
one $S/torch_transformer_sweep.trace "" transformer
for m in gpt moe unet resnet; do one $T/torch_$m.trace $T/cmbrun_$m.trace $m; done
L=; for n in convnet decode mlp serving transformer gpt moe unet resnet; do
    L="$L${L:+,}$OUT/$n/results.csv"; gzip -9c $OUT/$n/results.csv > $D/results-$n.csv.gz
done
python3 scripts/cmb_steady_table.py --candidate cmb:layout= $L | sed "s|$T/||g; s|traces/samples/||g" > $D/replay.md
# the two moe runs' allocation sequences (rounded sizes) side by side
/usr/bin/python3 - $T/cmbrun_moe.trace $T/torch_moe.trace > $D/moe-runs.txt <<'PY'
import difflib, sys
def seq(p):
    return [(int(l.split()[2]) + 511) // 512 * 512 for l in open(p) if l[0] == 'a']
a, b = seq(sys.argv[1]), seq(sys.argv[2])
ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
same = sum(i2 - i1 for t, i1, i2, j1, j2 in ops if t == 'equal')
first = next(i1 for t, i1, i2, j1, j2 in ops if t != 'equal')
print("moe, two recorded runs: %d and %d allocations; the same rounded size at the same place in "
      "the matched sequence for %d; the first difference at allocation %d" % (len(a), len(b), same, first))
for t, i1, i2, j1, j2 in ops[:12]:
    print(t, i1, i2, j1, j2, a[i1:min(i2, i1 + 3)], b[j1:min(j2, j1 + 3)])
PY
