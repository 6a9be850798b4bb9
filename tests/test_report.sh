#!/usr/bin/env bash
# test_report.sh - the report (plots/report.py, plots/*.gp) on the committed
# fixture results (tests/fixtures/reports: two GPUs, a failed case, a failed
# repetition, a skipped case, a scenario not run on one GPU) and on a real
# sim run of the binary. One part per CTest:
#
#   test_report.sh fixtures   HTML and gnuplot outputs, failures shown as such
#   test_report.sh browser    the page in headless Chromium: loads without
#                             errors, every image decodes, every value label
#                             lies inside its axes (exit 77 = skipped when
#                             Chromium is missing outside CI)
#   test_report.sh first_screen  a sim run with a replay that does not fit: the
#                             answers fill the first screen (1300x1000), the
#                             case that did not fit is named there, no value
#                             label outside its axes; CMB_REPORT_SCREENSHOT=FILE
#                             keeps the screenshot (docs/img/report-first-screen.png)
#   test_report.sh columns    plot scripts and report.py stop with a clear
#                             error on input that lacks a column
#   test_report.sh real       timelines from a sim run of the binary, and its report
#   test_report.sh answers_tune  a sim run's answers as a figure (smallest GPU against the
#                             time predicted from the run's cost file); a tune result's
#                             Pareto front (table and figure) from tune --out DIR in the
#                             run's directory, alone, and through --tune FILE; bad tune input
#   test_report.sh committed  the committed full runs of every GPU, side by side
#                             (with docs/findings.md, the default Findings section)
#   test_report.sh findings   the Findings section from a Markdown file
#                             (tests/fixtures/reports/docs/findings.md): table, code,
#                             links rewritten for the report's directory; --no-findings;
#                             a clear error without python3-markdown
#
# Environment: CMB_SRC (source tree), CMB_BIN (cumembench), CMB_PYTHON
# (default /usr/bin/python3), CMB_REPORT_KEEP=DIR keeps the outputs and the
# screenshot there.
set -euo pipefail

src=${CMB_SRC:?CMB_SRC must name the source tree}
py=${CMB_PYTHON:-/usr/bin/python3}
fixtures=$src/tests/fixtures/reports
findings_md=$fixtures/docs/findings.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

report() { # OUT.html [OPTION...] RUN...
    local out=$1
    shift
    "$py" "$src/plots/report.py" -q -o "$out" "$@" || fail "report.py exited with $? on $*"
}

keep() {
    if [ -n "${CMB_REPORT_KEEP:-}" ]; then
        mkdir -p "$CMB_REPORT_KEEP"
        cp -r "$@" "$CMB_REPORT_KEEP"/
    fi
}

# --- fixtures -------------------------------------------------------------------------

check_html() { # the page's content, read with Python's own HTML parser
    "$py" - "$1" <<'EOF'
import html.parser, re, sys

class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.row, self.cell, self.section, self.imgs, self.text = [], None, None, "", [], []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "h2" and a.get("id"):
            self.section = a["id"]
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag == "tr":
            self.row = []
        if tag == "td" and self.row is not None:
            self.cell = [a.get("class") or "", ""]
    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None and self.row is not None:
            self.row.append((self.cell[0], self.cell[1].strip()))
            self.cell = None
        if tag == "tr" and self.row is not None:
            self.rows.append((self.section, self.row))
            self.row = None
    def handle_data(self, data):
        self.text.append(data)
        if self.cell is not None:
            self.cell[1] += data

p = Page()
p.feed(open(sys.argv[1], encoding="utf-8").read())
text = " ".join(p.text)
errors = []
def need(cond, what):
    if not cond:
        errors.append(what)

need(len(p.imgs) >= 15, f"expected at least 15 figures, found {len(p.imgs)}")
for i, src in enumerate(p.imgs):
    need(src.startswith("data:image/png;base64,") and len(src) > 2000, f"image {i} is not an embedded PNG")
for word in ("fixture-gpu-a", "fixture-gpu-b", "synthetic test fixtures", "Metric definitions", "frag_ratio",
             "1 - peak_requested / peak_reserved", "memory over time", "Across GPUs", "Environment"):
    need(word in text, f"the page does not mention '{word}'")

def rows(section, *must):
    return [r for s, r in p.rows if s == section and all(any(m == c[1] for c in r) for m in must)]

# the crashed case: FAILED with its reason, in the side-by-side tables and the failure list, never a number
cmp = rows("compare", "max_size=64MiB", "bfc")
need(cmp, "no side-by-side row for churn max_size=64MiB bfc")
for r in cmp:
    need(r[2][1] == "FAILED" and r[2][0] == "failed", f"churn bfc 64MiB on gpu-a shows {r[2]} instead of FAILED")
    need(r[-1][1] == "-", f"the ratio of a failed case shows {r[-1][1]}")
need(any("signal 11" in c[1] for _, r in p.rows for c in r), "the crash reason is not shown")
# the case missing on gpu-b: 'not run'
bs = rows("summary", "rmm-pool")
need(any(c[1] == "not run" for r in bs for c in r), "batch-sweep rmm-pool on gpu-b is not shown as not run")
need(any(c[1] == "not run" for r in rows("compare", "rmm-pool") for c in r), "no 'not run' cell for rmm-pool")
# the scenario not run on gpu-b
need("Only fixture-gpu-a ran gemm-chunked" in text, "gemm-chunked is not marked as not run on gpu-b")
need("Not run on fixture-gpu-b" in text, "the gemm-chunked section does not say it was not run on gpu-b")
# skipped and partial
need(any(c[0].startswith("skipped") and c[1] == "skipped" for _, r in p.rows for c in r), "no skipped cell")
need(any("partial" in c[0] for _, r in p.rows for c in r), "the failed repetition is not marked partial")
# ratios against the first GPU
need(re.search(r"\b0\.\d\dx\b", text), "no ratio column values")
if errors:
    print("\n".join("FAIL: " + e for e in errors))
    sys.exit(1)
EOF
}

check_plots() { # DIR FILE...: each a non-empty PNG or a well-formed SVG
    local dir=$1
    shift
    for f in "$@"; do
        for ext in png svg; do
            [ -s "$dir/$f.$ext" ] || fail "missing or empty gnuplot output $dir/$f.$ext"
        done
        head -c 8 "$dir/$f.png" | grep -q PNG || fail "$dir/$f.png is not a PNG"
        "$py" -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$dir/$f.svg" ||
            fail "$dir/$f.svg is not well-formed SVG"
    done
}

part_fixtures() {
    report "$tmp/report.html" --findings "$findings_md" "$fixtures/gpu-a" "$fixtures/gpu-b"
    [ -s "$tmp/report.html" ] || fail "no report.html"
    check_html "$tmp/report.html" || fail "report.html content (above)"
    local plots=$tmp/report-plots
    check_plots "$plots/fixture-gpu-a" latency frag_churn frag_batch-sweep frag_gemm-chunked batch_batch-sweep \
        gemm_gemm-chunked timeline_churn_1 timeline_churn_2
    check_plots "$plots/fixture-gpu-b" latency frag_churn batch_batch-sweep timeline_churn_1 timeline_churn_2
    [ ! -e "$plots/fixture-gpu-b/gemm_gemm-chunked.png" ] || fail "a gemm plot for gpu-b, which did not run it"
    # the failed case is absent from the plot data, or present with its status: never a 0
    grep -q ',bfc,failed,,,' "$plots/fixture-gpu-a/data/frag_churn.csv" ||
        fail "frag data does not mark churn bfc 64MiB as failed"
    keep "$tmp/report.html" "$plots"
    echo "report on fixtures: ok"
}

# --- browser -------------------------------------------------------------------------------

chromium_bin() {
    for c in "${CMB_CHROMIUM:-}" chromium chromium-browser google-chrome; do
        [ -n "$c" ] && command -v "$c" && return 0
    done
    return 1
}

part_browser() {
    local chrome
    if ! chrome=$(chromium_bin); then
        [ -n "${CI:-}" ] && fail "chromium is not installed (make test installs it: ci/install-deps.sh --test)"
        echo "SKIP: chromium is not installed (Debian: apt-get install chromium)"
        exit 77
    fi
    report "$tmp/report.html" --findings "$findings_md" "$fixtures/gpu-a" "$fixtures/gpu-b"
    local flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
        --disable-sync --no-first-run --disable-default-apps --disable-extensions --hide-scrollbars
        --enable-logging=stderr --v=0 --user-data-dir="$tmp/profile" --virtual-time-budget=15000)
    timeout 120 "$chrome" "${flags[@]}" --dump-dom "file://$tmp/report.html" >"$tmp/dom.html" 2>"$tmp/chrome.log" ||
        fail "chromium --dump-dom failed: $(tail -3 "$tmp/chrome.log")"
    local body
    body=$(grep -o '<body[^>]*>' "$tmp/dom.html" | head -1)
    [[ $body =~ data-images=\"([0-9]+)/([0-9]+)\" ]] || fail "the page did not finish loading: $body"
    local ok=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]}
    [ "$total" -gt 0 ] && [ "$ok" = "$total" ] || fail "only $ok of $total images decoded in the browser"
    [[ $body != *data-errors* ]] || fail "load errors in the page: $body"
    [[ $body =~ data-labels=\"([0-9]+)\ checked,\ 0\ outside\" ]] && [ "${BASH_REMATCH[1]}" -gt 20 ] ||
        fail "value labels outside their axes (or none checked): $body"
    if grep -E 'CONSOLE.*(Uncaught|Error)' "$tmp/chrome.log"; then
        fail "JavaScript errors in the page (above)"
    fi
    timeout 120 "$chrome" "${flags[@]}" --window-size=1300,6000 --screenshot="$tmp/screenshot.png" \
        "file://$tmp/report.html" >/dev/null 2>>"$tmp/chrome.log" || fail "chromium --screenshot failed"
    [ "$(stat -c %s "$tmp/screenshot.png")" -gt 50000 ] || fail "the screenshot is (nearly) empty"
    head -c 8 "$tmp/screenshot.png" | grep -q PNG || fail "the screenshot is not a PNG"
    keep "$tmp/screenshot.png"
    echo "report in headless Chromium: $ok/$total images, no errors"
}

# --- the first screen ------------------------------------------------------------------------

part_first_screen() {
    local chrome bin=${CMB_BIN:?CMB_BIN must name the cumembench binary}
    if ! chrome=$(chromium_bin); then
        [ -n "${CI:-}" ] && fail "chromium is not installed (make test installs it: ci/install-deps.sh --test)"
        echo "SKIP: chromium is not installed (Debian: apt-get install chromium)"
        exit 77
    fi
    # the MLP trace on a 3 GiB device: bfc needs 4 GiB, the others fit
    "$bin" --mode sim --scenario replay,churn --allocator bfc,torch-caching,torch-expandable,rmm-pool,cupy,cuda \
        --param trace="$src/traces/samples/torch_mlp_sweep_default.trace" --param capacity=3GiB \
        --param n=2000 --param max_size=1MiB,64MiB --repetitions 2 --out "$tmp/run" -q 2>"$tmp/run.err" ||
        [ $? -eq 1 ] || fail "cumembench failed: $(cat "$tmp/run.err")"
    "$py" -W error::UserWarning "$src/plots/report.py" -o "$tmp/run/report.html" "$tmp/run" 2>"$tmp/report.err" ||
        fail "report.py failed or warned: $(cat "$tmp/report.err")"
    if grep -iv '^report: ' "$tmp/report.err" | grep -q .; then
        fail "report.py printed more than its own lines: $(cat "$tmp/report.err")"
    fi
    local flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/profile"
        --window-size=1300,1000 --virtual-time-budget=15000)
    timeout 120 "$chrome" "${flags[@]}" --dump-dom "file://$tmp/run/report.html" >"$tmp/dom.html" 2>/dev/null ||
        fail "chromium --dump-dom failed"
    local body
    body=$(grep -o '<body[^>]*>' "$tmp/dom.html" | head -1)
    [[ $body =~ data-answers-bottom=\"([0-9]+)\" ]] || fail "no answers table in the page: $body"
    local bottom=${BASH_REMATCH[1]}
    [ "$bottom" -le 1000 ] || fail "the answers end at $bottom px, below the first screen"
    [[ $body =~ data-labels=\"([0-9]+)\ checked,\ 0\ outside\" ]] && [ "${BASH_REMATCH[1]}" -gt 10 ] ||
        fail "value labels outside their axes (or none checked): $body"
    # the first screen's words: the answers, what did not fit, no time ranking in sim
    "$py" - "$tmp/dom.html" <<'EOF2' || fail "the first screen (above)"
import html.parser, sys
class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(); self.section = None; self.text = {}
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "h2":
            self.section = a.get("id")
    def handle_data(self, d):
        self.text[self.section] = self.text.get(self.section, "") + d
p = P(); p.feed(open(sys.argv[1], encoding="utf-8").read())
ans = p.text.get("answers", "")
errors = [w for w in ("replay", "churn", "best for memory", "did not fit", "bfc (", "allocations failed)",
                      "smallest churn peak reserved", "time is not ranked") if w not in ans]
if "best for time" in ans:
    errors.append("a sim report has a 'best for time' column")
if errors:
    print("FAIL: the answers lack: " + ", ".join(errors)); sys.exit(1)
EOF2
    timeout 120 "$chrome" "${flags[@]}" --screenshot="$tmp/first-screen.png" "file://$tmp/run/report.html" \
        >/dev/null 2>&1 || fail "chromium --screenshot failed"
    head -c 8 "$tmp/first-screen.png" | grep -q PNG || fail "the screenshot is not a PNG"
    if [ -n "${CMB_REPORT_SCREENSHOT:-}" ]; then
        cp "$tmp/first-screen.png" "$CMB_REPORT_SCREENSHOT"
    fi
    keep "$tmp/first-screen.png" "$tmp/run/report.html"
    echo "first screen: the answers end at $bottom px, value labels inside their axes"
}

# --- missing columns -------------------------------------------------------------------------

part_columns() {
    local gp
    printf 'series,unrelated\nx,1\n' >"$tmp/bad.csv"
    for gp in "$src"/plots/*.gp; do
        [ "$(basename "$gp")" = common.gp ] && continue
        if gnuplot -c "$gp" "$tmp/bad.csv" "$tmp/out.png" 2>"$tmp/err"; then
            fail "$(basename "$gp") accepted a CSV without its columns"
        fi
        grep -q "has no column" "$tmp/err" || fail "$(basename "$gp") failed without naming the column: $(cat "$tmp/err")"
    done
    if gnuplot -c "$src/plots/timeline.gp" "$tmp/absent.csv" "$tmp/out.png" 2>"$tmp/err"; then
        fail "timeline.gp accepted a missing file"
    fi
    grep -q "missing or has no header" "$tmp/err" || fail "no clear error for a missing file: $(cat "$tmp/err")"
    # report.py: a results.csv without the status column
    mkdir -p "$tmp/run"
    sed '1s/,status,/,state,/' "$fixtures/gpu-a/results.csv" >"$tmp/run/results.csv"
    if "$py" "$src/plots/report.py" -q -o "$tmp/r.html" "$tmp/run" 2>"$tmp/err"; then
        fail "report.py accepted a results.csv without a status column"
    fi
    grep -q "missing column(s) status" "$tmp/err" || fail "report.py did not name the missing column: $(cat "$tmp/err")"
    if "$py" "$src/plots/report.py" -q -o "$tmp/r.html" "$tmp/nowhere" 2>"$tmp/err"; then
        fail "report.py accepted a directory without results"
    fi
    grep -q "no results.csv" "$tmp/err" || fail "report.py: unclear error for a missing run: $(cat "$tmp/err")"
    echo "missing columns and files: clear errors"
}

# --- a real run ----------------------------------------------------------------------------------

part_real() {
    local bin=${CMB_BIN:?CMB_BIN must name the cumembench binary}
    "$bin" --mode sim --scenario churn --repetitions 2 --param n=2000 --out "$tmp/run" -q ||
        fail "cumembench sim run failed"
    local n
    n=$(find "$tmp/run/timelines" -name '*.csv' | wc -l)
    [ "$n" -ge 1 ] || fail "the churn run wrote no timelines"
    for f in "$tmp"/run/timelines/*.csv; do
        grep -q '^op,time_s,kind,requested_bytes,allocated_bytes,reserved_bytes,' "$f" || fail "$f: no header"
        local rows
        rows=$(grep -c '^[0-9]' "$f")
        [ "$rows" -ge 10 ] && [ "$rows" -le $((512 + 3)) ] || fail "$f: $rows points, expected 10..515"
        grep -q ',end,' "$f" || fail "$f: no end point"
    done
    "$bin" --mode sim --scenario churn --repetitions 1 --param n=500 --timeline off --out "$tmp/off" -q ||
        fail "cumembench --timeline off failed"
    [ ! -e "$tmp/off/timelines" ] || fail "--timeline off still wrote timelines"
    "$bin" --timeline sometimes --mode sim 2>"$tmp/err" && fail "--timeline accepted a bad value"
    grep -q "expects auto, on or off" "$tmp/err" || fail "unclear --timeline error: $(cat "$tmp/err")"
    report "$tmp/run/report.html" "$tmp/run"
    grep -q "memory over time" "$tmp/run/report.html" || fail "the report of a real run has no timeline"
    check_plots "$tmp/run/report-plots" frag_churn timeline_churn_1
    echo "real sim run: $n timelines, report ok"
}

# --- the answers' figure and tune's front -------------------------------------------------------

check_tune_page() { # REPORT.html FIGURES SETTING...: the page's figures, the settings in its tune table
    "$py" - "$@" <<'EOF'
import html.parser, sys

class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.section, self.imgs, self.rows, self.row, self.text = "", [], [], None, []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "h2":
            self.section = a.get("id", "")
        if tag == "img":
            self.imgs.append((self.section, a.get("alt", ""), a.get("src", "")))
        if tag == "tr":
            self.row = []
    def handle_endtag(self, tag):
        if tag == "tr" and self.row is not None:
            self.rows.append((self.section, [c.strip() for c in self.row]))
            self.row = None
    def handle_data(self, data):
        self.text.append(data)
        if self.row is not None and data.strip():
            self.row.append(data)

path, figures, settings = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
p = Page()
p.feed(open(path, encoding="utf-8").read())
text = " ".join(p.text)
errors = []
for fig in figures:
    found = [src for _, alt, src in p.imgs if alt == fig]
    if not found or not found[0].startswith("data:image/png;base64,") or len(found[0]) < 4000:
        errors.append(f"no embedded figure '{fig}' (figures: {[alt for _, alt, _ in p.imgs]})")
tune_rows = [r for s, r in p.rows if s == "tune"]
marks = [r[0] for r in tune_rows if r]
if settings and ("recorded" not in marks or "recommended" not in marks or "front" not in marks):
    errors.append(f"the front's table lacks the recorded, recommended or front rows: {marks}")
for setting in settings:
    if not any(setting in r for r in tune_rows):
        errors.append(f"the front's table has no row for {setting}")
if settings and "predicted from results/nvidia-h100/costs.json" not in text:
    errors.append("the tune section does not name the cost file its times are predicted from")
if errors:
    print("\n".join("FAIL: " + e for e in errors))
    sys.exit(1)
EOF
}

part_answers_tune() {
    local bin=${CMB_BIN:?CMB_BIN must name the cumembench binary} trace=$src/traces/samples/churn_small.trace
    local run=$tmp/run rec
    "$bin" --mode sim --scenario replay --param trace="$trace" --allocator cuda,rmm-pool,torch-caching,torch-expandable \
        --repetitions 1 --out "$run" -q || fail "cumembench sim replay failed"
    grep -q '"costs_file": ".*results/nvidia-h100/costs.json"' "$run/results.json" ||
        fail "results.json does not name the cost file the run's times were predicted from"
    report "$run/report.html" --no-gnuplot "$run"
    check_tune_page "$run/report.html" "smallest GPU and allocator time on sim" ||
        fail "the sim run's report has no answers figure"
    grep -q "Allocator time: predicted from results/nvidia-h100/costs.json" "$run/report.html" ||
        fail "the answers figure does not say its times are predicted from the cost file"
    if grep -q "<h2 id='tune'" "$run/report.html"; then fail "a report without a tune result has a tune section"; fi

    # tune --out into the run's directory: its front in the run's report
    "$bin" tune "$trace" --budget 2560MiB --out "$run" >"$tmp/tune.txt" 2>"$tmp/tune.err" ||
        fail "tune --out failed: $(cat "$tmp/tune.err")"
    [ -s "$run/tune.json" ] || fail "tune --out wrote no tune.json"
    rec=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["recommendation"]["setting"])' "$run/tune.json")
    grep -q "^recommended .*: $rec\$" "$tmp/tune.txt" || fail "tune.json's recommendation $rec is not the one printed"
    report "$run/report.html" --no-gnuplot "$run"
    check_tune_page "$run/report.html" "smallest GPU and allocator time on sim,tune front of churn_small.trace" \
        "$rec" torch-caching || fail "the run's report lacks tune's front"
    # a second tune into the same directory keeps the first; a DIR that cannot be made is refused
    if "$bin" tune "$trace" --out "$run" >/dev/null 2>"$tmp/err"; then fail "tune --out overwrote a tune.json"; fi
    grep -q "tune.json exists" "$tmp/err" || fail "unclear refusal: $(cat "$tmp/err")"
    if "$bin" tune "$trace" --out "$tmp/no/such" >/dev/null 2>"$tmp/err"; then fail "tune --out took $tmp/no/such"; fi
    [ ! -e "$tmp/no" ] || fail "a refused tune --out made a directory"

    # a directory with only tune.json, and --tune FILE from --json
    "$bin" tune "$trace" --budget 2560MiB --out "$tmp/alone" >/dev/null 2>&1 || fail "tune --out (alone) failed"
    report "$tmp/alone.html" --no-gnuplot "$tmp/alone"
    check_tune_page "$tmp/alone.html" "tune front of churn_small.trace" "$rec" || fail "the tune-only report"
    "$bin" tune "$trace" --budget 2560MiB --json >"$tmp/t.json" 2>/dev/null || fail "tune --json failed"
    report "$tmp/flag.html" --no-gnuplot --tune "$tmp/t.json"
    check_tune_page "$tmp/flag.html" "tune front of churn_small.trace" "$rec" || fail "report.py --tune FILE"

    # a malformed tune result: one line, exit 2
    echo '{"input": "x"}' >"$tmp/bad.json"
    if "$py" "$src/plots/report.py" -q -o "$tmp/bad.html" --tune "$tmp/bad.json" 2>"$tmp/err"; then
        fail "report.py took a malformed tune result"
    fi
    [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "not a tune result" "$tmp/err" || fail "unclear error: $(cat "$tmp/err")"
    keep "$run/report.html" "$tmp/alone.html"
    echo "answers figure; tune's front in the run's report, alone and with --tune: ok"
}

# --- the Findings section -----------------------------------------------------------------------

check_findings() { # REPORT.html with|without: the section from $findings_md, or none
    "$py" - "$1" "$2" "$fixtures" <<'EOF'
import base64, html.parser, os, sys

path, mode, fixtures = sys.argv[1:]
out_dir = os.path.dirname(os.path.abspath(path))
VOID = {"img", "br", "hr", "meta", "input", "link"}

class Page(html.parser.HTMLParser):
    """Element ids, links by their text, and the findings block's tables, cells, images and text."""
    def __init__(self):
        super().__init__()
        self.open, self.section, self.seen_section = [], None, False
        self.ids, self.links, self.link = set(), {}, None
        self.tables, self.cells, self.imgs, self.text = 0, [], [], []
    def inside(self):
        return self.section is not None and len(self.open) >= self.section
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag not in VOID:
            self.open.append(tag)
        if a.get("class") == "findings":
            self.section, self.seen_section = len(self.open), True
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href") is not None:
            self.link = [a["href"], "", self.inside()]
        if self.inside():
            self.tables += tag == "table"
            if tag == "td":
                self.cells.append("")
            if tag == "img":
                self.imgs.append(a.get("src", ""))
    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if self.section is not None and len(self.open) == self.section:
            self.section = None
        if self.open:
            self.open.pop()
        if tag == "a" and self.link:
            self.links[self.link[1].strip()] = self.link
            self.link = None
    def handle_data(self, data):
        if self.link:
            self.link[1] += data
        if self.inside():
            self.text.append(data)
            if self.cells and "td" in self.open:
                self.cells[-1] += data

p = Page()
p.feed(open(path, encoding="utf-8").read())
errors = []
def need(cond, what):
    if not cond:
        errors.append(what)

nav = p.links.get("Findings")
if mode == "without":
    need("findings" not in p.ids and not p.seen_section, "--no-findings: the page still has a Findings section")
    need(nav is None, "--no-findings: the contents still list Findings")
else:
    text = "".join(p.text)
    need("findings" in p.ids and p.seen_section, "no Findings section (id 'findings', class 'findings')")
    need(nav is not None and nav[0] == "#findings", f"no contents entry 'Findings' -> #findings: {nav}")
    need("Findings: fixture claims" in text, "the document's title is not the section's heading")
    need(p.tables >= 1, "the Markdown table did not become a <table>")
    need("fixture-claim-one" in p.cells and "fixture-claim-two fragments A & B" in p.cells,
         f"the table's cells are not the Markdown's: {p.cells}")
    need("fixture-code-block" in text, "the fenced code block is missing")
    need("nested by two spaces" in text and "- a list" not in text, "the lists did not become lists")
    def link(label, target, suffix=""):
        got = p.links.get(label)
        want = os.path.relpath(os.path.join(fixtures, target), out_dir) + suffix
        need(got is not None and got[2], f"no link '{label}' in the section")
        if got:
            need(got[0] == want, f"link '{label}': {got[0]}, expected {want}")
            need(os.path.exists(os.path.join(out_dir, got[0].split("#")[0])), f"link '{label}' does not resolve")
    link("fixture-gpu-a results", "gpu-a/results.csv")
    link("the gpu-b run", "gpu-b", "/")
    link("the fixtures' README", "README.md", "#report-test-fixtures-synthetic-not-measurements")
    anchor = p.links.get("the verdicts below", [""])[0]
    need(anchor == "#findings-verdicts-at-a-glance" and anchor[1:] in p.ids, f"in-document link: {anchor}")
    need(p.links.get("an outside page", [""])[0] == "https://example.org/cuda?a=1&b=2", "the outside link changed")
    need(len(p.imgs) == 1 and p.imgs[0].startswith("data:image/png;base64,")
         and base64.b64decode(p.imgs[0].split(",", 1)[1])[:4] == b"\x89PNG",
         f"the document's image is not embedded: {[s[:60] for s in p.imgs]}")
if errors:
    print("\n".join("FAIL: " + e for e in errors))
    sys.exit(1)
EOF
}

report_without_markdown() { # report.py's arguments: report.py with the markdown module hidden
    "$py" -c 'import runpy, sys; sys.modules["markdown"] = None; sys.argv.pop(0)
runpy.run_path(sys.argv[0], run_name="__main__")' "$src/plots/report.py" "$@"
}

part_findings() {
    local out=$tmp/out/nested/report.html
    report "$out" --no-gnuplot --findings "$findings_md" "$fixtures/gpu-a" "$fixtures/gpu-b"
    check_findings "$out" with || fail "the Findings section (above)"
    keep "$out"
    report "$tmp/without.html" --no-gnuplot --no-findings "$fixtures/gpu-a" "$fixtures/gpu-b"
    check_findings "$tmp/without.html" without || fail "--no-findings (above)"
    # without python3-markdown: one clear line, unless --no-findings
    if report_without_markdown -q -o "$tmp/r.html" --findings "$findings_md" "$fixtures/gpu-a" 2>"$tmp/err"; then
        fail "report.py made a Findings section without python3-markdown"
    fi
    [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "python3-markdown" "$tmp/err" ||
        fail "unclear error without python3-markdown: $(cat "$tmp/err")"
    report_without_markdown -q -o "$tmp/r.html" --no-gnuplot --no-findings "$fixtures/gpu-a" ||
        fail "--no-findings still needs python3-markdown"
    if "$py" "$src/plots/report.py" -q -o "$tmp/r.html" --findings "$tmp/absent.md" "$fixtures/gpu-a" 2>"$tmp/err"; then
        fail "report.py accepted a missing --findings file"
    fi
    grep -q "absent.md: No such file" "$tmp/err" ||
        fail "unclear error for a missing --findings file: $(cat "$tmp/err")"
    echo "findings: section, table, code, links and image; --no-findings; clear errors"
}

# --- the committed GPU results ---------------------------------------------------------------------

part_committed() {
    local runs=()
    while IFS= read -r f; do
        runs+=("$(dirname "$f")")
    done < <(find "$src/results" -path "$src/results/*/full/results.csv*" 2>/dev/null | sort)
    # the cross-GPU report of the full runs (make report-gpus); without them, the plain runs
    if [ ${#runs[@]} -eq 0 ]; then
        while IFS= read -r f; do
            runs+=("$(dirname "$f")")
        done < <(find "$src/results" -name results.csv -not -path "$src/results/runs/*" 2>/dev/null | sort)
    fi
    if [ ${#runs[@]} -eq 0 ]; then
        echo "SKIP: no committed results under results/"
        exit 77
    fi
    report "$tmp/report.html" "${runs[@]}"
    local n
    n=$(grep -o '<img ' "$tmp/report.html" | wc -l)
    [ "$n" -ge 4 ] || fail "the committed results gave only $n figures"
    grep -q "Metric definitions" "$tmp/report.html" || fail "no definitions in the committed results' report"
    if [ -f "$src/docs/findings.md" ]; then
        grep -q '<h2 id="findings"' "$tmp/report.html" || fail "no Findings section from docs/findings.md"
    fi
    keep "$tmp/report.html"
    echo "committed results (${#runs[@]} runs): $n figures"
}

case "${1:-}" in
fixtures) part_fixtures ;;
committed) part_committed ;;
browser) part_browser ;;
first_screen) part_first_screen ;;
columns) part_columns ;;
real) part_real ;;
answers_tune) part_answers_tune ;;
findings) part_findings ;;
*)
    echo "usage: $0 fixtures|browser|first_screen|columns|real|answers_tune|committed|findings" >&2
    exit 2
    ;;
esac
