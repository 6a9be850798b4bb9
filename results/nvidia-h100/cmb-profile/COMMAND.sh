#!/bin/bash
# where cmb's time goes in the real transformer: CMB_PROFILE=1 (build 1c7e953) under cmb@vmm and
# torch-expandable@vmm through the library, native expandable segments beside; 16 steps, 3 runs each
set -u
mkdir -p .gpu-build/cur && tar xJf .gpu-build/cur.tar.xz -C .gpu-build/cur
W=$OUT/w; mkdir -p $W/e2e
nvidia-smi > $W/nvidia-smi.txt 2>&1
python3 -c "import torch;print(torch.__version__, torch.version.cuda)" > $W/torch.txt 2>&1
lib=$PWD/.gpu-build/cur/pluggable/libcmb_pluggable.so
start=$(date +%s)
for r in 1 2 3; do
  for m in native-expandable cmb lib-torch-expandable; do
    base=$W/e2e/transformer-$m-$r
    case $m in
    native-expandable) env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 scripts/e2e-steady.py run --program transformer --steps 16 --out $base.json > $base.log 2>&1 ;;
    cmb) env -u PYTORCH_CUDA_ALLOC_CONF CMB_PROFILE=1 python3 scripts/e2e-steady.py run --program transformer --steps 16 --policy cmb@vmm --lib $lib --out $base.json > $base.log 2>&1 ;;
    lib-torch-expandable) env -u PYTORCH_CUDA_ALLOC_CONF CMB_PROFILE=1 python3 scripts/e2e-steady.py run --program transformer --steps 16 --policy torch-expandable@vmm --lib $lib --out $base.json > $base.log 2>&1 ;;
    esac
    echo "transformer $m $r rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
  done
done
grep -h "cumembench profile" $W/e2e/*.log | tee -a $W/log.txt
cd $OUT && tar czf probe8.tgz w
