#!/bin/bash
# CMB_PROFILE with every upstream op timed (2ccad1c) in the real transformer and GPT-style decoder:
# cur (2ccad1c: park_after's pending groups polled before every map) against poll (oldest first,
# not before maps), native expandable beside; torch-expandable@vmm profiled once; calibrate before and after
set -u
mkdir -p .gpu-build/cur && tar xJf .gpu-build/cur.tar.xz -C .gpu-build/cur
W=$OUT/w; mkdir -p $W
start=$(date +%s)
L=$PWD/.gpu-build/cur
LD_LIBRARY_PATH=$L/lib $L/cumembench calibrate --out $W/costs.json --repetitions 15 > $W/calibrate.log 2>&1
echo "calibrate rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
CMB_AB_PROFILE=1 CMB_AB_RUNS=3 CMB_AB_STEPS=16 CMB_AB_PROGRAMS=transformer,gpt CMB_AB_BUDGET=380 \
  scripts/gpu-cmb-ab.sh $W/ab cur=$L/pluggable/libcmb_pluggable.so poll=$L/pluggable/libcmb_pluggable_poll.so > $W/ab.log 2>&1
echo "ab rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
mkdir -p $W/te
env -u PYTORCH_CUDA_ALLOC_CONF CMB_PROFILE=1 python3 scripts/e2e-steady.py run --program transformer --steps 16 --policy torch-expandable@vmm --lib $L/pluggable/libcmb_pluggable.so --out $W/te/transformer-lib-torch-expandable-1.json > $W/te/transformer-lib-torch-expandable-1.log 2>&1
echo "torch-expandable rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
LD_LIBRARY_PATH=$L/lib $L/cumembench calibrate --out $W/costs-after.json --repetitions 15 > $W/calibrate-after.log 2>&1
echo "calibrate again rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
grep -h "cumembench profile" $W/ab/e2e/*.log $W/te/*.log >> $W/log.txt
cd $OUT && tar czf w.tgz w && rm -rf w
