import sys, traceback, importlib.util, os
sys.path.insert(0, "python")
import cumembench_alloc as cmb
cmb.install_torch(sys.argv[1], path=".gpu-build/behind/pluggable/libcmb_pluggable.so", oom="raise")
import torch
spec = importlib.util.spec_from_file_location("e2e", "scripts/e2e-steady.py")
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
try:
    step = m.PROGRAMS["transformer"](torch)
    for i in range(3):
        print("step", i, step(i), flush=True)
        torch.cuda.synchronize()
except Exception:
    traceback.print_exc()
