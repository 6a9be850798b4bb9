#!/usr/bin/env bash
# test_report_timeline.sh - the report's interactive memory timeline
# (plots/cmb_report/timeline_view.py) on a large replay, in headless
# Chromium: a 2-million-event trace grown from the transformer trace
# (tools/scale_gen.py) replayed with 131072 timeline points; the page opens
# without errors, builds its levels of detail, keeps the highest reserved
# sample at the coarsest level, zooms into a time range and reads a moment
# from the URL fragment (#tl=START,END,CLICK) with the blocks live there (as
# many as replaying the trace to that operation leaves, adding up to the
# timeline's requested bytes), and stays under 20 MB. How fast
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
"$py" - "$tmp/big.trace" "$blocks_op" "$blocks" "$exact" "$shown" "$picked" "$first" "$last" <<'PY' || exit 1
import sys
trace, op_at, n, exact, shown, picked, first, last = sys.argv[1], *map(int, sys.argv[2:])
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
if abs(op_at - picked) > (last - first) // 1000 + 1:
    fail(f"the blocks are those of op {op_at}, far from the moment clicked ({picked})")
print(f"click: {n} blocks live at op {op_at} (clicked {picked})")
PY
grep -q 'blocks live at op' "$tmp/dom.html" || fail "the moment read lists no blocks"
grep -q 'the segments themselves are not recorded' "$tmp/dom.html" || fail "the moment read says nothing of segments"
echo "report timeline in headless Chromium: $((size >> 10)) KiB page"
