#!/bin/sh
# gpu-cmb-steady.sh - cmb at steady state (docs/cmb.md): every sample trace
# replayed once and 100 times, beside PyTorch's expandable segments and
# caching allocator, then (on a GPU) three real training programs natively
# and through libcmb_pluggable.so. Builds nothing.
#
#   scripts/gpu-cmb-steady.sh BUILD_DIR OUT_DIR [--sim]
#   scripts/gpu-cmb-steady.sh OUT_DIR          (BUILD_DIR = .gpu-build)
#
# On a GPU, carry a build made with `make build CUDA_ARCHS=90`:
#   mkdir -p .gpu-build && cp -a build/cumembench build/lib build/pluggable .gpu-build/
#   bash scripts/gpu-cmb-steady.sh "$OUT"       # the three programs, under 8 minutes
#   CMB_STEADY_PARTS=replay bash scripts/gpu-cmb-steady.sh "$OUT"   # replays over vmm
#
#   OUT_DIR/replay/   cumembench's run: replay of traces/samples/*.trace at
#                     passes=1 and passes=100 (sim: also each trace's smallest
#                     device, find_min_capacity), under cmb, torch-expandable
#                     and torch-caching (on a GPU: cmb@vmm, torch-expandable@vmm,
#                     torch-caching; 3 repetitions)
#   OUT_DIR/churn/    churn's quick preset (the checkerboard's capacity_ratio)
#   OUT_DIR/replay.md the table: reserved/requested, smallest device, upstream
#                     calls, driver calls (the driver_calls metric), and the
#                     calls per pass after the first ((passes=100 - passes=1) / 99)
#   OUT_DIR/e2e/      GPU only: scripts/e2e-steady.py for the recorded
#                     transformer (24 steps: its 8 lengths, 3 times), convnet
#                     (18 steps: 6 image sizes, 3 times) and LLM decode (24
#                     steps: its 12 requests, twice), each natively (PyTorch's
#                     default allocator), natively with
#                     expandable_segments:True, and under cmb@vmm through
#                     BUILD_DIR/pluggable/libcmb_pluggable.so; CMB_STEADY_RUNS
#                     rounds (3), numbered from CMB_STEADY_FIRST_RUN (1; a
#                     later call adding runs to a directory starts past its
#                     last), every step timed; one RUN.json and one .log
#                     per run, e2e.md the table (per program and mode: the
#                     median and [min-max] over runs of each run's median
#                     step, steady / repeat-shape / new-shape / every step,
#                     and cmb against native expandable segments). Runs go
#                     round by round; a run that would start after
#                     CMB_STEADY_BUDGET seconds (420) is skipped and e2e.md
#                     lists it, keeping the call under 8 minutes.
#                     CMB_STEADY_PROGRAMS (space- or comma-separated, default
#                     "transformer convnet llm_decode") runs some of them, or
#                     e2e-steady.py's programs no sample trace was recorded
#                     from: gpt (24 steps: 6 shapes, 4 times), moe and unet
#                     (20 steps: 4 shapes 5 times, 5 sizes 4 times).
#                     CMB_STEADY_MODES (default "native-default
#                     native-expandable cmb") picks the modes; "cmb-layout"
#                     first records each program once through the library
#                     (torch-expandable@vmm, CMB_TRACE, its first run: the
#                     profiling run, not timed) into OUT_DIR/e2e-rec/, then
#                     runs it under cmb:layout=THAT_TRACE@vmm (docs/cmb.md,
#                     "A layout planned from a recording"); "lib-expandable"
#                     runs torch-expandable@vmm through the same library: what
#                     the library's path costs apart from cmb's policy.
#   OUT_DIR/log.txt   everything the runs printed
# CMB_STEADY_PARTS (default "e2e" on a GPU, "replay" with --sim) picks the
# parts: the replays over vmm ("replay") go in a separate call into the
# same OUT_DIR. CMB_STEADY_TRACES (names under traces/samples, comma-separated;
# default all) and CMB_STEADY_REPS (default 3 on a GPU, 1 in sim) split the
# replay part: on an H200 all seven traces at 3 repetitions take over 10
# minutes (the serving trace's 100 passes, 23.6M events, about 75 s a
# repetition under cmb@vmm); give each part its own OUT_DIR and join the
# tables with cmb_steady_table.py A/replay/results.csv,B/replay/results.csv.
# Exit status: 0 when everything ran, 1 when a case or run failed, 2 on bad
# usage, no GPU or no PyTorch (GPU mode).
set -u

. "$(dirname "$0")/lib.sh"
[ $# -eq 1 ] && set -- "$(dirname "$0")/../.gpu-build" "$1"
cmb_dirs "[--sim]" "$@"
shift 2
mode=gpu
if [ "${1:-}" = --sim ]; then
    mode=sim
elif [ $# -gt 0 ]; then
    echo "$0: unknown option $1 (expected --sim)" >&2
    exit 2
fi
cd "$(dirname "$0")/.." || exit 2
if [ -n "${CMB_STEADY_TRACES:-}" ]; then
    traces=
    for t in $(echo "$CMB_STEADY_TRACES" | tr , ' '); do
        [ -f "traces/samples/$t" ] || { echo "$0: CMB_STEADY_TRACES: no traces/samples/$t" >&2; exit 2; }
        traces="${traces:+$traces,}traces/samples/$t"
    done
else
    traces=$(ls traces/samples/*.trace | paste -sd, -)
fi
[ -n "$traces" ] || { echo "$0: no traces/samples/*.trace" >&2; exit 2; }
if [ $mode = gpu ]; then parts=${CMB_STEADY_PARTS:-e2e}; else parts=${CMB_STEADY_PARTS:-replay}; fi
case " $parts " in *" replay "* | *" e2e "*) ;; *) echo "$0: CMB_STEADY_PARTS='$parts': expected replay and/or e2e" >&2; exit 2 ;; esac
runs=${CMB_STEADY_RUNS:-3}
first=${CMB_STEADY_FIRST_RUN:-1}
reps=${CMB_STEADY_REPS:-}
budget=${CMB_STEADY_BUDGET:-420}
case "$runs$budget$reps$first" in '' | *[!0-9]*) echo "$0: CMB_STEADY_RUNS, CMB_STEADY_BUDGET, CMB_STEADY_REPS and CMB_STEADY_FIRST_RUN must be numbers" >&2; exit 2 ;; esac
[ "${reps:-1}" -gt 0 ] || { echo "$0: CMB_STEADY_REPS must be at least 1" >&2; exit 2; }
cmb_programs CMB_STEADY_PROGRAMS "transformer convnet llm_decode gpt moe unet" "transformer convnet llm_decode"
modes=$(echo "${CMB_STEADY_MODES:-native-default native-expandable cmb}" | tr , ' ')
for m in $modes; do
    case $m in native-default | native-expandable | lib-expandable | cmb | cmb-layout) ;;
    *) echo "$0: CMB_STEADY_MODES: unknown mode $m (native-default, native-expandable, lib-expandable, cmb, cmb-layout)" >&2; exit 2 ;;
    esac
done
if [ $mode = gpu ]; then
    allocators="cmb@vmm,torch-expandable@vmm,torch-caching"
    find_min=false
    reps=${reps:-3}
    lib="$build/pluggable/libcmb_pluggable.so"
    [ -f "$lib" ] || { echo "$0: $lib is missing: build it (make build)" >&2; exit 2; }
    # the replays above need the GPU only; the programs need PyTorch with it
    case " $parts " in *" e2e "*)
        python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null ||
            { echo "$0: no PyTorch with a GPU (the e2e part; CMB_STEADY_PARTS=replay runs without it)" >&2; exit 2; } ;;
    esac
else
    allocators="cmb,torch-expandable,torch-caching"
    find_min=true
    reps=${reps:-1}
fi
log="$out/log.txt"
: >"$log"
status=0

bench() { # NAME cumembench-args...
    name=$1
    shift
    echo "== $name ($mode): $*" | tee -a "$log" >&2
    rm -rf "${out:?}/$name"
    "$bin" --mode $mode --out "$out/$name" "$@" >>"$log" 2>&1
    rc=$?
    [ $rc -eq 2 ] && { tail -5 "$log" >&2; exit 2; }
    [ $rc -ne 0 ] && status=1
    return 0
}

case " $parts " in *" replay "*)
bench replay --scenario replay --param trace="$traces" --param passes=1,100 --param find_min_capacity=$find_min \
    --allocator "$allocators" --repetitions $reps --timeline off
bench churn --scenario churn --preset quick --allocator "$allocators" --repetitions $reps --timeline off
python3 scripts/cmb_steady_table.py "$out/replay/results.csv" "$out/churn/results.csv" >"$out/replay.md" || status=1
cat "$out/replay.md"
;; esac

if [ $mode = gpu ] && case " $parts " in *" e2e "*) true ;; *) false ;; esac; then
    mkdir -p "$out/e2e"
    start=$(date +%s)
    set_steps() { case $1 in transformer | llm_decode | gpt) steps=24 ;; convnet) steps=18 ;; moe | unet) steps=20 ;; esac; }
    case " $modes " in *" cmb-layout "*)
        case "$out" in *[:@]*) echo "$0: cmb-layout: OUT_DIR $out holds ':' or '@', which end a layout path in an allocator spec" >&2; exit 2 ;; esac
        # the profiling run of each program: its trace is the layout the cmb-layout runs follow
        mkdir -p "$out/e2e-rec"
        for program in $programs; do
            rec="$out/e2e-rec/$program"
            [ -f "$rec.trace" ] && continue # a later call adding runs reuses it
            set_steps $program
            echo "== e2e $program record ($steps steps)" | tee -a "$log" >&2
            env -u PYTORCH_CUDA_ALLOC_CONF CMB_TRACE="$rec.trace" python3 scripts/e2e-steady.py run --program $program \
                --steps $steps --policy torch-expandable@vmm --lib "$lib" --out "$rec.json" >"$rec.log" 2>&1
            rc=$?
            echo "   exit $rc, $(($(date +%s) - start)) s into the e2e part" | tee -a "$log" >&2
            [ $rc -ne 0 ] && status=1
        done
        ;;
    esac
    for r in $(seq "$first" $((first + runs - 1))); do
        for program in $programs; do
            set_steps $program
            for m in $modes; do
                base="$out/e2e/$program-$m-$r"
                if [ $(($(date +%s) - start)) -gt "$budget" ]; then
                    echo "skipped: $program $m run $r (past CMB_STEADY_BUDGET=${budget}s)" | tee -a "$log" "$out/e2e/skipped.txt" >&2
                    status=1
                    continue
                fi
                echo "== e2e $program $m run $r ($steps steps)" | tee -a "$log" >&2
                case $m in
                native-default) env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run \
                    --program $program --steps $steps --out "$base.json" >"$base.log" 2>&1 ;;
                native-expandable) env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 scripts/e2e-steady.py \
                    run --program $program --steps $steps --out "$base.json" >"$base.log" 2>&1 ;;
                cmb) env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run --program $program \
                    --steps $steps --policy cmb@vmm --lib "$lib" --out "$base.json" >"$base.log" 2>&1 ;;
                lib-expandable) env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run --program $program \
                    --steps $steps --policy torch-expandable@vmm --lib "$lib" --out "$base.json" >"$base.log" 2>&1 ;;
                cmb-layout) env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run --program $program \
                    --steps $steps --policy "cmb:layout=$out/e2e-rec/$program.trace@vmm" --lib "$lib" \
                    --out "$base.json" >"$base.log" 2>&1 ;;
                esac
                rc=$?
                echo "   exit $rc, $(($(date +%s) - start)) s into the e2e part" | tee -a "$log" >&2
                [ $rc -ne 0 ] && status=1
            done
        done
    done
    python3 scripts/e2e-steady.py table --work "$out/e2e" --out "$out/e2e.md" || status=1
    [ -f "$out/e2e/skipped.txt" ] && cat "$out/e2e/skipped.txt" >>"$out/e2e.md"
fi
exit $status
