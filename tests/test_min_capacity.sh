#!/usr/bin/env bash
# test_min_capacity.sh - the replay's smallest GPU where fit is not monotone
# in the capacity (docs/costs.md, "The smallest GPU"): rmm-pool's initial
# pool is half the free memory, so the MLP sample trace fits on an island
# below the answer, fails above the island and fits from the answer up. The
# answer must fit, the grid step below it must not, every grid capacity from
# it to 1.25x must fit (checked independently, one run each on a sample), and
# the island is reported and fits.
#
# Environment: CMB_SRC, CMB_BIN, CMB_PYTHON (default /usr/bin/python3).
set -euo pipefail
src=${CMB_SRC:?CMB_SRC must name the source tree}
bin=${CMB_BIN:?CMB_BIN must name the cumembench binary}
py=${CMB_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trace=$src/traces/samples/torch_mlp_sweep_default.trace
n=0

counter() { # DIR NAME: the first case's counter, or empty
    "$py" - "$1/results.json" "$2" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
def walk(o):
    if isinstance(o, dict):
        if sys.argv[2] in o and not isinstance(o[sys.argv[2]], (dict, list)):
            print(int(float(o[sys.argv[2]]))); sys.exit(0)
        for v in o.values(): walk(v)
    elif isinstance(o, list):
        for v in o: walk(v)
walk(doc)
PY
}

fits() { # CAPACITY: 0 when the trace fits
    n=$((n + 1))
    "$bin" --mode sim --scenario replay --allocator rmm-pool --param "trace=$trace" \
        --param "capacity=$1" --param find_min_capacity=false --repetitions 1 \
        --out "$tmp/r$n" >"$tmp/r$n.log" 2>&1
    grep -q '^\[1/1\].* fits ' "$tmp/r$n.log"
}

"$bin" --mode sim --scenario replay --allocator rmm-pool --param "trace=$trace" \
    --repetitions 1 --out "$tmp/search" >"$tmp/search.log" 2>&1
best=$(counter "$tmp/search" min_capacity_bytes)
island=$(counter "$tmp/search" min_capacity_island_bytes)
step=$((2 << 20))
[ -n "$best" ] || { echo "FAIL: no min_capacity_bytes"; exit 1; }
[ -n "$island" ] || { echo "FAIL: no island reported below $best"; exit 1; }
[ "$island" -lt "$best" ] || { echo "FAIL: island $island not below $best"; exit 1; }
fits "$best" || { echo "FAIL: does not fit at the answer $best"; exit 1; }
if fits $((best - step)); then echo "FAIL: fits one step below the answer $best"; exit 1; fi
fits "$island" || { echo "FAIL: the island $island does not fit"; exit 1; }
# the non-monotone part: a capacity between the island and the answer fails
if fits $(((island + best) / 2 / step * step)); then echo "FAIL: no gap between island and answer"; exit 1; fi
for k in 1 2 3 5 8 13 21 34 55 89 144; do
    cap=$((best + k * step))
    fits "$cap" || { echo "FAIL: does not fit at $cap above the answer $best"; exit 1; }
done
# a trace that fits, with no island below, is not said not to fit
"$bin" --mode sim --scenario replay --allocator cmb --param "trace=$trace" \
    --repetitions 1 --out "$tmp/plain" >"$tmp/plain.log" 2>&1
[ -n "$(counter "$tmp/plain" min_capacity_bytes)" ] || { echo "FAIL: cmb: no min_capacity_bytes"; exit 1; }
if grep -rq "does not fit a device of 1 TiB" "$tmp/plain"; then echo "FAIL: a trace that fits is noted as not fitting"; exit 1; fi
echo "ok: fits from $best bytes up, island from $island"
