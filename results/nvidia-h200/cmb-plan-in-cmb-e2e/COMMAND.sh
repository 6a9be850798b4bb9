#!/bin/bash
# Two calls on one NVIDIA H200 (driver 580.159.04, CUDA 13.0, PyTorch 2.11.0+cu130), 3 runs of each
# program in each mode, every step timed (scripts/e2e-steady.py through scripts/gpu-cmb-steady.sh):
#   bash COMMAND.sh "transformer convnet" tc    -> call1-transformer-convnet/
#   bash COMMAND.sh "gpt llm_decode" gl         -> call2-gpt-llm_decode/ (a fresh machine)
# The build: ../../sim/cmb-steady/plan-in-cmb/plan-in-cmb.patch applied to 6115bda (it also adds
# the mode cmb-plan to scripts/gpu-cmb-steady.sh: cmb:plan=layout@vmm through libcmb_pluggable):
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build -j2 --target cumembench cmb_pluggable
#   cumembench, lib/ and pluggable/libcmb_pluggable.so into .gpu-build/plan, carried as
#   .gpu-build/plan.tar.xz
# Call 1 ran the patch as it was before its `repeat` variant was added: the option was a bool and
# the mode passed `cmb:plan=true@vmm`, the same layout planner that `plan=layout` names now (the
# repeat variant only adds a branch taken when plan=repeat). Both calls ran the patch before its
# hint variant was added, which leaves plan=layout as it was. Call 1 set CMB_PLAN_DEBUG=1; the
# counters it printed in e2e/*-cmb-plan-*.log are an unused instance's (all zero), not the
# program's.
set -u
P=$1; O=$OUT/plan-e2e-$2; mkdir -p $O
rm -rf .gpu-build/plan; tar xJf .gpu-build/plan.tar.xz -C .gpu-build
nvidia-smi > $O/nvidia-smi.txt 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" > $O/torch.txt 2>&1
CMB_STEADY_MODES="native-expandable cmb cmb-plan" CMB_STEADY_PROGRAMS="$P" CMB_STEADY_BUDGET=480 \
    bash scripts/gpu-cmb-steady.sh .gpu-build/plan $O/run > $O/call-log.txt 2>&1; echo "rc $?" >> $O/call-log.txt
(cd $O/run && tar czf ../e2e.tar.gz e2e); cp $O/run/e2e.md $O/run/log.txt $O/
# here: each call's e2e.md, log.txt, call-log.txt, nvidia-smi.txt, torch.txt, and e2e/ unpacked
