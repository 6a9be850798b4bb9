#!/bin/bash
# warm.cu: one call on an NVIDIA H200 (driver 580.159.04, CUDA 13.0), from the repository root.
# built here: nvcc -O2 -std=c++14 -gencode arch=compute_90,code=sm_90 -o warm warm.cu (CUDA 13.0),
# carried as .gpu-build/warm/warm
# arguments: handle MiB, handles per part, region MiB, sliding handle MiB, order of the three warmings
O=$OUT/warm; mkdir -p $O; nvidia-smi > $O/nvidia-smi.txt 2>&1
for r in 1 2; do for a in "2 128 1024 64" "8 100 1024 64" "20 100 4096 256"; do for rev in 0 1; do
  echo "== warm $a $rev (round $r)" >> $O/warm.txt; timeout 120 .gpu-build/warm/warm $a $rev >> $O/warm.txt 2>&1; echo "rc $?" >> $O/warm.txt
done; done; done
