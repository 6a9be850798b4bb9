#!/bin/bash
# the cost model against the measured allocation time on one machine (build b9075b0): calibrate,
# then the real transformer (16 steps) under cmb@vmm and torch-expandable@vmm through the library,
# CMB_PROFILE=1, 3 runs each alternating, a 4th run of each recording its traffic (CMB_TRACE) for
# the sim prediction; calibrate again after
set -u
mkdir -p .gpu-build/cur && tar xJf .gpu-build/cur.tar.xz -C .gpu-build/cur
W=$OUT/w; mkdir -p $W/e2e
L=$PWD/.gpu-build/cur
nvidia-smi > $W/nvidia-smi.txt 2>&1
python3 -c "import torch;print(torch.__version__, torch.version.cuda)" > $W/torch.txt 2>&1
start=$(date +%s)
LD_LIBRARY_PATH=$L/lib $L/cumembench calibrate --out $W/costs.json --repetitions 15 > $W/calibrate.log 2>&1
echo "calibrate rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
run() { # policy-name spec run [trace]
  local base=$W/e2e/transformer-$1-$3
  env -u PYTORCH_CUDA_ALLOC_CONF CMB_PROFILE=1 ${4:+CMB_TRACE=$4} python3 scripts/e2e-steady.py run --program transformer --steps 16 --policy $2 --lib $L/pluggable/libcmb_pluggable.so --out $base.json > $base.log 2>&1
  echo "transformer $1 $3 rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
}
for r in 1 2 3; do run cmb cmb@vmm $r; run lib-torch-expandable torch-expandable@vmm $r; done
run cmb cmb@vmm 4 $W/cmb.trace
run lib-torch-expandable torch-expandable@vmm 4 $W/torch-expandable.trace
LD_LIBRARY_PATH=$L/lib $L/cumembench calibrate --out $W/costs-after.json --repetitions 15 > $W/calibrate-after.log 2>&1
echo "calibrate again rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
for t in cmb torch-expandable; do
  LD_LIBRARY_PATH=$L/lib $L/cumembench --mode sim --scenario replay --param trace=$W/$t.trace --param find_min_capacity=false --allocator cmb,torch-expandable --repetitions 3 --costs $W/costs.json --timeline off --out $W/predict-$t -q > $W/predict-$t.log 2>&1
  echo "predict on $t.trace rc $? $(( $(date +%s)-start ))s" | tee -a $W/log.txt
done
grep -h "cumembench profile" $W/e2e/*.log >> $W/log.txt
cd $OUT && tar czf w.tgz w && rm -rf w
