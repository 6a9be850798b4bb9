#!/bin/bash
# Four calls on an NVIDIA H200 (driver 580.159.04, CUDA 13.0, PyTorch 2.11.0+cu130), from the
# repository root, with the build of main at 5654c7c (cmb:layout as committed there) carried as
# .gpu-build/layout.tar.xz:
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build -j2 --target cumembench cmb_pluggable
#   mkdir -p .gpu-build/layout/pluggable && cp -a build/cumembench build/lib .gpu-build/layout/ &&
#   cp build/pluggable/libcmb_pluggable.so .gpu-build/layout/pluggable/ &&
#   (cd .gpu-build && tar cJf layout.tar.xz layout)
#   bash COMMAND.sh call1 "transformer gpt convnet" 1 520   -> call1/ (runs 1-3)
#   bash COMMAND.sh call2 "gpt unet moe" 4 490              -> call2/ (runs 4-6; moe's run 6 of three
#                                                          modes past the budget: call2/run/e2e/skipped.txt)
# and two more, with the build of main at 9aaabd6 (the same layout, its code tidied) and the scripts
# as committed in 250c6c0 (the lib-expandable mode: torch-expandable@vmm through the library):
#   bash COMMAND.sh call3 llm_decode 1 250 "native-default native-expandable cmb-layout"   -> call3/
#   bash COMMAND.sh call4 gpt 1 150 "native-expandable lib-expandable cmb-layout" 4        -> call4/
# (made as one call writing /tmp/steady-s20/{decode,gpt}); and a fifth, with the build of main at
# c214b5b (the layout's code as at 9aaabd6 but for e1a0673's one aligned reservation), on another
# H200 host (same driver, CUDA and PyTorch):
#   bash COMMAND.sh call5 llm_decode 4 470 "native-expandable cmb-layout" 9  -> call5/ (runs 4-11;
#                                                          run 12 of both modes past the budget)
# decode-11-runs.md: scripts/e2e-steady.py table over the JSON files of calls 3 and 5 together.
# gpt-10-runs.md: scripts/e2e-steady.py
# table over gpt's JSON files of calls 1, 2 and 4, call4's runs 1-4 renamed 7-10.
# Each program is first run once through the library under torch-expandable@vmm with CMB_TRACE (the
# profiling run, call*/run/e2e-rec/, traces gzipped here), then natively (default, expandable
# segments), under cmb@vmm and under cmb:layout=<that trace>@vmm, round by round, every step timed.
# (The calls as made wrote /tmp/steady-layout and /tmp/steady-layout2, the same commands.)
# gpt-6-runs.md: scripts/e2e-steady.py table over gpt's JSON files of both calls.
set -u
[ -x .gpu-build/layout/cumembench ] || tar xJf .gpu-build/layout.tar.xz -C .gpu-build
O=/tmp/steady-layout-$1; mkdir -p $O
nvidia-smi > $O/nvidia-smi.txt 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" > $O/torch.txt 2>&1
CMB_STEADY_PROGRAMS="$2" CMB_STEADY_FIRST_RUN=$3 CMB_STEADY_RUNS=${6:-3} \
    CMB_STEADY_MODES="${5:-native-default native-expandable cmb cmb-layout}" \
    CMB_STEADY_BUDGET=$4 bash scripts/gpu-cmb-steady.sh .gpu-build/layout $O/run > $O/call-log.txt 2>&1
echo "rc $?" >> $O/call-log.txt
tar czf $OUT/$1.tgz -C /tmp steady-layout-$1
