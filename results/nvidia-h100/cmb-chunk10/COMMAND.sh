#!/bin/bash
# what the handle size costs in time: cmb@vmm (chunk=4, 8 MiB handles) against cmb:chunk=10@vmm
# (20 MiB, PyTorch's expandable segments' size) through one build of libcmb_pluggable (c7c2f81),
# CMB_PROFILE=1, native expandable beside; transformer and GPT-style decoder, 16 steps, 3 runs each
set -u
mkdir -p .gpu-build/cur && tar xJf .gpu-build/cur.tar.xz -C .gpu-build/cur
W=$OUT/w; mkdir -p $W/e2e
nvidia-smi > $W/nvidia-smi.txt 2>&1
python3 -c "import torch;print(torch.__version__, torch.version.cuda)" > $W/torch.txt 2>&1
lib=$PWD/.gpu-build/cur/pluggable/libcmb_pluggable.so
start=$(date +%s)
for r in 1 2 3; do
  for p in transformer gpt; do
    for m in native-expandable cmb cmb-chunk10; do
      base=$W/e2e/$p-$m-$r
      if [ $(( $(date +%s)-start )) -gt 420 ]; then echo "skipped: $p $m run $r" | tee -a $W/log.txt $W/e2e/skipped.txt; continue; fi
      case $m in
      native-expandable) env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 scripts/e2e-steady.py run --program $p --steps 16 --out $base.json > $base.log 2>&1 ;;
      cmb) env -u PYTORCH_CUDA_ALLOC_CONF CMB_PROFILE=1 python3 scripts/e2e-steady.py run --program $p --steps 16 --policy cmb@vmm --lib $lib --out $base.json > $base.log 2>&1 ;;
      cmb-chunk10) env -u PYTORCH_CUDA_ALLOC_CONF CMB_PROFILE=1 python3 scripts/e2e-steady.py run --program $p --steps 16 --policy cmb:chunk=10@vmm --lib $lib --out $base.json > $base.log 2>&1 ;;
      esac
      echo "$p $m $r rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
    done
  done
done
python3 scripts/e2e-steady.py table --work $W/e2e --out $W/e2e.md > /dev/null 2>&1
grep -h "cumembench profile" $W/e2e/*.log >> $W/log.txt
cd $OUT && tar czf w.tgz w && rm -rf w
