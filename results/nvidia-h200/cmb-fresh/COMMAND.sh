#!/bin/bash
# cmb@vmm against cmb:fresh=4096@vmm (growths avoid ranges the budget moved within 4096 allocations,
# so fewer maps wait for park_after's old mappings), same build (working tree of dcb80e8 + the fresh
# option, default off), CMB_PROFILE=1, native expandable beside; transformer, GPT-style decoder, convnet;
# 16 steps (transformer, gpt) / 24 (convnet), 3 runs each, modes alternating
set -u
mkdir -p .gpu-build/cur && tar xJf .gpu-build/cur.tar.xz -C .gpu-build/cur
W=$OUT/w; mkdir -p $W/e2e
nvidia-smi > $W/nvidia-smi.txt 2>&1
python3 -c "import torch;print(torch.__version__, torch.version.cuda)" > $W/torch.txt 2>&1
lib=$PWD/.gpu-build/cur/pluggable/libcmb_pluggable.so
start=$(date +%s)
for r in 1 2 3; do
  for p in transformer gpt convnet; do
    steps=16; [ $p = convnet ] && steps=24
    for m in native-expandable cmb cmb-fresh; do
      base=$W/e2e/$p-$m-$r
      if [ $(( $(date +%s)-start )) -gt 520 ]; then echo "skipped: $p $m run $r" | tee -a $W/log.txt $W/e2e/skipped.txt; continue; fi
      case $m in
      native-expandable) env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 scripts/e2e-steady.py run --program $p --steps $steps --out $base.json > $base.log 2>&1 ;;
      cmb) env -u PYTORCH_CUDA_ALLOC_CONF CMB_PROFILE=1 python3 scripts/e2e-steady.py run --program $p --steps $steps --policy cmb@vmm --lib $lib --out $base.json > $base.log 2>&1 ;;
      cmb-fresh) env -u PYTORCH_CUDA_ALLOC_CONF CMB_PROFILE=1 python3 scripts/e2e-steady.py run --program $p --steps $steps --policy cmb:fresh=4096@vmm --lib $lib --out $base.json > $base.log 2>&1 ;;
      esac
      echo "$p $m $r rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
    done
  done
done
python3 scripts/e2e-steady.py table --work $W/e2e --out $W/e2e.md > /dev/null 2>&1
grep -h "cumembench profile" $W/e2e/*.log >> $W/log.txt
cd $OUT && tar czf w.tgz w && rm -rf w
