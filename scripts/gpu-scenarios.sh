#!/bin/sh
# gpu-scenarios.sh - run the scenario set on a GPU: every scenario under
# every allocator with the quick preset, then the stream-ordered pool's
# reuse policies switched off one at a time (stream-async). Builds nothing.
#
#   scripts/gpu-scenarios.sh BUILD_DIR OUT_DIR [cumembench options...]
#
# BUILD_DIR holds a built cumembench; OUT_DIR receives
#   OUT_DIR/quick/           results.json, results.csv and the run's log
#   OUT_DIR/reuse-policies/  the same for the reuse-policy comparison
# Extra options go to the first run (e.g. --scenario stream-async,contention
# or --allocator cuda,cub). Exit status: 0 when every case ran, 1 when some
# case failed, 2 on bad usage or no GPU.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "[cumembench options...]" "$@"
shift 2

# Replay's sample traces are named relative to the source tree.
cd "$(dirname "$0")/.." || exit 2

status=0
echo "== every scenario x every allocator, quick preset -> $out/quick" >&2
"$bin" --mode gpu --preset quick --scenario all --allocator all --out "$out/quick" "$@"
rc=$?
[ $rc -eq 2 ] && exit 2
[ $rc -ne 0 ] && status=1

# Each reuse policy of cudaMallocAsync's pool off in turn, then all off.
pool=cuda-async-retain
variants="$pool,$pool:reuse_follow_event_deps=false,$pool:reuse_opportunistic=false"
variants="$variants,$pool:reuse_internal_deps=false"
variants="$variants,$pool:reuse_follow_event_deps=false:reuse_opportunistic=false:reuse_internal_deps=false"
echo "== stream-async, reuse policies on and off -> $out/reuse-policies" >&2
"$bin" --mode gpu --preset quick --scenario stream-async --allocator "$variants" --out "$out/reuse-policies"
rc=$?
[ $rc -ne 0 ] && status=1

exit $status
