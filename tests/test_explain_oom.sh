#!/usr/bin/env bash
# test_explain_oom.sh - CMB_EXPLAIN_OOM=1 end to end (docs/explain.md). One
# part per CTest:
#
#   test_explain_oom.sh replay   the transformer trace on 11.5 GiB, where
#                                torch-caching does not fit and
#                                torch-expandable does: the oom_* counters
#                                add up (free by reason = reserved -
#                                allocated), tools/explain_oom.py names the
#                                reasons, the pinning blocks and expandable
#                                segments as fitting; without the variable
#                                no oom_* counter is written and the case
#                                names do not change; leak-check's error
#                                path (failure=oom) is explained as a request
#                                larger than the device
#   test_explain_oom.sh scale    tools/scale_gen.py (make bench-scale's
#                                inputs): a grown trace has exactly the events
#                                asked for and replays cleanly; a grown
#                                snapshot converts (traces/torch_snapshot_to_
#                                trace.py) to the same allocations, its frames
#                                unshared
#   test_explain_oom.sh flag     --explain-oom on the same trace built to
#                                fail, with CMB_EXPLAIN_OOM=0 in the
#                                environment: --help lists it, it writes the
#                                oom_* counters CMB_EXPLAIN_OOM=1 writes, with
#                                the same values; without it none
#   test_explain_oom.sh report   the report's "Why it did not fit" section,
#                                in headless Chromium when it is there:
#                                rendered without errors; CMB_EXPLAIN_SCREENSHOT
#                                =FILE keeps a screenshot of the section
#
# Environment: CMB_SRC, CMB_BIN, CMB_PYTHON (default /usr/bin/python3).
set -euo pipefail

src=${CMB_SRC:?CMB_SRC must name the source tree}
bin=${CMB_BIN:?CMB_BIN must name the cumembench binary}
py=${CMB_PYTHON:-/usr/bin/python3}
trace=traces/samples/torch_transformer_sweep.trace # relative: run from $src
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

run() { # DIR, then cumembench arguments
    local dir=$1
    shift
    (cd "$src" && "$bin" --mode sim --scenario replay --param trace="$trace" --capacity 11.5GiB \
        --repetitions 1 --out "$dir" -q "$@") >"$dir.log" 2>&1 || fail "cumembench: $(tail -3 "$dir.log")"
}

part_replay() {
    CMB_EXPLAIN_OOM=1 run "$tmp/on" --allocator torch-caching,torch-expandable,bfc
    run "$tmp/off" --allocator torch-caching,torch-expandable,bfc
    "$py" - "$tmp/on" "$tmp/off" <<'EOF' || exit 1
import csv, os, sys
def rows(d):
    return list(csv.DictReader(open(os.path.join(d, "results.csv"))))
on, off = rows(sys.argv[1]), rows(sys.argv[2])
def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)
if any(r["metric"].startswith("oom_") and r["metric"] != "oom_retries" for r in off):
    fail("oom_* counters written without CMB_EXPLAIN_OOM")
if {r["case"] for r in on} != {r["case"] for r in off}:
    fail("CMB_EXPLAIN_OOM changed the case names")
by = {}
for r in on:
    by.setdefault((r["allocator"], r["repetition"]), {})[r["metric"]] = (r["status"], float(r["value"] or 0))
checked = 0
for (alloc, rep), m in by.items():
    status = {s for s, _ in m.values()}
    if "oom_request_bytes" not in m:
        if "oom" in status:
            fail(f"{alloc} did not fit but was not explained")
        continue
    free = sum(v for k, (_, v) in m.items() if k.startswith("oom_free_"))
    if free != m["oom_reserved_bytes"][1] - m["oom_allocated_bytes"][1]:
        fail(f"{alloc}: free by reason {free} != reserved - allocated")
    if m["oom_free_usable_bytes"][1] != 0:
        fail(f"{alloc}: usable free bytes at the failure")
    if not m["oom_pin1_bytes"][1] >= m.get("oom_pin2_bytes", (0, 0))[1] > 0:
        fail(f"{alloc}: pinning blocks not largest first")
    checked += 1
if checked != 2:
    fail(f"{checked} explained cases, expected torch-caching and bfc")
EOF
    "$py" "$src/tools/explain_oom.py" "$tmp/on" --case torch-caching >"$tmp/text" || fail "explain_oom.py failed"
    for want in "did not fit: 6 allocations failed" "first failure: 183.11 MiB" "free blocks smaller than the request" \
        "live blocks that pin the most:" "375.00 MiB  allocated at event" \
        "torch-expandable             fits, peak reserved" "bfc                          did not fit"; do
        grep -qF "$want" "$tmp/text" || fail "explain_oom.py: no '$want' in: $(cat "$tmp/text")"
    done
    "$py" "$src/tools/explain_oom.py" "$tmp/off" >/dev/null 2>&1 && fail "explain_oom.py found an explanation in a run without one"
    # leak-check's error path: an impossibly large request, explained as such
    (cd "$src" && CMB_EXPLAIN_OOM=1 "$bin" --mode sim --scenario leak-check --allocator bfc --param failure=oom \
        --param variant=clean --repetitions 1 --out "$tmp/leak" -q) >"$tmp/leak.log" 2>&1 ||
        fail "leak-check: $(tail -2 "$tmp/leak.log")"
    "$py" "$src/tools/explain_oom.py" "$tmp/leak" >"$tmp/leak.txt" || fail "leak-check was not explained"
    grep -q "the request alone is larger than the device (80.00 GiB)" "$tmp/leak.txt" ||
        fail "leak-check's explanation: $(cat "$tmp/leak.txt")"
    echo "explain-oom: counters add up, text names the reasons and what fits"
}

part_flag() {
    "$bin" --help 2>&1 | grep -q -- "--explain-oom" || fail "--help does not list --explain-oom"
    CMB_EXPLAIN_OOM=0 run "$tmp/flag" --allocator torch-caching,torch-expandable --explain-oom
    CMB_EXPLAIN_OOM=1 run "$tmp/env" --allocator torch-caching,torch-expandable
    CMB_EXPLAIN_OOM=0 run "$tmp/none" --allocator torch-caching,torch-expandable
    "$py" - "$tmp/flag" "$tmp/env" "$tmp/none" <<'EOF' || exit 1
import csv, os, sys
def oom(d):
    return {(r["case"], r["repetition"], r["metric"]): r["value"]
            for r in csv.DictReader(open(os.path.join(d, "results.csv")))
            if r["metric"].startswith("oom_") and r["metric"] != "oom_retries"}
flag, env, none = (oom(d) for d in sys.argv[1:])
def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)
if not any(k[2] == "oom_request_bytes" for k in flag):
    fail("--explain-oom explained nothing on a trace built to fail")
if flag != env:
    fail(f"--explain-oom and CMB_EXPLAIN_OOM=1 differ: {sorted(set(flag.items()) ^ set(env.items()))[:4]}")
if none:
    fail("oom_* counters written with CMB_EXPLAIN_OOM=0 and no flag")
EOF
    "$py" "$src/tools/explain_oom.py" "$tmp/flag" --case torch-caching >"$tmp/flag.txt" ||
        fail "explain_oom.py failed on the --explain-oom run"
    grep -q "did not fit: 6 allocations failed" "$tmp/flag.txt" ||
        fail "explain_oom.py: the --explain-oom run is not explained: $(cat "$tmp/flag.txt")"
    echo "explain-oom: --explain-oom is CMB_EXPLAIN_OOM=1"
}

chromium_bin() {
    for c in "${CMB_CHROMIUM:-}" chromium chromium-browser google-chrome; do
        [ -n "$c" ] && command -v "$c" && return 0
    done
    return 1
}

part_report() {
    CMB_EXPLAIN_OOM=1 run "$tmp/on" --allocator torch-caching,torch-expandable
    "$py" "$src/plots/report.py" "$tmp/on" -o "$tmp/report.html" --no-gnuplot --no-findings -q ||
        fail "report.py failed"
    grep -q "id='explain-oom'" "$tmp/report.html" || fail "no 'Why it did not fit' section"
    grep -q "class='oom-bar'" "$tmp/report.html" || fail "no free-by-reason bar"
    local chrome
    if ! chrome=$(chromium_bin); then
        [ -n "${CI:-}" ] && fail "chromium is not installed (make test installs it: ci/install-deps.sh --test)"
        echo "SKIP: chromium is not installed (Debian: apt-get install chromium)"
        exit 77
    fi
    # the section alone, as the screenshot shows it
    "$py" - "$tmp/report.html" "$tmp/section.html" <<'EOF'
import re, sys
page = open(sys.argv[1], encoding="utf-8").read()
head = page[:page.index("<body>") + len("<body>")]
start = page.index("<style>\n.oom-bar")
end = page.index("<h2", page.index("id='explain-oom'") + 10)
open(sys.argv[2], "w", encoding="utf-8").write(head + page[start:end] + "</body></html>\n")
EOF
    local flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
        --disable-sync --no-first-run --disable-default-apps --disable-extensions --hide-scrollbars
        --enable-logging=stderr --v=0 --user-data-dir="$tmp/profile" --virtual-time-budget=5000)
    timeout 120 "$chrome" "${flags[@]}" --dump-dom "file://$tmp/section.html" >"$tmp/dom.html" 2>"$tmp/chrome.log" ||
        fail "chromium --dump-dom failed: $(tail -3 "$tmp/chrome.log")"
    grep -q "oom-bar" "$tmp/dom.html" || fail "the section did not render"
    if grep -E 'CONSOLE.*(Uncaught|Error)' "$tmp/chrome.log"; then
        fail "JavaScript errors in the page (above)"
    fi
    timeout 120 "$chrome" "${flags[@]}" --window-size=1100,1500 --screenshot="$tmp/section.png" \
        "file://$tmp/section.html" >/dev/null 2>>"$tmp/chrome.log" || fail "chromium --screenshot failed"
    head -c 8 "$tmp/section.png" | grep -q PNG || fail "the screenshot is not a PNG"
    [ -z "${CMB_EXPLAIN_SCREENSHOT:-}" ] || cp "$tmp/section.png" "$CMB_EXPLAIN_SCREENSHOT"
    echo "explain-oom: the report's section renders in headless Chromium"
}

part_scale() {
    local gen=$src/tools/scale_gen.py base=$src/$trace
    "$py" "$gen" trace "$base" "$tmp/g.trace" --events 60000 || fail "scale_gen.py trace failed"
    [ "$(grep -c '^[afs] ' "$tmp/g.trace")" = 60000 ] || fail "the grown trace does not hold 60000 events"
    (cd "$tmp" && "$bin" --mode sim --scenario replay --allocator torch-caching --param trace=g.trace \
        --param find_min_capacity=false --repetitions 1 --out run -q) >"$tmp/g.log" 2>&1 ||
        fail "the grown trace does not replay: $(tail -2 "$tmp/g.log")"
    grep -q "1 ok" "$tmp/g.log" || fail "the grown trace did not fit 80 GiB: $(tail -1 "$tmp/g.log")"
    "$py" "$gen" snapshot "$base" "$tmp/s.pickle" --events 3000 --frames 5 || fail "scale_gen.py snapshot failed"
    "$py" "$src/traces/torch_snapshot_to_trace.py" "$tmp/s.pickle" "$tmp/s.trace" || fail "the snapshot does not convert"
    "$py" - "$tmp/s.pickle" "$tmp/s.trace" "$tmp/g.trace" <<'EOF' || exit 1
import pickle, sys
snap = pickle.load(open(sys.argv[1], "rb"))
ev = snap["device_traces"][0]
def fail(m):
    print("FAIL:", m, file=sys.stderr)
    sys.exit(1)
if len(ev) != 3000 or any(len(e["frames"]) != 5 for e in ev):
    fail(f"{len(ev)} snapshot events, expected 3000 with 5 frames each")
frames = [f for e in ev for f in e["frames"]]
if len({id(f["filename"]) for f in frames}) != len(frames):
    fail("frame strings are shared between events")
conv = [l.split() for l in open(sys.argv[2]) if l[:2] in ("a ", "f ")]
grown = [l.split() for l in open(sys.argv[3]) if l[:2] in ("a ", "f ")]
n_alloc = sum(1 for e in ev if e["action"] == "alloc")
if sum(1 for l in conv if l[0] == "a") != n_alloc or \
        [l[2] for l in conv if l[0] == "a"] != [l[2] for l in grown if l[0] == "a"][:n_alloc]:
    fail("the converted snapshot does not allocate what the grown trace does")
EOF
    echo "scale_gen: grown trace and snapshot as asked"
}

case "${1:-}" in
replay) part_replay ;;
scale) part_scale ;;
report) part_report ;;
flag) part_flag ;;
*) fail "usage: test_explain_oom.sh replay|scale|report|flag" ;;
esac
