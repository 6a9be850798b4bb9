#!/bin/bash
# One call on an NVIDIA H200 (driver 580.159.04, CUDA 13.0), from the repository root, with the build
# of 5654c7c carried as .gpu-build/layout.tar.xz (as ../cmb-layout-e2e/COMMAND.sh makes it): each
# sample trace replayed once and 100 times over the real driver under cmb@vmm, torch-expandable@vmm
# and cmb with the trace's own layout, 3 repetitions (serving: one, without cmb@vmm). The call ran
# past its 480 s limit during serving's 100 passes: serving has its one-pass cases only, and the
# files came back in a second call (tar of what the first had written). results.csv and log.txt
# are gzipped here; replay.md:
#   for t in */; do gunzip -c $t/results.csv.gz > /tmp/$t.csv; done
#   python3 scripts/cmb_steady_table.py --candidate cmb:layout= /tmp/torch_convnet.csv,...
set -u
tar xJf .gpu-build/layout.tar.xz -C .gpu-build
O=/tmp/cmb-layout-vmm; mkdir -p $O; nvidia-smi > $O/nvidia-smi.txt 2>&1
B=.gpu-build/layout/cumembench; S=traces/samples; st=$(date +%s)
for t in torch_convnet torch_llm_decode torch_mlp_sweep_default torch_transformer_sweep; do
    $B --mode gpu --out $O/$t --scenario replay --param trace=$S/$t.trace --param passes=1,100 \
        --param find_min_capacity=false --allocator "cmb@vmm,torch-expandable@vmm,cmb:layout=$S/$t.trace@vmm" \
        --repetitions 3 --timeline off > $O/$t.log 2>&1
    echo "$t rc $? $(( $(date +%s) - st )) s" | tee -a $O/call-log.txt
done
$B --mode gpu --out $O/torch_serving --scenario replay --param trace=$S/torch_serving.trace --param passes=1,100 \
    --param find_min_capacity=false --allocator "torch-expandable@vmm,cmb:layout=$S/torch_serving.trace@vmm" \
    --repetitions 1 --timeline off > $O/torch_serving.log 2>&1
tar czf $OUT/vmm.tgz -C /tmp cmb-layout-vmm
