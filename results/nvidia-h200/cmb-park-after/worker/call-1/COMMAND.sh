#!/bin/bash
# the worker thread: park_after inline (400accf, "cmb-mid") against unmaps and releases on a worker (365af6d, "cmb-new")
set -u
for v in mid new; do mkdir -p .gpu-build/$v && tar xJf .gpu-build/$v.tar.xz -C .gpu-build/$v; done
W=$OUT/w; mkdir -p $W/e2e
nvidia-smi > $W/nvidia-smi.txt 2>&1
python3 -c "import torch;print(torch.__version__, torch.version.cuda)" > $W/torch.txt 2>&1
start=$(date +%s)
LD_LIBRARY_PATH=$PWD/.gpu-build/new/lib .gpu-build/new/cumembench --mode gpu --out $W/churn-new --scenario churn,stream-async \
  --preset quick --param touch=true --allocator cmb@vmm --repetitions 3 --timeline off > $W/churn-new.log 2>&1
echo "churn new rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
san=/usr/local/cuda/bin/compute-sanitizer; command -v compute-sanitizer >/dev/null && san=$(command -v compute-sanitizer)
LD_LIBRARY_PATH=$PWD/.gpu-build/new/lib timeout 200 $san --tool memcheck --report-api-errors no --target-processes all \
  --print-limit 50 --log-file $W/memcheck.%p.log .gpu-build/new/cumembench --mode gpu --out $W/memcheck-run \
  --scenario churn,stream-async --preset quick --param touch=true --allocator cmb@vmm --repetitions 1 --timeline off \
  > $W/memcheck-run.log 2>&1
echo "memcheck rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
grep -h "ERROR SUMMARY" $W/memcheck.*.log | sort | uniq -c | tee -a $W/log.txt
one() { # program mode run steps
  local p=$1 m=$2 r=$3 base=$W/e2e/$1-$2-$3
  [ $(( $(date +%s) - start )) -gt 530 ] && { echo "skipped $p $m $r" | tee -a $W/log.txt; return; }
  case $m in
  native-expandable) env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 scripts/e2e-steady.py run --program $p --steps $4 --out $base.json > $base.log 2>&1 ;;
  cmb-mid|cmb-new) env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run --program $p --steps $4 --policy cmb@vmm --lib $PWD/.gpu-build/${m#cmb-}/pluggable/libcmb_pluggable.so --out $base.json > $base.log 2>&1 ;;
  esac
  echo "$p $m $r rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
}
for r in 1 2 3 4; do for m in native-expandable cmb-mid cmb-new; do one transformer $m $r 24; done; done
for r in 1 2; do for m in native-expandable cmb-mid cmb-new; do one gpt $m $r 24; done; done
rm -f $W/*/report.html
cd $OUT && tar czf probe4.tgz w && rm -rf w
