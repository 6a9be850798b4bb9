#!/usr/bin/env bash
# make regress: compares a run with a baseline (tools/cumembench-compare).
#
#   BIN=build/cumembench MODE=sim|gpu [BASELINE=dir] [CURRENT=dir] [SUMMARY=file] \
#       [RESULTS=results] ci/regress.sh [cumembench-compare options...]
#
# BASELINE defaults to $RESULTS/sim/baseline (MODE=sim) or to
# $RESULTS/<slug of this machine's GPU>/baseline (MODE=gpu). Without CURRENT
# the suite runs first, with the arguments the baseline was taken with
# (BASELINE/args), into $RESULTS/runs/regress-*; its summary goes to
# CURRENT/regress.json unless SUMMARY names another file.
# Exit status: the tool's own: 0 no regression, 1 regression, 2 unusable input.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

BIN=${BIN:-$root/build/cumembench}
MODE=${MODE:-sim}
BASELINE=${BASELINE:-}
CURRENT=${CURRENT:-}
SUMMARY=${SUMMARY:-}
RESULTS=${RESULTS:-$root/results}
COMPARE=$root/tools/cumembench-compare

die() {
    echo "regress: $*" >&2
    exit 2
}

# The directory name harness/env.c gives a GPU: lower-case words joined by '-'.
gpu_slug() {
    local name
    name=$("$BIN" --probe-env | awk -F'\t' '$1 == "gpu_name" { print $2 }')
    [ -n "$name" ] || die "MODE=gpu but no GPU is visible ($("$BIN" --probe-env | awk -F'\t' '$1 == "no_gpu_reason" { print $2 }'))"
    printf '%s' "$name" | LC_ALL=C tr -cs '[:alnum:]' '-' | LC_ALL=C tr '[:upper:]' '[:lower:]' | sed 's/^-//; s/-$//'
}

if [ -z "$BASELINE" ]; then
    case "$MODE" in
    sim) BASELINE=$RESULTS/sim/baseline ;;
    gpu) BASELINE=$RESULTS/$(gpu_slug)/baseline ;;
    *) die "MODE must be sim or gpu, not '$MODE'" ;;
    esac
fi
[ -e "$BASELINE" ] || die "no baseline at $BASELINE (make baseline MODE=$MODE creates one)"

if [ -z "$CURRENT" ]; then
    [ -f "$BASELINE/args" ] || die "$BASELINE/args is missing: give CURRENT=dir, or regenerate the baseline"
    [ -x "$BIN" ] || die "$BIN is not built (make build)"
    mapfile -t args <"$BASELINE/args"
    CURRENT=$RESULTS/runs/regress-$(basename "$(dirname "$BASELINE")")-$(date +%Y%m%d-%H%M%S)
    echo "regress: running the suite as the baseline was taken: ${args[*]}" >&2
    rc=0
    "$BIN" "${args[@]}" --out "$CURRENT" --quiet || rc=$?
    # 1: some cases failed; the comparison reports them
    [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || die "the run failed (exit $rc)"
    SUMMARY=${SUMMARY:-$CURRENT/regress.json}
fi

exec "$COMPARE" "$BASELINE" "$CURRENT" ${SUMMARY:+--json "$SUMMARY"} "$@"
