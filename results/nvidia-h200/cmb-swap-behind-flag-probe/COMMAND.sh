#!/bin/bash
# Two calls on NVIDIA H200s (driver 580.159.04, CUDA 13.0), the second on a fresh machine; O=$OUT/swap.
# built here: nvcc -O2 -std=c++14 -gencode arch=compute_90,code=sm_90 -o swap swap.cu -lpthread (CUDA 13.0)
# arguments: handles a growth maps, rounds, spin cycles before part 1 (a tenth of it before each round's
# old work), kernels a round, repetitions of part 2, spin cycles queued between the old work and the growth.
run() { echo "== swap $*" >> $O/swap.txt; timeout 60 .gpu-build/swap/swap "$@" >> $O/swap.txt 2>&1; echo "rc $?" >> $O/swap.txt; }
# call 1 (swap.txt; swap.cu before its sixth argument, which defaults to 0 and changes nothing else):
run 16 50 2000000 100 5; run 4 100 2000000 50 5; run 64 20 2000000 200 5
# call 2 (swap-middle.txt here, swap.txt there):
for m in 0 1000000 4000000; do run 16 50 2000000 100 5 $m; done; run 4 100 2000000 50 5 4000000
