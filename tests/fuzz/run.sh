#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each for a
# bounded time over its corpus in tests/fuzz/corpus/<target>/.
#
#   tests/fuzz/run.sh [--seconds N] [--runs N] [--merge] [--build DIR] [--report FILE] [TARGET...]
#
#   --seconds N  time per target (default 60)
#   --runs N     a number of executions per target instead of a time
#   --merge      merge the new inputs that add coverage into the committed
#                corpus (minimized with -merge=1), to commit them
#   --report F   append "target executions seconds corpus" lines to F
# Exit status 1 on any crash, sanitizer report, timeout (10 s per input),
# out-of-memory (2 GiB) or broken invariant; the input is kept in
# $BUILD/artifacts/ and named in the output.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=60 runs= merge=0 build=build-fuzz report=
targets=()
while (($#)); do
    case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --merge) merge=1; shift ;;
    --build) build=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
    esac
done
((${#targets[@]})) || targets=(fuzz_trace_suite fuzz_trace_rmm fuzz_units fuzz_params fuzz_results)

cc=${FUZZ_CC:-$(command -v clang || command -v clang-14 || true)}
if [ -z "$cc" ]; then
    echo "run.sh: clang is needed (apt-get install clang libclang-rt-14-dev)" >&2
    exit 2
fi
cmake -S tests/fuzz -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$build/artifacts"
status=0
for t in "${targets[@]}"; do
    corpus=tests/fuzz/corpus/$t
    mkdir -p "$corpus" "$work/$t"
    limit=(-max_total_time="$seconds")
    [ -n "$runs" ] && limit=(-runs="$runs")
    log=$work/$t.log
    t0=$(date +%s.%N)
    if ! "$build/$t" "${limit[@]}" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
        -artifact_prefix="$build/artifacts/$t-" "$work/$t" "$corpus" >"$log" 2>&1; then
        echo "FAIL $t: a crash, sanitizer report or broken invariant; input kept in $build/artifacts/" >&2
        grep -E "ERROR|invariant|SUMMARY|Test unit written|runtime error" "$log" | head -20 >&2 || tail -30 "$log" >&2
        status=1
        continue
    fi
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    found=$(find "$work/$t" -type f | wc -l)
    if ((merge)); then
        "$build/$t" -merge=1 "$corpus" "$work/$t" >"$work/$t.merge" 2>&1
    fi
    size=$(find "$corpus" -type f | wc -l)
    printf '%-18s %12s executions in %5.0f s, %4s new inputs, corpus %s\n' "$t" "$execs" "$secs" "$found" "$size"
    [ -n "$report" ] && printf '%s %s %.0f %s\n' "$t" "$execs" "$secs" "$size" >>"$report"
done
exit $status
