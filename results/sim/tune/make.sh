#!/bin/sh
# make.sh - the committed sim runs of cumembench tune (docs/tune.md), from the
# repository root: sh results/sim/tune/make.sh [BUILD_DIR]
#   convnet-4.75GiB.{txt,json}  the README's worked example (and -front.png,
#                               the figure of its front): the ResNet-50
#                               sample trace (a PyTorch snapshot converted)
#                               under a 4.75 GiB budget
#   samples.txt                 every sample trace, no budget: the recorded
#                               setting's smallest GPU and the recommendation
#   speed.txt                   candidates, replays and time on a 50,000-event
#                               trace (the first 50,000 events of the LLM-decode
#                               sample) and on the whole 107,500-event trace,
#                               with the machine's cores and load
set -eu
bin=${1:-build}/cumembench
here=results/sim/tune
"$bin" tune traces/samples/torch_convnet.trace --budget 4.75GiB >"$here/convnet-4.75GiB.txt" 2>/dev/null
"$bin" tune traces/samples/torch_convnet.trace --budget 4.75GiB --json >"$here/convnet-4.75GiB.json" 2>/dev/null
python3 plots/tune_front.py "$here/convnet-4.75GiB.json" "$here/convnet-4.75GiB-front.png"
{
    printf '%-40s %-14s %-14s %s\n' trace "recorded GPU" "recommended" "setting"
    for t in traces/samples/*.trace traces/samples/*.csv; do
        "$bin" tune "$t" --json 2>/dev/null | python3 -c "
import json, sys
d = json.load(sys.stdin); r = d['recommendation']
print('%-40s %8.3f GiB   %8.3f GiB   %s' % (sys.argv[1], d['recorded']['min_capacity_bytes'] / 2**30,
      r['min_capacity_bytes'] / 2**30, r['setting']))" "$t"
    done
} >"$here/samples.txt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -n 50005 traces/samples/torch_llm_decode.trace >"$tmp/llm-50k.trace"
{
    echo "cores: $(nproc); $(uname -m); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    for t in "$tmp/llm-50k.trace" traces/samples/torch_llm_decode.trace; do
        /usr/bin/time -f "%e s wall, %U s user" -o "$tmp/time" "$bin" tune "$t" --json >"$tmp/o.json" 2>/dev/null
        python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
print('%s: %d events, %d candidates, %d replays, %s' % (sys.argv[2], d['events'], d['candidates'], d['replays'],
      open(sys.argv[3]).read().strip()))" "$tmp/o.json" "$(basename "$t")" "$tmp/time"
    done
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$here/speed.txt"
