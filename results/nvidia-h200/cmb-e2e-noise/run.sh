#!/bin/bash
# How far apart two sets of runs of the same program lie step by step, and whether loading every
# kernel at start (CUDA_MODULE_LOADING=EAGER) narrows it: native PyTorch with expandable segments and
# cmb@vmm through libcmb_pluggable.so, each with the default lazy loading (OUT/e2e-lazy/) and with
# eager loading (OUT/e2e-eager/); RUNS rounds, the four settings' order reversed every other round;
# (SETTINGS, a list of LOAD:MODE, runs fewer); a run that would start after BUDGET seconds is skipped (listed in OUT/skipped.txt).
# usage (repository root, on a GPU): bash run.sh LIB OUT RUNS BUDGET "PROGRAMS" [FIRST]
set -u
L=$1; O=$2; RUNS=$3; BUDGET=$4; PROGS=$5; FIRST=${6:-1}
mkdir -p "$O/e2e-lazy" "$O/e2e-eager"; start=$(date +%s)
nvidia-smi > "$O/nvidia-smi-$FIRST.txt" 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" > "$O/torch-$FIRST.txt" 2>&1
settings=${SETTINGS:-"lazy:native-expandable eager:native-expandable lazy:cmb eager:cmb"}
for r in $(seq "$FIRST" $((FIRST + RUNS - 1))); do
    order=$settings; [ $((r % 2)) -eq 0 ] && order=$(echo $settings | tr ' ' '\n' | tac | tr '\n' ' ')
    for p in $PROGS; do
        case $p in convnet) steps=18 ;; *) steps=24 ;; esac
        for s in $order; do
            load=${s%%:*}; m=${s#*:}; base="$O/e2e-$load/$p-$m-$r"
            if [ $(($(date +%s) - start)) -gt "$BUDGET" ]; then echo "skipped: $p $s run $r" | tee -a "$O/skipped.txt"; continue; fi
            t0=$(date +%s)
            case $m in
            native-expandable) env CUDA_MODULE_LOADING=${load^^} PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
                python3 scripts/e2e-steady.py run --program $p --steps $steps --out "$base.json" > "$base.log" 2>&1 ;;
            cmb*) pol=$(echo $m | sed 's/_chunk_/:chunk=/')@vmm   # cmb, or cmb_chunk_N for cmb:chunk=N
                env -u PYTORCH_CUDA_ALLOC_CONF CUDA_MODULE_LOADING=${load^^} python3 scripts/e2e-steady.py run \
                --program $p --steps $steps --policy $pol --lib "$L" --out "$base.json" > "$base.log" 2>&1 ;;
            esac
            echo "$p $s run $r: exit $?, $(($(date +%s) - t0)) s, $(($(date +%s) - start)) s in" | tee -a "$O/log.txt"
        done
    done
done
for load in lazy eager; do [ -n "$(ls "$O/e2e-$load")" ] && python3 scripts/e2e-steady.py table --work "$O/e2e-$load" --out "$O/e2e-$load.md" > /dev/null; done
