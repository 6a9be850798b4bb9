#!/bin/bash
# park_after A/B in real programs: cmb before (78cd30b) and after (400accf), native expandable beside
set -u
for v in old new; do mkdir -p .gpu-build/$v && tar xJf .gpu-build/$v.tar.xz -C .gpu-build/$v; done
W=$OUT/w; mkdir -p $W/e2e $W/replay
nvidia-smi > $W/nvidia-smi.txt 2>&1
python3 -c "import torch;print(torch.__version__, torch.version.cuda)" > $W/torch.txt 2>&1
start=$(date +%s)
for v in new old; do
  LD_LIBRARY_PATH=$PWD/.gpu-build/$v/lib .gpu-build/$v/cumembench --mode gpu --out $W/replay/$v --scenario replay \
    --param trace=traces/samples/torch_transformer_sweep.trace,traces/samples/torch_convnet.trace --param passes=1 \
    --allocator cmb@vmm --repetitions 3 --timeline off > $W/replay/$v.log 2>&1
  echo "replay $v rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
done
one() { # program mode run
  local p=$1 m=$2 r=$3 base=$W/e2e/$1-$2-$3
  [ $(( $(date +%s) - start )) -gt 530 ] && { echo "skipped $p $m $r" | tee -a $W/log.txt; return; }
  case $m in
  native-expandable) env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 scripts/e2e-steady.py run --program $p --steps $4 --out $base.json > $base.log 2>&1 ;;
  cmb-old|cmb-new) env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run --program $p --steps $4 --policy cmb@vmm --lib $PWD/.gpu-build/${m#cmb-}/pluggable/libcmb_pluggable.so --out $base.json > $base.log 2>&1 ;;
  esac
  echo "$p $m $r rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
}
for r in 1 2 3; do for m in native-expandable cmb-old cmb-new; do one transformer $m $r 24; done; done
for r in 1 2; do for m in native-expandable cmb-old cmb-new; do one gpt $m $r 24; done; done
for r in 1 2; do for m in native-expandable cmb-old cmb-new; do one convnet $m $r 18; done; done
cd $OUT && tar czf probe2.tgz w && rm -rf w
