#!/bin/bash
# Three calls on an NVIDIA H200 (driver 580.159.04, CUDA 13.0, PyTorch 2.11.0+cu130), from the
# repository root, with the build of main at 9aaabd6 carried as .gpu-build/layout.tar.xz (made as
# ../cmb-layout-e2e/COMMAND.sh says) and the scripts as committed in 250c6c0:
#   bash COMMAND.sh call1   -> call1/ (transformer, ResNet-50, LLM decode; two processes a setting)
#   bash COMMAND.sh call2   -> call2/ (LLM decode; three processes a setting)
#   bash COMMAND.sh profile -> profile/ (LLM decode under CMB_PROFILE=1)
# (The calls as made wrote /tmp/tm-layout, /tmp/tm-decode and /tmp/prof-s20; call*/tm-logs.tar.gz
# holds each call's logs/ directory: every process's JSON and log, the recorded traces and replays.)
set -u
[ -x .gpu-build/layout/cumembench ] || tar xJf .gpu-build/layout.tar.xz -C .gpu-build
O=/tmp/time-model-layout-$1; mkdir -p $O
nvidia-smi > $O/nvidia-smi.txt 2>&1
C=results/nvidia-h200/costs.json
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in *H200*) ;; *) C=results/nvidia-h100/costs.json ;; esac
echo "costs $C" > $O/costs-used.txt
S="native lib-torch-caching native-expandable lib-cmb lib-cmb-layout"
case $1 in
call1) CMB_TM_PROCS="1 2" CMB_TM_SETTINGS="$S" CMB_TM_BUDGET=430 \
        timeout 530 bash scripts/gpu-time-model.sh .gpu-build/layout $O $C > $O/call-log.txt 2>&1 ;;
call2) CMB_TM_PROCS="1 2 3" CMB_TM_WORKLOADS=llm-decode CMB_TM_SETTINGS="$S" CMB_TM_BUDGET=300 \
        timeout 380 bash scripts/gpu-time-model.sh .gpu-build/layout $O $C > $O/call-log.txt 2>&1 ;;
profile)
    for p in cmb@vmm torch-expandable@vmm; do
        CMB_PROFILE=1 timeout 80 env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/time_model.py run \
            --workload llm-decode --rounds 3 --lib .gpu-build/layout/pluggable/libcmb_pluggable.so \
            --policy $p --out $O/${p%@vmm}.json > $O/${p%@vmm}.log 2>&1
        echo "$p rc $?" >> $O/rc.txt
    done ;;
esac
echo "rc $?" >> $O/call-log.txt
tar czf $OUT/$1.tgz -C /tmp time-model-layout-$1
