#!/bin/bash
# park_after on the real driver with kernels in flight: churn with every block written by a kernel,
# before (78cd30b) and after (400accf); then compute-sanitizer memcheck over the after build
set -u
for v in old new; do mkdir -p .gpu-build/$v && tar xJf .gpu-build/$v.tar.xz -C .gpu-build/$v; done
W=$OUT/w; mkdir -p $W
nvidia-smi > $W/nvidia-smi.txt 2>&1
start=$(date +%s)
for v in old new; do
  LD_LIBRARY_PATH=$PWD/.gpu-build/$v/lib .gpu-build/$v/cumembench --mode gpu --out $W/churn-$v --scenario churn,stream-async \
    --preset quick --param touch=true --allocator cmb@vmm --repetitions 3 --timeline off > $W/churn-$v.log 2>&1
  echo "churn $v rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
done
san=/usr/local/cuda/bin/compute-sanitizer; command -v compute-sanitizer >/dev/null && san=$(command -v compute-sanitizer)
LD_LIBRARY_PATH=$PWD/.gpu-build/new/lib timeout 300 $san --tool memcheck --report-api-errors no --target-processes all \
  --print-limit 50 --log-file $W/memcheck.%p.log .gpu-build/new/cumembench --mode gpu --out $W/memcheck-run \
  --scenario churn,stream-async --preset quick --param touch=true --allocator cmb@vmm --repetitions 1 --timeline off \
  > $W/memcheck-run.log 2>&1
echo "memcheck rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
grep -h "ERROR SUMMARY" $W/memcheck.*.log | sort | uniq -c | tee -a $W/log.txt
rm -f $W/*/report.html
cd $OUT && tar czf probe3.tgz w && rm -rf w
