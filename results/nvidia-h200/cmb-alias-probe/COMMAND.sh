#!/bin/bash
# alias.cu: one call on an NVIDIA H200 (driver 580.159.04, CUDA 13.0), from the repository root; O=$OUT/alias.
# built here: nvcc -O2 -std=c++14 -gencode arch=compute_90,code=sm_90 -o alias alias.cu (CUDA 13.0),
# carried as .gpu-build/alias/alias
# arguments: handle MiB, repetitions of part 2, aliases in part 3, precycle (part 4's first remap elsewhere)
for r in 1 2; do for a in "8 50 1024" "2 50 1024"; do for p in 0 1; do
  echo "== alias $a $p (round $r)" >> $O/alias.txt; timeout 120 .gpu-build/alias/alias $a $p >> $O/alias.txt 2>&1; echo "rc $?" >> $O/alias.txt
done; done; done

# offset.cu, a second call (driver 580.159.04, CUDA 13.0, NVIDIA H200; its nvidia-smi in offset-nvidia-smi.txt);
# built here: nvcc -O2 -std=c++14 -gencode arch=compute_90,code=sm_90 -o offset offset.cu (CUDA 13.0),
# carried as .gpu-build/offset/offset; O=$OUT/offset; arguments: pages per handle, repetitions of part 4
for r in 1 2 3; do for n in 10 4; do
  echo "== offset $n 50 (round $r)" >> $O/offset.txt; timeout 120 .gpu-build/offset/offset $n 50 >> $O/offset.txt 2>&1; echo "rc $?" >> $O/offset.txt
done; done
