#!/usr/bin/env bash
# bench.sh - runs the suite, then the report of what it wrote; `make bench`
# calls it. The exit status is the suite's (a failed case is 1), not the
# report's: a report that cannot be drawn is said on stderr.
#
#   ci/bench.sh BUILD_DIR [cumembench options...]
#
# Environment (from the Makefile):
#   GPUS    ""        one run (the binary picks the GPU, or sim without one)
#           all       one run per visible GPU (--device 0..N-1), reported together
#           "0 2"     one run per listed device, reported together
#   OUT     output directory (several GPUs: OUT/gpu<N>); default results/runs/...
#   REPORT  the HTML report (default: RUN/report.html, or for several GPUs
#           results/runs/report-<time>.html)
#   PYTHON  the interpreter with matplotlib (default /usr/bin/python3)
set -u

build=${1:?usage: ci/bench.sh BUILD_DIR [cumembench options...]}
shift
bin=$build/cumembench
python=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")/.." && pwd)
runs=()
status=0

gpu_count() {
    "$bin" --probe-env | awk -F'\t' '$1 == "gpu_count" { print $2 }'
}

# Runs the suite once; appends the directory it wrote to runs[].
run_once() { # OUT_OR_EMPTY [extra options...]
    local out=$1 marker rc dir
    shift
    marker=$(mktemp)
    if [ -n "$out" ]; then
        "$bin" --out "$out" "$@"
    else
        "$bin" "$@"
    fi
    rc=$?
    [ $rc -ne 0 ] && [ $status -eq 0 ] && status=$rc
    if [ -n "$out" ]; then
        dir=$out
    else # the binary chose results/runs/<gpu>-<preset>-<time>: the one it just made
        dir=$(find results/runs -mindepth 1 -maxdepth 1 -type d -newer "$marker" 2>/dev/null | sort | tail -n 1)
    fi
    rm -f "$marker"
    if [ -n "$dir" ] && [ -f "$dir/results.csv" ]; then
        runs+=("$dir")
    fi
}

case "${GPUS:-}" in
"")
    run_once "${OUT:-}" "$@"
    ;;
*)
    if [ "$GPUS" = all ]; then
        n=$(gpu_count)
        if [ -z "$n" ] || [ "$n" -eq 0 ]; then
            echo "bench: GPUS=all, but no CUDA GPU is visible ($("$bin" --probe-env | awk -F'\t' '$1 == "no_gpu_reason" { print $2 }'))" >&2
            exit 2
        fi
        devices=$(seq 0 $((n - 1)))
    else
        devices=$(echo "$GPUS" | tr ',' ' ')
    fi
    for d in $devices; do
        echo "bench: GPU $d" >&2
        run_once "${OUT:+$OUT/gpu$d}" --device "$d" "$@"
    done
    ;;
esac

if [ ${#runs[@]} -eq 0 ]; then
    echo "bench: no results to report" >&2
    exit $((status ? status : 1))
fi
report=${REPORT:-}
if [ -z "$report" ] && [ ${#runs[@]} -gt 1 ]; then
    report=results/runs/report-$(date +%Y%m%d-%H%M%S).html
fi
if ! "$python" "$here/plots/report.py" ${report:+-o "$report"} "${runs[@]}"; then
    echo "bench: the report could not be made (the results are in ${runs[*]})" >&2
fi
exit $status
