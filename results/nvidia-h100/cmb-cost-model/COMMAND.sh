#!/bin/bash
# same machine: the cost file and the real transformer, native expandable segments and cmb@vmm (8254a6c)
set -u
mkdir -p .gpu-build/cur && tar xJf .gpu-build/cur.tar.xz -C .gpu-build/cur
W=$OUT/w; mkdir -p $W/e2e
nvidia-smi > $W/nvidia-smi.txt 2>&1
python3 -c "import torch;print(torch.__version__, torch.version.cuda)" > $W/torch.txt 2>&1
start=$(date +%s)
LD_LIBRARY_PATH=$PWD/.gpu-build/cur/lib .gpu-build/cur/cumembench calibrate --out $W/costs.json --repetitions 15 > $W/calibrate.log 2>&1
echo "calibrate rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
one() { # program mode run steps
  local p=$1 m=$2 r=$3 base=$W/e2e/$1-$2-$3
  case $m in
  native-expandable) env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 scripts/e2e-steady.py run --program $p --steps $4 --out $base.json > $base.log 2>&1 ;;
  cmb) env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run --program $p --steps $4 --policy cmb@vmm --lib $PWD/.gpu-build/cur/pluggable/libcmb_pluggable.so --out $base.json > $base.log 2>&1 ;;
  esac
  echo "$p $m $r rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
}
for r in 1 2 3 4; do for m in native-expandable cmb; do one transformer $m $r 16; done; done
LD_LIBRARY_PATH=$PWD/.gpu-build/cur/lib .gpu-build/cur/cumembench calibrate --out $W/costs-after.json --repetitions 15 > $W/calibrate-after.log 2>&1
echo "calibrate again rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
cd $OUT && tar czf probe6.tgz w && rm -rf w
