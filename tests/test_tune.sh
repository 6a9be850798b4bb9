#!/usr/bin/env bash
# test_tune.sh - cumembench tune (docs/tune.md).
#
#   test_tune.sh sample TRACE   on a sample trace: under a budget between the
#                               recorded setting's peak reserved and the
#                               smallest GPU any candidate fits, the
#                               recommendation fits that budget in a separate
#                               replay case (the case machinery, not tune's
#                               in-process replay), its peak reserved at
#                               unlimited capacity is the replay case's, and
#                               --json validates
#   test_tune.sh refusals       bad input: one line on stderr, nothing on
#                               stdout, exit 2, before anything runs
#   test_tune.sh exits          exit 1 when nothing fits the budget (with the
#                               smallest budget that does), 0 with a
#                               recommendation; the text output's parts
#
# Environment: CMB_SRC, CMB_BIN, CMB_PYTHON (default /usr/bin/python3).
set -euo pipefail
src=${CMB_SRC:?CMB_SRC must name the source tree}
bin=${CMB_BIN:?CMB_BIN must name the cumembench binary}
py=${CMB_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src"

fail() { echo "FAIL: $*" >&2; exit 1; }

# The JSON's shape: every field a CI job reads, with its type.
validate() { # FILE EXPECT_RECOMMENDATION(0|1)
    "$py" - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want_rec = sys.argv[2] == "1"
def cand(c, where):
    for k, t in (("setting", str), ("paste", str), ("run_setting", str), ("min_capacity_bytes", int),
                 ("peak_reserved_bytes", int), ("peak_allocated_bytes", int), ("upstream_calls", int)):
        assert isinstance(c.get(k), t), (where, k, c.get(k))
    assert c["min_capacity_bytes"] >= d["peak_requested_bytes"], (where, "fits below peak requested")
    assert c["frag_ratio"] is None or 0 <= c["frag_ratio"] < 1, (where, c["frag_ratio"])
    t = c["predicted_alloc_time_per_pass_s"]
    assert t is None or t >= 0, (where, t)
for k, t in (("input", str), ("events", int), ("peak_requested_bytes", int), ("front", list), ("candidates", int),
             ("replays", int), ("seconds", float), ("objective", str), ("recorded", dict), ("time_is", str)):
    assert isinstance(d.get(k), t), (k, d.get(k))
cand(d["recorded"], "recorded")
assert d["front"], "an empty front"
caps = [c["min_capacity_bytes"] for c in d["front"]]
assert caps == sorted(caps), "the front is not by smallest GPU"
for i, c in enumerate(d["front"]):
    cand(c, "front[%d]" % i)
times = [c["predicted_alloc_time_per_pass_s"] for c in d["front"]]
if None not in times:
    assert all(times[i] > times[i + 1] for i in range(len(times) - 1)), ("a dominated member", times)
assert (d["recommendation"] is not None) == want_rec, d["recommendation"]
if want_rec:
    rec = d["recommendation"]
    cand(rec, "recommendation")
    assert isinstance(d["recommendation_on_budget"]["upstream_calls"], int), d["recommendation_on_budget"]
    on_budget = d.get("front_on_budget")
    assert rec["setting"] in [c["setting"] for c in d["front"] + (on_budget or [])] + [d["recorded"]["setting"]]
    if d["budget_bytes"]:
        assert rec["min_capacity_bytes"] <= d["budget_bytes"]
    if d["budget_bytes"] and d["costs_file"]:
        # chosen by the time on a GPU of the budget: no candidate that fits there is as small and
        # clearly faster there (a garbage-collection threshold looked fast on an unlimited GPU);
        # balanced keeps the recorded setting where nothing fits a smaller GPU at no time cost
        assert on_budget, "a budget with a cost file, and no candidates priced on it"
        for i, c in enumerate(on_budget):
            cand(c, "front_on_budget[%d]" % i)
            assert c["min_capacity_bytes"] <= d["budget_bytes"], ("front_on_budget", i)
            assert c["predicted_alloc_time_per_pass_on_budget_s"] is not None, ("front_on_budget", i)
        t = rec.get("predicted_alloc_time_per_pass_on_budget_s")
        assert t is not None or rec["setting"] == d["recorded"]["setting"], "the recommendation was not priced"
        kept = d["objective"] == "balanced" and rec["setting"] == d["recorded"]["setting"]
        for c in on_budget:
            if kept and c["min_capacity_bytes"] == rec["min_capacity_bytes"]:
                continue
            assert not (t is not None and c["min_capacity_bytes"] <= rec["min_capacity_bytes"] and
                        c["predicted_alloc_time_per_pass_on_budget_s"] < t / 1.03), \
                ("dominated on the budget by", c["setting"], c["predicted_alloc_time_per_pass_on_budget_s"], t)
else:
    cand(d["smallest_budget"], "smallest_budget")
    assert d["smallest_budget"]["min_capacity_bytes"] > d["budget_bytes"]
PY
}

field() { # FILE PYTHON-EXPRESSION-ON-d
    "$py" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

replay_case() { # SPEC TRACE CAPACITY OUT: the replay scenario, one repetition
    "$bin" --mode sim --scenario replay --allocator "$1" --param "trace=$2" --param "capacity=$3" \
        --param find_min_capacity=false --repetitions 1 --out "$4" >"$4.log" 2>&1
}

sample() {
    local trace=$1
    "$bin" tune "$trace" --json >"$tmp/all.json" 2>"$tmp/all.err" || fail "$trace: tune exited $?"
    validate "$tmp/all.json" 1 || fail "$trace: --json does not validate"
    local peak smallest budget
    peak=$(field "$tmp/all.json" 'd["recorded"]["peak_reserved_bytes"]')
    smallest=$(field "$tmp/all.json" 'd["front"][0]["min_capacity_bytes"]')
    [ "$smallest" -lt "$peak" ] || fail "$trace: no candidate fits below the recorded peak reserved"
    budget=$(( (peak + smallest) / 2 / 1048576 * 1048576 ))
    "$bin" tune "$trace" --budget "$budget" --json >"$tmp/b.json" 2>"$tmp/b.err" || fail "$trace: tune --budget exited $?"
    validate "$tmp/b.json" 1 || fail "$trace: --json under the budget does not validate"
    local spec reserved
    spec=$(field "$tmp/b.json" 'd["recommendation"]["setting"].split("@")[0]')
    reserved=$(field "$tmp/b.json" 'd["recommendation"]["peak_reserved_bytes"]')
    replay_case "$spec" "$trace" "$budget" "$tmp/fit" || fail "$trace: the replay of $spec failed"
    grep -qE '^\[1/1\] .* fits( |$)' "$tmp/fit.log" || fail "$trace: $spec does not fit $budget B in a replay: $(cat "$tmp/fit.log")"
    replay_case "$spec" "$trace" 1TiB "$tmp/unl" || fail "$trace: the replay of $spec at 1 TiB failed"
    local case_reserved
    case_reserved=$("$py" -c "
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r['metric'] == 'peak_reserved_bytes']
print(int(float(rows[0]['value'])))" "$tmp/unl/results.csv")
    [ "$case_reserved" = "$reserved" ] || fail "$trace: $spec peak reserved $reserved in tune, $case_reserved in the replay case"
    echo "ok: $trace: budget $budget B -> $spec (fits; peak reserved $reserved B as the replay case)"
}

refuse() { # WHAT ARGS...: exit 2, one line on stderr, nothing on stdout
    local what=$1 rc=0
    shift
    "$bin" tune "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [ "$rc" = 2 ] || fail "$what: exit $rc, expected 2"
    [ ! -s "$tmp/out" ] || fail "$what: wrote to stdout"
    [ "$(wc -l <"$tmp/err")" = 1 ] || fail "$what: not one line: $(cat "$tmp/err")"
    ! grep -q '^tune: ' "$tmp/err" || fail "$what: the search started"
    echo "ok: $what: $(cat "$tmp/err")"
}

says() { # PATTERN: the last refusal's line matches it (grep -E)
    grep -qE -- "$1" "$tmp/err" || fail "expected '$1', got: $(cat "$tmp/err")"
}

refusals() {
    local t=traces/samples/torch_mlp_sweep_default.trace
    printf 'a 1 100 0 0\nz nonsense\n' >"$tmp/bad.trace"
    printf '\x80\x04not a pickle' >"$tmp/bad.pickle"
    refuse "no input" --json
    refuse "missing file" "$tmp/none.trace"
    refuse "malformed trace" "$tmp/bad.trace"
    refuse "unconvertible snapshot" "$tmp/bad.pickle"
    refuse "two inputs" "$t" "$t"
    refuse "unknown option" "$t" --bugdet 1GiB
    refuse "unknown option, last" "$t" --nosuch
    says 'unknown option --nosuch'
    refuse "an option twice" "$t" --for torch --for cupy
    says '^cumembench tune: --for is given twice'
    refuse "a flag twice" "$t" --json --budget 4GiB --json
    says '^cumembench tune: --json is given twice'
    refuse "bad budget" "$t" --budget 12XB
    refuse "zero budget" "$t" --budget 0
    says '--budget 0: must be above 0'
    refuse "budget too large" "$t" --budget 99999999999999999999
    says '--budget 99999999999999999999: too large'
    refuse "budget without a value" "$t" --budget
    says '--budget needs a value'
    refuse "unknown framework" "$t" --for tensorflow
    refuse "unknown objective" "$t" --objective fastest
    refuse "bad passes" "$t" --passes 0
    refuse "missing cost file" "$t" --costs "$tmp/none.json"
    says "^cumembench tune: cost file $tmp/none.json: No such file or directory\$"
    refuse "cost file a directory" "$t" --costs "$tmp"
    says 'not a regular file'
    refuse "verify without --" "$t" --verify python3 x.py
    refuse "verify with no GPU" "$t" --verify -- python3 -c pass
    refuse "recorded setting that cannot run" "$t" --recorded torch-caching:max_split_size_mb=5
    # python3 -m cumembench_alloc run (tune --verify's wrapper): bad usage exits 2 with one line
    local rc
    for args in "run" "run native:" "run native: -- $tmp/none.py" "run native: --capacity x -- $t" \
        "run native: --bogus 1 -- $t" "run native: -- python3 $tmp/none.py" "run native: -- python3 -m x"; do
        rc=0
        # shellcheck disable=SC2086
        PYTHONPATH="$src/python" "$py" -m cumembench_alloc $args >"$tmp/out" 2>"$tmp/err" || rc=$?
        [ "$rc" = 2 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" = 1 ] ||
            fail "cumembench_alloc $args: exit $rc, $(cat "$tmp/err")"
        echo "ok: cumembench_alloc $args: $(cat "$tmp/err")"
    done
}

churn_text() { # BUDGET: the upstream-calls line against the same run's --out DIR/tune.json
    local t=traces/samples/torch_mlp_sweep_default.trace costs=results/nvidia-h200/costs.json
    rm -rf "$tmp/c"
    "$bin" tune "$t" --budget "$1" --costs "$costs" --out "$tmp/c" >"$tmp/c.txt" 2>/dev/null || fail "churn $1: tune exited $?"
    "$py" - "$tmp/c.txt" "$tmp/c/tune.json" <<'PY' || fail "churn $1: the text and its tune.json disagree"
import json, re, sys
text, d = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
at, unl = d["recommendation_on_budget"]["upstream_calls"], d["recommendation"]["upstream_calls"]
m = re.search(r"^upstream calls over (\d+) pass(es)?: (\d+) on that GPU, (\d+) unlimited$", text, re.M)
assert m, text
assert (int(m.group(1)), int(m.group(3)), int(m.group(4))) == (d["passes"], at, unl), (m.groups(), at, unl)
assert (("  %d calls more on that GPU" % (at - unl)) in text) == (at > unl), text
# reserving more than the budget unlimited, it must give memory back on the budget to fit there
if d["recommendation"]["peak_reserved_bytes"] > d["budget_bytes"]:
    assert at > unl, ("fits the budget with no more upstream calls than unlimited", d["recommendation"])
print(d["recommendation"]["setting"], at, unl)
PY
    echo "ok: churn $1: the upstream calls on the budget as its tune.json gives them"
}

churn() {
    churn_text 2300MiB # below the recorded peak reserved: the recommendation gives memory back there
    churn_text 4GiB
}

repeat() { # the same input, the same recommendation: on one thread and on two, run again
    local t=traces/samples/torch_mlp_sweep_default.trace costs=results/nvidia-h200/costs.json first="" rec th
    for th in 1 2 2; do
        rec=$(CMB_TUNE_THREADS=$th "$bin" tune "$t" --budget 4GiB --costs "$costs" --json 2>/dev/null |
            "$py" -c "import json,sys; print(json.load(sys.stdin)['recommendation']['setting'])") ||
            fail "repeat: tune on $th thread(s) failed"
        [ -z "$first" ] && first=$rec
        [ "$rec" = "$first" ] || fail "repeat: $first on one thread, $rec on $th"
    done
    echo "ok: repeat: $first, on one thread and on two, twice"
}

exits() {
    local t=traces/samples/torch_mlp_sweep_default.trace rc=0
    "$bin" tune "$t" --budget 1MiB --json >"$tmp/none.json" 2>/dev/null || rc=$?
    [ "$rc" = 1 ] || fail "nothing fits 1 MiB: exit $rc, expected 1"
    validate "$tmp/none.json" 0 || fail "nothing fits: --json does not validate"
    rc=0
    "$bin" tune "$t" --budget 1MiB >"$tmp/none.txt" 2>/dev/null || rc=$?
    [ "$rc" = 1 ] && grep -q 'nothing fits a budget of .*the smallest budget any candidate fits is' "$tmp/none.txt" ||
        fail "nothing fits: exit $rc, text: $(cat "$tmp/none.txt")"
    "$bin" tune "$t" --objective memory >"$tmp/rec.txt" 2>"$tmp/rec.err" || fail "a recommendation: exit $?"
    for part in '^Pareto front' '^recommended' '^saves:' '^time: predicted' '^why:' 'searched [0-9]* candidates'; do
        grep -q "$part" "$tmp/rec.txt" || fail "the text has no '$part'"
    done
    grep -q '^tune: .* candidates, [0-9]* replays' "$tmp/rec.err" || fail "no progress on stderr"
    local n
    n=$("$bin" tune "$t" --json 2>/dev/null | "$py" -c "import json,sys; print(json.load(sys.stdin)['candidates'])")
    [ "$n" -ge 200 ] || fail "only $n candidates searched"
    echo "ok: exit 1 with the smallest budget, 0 with a recommendation, $n candidates"
    # a PyTorch snapshot in: converted, its allocator_settings read as the recorded setting
    "$py" - "$tmp/run.pickle" <<'PY'
import pickle, sys
events, t, addr = [], 0, 1 << 30
live = []
for i in range(60):
    size = [3 << 20, 25 << 20, 700 << 10, 90 << 20][i % 4] + 512 * i
    t += 10
    events.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": t})
    live.append((addr, size))
    addr += size + (1 << 21)
    if i % 3 == 2:
        a, sz = live.pop(0)
        t += 10
        events.append({"action": "free_completed", "addr": a, "size": sz, "stream": 0, "time_us": t})
settings = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:64", "expandable_segments": True}
pickle.dump({"device_traces": [events], "segments": [], "allocator_settings": settings}, open(sys.argv[1], "wb"))
PY
    TMPDIR="$tmp" "$bin" tune "$tmp/run.pickle" --json >"$tmp/pickle.json" 2>"$tmp/pickle.err" || fail "snapshot: exit $?: $(cat "$tmp/pickle.err")"
    validate "$tmp/pickle.json" 1 || fail "snapshot: --json does not validate"
    [ "$(field "$tmp/pickle.json" 'd["recorded"]["setting"]')" = "torch-expandable:max_split_size_mb=64" ] ||
        fail "snapshot: recorded setting $(field "$tmp/pickle.json" 'd["recorded"]["setting"]')"
    ! ls "$tmp"/cmb-tune-*.trace 2>/dev/null | grep -q . || fail "the converted snapshot was left behind"
    echo "ok: a snapshot in, its recorded setting torch-expandable:max_split_size_mb=64"
}

case ${1:-} in
sample) sample "$2" ;;
refusals) refusals ;;
exits) exits ;;
churn) churn ;;
repeat) repeat ;;
*) echo "usage: $0 sample TRACE | refusals | exits | churn | repeat" >&2; exit 2 ;;
esac
