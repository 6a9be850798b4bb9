#!/bin/bash
# The patch: behind.patch on 2e0bbaa (git apply), built here (Release, CUDA arch 90):
#   cmake --build build -j2 --target cumembench cmb_pluggable
#   build/cumembench, build/lib and build/pluggable/libcmb_pluggable.so into .gpu-build/behind,
#   carried as .gpu-build/behind.tar.xz; dbg-behind.py was carried as scripts/.dbg-behind.py.
# Calls 1 and 2 ran the patch with the access calls behind as well: at the top of call_access
#       if (!bq_push(s, BQ_ACCESS, va, size, 0))
#           return CUDA_SUCCESS;
# (behind.patch is the version calls 3 and 4 ran, which makes them on the caller's thread).
# All on one NVIDIA H200 (driver 580.159.04, CUDA 13.0, PyTorch 2.11.0+cu130: call1-access-behind/
# nvidia-smi.txt, torch.txt), from the repository root; B=.gpu-build/behind, A=cmb@vmm,cmb:behind=true@vmm.
#
# call 1 (call1-access-behind/; O=$OUT/smoke):
$B/cumembench --scenario churn --param n=10000 --param max_size=64MiB --param touch=true --allocator $A \
    --repetitions 2 --timeline off --out $O/churn > $O/churn.log 2>&1          # churn-results.csv
$B/cumembench --scenario replay --param trace=traces/samples/torch_transformer_sweep.trace --param passes=1,10 \
    --param find_min_capacity=false --allocator $A --repetitions 2 --timeline off --out $O/replay > $O/replay.log 2>&1
CMB_STEADY_MODES="native-expandable cmb cmb-behind" CMB_STEADY_PROGRAMS=transformer CMB_STEADY_RUNS=1 \
    CMB_STEADY_BUDGET=200 bash scripts/gpu-cmb-steady.sh $B $O/e2e > $O/e2e-call.log 2>&1
#   (a stream_async line named the scenario wrongly and ran nothing; its per-run files did not come back)
# three short calls between 1 and 2 ran scripts/.dbg-behind.py: a tensor of 1 KiB to 300 MiB filled and
# read back, and a matmul, passed under cmb:behind=true@vmm (with and without CUDA_LAUNCH_BLOCKING=1);
# the transformer's first step failed (dbg-behind.py, the version in this directory, prints its traceback)
# call 2 (call2-access-behind/; O=$OUT/smoke2):
$B/cumembench --scenario stream-async --allocator $A --repetitions 2 --timeline off --out $O/sa > $O/sa.log 2>&1
$B/cumembench --scenario churn --param n=10000 --param max_size=64MiB --param touch=true --allocator $A \
    --repetitions 2 --timeline off --out $O/churn > $O/churn.log 2>&1
for m in cmb:behind=true cmb; do   # t-behind.json, t-cmb.json
    env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run --program transformer --steps 24 \
        --policy $m@vmm --lib $B/pluggable/libcmb_pluggable.so --out $O/t-....json > $O/t-....log 2>&1
done
# call 3 (call3-unmap-behind/; e2e.md is scripts/e2e-steady.py table over it, made here):
for r in 1 2; do for m in cmb cmb:behind=true; do n=$(echo $m | tr ':=' '__')
    env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run --program transformer --steps 24 \
        --policy $m@vmm --lib $B/pluggable/libcmb_pluggable.so --out $O/t-$n-$r.json > $O/t-$n-$r.log 2>&1
done; done
# call 4 (call4-profile/): the same with CMB_PROFILE=1 for transformer and gpt, one run each
for p in transformer gpt; do for m in cmb cmb:behind=true; do n=$(echo $m | tr ':=' '__')
    CMB_PROFILE=1 env -u PYTORCH_CUDA_ALLOC_CONF python3 scripts/e2e-steady.py run --program $p --steps 24 \
        --policy $m@vmm --lib $B/pluggable/libcmb_pluggable.so --out $O/$p-$n.json > $O/$p-$n.log 2>&1
done; done
# new-shape-sums.txt (here): each run's new-shape steps summed, from the JSON files of calls 3 and 4:
#   python3 -c "import json,glob; [print(f, 'new-shape steps after step 0, sum ms: %.2f' % sum(x['ms'] for x in
#     json.load(open(f))['steps'][1:] if not x['repeat'])) for f in sorted(glob.glob('call3-unmap-behind/*.json'))
#     + sorted(glob.glob('call4-profile/*.json'))]"
