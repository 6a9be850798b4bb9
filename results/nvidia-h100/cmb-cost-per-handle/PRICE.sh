#!/bin/sh
# the recorded cmb trace priced here (no GPU) with build b9075b0 and two more cost files:
# predict-cmb-after/ with costs-after.json, predict-cmb-without-handles/ with costs.json less its
# cuMemSetAccess_handles entry (the pricing before 5d6b707: an access over many handles as over one)
D=results/nvidia-h100/cmb-cost-per-handle
gunzip -c $D/cmb.trace.gz > /tmp/cmb.trace
python3 -c "import json; d=json.load(open('$D/costs.json')); d['calls'].pop('cuMemSetAccess_handles'); json.dump(d, open('/tmp/costs-without-handles.json', 'w'))"
for v in after:$D/costs-after.json without-handles:/tmp/costs-without-handles.json; do
  build/cumembench --mode sim --scenario replay --param trace=/tmp/cmb.trace --param find_min_capacity=false \
    --allocator cmb,torch-expandable --repetitions 3 --costs ${v#*:} --timeline off --out OUT-${v%%:*} -q
done
