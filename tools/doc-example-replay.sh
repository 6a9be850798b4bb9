#!/bin/sh
# doc-example-replay.sh - the README's "replay your PyTorch snapshot" output:
# the committed transformer trace replayed in sim under three allocators, the
# case lines and answers as the run printed them, host times (which vary from
# machine to machine) replaced by "…". The predicted allocator times in the
# answers include the suite's own policies' measured bookkeeping, so they
# vary a little from run to run too: the README shows a committed run,
# results/sim/readme-example/console.txt, printed by this script; with
# CMB_DOC_RERUN=1 it replays again and rewrites that file first. Run by
# tools/gendocs.py.
committed=results/sim/readme-example/console.txt
if [ "${CMB_DOC_RERUN:-0}" = 1 ] || [ ! -f "$committed" ]; then
    bin=${CMB_BIN:-build/cumembench}
    out=$(mktemp -d) || exit 1
    trap 'rm -rf "$out"' EXIT
    mkdir -p "$(dirname "$committed")"
    "$bin" --mode sim --scenario replay --param trace=traces/samples/torch_transformer_sweep.trace \
        --allocator torch-caching,torch-expandable,cmb --out "$out/run" --repetitions 1 2>&1 |
        grep -v "^cumembench: writing\|^cumembench: where to look" |
        sed -e '/^    \[/d' -e '/^\[[0-9]*\/[0-9]*\] [^ ]*$/d' | # progress on a slow machine
        sed -e "s|$out/run|RUN|g" -e 's/time [0-9.]* [mun]*s/time …/g' -e 's/([0-9.]* s, ~[0-9]* s left)/(…)/g' \
            -e 's/ in [0-9.]* s;/ in …;/' -e 's/ *$//' >"$committed.tmp" &&
        mv "$committed.tmp" "$committed" || exit 1
fi
echo '```text'
cat "$committed"
echo '```'
