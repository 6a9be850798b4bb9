#!/usr/bin/env bash
# test_report_timeline.sh - the report's interactive memory timeline
# (plots/cmb_report/timeline_view.py) on a large replay, in headless
# Chromium: a 2-million-event trace grown from the transformer trace
# (tools/scale_gen.py) replayed with 131072 timeline points; the page opens
# without errors, builds its levels of detail, keeps the highest reserved
# sample at the coarsest level, zooms into a time range and reads a moment
# from the URL fragment (#tl=START,END,CLICK) with the blocks live there (as
# many as replaying the trace to that operation leaves, adding up to the
# timeline's requested bytes) and the segments the policy held there (the
# harness's timelines/*.segments: adding up to the reserved bytes, their
# blocks to the requested bytes), and stays under 20 MB. How fast
# it opens at 10 million events is make bench-scale's to measure.
# Exit 77 (skipped) when Chromium is missing outside CI.
# Environment: CMB_SRC, CMB_BIN, CMB_PYTHON (default /usr/bin/python3).
set -euo pipefail
src=${CMB_SRC:?CMB_SRC must name the source tree}
bin=${CMB_BIN:?CMB_BIN must name the cumembench binary}
py=${CMB_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
chrome=
for c in "${CMB_CHROMIUM:-}" chromium chromium-browser google-chrome; do
    [ -n "$c" ] && command -v "$c" >/dev/null && chrome=$c && break
done
if [ -z "$chrome" ]; then
    [ -n "${CI:-}" ] && fail "chromium is not installed (make test installs it: ci/install-deps.sh --test)"
    echo "SKIP: chromium is not installed (Debian: apt-get install chromium)"
    exit 77
fi

"$py" "$src/tools/scale_gen.py" trace "$src/traces/samples/torch_transformer_sweep.trace" "$tmp/big.trace" \
    --events 2000000 || fail "scale_gen.py failed"
"$bin" --mode sim --scenario replay --allocator torch-caching --param trace="$tmp/big.trace" \
    --param find_min_capacity=false --param op_latency=false --repetitions 1 --timeline on \
    --timeline-points 131072 --out "$tmp/run" -q >"$tmp/run.log" 2>&1 || fail "cumembench: $(tail -3 "$tmp/run.log")"
"$py" "$src/plots/report.py" "$tmp/run" -o "$tmp/report.html" --no-gnuplot --no-findings -q || fail "report.py failed"
size=$(stat -c %s "$tmp/report.html")
[ "$size" -lt $((20 << 20)) ] || fail "the report is $size bytes (> 20 MB)"
csv=$(ls "$tmp/run/timelines/"*.csv)
read -r first last peak < <("$py" - "$csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#"))]
ops = [int(float(r["op"])) for r in rows]
print(min(ops), max(ops), max(int(float(r["reserved_bytes"])) for r in rows))
PY
)
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
    --disable-sync --no-first-run --disable-default-apps --disable-extensions --hide-scrollbars
    --enable-logging=stderr --v=0 --user-data-dir="$tmp/profile" --virtual-time-budget=10000)
timeout 120 "$chrome" "${flags[@]}" --dump-dom "file://$tmp/report.html#tl=0.25,0.5,0.5" >"$tmp/dom.html" \
    2>"$tmp/chrome.log" || fail "chromium --dump-dom failed: $(tail -3 "$tmp/chrome.log")"
if grep -E 'CONSOLE.*(Uncaught|Error)' "$tmp/chrome.log"; then
    fail "JavaScript errors in the page (above)"
fi
div=$(grep -o '<div class="tl-view"[^>]*>' "$tmp/dom.html" | head -1)
[ -n "$div" ] || fail "no interactive timeline in the page"
attr() { [[ $div =~ data-$1=\"([^\"]*)\" ]] && echo "${BASH_REMATCH[1]}"; }
view=$(attr view) levels=$(attr levels) picked=$(attr picked) top=$(attr top-max) drawn=$(attr drawn)
[ -n "$view" ] && [ -n "$picked" ] || fail "the view did not load: $div"
"$py" - "$first" "$last" "$view" "$picked" "$levels" "$top" "$peak" "$drawn" <<'PY' || exit 1
import sys
first, last, view, picked, levels, top, peak, drawn = sys.argv[1:]
first, last, picked, levels, top, peak, drawn = map(int, (first, last, picked, levels, top, peak, drawn))
a, b = map(int, view.split(","))
span = last - first
def fail(m):
    print("FAIL:", m, file=sys.stderr)
    sys.exit(1)
if abs(a - (first + span // 4)) > span // 1000 + 1 or abs(b - (first + span // 2)) > span // 1000 + 1:
    fail(f"zoom: view {a}-{b}, expected a quarter to a half of {first}-{last}")
if not a <= picked <= b:
    fail(f"the moment read ({picked}) lies outside the view {a}-{b}")
if levels < 8:
    fail(f"only {levels} levels of detail for 65536+ samples")
if top != peak:
    fail(f"the coarsest level's highest reserved sample is {top}, the timeline's is {peak}: a peak was lost")
if drawn > 4 * 1100:
    fail(f"{drawn} buckets drawn for a canvas 1100 pixels wide")
print(f"timeline: {levels} levels, view {a}-{b}, {drawn} buckets drawn, peak kept")
PY
# the click shows the blocks live at the moment kept nearest to it: as many as
# replaying the trace here up to that operation leaves live, the largest
# listed, their bytes the timeline's requested bytes there (exact)
blocks=$(attr blocks) blocks_op=$(attr blocks-op) exact=$(attr blocks-exact) shown=$(attr blocks-shown)
[ -n "$blocks" ] && [ "$blocks" != - ] || fail "the click shows no blocks: $div"
"$py" - "$tmp/big.trace" "${csv%.csv}.segments" "$blocks_op" "$blocks" "$exact" "$shown" "$picked" <<'PY' || exit 1
import sys
trace, segfile, (op_at, n, exact, shown, picked) = sys.argv[1], sys.argv[2], map(int, sys.argv[3:])
def fail(m):
    print("FAIL:", m, file=sys.stderr)
    sys.exit(1)
live, op = set(), 0
for line in open(trace):
    p = line.split()
    if line[:2] == "a ":
        op += 1
        live.add(p[1])
    elif line[:2] == "f " and p[1] in live:
        op += 1
        live.discard(p[1])
    if op == op_at:
        break
if len(live) != n:
    fail(f"{n} blocks shown live at op {op_at}, the trace leaves {len(live)}")
if exact != 1:
    fail("the blocks at the moment do not add up to the timeline's requested bytes")
if shown != min(n, 48):
    fail(f"{shown} blocks listed of {n}")
moments = [int(l.split()[1]) for l in open(segfile) if l.startswith("m ")]
nearest = min(moments, key=lambda m: abs(m - picked))
if abs(op_at - picked) != abs(nearest - picked):
    fail(f"the blocks are those of op {op_at}; the moment recorded nearest to the one clicked ({picked}) is {nearest}")
print(f"click: {n} blocks live at op {op_at} (clicked {picked})")
PY
grep -q 'blocks live at op' "$tmp/dom.html" || fail "the moment read lists no blocks"
# the click shows the segments the policy held at the moment recorded nearest
# to it (timelines/*.segments): their bytes the timeline's reserved bytes
# there, the bytes their blocks cover its requested bytes, the same moment as
# the blocks above, the largest 128 blocks drawn in them
segfile=${csv%.csv}.segments
[ -s "$segfile" ] || fail "the replay wrote no segments beside its timeline"
grep -q 'segments held at op' "$tmp/dom.html" || fail "the moment read shows no segments"
seg_op=$(attr seg-op) seg_count=$(attr seg-count) seg_bytes=$(attr seg-bytes) seg_cov=$(attr seg-covered)
seg_blocks=$(attr seg-blocks) seg_drawn=$(attr seg-drawn)
[ -n "$seg_op" ] && [ -n "$seg_count" ] && [ "$seg_count" != - ] || fail "the click shows no segments: $div"
"$py" - "$csv" "$segfile" "$seg_op" "$seg_count" "$seg_bytes" "$seg_cov" "$seg_blocks" "$seg_drawn" "$blocks" \
    "$blocks_op" "$picked" "$first" "$last" <<'PY' || exit 1
import csv, sys
tl, segfile = sys.argv[1:3]
op, count, nbytes, covered, nblocks, drawn, blocks, blocks_op, picked, first, last = map(int, sys.argv[3:])
def fail(m):
    print("FAIL:", m, file=sys.stderr)
    sys.exit(1)
rows = {int(float(r["op"])): r for r in csv.DictReader(l for l in open(tl) if not l.startswith("#"))}
if op not in rows:
    fail(f"the segments' moment (op {op}) is not a sample of the timeline")
if count < 1 or nbytes != int(rows[op]["reserved_bytes"]):
    fail(f"{count} segments of {nbytes} bytes at op {op}; the timeline's reserved bytes there: {rows[op]['reserved_bytes']}")
if covered != int(rows[op]["requested_bytes"]):
    fail(f"the blocks cover {covered} bytes of the segments at op {op}; the timeline's requested bytes: "
         f"{rows[op]['requested_bytes']}")
if op != blocks_op or nblocks != blocks:
    fail(f"segments at op {op} with {nblocks} blocks, blocks read from the trace at op {blocks_op}: {blocks}")
if drawn != min(nblocks, 128):
    fail(f"{drawn} blocks drawn of {nblocks}")
if abs(op - picked) > (last - first) // 256 + 1:
    fail(f"the segments are those of op {op}, far from the moment clicked ({picked})")
# the file itself: at every moment the segments lie apart in address order, add
# up to the reserved bytes, and hold every live block (covering the requested bytes)
moments = 0
def check(m, segs, placed):
    mop, kind, rq, rs, nb, outside, ns, nk = m
    if len(segs) != int(ns) or len(placed) != int(nk):
        fail(f"op {mop}: {len(segs)} segments and {len(placed)} blocks listed, the moment says {ns} and {nk}")
    if sum(s[1] for s in segs) != int(rs) or sum(s[4] for s in segs) != int(rq) or int(outside):
        fail(f"op {mop}: segments {sum(s[1] for s in segs)} bytes (reserved {rs}), covered "
             f"{sum(s[4] for s in segs)} (requested {rq}), {outside} blocks outside")
    if any(a[0] + a[1] > b[0] for a, b in zip(segs, segs[1:])):
        fail(f"op {mop}: segments overlap or are out of order")
    if any(off + size > segs[g][1] for g, off, size in placed) or any(s[5] > s[1] - s[4] for s in segs):
        fail(f"op {mop}: a block or free gap does not fit its segment")
m, segs, placed = None, [], []
for line in open(segfile):
    p = line.split()
    if p[0] == "m":
        if m:
            check(m, segs, placed)
            moments += 1
        m, segs, placed = p[1:], [], []
    elif p[0] == "s":
        segs.append(list(map(int, p[1:])))
    elif p[0] == "b":
        placed.append(list(map(int, p[1:])))
check(m, segs, placed)
moments += 1
if not 256 <= moments <= 514:
    fail(f"{moments} moments in the segments file (256 to 512, the peak and the end)")
print(f"segments: {count} at op {op} (clicked {picked}), {nbytes} bytes = reserved, covered = requested; "
      f"{moments} moments in the file, each adding up")
PY
# the page's moments: the largest blocks the harness placed are those the
# trace leaves live there (the 48 largest sizes of both agree at every moment)
"$py" - "$tmp/report.html" <<'PY' || exit 1
import json, re, sys
page = open(sys.argv[1]).read()
d = json.loads(re.search(r"class='tl-data'>(.*?)</script>", page, re.S).group(1))
kf = {k[0]: k for k in d["kf"]}
n = 0
for m in d["sg"]["m"]:
    k = kf.get(m[0])
    if k is None or not k[3]:
        continue
    placed = sorted(m[7][2::3], reverse=True)[:48]
    traced = sorted(k[4][0::4], reverse=True)
    if placed != traced:
        print(f"FAIL: op {m[0]}: the largest blocks placed {placed[:5]}... differ from the trace's {traced[:5]}...",
              file=sys.stderr)
        sys.exit(1)
    n += 1
if n < len(d["sg"]["m"]) // 2:
    print(f"FAIL: only {n} of {len(d['sg']['m'])} moments with segments have the trace's blocks", file=sys.stderr)
    sys.exit(1)
print(f"page: {len(d['sg']['m'])} moments with segments (of {d['sg']['of']} recorded), the largest blocks the "
      f"trace's at {n}")
PY
echo "report timeline in headless Chromium: $((size >> 10)) KiB page"
