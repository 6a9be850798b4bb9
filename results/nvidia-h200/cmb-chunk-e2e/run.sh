#!/bin/bash
# cmb's handle size in real programs: native expandable segments, cmb@vmm (chunk=4, 8 MiB handles),
# cmb:chunk=10@vmm (20 MiB, expandable segments' handle) and cmb:chunk=0@vmm (one handle per growth)
# through one build's libcmb_pluggable.so; RUNS rounds, the modes' order reversed every other round;
# a run that would start after BUDGET seconds is skipped (listed in e2e/skipped.txt).
# usage (repository root, on a GPU): bash run.sh BUILD OUT RUNS BUDGET "PROGRAMS" [FIRST]
# (FIRST, default 1: the first round's number, so that a later call adds rounds to OUT)
set -u
B=$1; O=$2; RUNS=$3; BUDGET=$4; PROGS=$5; FIRST=${6:-1}
mkdir -p "$O/e2e"; start=$(date +%s)
nvidia-smi > "$O/nvidia-smi-$FIRST.txt" 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" > "$O/torch-$FIRST.txt" 2>&1
modes="native-expandable cmb cmb_chunk_10 cmb_chunk_0"
for r in $(seq "$FIRST" $((FIRST + RUNS - 1))); do
    order=$modes; [ $((r % 2)) -eq 0 ] && order=$(echo $modes | tr ' ' '\n' | tac | tr '\n' ' ')
    for p in $PROGS; do
        case $p in convnet) steps=18 ;; *) steps=24 ;; esac
        for m in $order; do
            base="$O/e2e/$p-$m-$r"
            if [ $(($(date +%s) - start)) -gt "$BUDGET" ]; then echo "skipped: $p $m run $r" | tee -a "$O/e2e/skipped.txt"; continue; fi
            case $m in
            native-expandable) env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 scripts/e2e-steady.py run \
                --program $p --steps $steps --out "$base.json" > "$base.log" 2>&1 ;;
            *) pol=$(echo $m | sed 's/_chunk_/:chunk=/')@vmm
               env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run --program $p --steps $steps \
                --policy $pol --lib "$B/pluggable/libcmb_pluggable.so" --out "$base.json" > "$base.log" 2>&1 ;;
            esac
            echo "$p $m run $r: exit $?, $(($(date +%s) - start)) s" | tee -a "$O/log.txt"
        done
    done
done
python3 scripts/e2e-steady.py table --work "$O/e2e" --out "$O/e2e.md"
