#!/bin/sh
# sim-serving-table.sh [BIN] - the serving scenario's sim table of
# docs/scenarios.md: every policy, quick preset, seed 42, one repetition
# (sim is deterministic), through tools/results-table.py. Run from the
# repository root; BIN defaults to build/cumembench. Prints markdown.
set -eu
bin=${1:-build/cumembench}
[ -x "$bin" ] || { echo "$0: $bin is missing: build first (make build)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" --mode sim --scenario serving --allocator all --preset quick --seed 42 --repetitions 1 --timeline off \
    --quiet --out "$dir/run" >"$dir/log" 2>&1 || { cat "$dir/log" >&2; exit 1; }
tools/results-table.py "$dir/run" --scenario serving --metric max_utilization:x --metric kv_tokens:raw \
    --metric preemptions:raw --metric kv_waste_ratio:x --metric non_kv_slack_bytes:MiB \
    --metric peak_reserved_bytes:MiB --metric search_trials:raw |
    sed 's/, cumembench [0-9a-f]*\(-dirty\)\{0,1\}\.$/./' # the revision would make the block stale at every commit
