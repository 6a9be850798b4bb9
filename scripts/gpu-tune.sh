#!/bin/sh
# gpu-tune.sh - cumembench tune checked on a GPU (docs/tune.md, "Verified"):
# for three real programs (the transformer, ResNet-50 and LLM-decode
# workloads of scripts/time_model.py, the programs of the sample traces),
#   1. snapshot in: the program runs under PyTorch's default allocator with
#      its memory history recorded (python3 -m cumembench_alloc run native:
#      --snapshot), and steps timed;
#   2. setting out: `cumembench tune SNAPSHOT --budget B`, with B halfway
#      between the smallest GPU any candidate fits and the smallest GPU the
#      recorded setting needs (so below what the recorded setting needs);
#   3. verified: the same program under the recommended setting on a GPU of
#      B (PyTorch's memory fraction B/total, or the policy's capacity), under
#      the recorded setting unlimited, and under the recorded setting on B
#      (expected to run out of memory);
# then tune.md: predicted against measured peak reserved and step time.
#
#   scripts/gpu-tune.sh OUT_DIR
#
# Uses .gpu-build/cumembench (with .gpu-build/lib/ beside it) and
# .gpu-build/pluggable/libcmb_pluggable.so (make build BUILD=.gpu-build
# CUDA_ARCHS=90-real; those files are all a GPU machine needs, about 6 MB,
# without the tests' binaries) and the GPU's PyTorch and
# torchvision; builds nothing. Each process runs under a 100-second limit and
# no new one starts after CMB_TUNE_BUDGET seconds (default 420). The recorded
# and the recommended setting run in CMB_TUNE_PROCS processes each (default
# 4: with two, ResNet-50's settings seemed 2.3 ms apart, which six processes
# each showed to be the spread between processes; results/nvidia-h200/
# time-model-convnet), CMB_TUNE_ROUNDS rounds each (default 5); while the
# step-time verdict is "not resolved" (scripts/tune_table.py: outside the
# tolerance, the processes not telling the settings apart) one more pair
# runs, up to CMB_TUNE_MAX_PROCS a side (default twice CMB_TUNE_PROCS; stopping
# when resolved makes a verdict a little likelier than its test's 0.05 says,
# which the table's per-process ranges let a reader judge); CMB_TUNE_WORKLOADS
# picks the programs (default all three; one call of 10 minutes holds about
# two: run the third in a second call into another OUT_DIR). OUT_DIR receives tune.md and tune.json (commit them
# under results/<gpu>/tune/), each step's JSON and log, the snapshots, and
# each program's front as a figure where gnuplot is found.
# Exit status: 0 when every run finished as expected, 1 when one did not,
# 2 bad usage.
set -u
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.gpu-build/cumembench"
lib="$root/.gpu-build/pluggable/libcmb_pluggable.so"
[ -x "$bin" ] || { echo "$0: $bin is missing (make build BUILD=.gpu-build)" >&2; exit 2; }
[ -r "$lib" ] || { echo "$0: $lib is missing (make build BUILD=.gpu-build)" >&2; exit 2; }
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
py=${CMB_PYTHON:-python3}
"$py" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null ||
    { echo "$0: needs PyTorch and torchvision with a GPU ($py)" >&2; exit 2; }
# tune prices with this card's committed cost file (results/<gpu>/costs.json)
CMB_GPU_MODEL=${CMB_GPU_MODEL:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)}
export CMB_GPU_MODEL
export CMB_PLUGGABLE_LIB="$lib" PYTHONPATH="$root/python:$root/scripts${PYTHONPATH:+:$PYTHONPATH}"
cd "$root" || exit 2
budget=${CMB_TUNE_BUDGET:-420}
rounds=${CMB_TUNE_ROUNDS:-5}
procs=${CMB_TUNE_PROCS:-4}
workloads=${CMB_TUNE_WORKLOADS:-transformer convnet llm-decode}
case $procs in '' | *[!0-9]* | 0) echo "$0: CMB_TUNE_PROCS must be a positive count" >&2; exit 2 ;; esac
max_procs=${CMB_TUNE_MAX_PROCS:-$((2 * procs))}
case $max_procs in '' | *[!0-9]*) echo "$0: CMB_TUNE_MAX_PROCS must be a count" >&2; exit 2 ;; esac
export CMB_TUNE_PROCS=$procs CMB_TUNE_ROUNDS=$rounds CMB_TUNE_WORKLOADS="$workloads"
start=$(date +%s)
rc=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/gpu.txt" 2>&1
"$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" >>"$out/gpu.txt" 2>&1

left() { [ $(($(date +%s) - start)) -lt "$budget" ]; }

# wrapped NAME SETTING CAPACITY WORKLOAD [--snapshot FILE]: the program under a setting
wrapped() {
    name=$1 setting=$2 cap=$3 wl=$4
    shift 4
    if ! left; then
        echo "skipped: budget of $budget s spent" >"$out/$name.log"
        return 1
    fi
    t0=$(date +%s)
    set -- "$@" --out "$out/$name.json"
    [ "$cap" = 0 ] || set -- "$@" --capacity "$cap"
    timeout 100 "$py" -m cumembench_alloc run "$setting" "$@" -- scripts/time_model.py run --workload "$wl" \
        --rounds "$rounds" --out "$out/$name.steps.json" >"$out/$name.log" 2>&1
    s=$?
    echo "$name: exit $s, $(($(date +%s) - t0)) s" | tee -a "$out/times.txt"
    return $s
}

field() { "$py" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

one() { # WORKLOAD
    wl=$1
    wrapped "$wl.record" native: 0 "$wl" --snapshot "$out/$wl.pickle" || { rc=1; return; }
    t0=$(date +%s)
    "$bin" tune "$out/$wl.pickle" --json >"$out/$wl.free.json" 2>"$out/$wl.free.log" || { rc=1; return; }
    need=$(field "$out/$wl.free.json" 'd["recorded"]["min_capacity_bytes"]')
    best=$(field "$out/$wl.free.json" 'd["front"][0]["min_capacity_bytes"]')
    b=$(( (need + best) / 2 / 2097152 * 2097152 ))
    [ "$b" -ge "$best" ] || b=$best
    "$bin" tune "$out/$wl.pickle" --budget "$b" --json >"$out/$wl.tune.json" 2>"$out/$wl.tune.log" || { rc=1; return; }
    echo "$wl.tune: budget $b B, $(($(date +%s) - t0)) s" | tee -a "$out/times.txt"
    command -v gnuplot >/dev/null && "$py" plots/tune_front.py "$out/$wl.tune.json" "$out/$wl-front.png"
    rec=$(field "$out/$wl.tune.json" 'd["recommendation"]["run_setting"]')
    old=$(field "$out/$wl.tune.json" 'd["recorded"]["run_setting"]')
    # CMB_TUNE_PROCS processes of each, their order alternating: what varies between processes
    # (on a host-bound program, more than the allocator's share) is in the spread
    p=0
    while [ $p -lt "$procs" ] || { [ $p -lt "$max_procs" ] && left &&
        [ "$("$py" "$root/scripts/tune_table.py" "$out" --verdict "$wl")" = "not resolved" ]; }; do
        p=$((p + 1))
        [ $p -gt "$procs" ] && echo "$wl: not resolved after $((p - 1)) processes a side: one more pair" | tee -a "$out/times.txt"
        sfx=$([ "$p" = 1 ] || echo ".p$p")
        if [ $((p % 2)) = 1 ]; then
            wrapped "$wl.recommended$sfx" "$rec" "$b" "$wl" || rc=1
            wrapped "$wl.recorded$sfx" "$old" 0 "$wl" || rc=1
        else
            wrapped "$wl.recorded$sfx" "$old" 0 "$wl" || rc=1
            wrapped "$wl.recommended$sfx" "$rec" "$b" "$wl" || rc=1
        fi
    done
    # the recorded setting on the budget (out of memory expected), before the next program: a
    # program's evidence is whole, or the next program is not started
    wrapped "$wl.recorded-on-budget" "$old" "$b" "$wl"
    left && "$bin" tune "$out/$wl.pickle" --budget "$b" >"$out/$wl.tune.txt" 2>/dev/null # the text a user reads
}

for wl in $workloads; do
    one "$wl"
done

"$py" "$root/scripts/tune_table.py" "$out" || rc=1
cat "$out/tune.md"
echo "gpu-tune: $(($(date +%s) - start)) s; results in $out (exit $rc)"
exit $rc
