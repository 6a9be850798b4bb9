#!/bin/sh
# gpu-cmb-ab.sh - two or more builds of libcmb_pluggable.so side by side in
# real training programs, native expandable segments beside, in one call:
# before/after comparisons of a policy change (one build's time moves by up
# to 2x between machines of one model, results/nvidia-h200/cmb-park-after).
# Builds nothing.
#
#   scripts/gpu-cmb-ab.sh OUT_DIR NAME=LIB [NAME=LIB ...]
#
# NAME: a word (letters, digits, '-'); LIB: a libcmb_pluggable.so. Every
# program runs natively with expandable_segments:True ("native-expandable")
# and under CMB_AB_POLICY (cmb@vmm) through each LIB ("NAME"), the modes
# alternating run by run, every step timed (scripts/e2e-steady.py run):
#
#   OUT_DIR/e2e/PROGRAM-MODE-RUN.json and .log   each run
#   OUT_DIR/e2e.md      scripts/e2e-steady.py table: per mode the median and
#                       [min-max] over runs, each step as a ratio to native
#                       expandable segments, the new-shape steps' sums
#   OUT_DIR/log.txt     progress; nvidia-smi.txt, torch.txt the machine
#
# CMB_AB_PROGRAMS  comma-separated, of e2e-steady.py's (default transformer)
# CMB_AB_RUNS      runs of each mode (3); CMB_AB_STEPS steps a run (24)
# CMB_AB_POLICY    the spec every LIB runs (cmb@vmm)
# CMB_AB_PROFILE   1: CMB_PROFILE=1 in the library runs (their .log ends with
#                  the host time of the policy's and the driver's calls)
# CMB_AB_BUDGET    seconds after which no run starts (530; skipped ones are
#                  listed in e2e.md)
# Exit status: 0 when every run ran, 1 when one failed, 2 on bad usage or no
# PyTorch with a GPU (before anything runs).
set -u

. "$(dirname "$0")/lib.sh"
usage() { echo "usage: $0 OUT_DIR NAME=LIB [NAME=LIB ...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
root=$(cd "$(dirname "$0")/.." && pwd) || exit 2
out=$1
shift
runs=${CMB_AB_RUNS:-3}
steps=${CMB_AB_STEPS:-24}
budget=${CMB_AB_BUDGET:-530}
policy=${CMB_AB_POLICY:-cmb@vmm}
profile=${CMB_AB_PROFILE:-0}
case "$runs$steps$budget" in '' | *[!0-9]*) echo "$0: CMB_AB_RUNS, CMB_AB_STEPS and CMB_AB_BUDGET must be numbers" >&2; exit 2 ;; esac
[ "$runs" -gt 0 ] && [ "$steps" -gt 1 ] || { echo "$0: CMB_AB_RUNS must be at least 1 and CMB_AB_STEPS at least 2" >&2; exit 2; }
case "$profile" in 0 | 1) ;; *) echo "$0: CMB_AB_PROFILE='$profile': expected 0 or 1" >&2; exit 2 ;; esac
cmb_programs CMB_AB_PROGRAMS "transformer gpt convnet llm_decode" transformer
names=
pairs= # NAME=absolute path, one a line
for pair in "$@"; do
    name=${pair%%=*}
    lib=${pair#*=}
    case "$pair" in *=*) ;; *) name= ;; esac
    case "$name" in '' | *[!A-Za-z0-9-]* | native-expandable)
        echo "$0: '$pair': expected NAME=LIB, NAME a word of letters, digits and '-' (not native-expandable)" >&2; exit 2 ;; esac
    [ -f "$lib" ] || { echo "$0: '$pair': no library at '$lib'" >&2; exit 2; }
    case " $names " in *" $name "*) echo "$0: '$name' named twice" >&2; exit 2 ;; esac
    names="$names $name"
    pairs="$pairs$name=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")
"
done
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null ||
    { echo "$0: no PyTorch with a GPU here" >&2; exit 2; }
mkdir -p "$out/e2e" || exit 2
out=$(cd "$out" && pwd)
cd "$root" || exit 2
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda)" >"$out/torch.txt" 2>&1
status=0
start=$(date +%s)
for r in $(seq 1 "$runs"); do
    for p in $programs; do
        for m in native-expandable $names; do
            base="$out/e2e/$p-$m-$r"
            if [ $(($(date +%s) - start)) -gt "$budget" ]; then
                echo "skipped: $p $m run $r (past CMB_AB_BUDGET=${budget}s)" | tee -a "$out/log.txt" "$out/e2e/skipped.txt" >&2
                status=1
                continue
            fi
            if [ "$m" = native-expandable ]; then
                env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 scripts/e2e-steady.py run \
                    --program "$p" --steps "$steps" --out "$base.json" >"$base.log" 2>&1
            else
                lib=$(printf '%s' "$pairs" | sed -n "s/^$m=//p")
                env -u PYTORCH_CUDA_ALLOC_CONF CMB_PROFILE="$profile" python3 scripts/e2e-steady.py run \
                    --program "$p" --steps "$steps" --policy "$policy" --lib "$lib" \
                    --out "$base.json" >"$base.log" 2>&1
            fi
            rc=$?
            echo "$p $m run $r: exit $rc, $(($(date +%s) - start)) s" | tee -a "$out/log.txt" >&2
            [ $rc -ne 0 ] && status=1
        done
    done
done
python3 scripts/e2e-steady.py table --work "$out/e2e" --out "$out/e2e.md" >/dev/null || status=1
[ -f "$out/e2e/skipped.txt" ] && cat "$out/e2e/skipped.txt" >>"$out/e2e.md"
exit $status
