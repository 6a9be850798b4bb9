#!/bin/bash
# threads.cu: one call on an NVIDIA H200 (driver 580.159.04, CUDA 13.0), from the repository root.
# built here: nvcc -O2 -std=c++14 -gencode arch=compute_90,code=sm_90 -o threads threads.cu -lpthread (CUDA 13.0),
# carried as .gpu-build/threads/threads
# arguments: handle MiB, handles a thread, launches, repetitions
O=$OUT/threads; mkdir -p $O; nvidia-smi > $O/nvidia-smi.txt 2>&1; nproc > $O/nproc.txt
for r in 1 2; do for a in "2 64 20000 5" "8 32 20000 5" "20 16 20000 5"; do
  echo "== threads $a (round $r)" >> $O/threads.txt; timeout 150 .gpu-build/threads/threads $a >> $O/threads.txt 2>&1; echo "rc $?" >> $O/threads.txt
done; done
cat $O/threads.txt
