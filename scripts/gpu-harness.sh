#!/bin/sh
# gpu-harness.sh - the harness on a GPU after its redesign (one allocator
# instance, one case record, one CLI table, one result schema). Builds
# nothing; about 5 minutes on an H100.
#
#   scripts/gpu-harness.sh BUILD_DIR OUT_DIR
#
#  1. quick/    churn, replay, batch-sweep and stream-async under cuda,
#               cuda-async, torch-caching, rmm-pool and bfc: no case fails,
#               every row has the schema's columns, impl says real or
#               emulation, and results-table.py reads the run;
#  2. verify/   batch-sweep and replay's capacity search under a fault that
#               never fires (so every instance is verified, the trials'
#               too) over the real upstreams: no overlap, misalignment or
#               block outside the upstream's memory;
#  3. child/    the planted scenario starts its helper as a --child from
#               options (no case record): the helper holds its memory.
# OUT_DIR/summary.txt lists the checks; exit status 0 when all hold.
set -u

. "$(dirname "$0")/lib.sh"
cmb_dirs "" "$@"
cd "$(dirname "$0")/.." || exit 2
status=0
: >"$out/summary.txt"
say() { echo "$*" | tee -a "$out/summary.txt" >&2; }

# check NAME PYTHON-EXPRESSION-OVER-rows: one line in the summary
check() {
    if python3 - "$out/$1" "$2" <<'PY' >>"$out/summary.txt" 2>&1; then say "ok: $1"; else say "FAILED: $1"; status=1; fi
import sys
sys.path.insert(0, "tools")
import cmb_schema
rows = list(cmb_schema.read_rows(sys.argv[1]))
bad = eval("(" + sys.argv[2] + ")", {"rows": rows, "cmb_schema": cmb_schema})
for b in bad[:20]:
    print("  ", b)
sys.exit(1 if bad or not rows else 0)
PY
}

say "== 1. quick run -> $out/quick"
"$bin" --mode gpu --scenario churn,replay,batch-sweep,stream-async \
    --allocator cuda,cuda-async,torch-caching,rmm-pool,bfc --repetitions 2 --quiet --out "$out/quick"
[ $? -eq 2 ] && exit 2
check quick '[(r["case"], r["status"], r["error"]) for r in rows if r["status"] not in ("ok", "skipped")] +
             [r["case"] for r in rows if r["impl"] not in ("real", "emulation") or not r["allocator"]]'
python3 tools/results-table.py "$out/quick" --scenario churn --metric peak_reserved_bytes:GiB \
    --metric frag_ratio:x >>"$out/summary.txt" 2>&1 || { say "FAILED: results-table.py"; status=1; }

say "== 2. every instance verified -> $out/verify"
"$bin" --mode gpu --scenario batch-sweep,replay --allocator torch-caching,rmm-pool,bfc,cupy@vmm \
    --param find_min_capacity=true --fault nth=1000000000 --repetitions 1 --quiet --out "$out/verify"
[ $? -eq 2 ] && exit 2
check verify '[(r["case"], r["metric"], r["value"]) for r in rows
               if r["metric"] in ("verify_overlaps", "verify_misaligned", "verify_outside") and float(r["value"])] +
              [r["case"] for r in rows if r["status"] == "failed"] +
              ([] if any(r["metric"] == "verify_overlaps" for r in rows) else ["no verify counters"])'

say "== 3. a child from options -> $out/child"
CMB_PLANTED_FAULTS=1 "$bin" --mode gpu --scenario planted-fault --allocator cuda --param kind=orphan \
    --param hold=1GiB --param hold_s=5 --repetitions 1 --quiet --out "$out/child"
[ $? -eq 2 ] && exit 2
check child '[] if any(r["metric"] == "planted_hold_bytes" for r in rows) else [(r["status"], r["error"]) for r in rows]'
sleep 6 # the helper lets go

cat "$out/summary.txt"
exit $status
