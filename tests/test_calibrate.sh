#!/usr/bin/env bash
# test_calibrate.sh - cumembench calibrate's refusals (docs/costs.md): a bad
# argument, or an --out FILE that cannot be written, exits 2 with one line
# before anything runs; without a GPU it says so in one line, exits 2 and
# writes no cost file.
#
# Environment: CMB_BIN.
set -uo pipefail
bin=${CMB_BIN:?CMB_BIN must name the cumembench binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" calibrate --repetitions 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: --repetitions 1 exits $rc, not 2"; exit 1; }
[ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- '--repetitions takes' "$tmp/err" ||
    { echo "FAIL: --repetitions 1: $(cat "$tmp/err")"; exit 1; }
"$bin" calibrate --nonsense >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q 'unknown argument --nonsense' "$tmp/err" ||
    { echo "FAIL: unknown argument: rc $rc, $(cat "$tmp/err")"; exit 1; }
# refused before the GPU is looked for, so a refusal needs none: ARGS... and what the one line says
refuse() {
    local want=$1
    shift
    "$bin" calibrate "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 2 ] && [ ! -s "$tmp/out" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$want" "$tmp/err" ||
        { echo "FAIL: calibrate $*: rc $rc, $(cat "$tmp/err")"; exit 1; }
}
refuse '--out needs a value' --out
refuse '--repetitions needs a value' --repetitions
refuse "--out $tmp/none/costs.json: directory $tmp/none: No such file or directory" --out "$tmp/none/costs.json"
refuse "--out $tmp: a directory" --out "$tmp"
: >"$tmp/file"
refuse "$tmp/file is not a directory" --out "$tmp/file/costs.json"
[ ! -e "$tmp/none" ] || { echo "FAIL: a refused --out made its directory"; exit 1; }

"$bin" calibrate --repetitions 3 --out "$tmp/costs.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
if ! grep -q 'no usable GPU' "$tmp/err"; then
    echo "skipped: a GPU is here (calibrate exited $rc)"
    exit 77
fi
[ "$rc" -eq 2 ] || { echo "FAIL: no GPU exits $rc, not 2"; exit 1; }
[ "$(wc -l <"$tmp/err")" -eq 1 ] || { echo "FAIL: more than one line: $(cat "$tmp/err")"; exit 1; }
[ ! -e "$tmp/costs.json" ] || { echo "FAIL: a cost file was written without a GPU"; exit 1; }
echo "ok"
