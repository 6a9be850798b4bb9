#!/bin/bash
# One call on an NVIDIA H100 80GB HBM3 (driver 580.159.04, CUDA 13.0, PyTorch 2.11.0+cu130).
# The build: main at 82f9926 (cmb's code as at a925a7f), here:
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build -j2 --target cumembench cmb_pluggable
#   cumembench, lib/libbenchmark.so.1debian and pluggable/libcmb_pluggable.so into .gpu-build/steady (carried as a tarball)
O=$OUT/steady; mkdir -p $O
nvidia-smi > $O/nvidia-smi.txt 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" > $O/torch.txt 2>&1
CMB_STEADY_BUDGET=470 bash scripts/gpu-cmb-steady.sh .gpu-build/steady $O/run > $O/log.txt 2>&1; echo "rc $?" >> $O/log.txt
# run/log.txt -> log.txt here, $O/log.txt -> call-log.txt (its rc 1: a run was skipped past the budget)
