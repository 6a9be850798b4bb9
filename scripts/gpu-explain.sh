#!/bin/sh
# gpu-explain.sh - CMB_EXPLAIN_OOM=1 on a GPU (docs/explain.md). Builds
# nothing; a few minutes on an H100.
#
#   scripts/gpu-explain.sh BUILD_DIR OUT_DIR
#
#  1. replay/   the transformer trace capped at 11.5 GiB under torch-caching,
#               torch-expandable, bfc, rmm-pool and cupy over the real CUDA
#               upstream: every case that did not fit is explained, its free
#               bytes by reason add up to reserved - allocated; the text
#               (explain.txt, tools/explain_oom.py) and the report
#               (report.html) are kept;
#  2. sim/      the same in sim mode, for the side by side: on a GPU the
#               cached blocks' events may still be pending at a failure
#               (oom_free_event_wait_bytes), which sim never shows.
# OUT_DIR/summary.txt lists the checks; exit status 0 when all hold.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "" "$@"
cd "$(dirname "$0")/.." || exit 2
status=0
: >"$out/summary.txt"
say() { echo "$*" | tee -a "$out/summary.txt" >&2; }
allocs=torch-caching,torch-expandable,bfc,rmm-pool,cupy
trace=traces/samples/torch_transformer_sweep.trace

for mode in gpu sim; do
    dir=$out/$([ $mode = gpu ] && echo replay || echo sim)
    CMB_EXPLAIN_OOM=1 "$bin" --mode $mode --scenario replay --allocator $allocs --param trace=$trace \
        --param find_min_capacity=false --capacity 11.5GiB --repetitions 3 --out "$dir" \
        >"$dir.log" 2>&1 || { say "FAILED: $mode run ($(tail -1 "$dir.log"))"; status=1; continue; }
    if python3 - "$dir" <<'PY' >>"$out/summary.txt" 2>&1; then say "ok: $mode: explanations add up"; else say "FAILED: $mode: explanations"; status=1; fi
import csv, os, sys
m = {}
for r in csv.DictReader(open(os.path.join(sys.argv[1], "results.csv"))):
    if r["metric"]:
        m.setdefault((r["allocator"], r["repetition"]), {})[r["metric"]] = float(r["value"])
bad = 0
for k, v in sorted(m.items()):
    if "oom_request_bytes" not in v or "oom_free_too_small_bytes" not in v:
        continue
    free = sum(x for n, x in v.items() if n.startswith("oom_free_"))
    ok = free == v["oom_reserved_bytes"] - v["oom_allocated_bytes"]
    bad += not ok
    print(f"   {k[0]} rep {k[1]}: free by reason {free:.0f}, reserved - allocated "
          f"{v['oom_reserved_bytes'] - v['oom_allocated_bytes']:.0f}, event wait {v['oom_free_event_wait_bytes']:.0f}"
          f"{'' if ok else '  MISMATCH'}")
sys.exit(1 if bad else 0)
PY
    python3 tools/explain_oom.py "$dir" >"$dir/explain.txt" 2>&1 || say "note: $mode: no case needed an explanation"
    /usr/bin/python3 plots/report.py "$dir" -o "$dir/report.html" --no-gnuplot -q >>"$dir.log" 2>&1 ||
        say "note: $mode: the report could not be written (matplotlib?)"
done
exit $status
