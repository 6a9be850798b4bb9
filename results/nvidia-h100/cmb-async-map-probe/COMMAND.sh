#!/bin/bash
# Two calls on one NVIDIA H100 80GB HBM3 (driver 580.159.04, CUDA 13.0), O=$OUT/async-map-probe.
# probe arguments: handles a growth maps, rounds, spin cycles before part 1, kernels a round, parts
# (1: part 1, 2: part 3, +4: part 1's pages mapped inline with only the access behind the flag,
# +8: part 1 without the memset).
# call 2 (probe.txt; the probe revision before the access-only and no-memset variants of part 1, flags 4 and 8):
run() { echo "== probe $*" >> $O/probe.txt; timeout 45 ./async-probe/probe "$@" >> $O/probe.txt 2>&1; echo "rc $?" >> $O/probe.txt; }
run 16 100 2000000 200 1; run 16 100 2000000 200 2; run 4 100 2000000 50 2; run 64 30 2000000 400 2
# call 3 (probe2.txt, probe.cu as committed):
run() { echo "== probe $*" >> $O/probe2.txt; timeout 40 ./async-probe/probe "$@" >> $O/probe2.txt 2>&1; echo "rc $?" >> $O/probe2.txt; }
run 16 100 2000000 200 5
run 16 100 2000000 200 9
run 16 100 2000000 200 13
run 16 100 2000000 200 2
run 16 100 2000000 200 2
# built here: nvcc -O2 -std=c++14 -gencode arch=compute_90,code=sm_90 -o probe probe.cu -lpthread (CUDA 13.0)
