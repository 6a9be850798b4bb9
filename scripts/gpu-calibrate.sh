#!/bin/sh
# gpu-calibrate.sh - the cost file of the GPU found (docs/costs.md): what
# every upstream and driver call costs, and each available real: plug-in's
# alloc+free pair, by `cumembench calibrate`. Needs a GPU; builds nothing.
#
#   scripts/gpu-calibrate.sh BUILD_DIR OUT_DIR [REPETITIONS]   (default 15)
#
# OUT_DIR receives costs.json (commit it as results/<gpu>/costs.json, where
# harness/costs.c finds it by --gpu-model), calibrate.log (the command's
# output, its wall time) and nvidia-smi.txt. The command runs under a
# 180-second limit (the issue's bound for an H100). Exit status: that of
# calibrate (0, 1 a call failed, 2 bad usage or no GPU), 124 past the limit.
set -u
. "$(dirname "$0")/lib.sh"
cmb_dirs "[REPETITIONS]" "$@"
reps=${3:-15}
log="$out/calibrate.log"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
start=$(date +%s)
echo "\$ $bin calibrate --out $out/costs.json --repetitions $reps" >"$log"
timeout 180 "$bin" calibrate --out "$out/costs.json" --repetitions "$reps" >>"$log" 2>&1
rc=$?
echo "exit $rc after $(($(date +%s) - start)) s" >>"$log"
cat "$log"
exit $rc
