#!/usr/bin/env bash
# make baseline: runs the suite with fixed settings and makes the result the
# baseline of this GPU (results/<gpu-slug>/baseline/) or of sim mode
# (results/sim/baseline/). The previous baseline is replaced only once the
# new run has finished. See docs/regress.md.
#
#   BIN=build/cumembench MODE=sim|gpu [BASELINE_ARGS="..."] [RESULTS=results] ci/baseline.sh
#
# A baseline records the revision it was built from, so the sources must be
# committed: changed files outside results/ stop it (exit 2), unless
# CMB_BASELINE_DIRTY_OK=1 (the revision then reads -dirty).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

BIN=${BIN:-$root/build/cumembench}
MODE=${MODE:-sim}
RESULTS=${RESULTS:-$root/results}
COMPARE=$root/tools/cumembench-compare

# The committed sim baseline: small and fast (seconds in sim); the lead
# regenerates it whenever policies or scenarios change on purpose.
SIM_ARGS="--mode sim --scenario all --allocator all --preset quick --seed 42 --repetitions 3 --timeline off"
# A GPU baseline: 9 repetitions, what compare.py's U test wants.
GPU_ARGS="--mode gpu --scenario all --allocator all --preset quick --seed 42 --repetitions 9 --timeline off"

case "$MODE" in
sim) default_args=$SIM_ARGS ;;
gpu) default_args=$GPU_ARGS ;;
*)
    echo "baseline: MODE must be sim or gpu, not '$MODE'" >&2
    exit 2
    ;;
esac
read -r -a args <<<"${BASELINE_ARGS:-$default_args}"

if [ -z "${CMB_BASELINE_DIRTY_OK:-}" ] && git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
    changed=$(git -C "$root" status --porcelain --untracked-files=no -- . ':(exclude)results')
    if [ -n "$changed" ]; then
        echo "baseline: the sources differ from the commit; commit them first (or CMB_BASELINE_DIRTY_OK=1):" >&2
        printf '%s\n' "$changed" | head -10 | sed 's/^/  /' >&2
        exit 2
    fi
fi

[ -x "$BIN" ] || {
    echo "baseline: $BIN is not built (make build)" >&2
    exit 2
}

stamp=$(date +%Y%m%d-%H%M%S)
tmp=$RESULTS/runs/baseline-$MODE-$stamp
rc=0
"$BIN" "${args[@]}" --out "$tmp" --quiet || rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
    echo "baseline: the run failed (exit $rc); the old baseline is kept" >&2
    exit 2
fi
[ "$rc" -eq 1 ] && echo "baseline: some cases failed; they are recorded as failed in the baseline" >&2

slug=$("$COMPARE" --print-slug "$tmp")
dest=$RESULTS/$slug/baseline
printf '%s\n' "${args[@]}" >"$tmp/args" # what make regress runs again
rm -f "$tmp/run.log" "$tmp/run.args"    # case output and --resume's record: not part of the baseline
# The sim baseline is committed and regenerated often: the JSON is all the
# comparison reads. A GPU baseline keeps the CSV for the cross-GPU report.
if [ "$MODE" = sim ]; then rm -rf "$tmp/results.csv" "$tmp/timelines"; fi

mkdir -p "$RESULTS/$slug"
rm -rf "$dest.old"
[ -d "$dest" ] && mv "$dest" "$dest.old"
mv "$tmp" "$dest"
rm -rf "$dest.old"
echo "baseline: $dest is the new baseline; commit it to make it the reference"
