#!/bin/sh
# gpu-cmb-e2e.sh - everything issue 18 measures on a GPU, in one call of
# under 9 minutes: cmb inside a real PyTorch training job against PyTorch's
# own allocator, then cmb's scenarios (docs/cmb.md "On a GPU"). Builds
# nothing; needs a GPU and PyTorch.
#
#   scripts/gpu-cmb-e2e.sh BUILD_DIR OUT_DIR
#
# 1. OUT_DIR/e2e/: scripts/gpu-e2e.sh's torch part with its jobs narrowed to
#    what issue 18 compares: the transformer natively (default and
#    expandable_segments:True), through libcmb_pluggable.so under cmb@vmm,
#    torch-expandable@vmm and cmb:page=8MiB@vmm, each beside the sim replay's
#    prediction of its own recorded traffic, and the out-of-memory probes
#    (native, and cmb@vmm raising under a 1 GiB cap). e2e-torch.md has the
#    table, with cmb against both native runs (peak reserved, step time).
# 2. OUT_DIR/cmb/: scripts/gpu-cmb.sh (summary.md, runs.tar.gz, log.txt),
#    its three runs sharing the time left.
#
# CMB_CMB_E2E_BUDGET (default 490) is the whole call's time in seconds: the
# torch part gets at most 190 of it, gpu-cmb.sh the rest but 30 (its
# summary and archive), split 30/30/40 between churn, fastpath and replay.
# Exit status: 2 on bad usage, else 1 when either part did not run every
# job or case, else 0.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "" "$@"
here=$(cd "$(dirname "$0")" && pwd)
budget=${CMB_CMB_E2E_BUDGET:-490}
case $budget in
'' | *[!0-9]*) echo "$0: CMB_CMB_E2E_BUDGET='$budget' is not a number of seconds" >&2; exit 2 ;;
esac
[ "$budget" -ge 200 ] || { echo "$0: CMB_CMB_E2E_BUDGET must be at least 200 s" >&2; exit 2; }
t0=$(date +%s)
status=0

e2e=$((budget * 190 / 490))
mkdir -p "$out/e2e" "$out/cmb" || exit 2
echo "== torch end to end (at most $e2e s)" >&2
env CMB_E2E_TORCH_POLICIES="cmb@vmm torch-expandable@vmm" CMB_E2E_TORCH_EXTRA="cmb:page=8MiB@vmm" \
    CMB_E2E_OOM_POLICY="cmb@vmm" CMB_E2E_OOM_MODES="raise" CMB_E2E_BUDGET=$((e2e - 30)) CMB_E2E_TIMEOUT=90 \
    "$here/gpu-e2e.sh" "$build" "$out/e2e" torch
rc=$?
[ $rc -eq 2 ] && exit 2
[ $rc -ne 0 ] && status=1

left=$((budget - ($(date +%s) - t0) - 30))
if [ $left -lt 60 ]; then
    echo "$0: $left s left: gpu-cmb.sh not run" >&2
    exit 1
fi
limits="$((left * 30 / 100)) $((left * 30 / 100)) $((left * 40 / 100))"
echo "== gpu-cmb.sh (time shares $limits s)" >&2
CMB_GPU_CMB_LIMITS=$limits "$here/gpu-cmb.sh" "$build" "$out/cmb"
rc=$?
[ $rc -eq 2 ] && exit 2
[ $rc -ne 0 ] && status=1
[ -f "$out/cmb/summary.md" ] && cat "$out/cmb/summary.md"
echo "gpu-cmb-e2e: $(($(date +%s) - t0)) s, outputs in $out" >&2
exit $status
