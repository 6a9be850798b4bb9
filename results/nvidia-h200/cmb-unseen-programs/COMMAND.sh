#!/bin/bash
# Four calls on NVIDIA H200s (driver 580.159.04, CUDA 13.0, PyTorch 2.11.0+cu130), from the
# repository root, with the build of main at 5e6cb73 (cmb's code as at a925a7f) carried as
# .gpu-build/steady.tar.xz:
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build -j2 --target cumembench cmb_pluggable
#   cumembench, lib/ and pluggable/ into .gpu-build/steady, then tar cJf .gpu-build/steady.tar.xz
#   PROGS="gpt convnet" bash COMMAND.sh record    -> record/call1 (gpt 24 steps, convnet 18; run
#                                                    twice on one machine: the first run's files did not come back)
#   PROGS="moe unet" bash COMMAND.sh record       -> record/call2 (20 steps each)
#   PROGS=bert bash COMMAND.sh record              -> held-out/ (20 steps; this call ran the
#                                                    torch-expandable@vmm run only)
#   bash COMMAND.sh steady "gpt unet" gu          -> steady-gu   (fresh machine)
#   bash COMMAND.sh steady moe moe                -> steady-moe  (same machine, warm)
# The scripts as at ecad1e5 (scripts/e2e-steady.py's steps have called descend() since, the same
# three calls). Files came back as one tar per call (the device returns few files per call); steady-*/run/ is
# steady-*/ here.
set -u
[ -d .gpu-build/steady ] || tar xJf .gpu-build/steady.tar.xz -C .gpu-build
L=.gpu-build/steady/pluggable/libcmb_pluggable.so
case $1 in
record)
    O=$OUT/rec; mkdir -p $O; cp scripts/e2e-steady.py $O/e2e-steady.py.used
    nvidia-smi > $O/nvidia-smi.txt 2>&1
    python3 -c "import torch, torchvision; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), torchvision.__version__)" > $O/torch.txt 2>&1
    for p in $PROGS; do
        case $p in gpt) steps=24 ;; convnet) steps=18 ;; *) steps=20 ;; esac
        for pol in torch-expandable@vmm cmb@vmm; do
            n=$p-${pol%@vmm}; t0=$(date +%s)
            env -u PYTORCH_CUDA_ALLOC_CONF CMB_TRACE=$O/$n.trace python3 scripts/e2e-steady.py run --program $p \
                --steps $steps --policy $pol --lib $L --out $O/$n.json > $O/$n.log 2>&1
            echo "$n rc $? $(( $(date +%s) - t0 )) s" | tee -a $O/call-log.txt
            gzip -9 $O/$n.trace
        done
    done
    (cd $OUT && tar cf rec.tar rec && rm -rf rec) ;;
steady)
    O=$OUT/steady-$3; mkdir -p $O
    nvidia-smi > $O/nvidia-smi.txt 2>&1
    python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" > $O/torch.txt 2>&1
    CMB_STEADY_PROGRAMS="$2" CMB_STEADY_BUDGET=500 bash scripts/gpu-cmb-steady.sh .gpu-build/steady $O/run > $O/call-log.txt 2>&1
    echo "rc $?" >> $O/call-log.txt
    (cd $OUT && tar cf steady-$3.tar steady-$3 && rm -rf steady-$3) ;;
esac
