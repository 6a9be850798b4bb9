#!/bin/sh
# doc-example-replay.sh - the README's "replay your PyTorch snapshot" output:
# the committed transformer trace replayed in sim under three allocators, the
# case lines and answers as the run prints them, with the host times (which
# vary from machine to machine) replaced by "…". Run by tools/gendocs.py.
bin=${CMB_BIN:-build/cumembench}
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
echo '```text'
"$bin" --mode sim --scenario replay --param trace=traces/samples/torch_transformer_sweep.trace \
    --allocator torch-caching,torch-expandable,cmb --out "$out/run" --repetitions 1 2>&1 |
    grep -v "^cumembench: writing\|^cumembench: where to look" |
    sed -e "s|$out/run|RUN|g" -e 's/time [0-9.]* [mun]*s/time …/g' -e 's/([0-9.]* s)/(…)/g' \
        -e 's/\[[0-9]*s elapsed[^]]*\]//' -e 's/ in [0-9.]* s;/ in …;/' -e 's/ *$//'
echo '```'
