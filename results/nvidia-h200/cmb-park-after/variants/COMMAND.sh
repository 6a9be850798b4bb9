#!/bin/bash
# one call: VMM in-flight calibration, then the transformer (and gpt) under cmb variants
set -u
tar xJf .gpu-build/cal.tar.xz -C .gpu-build
W=$OUT/w; mkdir -p $W/e2e
export LD_LIBRARY_PATH=$PWD/.gpu-build/lib:${LD_LIBRARY_PATH:-}
nvidia-smi > $W/nvidia-smi.txt 2>&1
python3 -c "import torch;print(torch.__version__)" > $W/torch.txt 2>&1
start=$(date +%s)
.gpu-build/cumembench calibrate --out $W/costs.json --repetitions 9 > $W/calibrate.log 2>&1; echo "calibrate rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
lib=$PWD/.gpu-build/pluggable/libcmb_pluggable.so
one() { # program mode run
  local p=$1 m=$2 r=$3 base=$W/e2e/$1-$2-$3
  [ $(( $(date +%s) - start )) -gt 540 ] && { echo "skipped $p $m $r" | tee -a $W/log.txt; return; }
  case $m in
  native-expandable) env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 scripts/e2e-steady.py run --program $p --steps 24 --out $base.json > $base.log 2>&1 ;;
  *) env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run --program $p --steps 24 --policy "$m" --lib $lib --out $base.json > $base.log 2>&1 ;;
  esac
  echo "$p $m $r rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
}
for r in 1 2 3; do
  for m in native-expandable cmb@vmm cmb:slack=1@vmm cmb:chunk=0@vmm cmb:slack=1:chunk=0@vmm; do one transformer $m $r; done
done
for r in 1 2; do
  for m in native-expandable cmb@vmm cmb:slack=1@vmm; do one gpt $m $r; done
done
cd $OUT && tar czf probe1.tgz w && rm -rf w
