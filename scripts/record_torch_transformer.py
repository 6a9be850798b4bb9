#!/usr/bin/env python3
"""Record a PyTorch memory snapshot of a transformer training sweep, with
PyTorch's own peak figures beside it, to check the replay's fidelity.

A 6-layer transformer encoder (d_model 512, 8 heads, FF 2048) with a
1000-way head and AdamW is trained 3 steps at each of 8 sequence lengths
(batch 32), the lengths out of order so freed activations of one length are
reused by the next. PYTORCH_CUDA_ALLOC_CONF is taken from the environment
as PyTorch reads it.

usage: PYTORCH_CUDA_ALLOC_CONF=... record_torch_transformer.py FRACTION OUT
  FRACTION  torch.cuda.set_per_process_memory_fraction (0 = no cap)
  OUT       writes OUT.pickle (the snapshot) and OUT.json (the peaks)

Then: traces/torch_snapshot_to_trace.py OUT.pickle OUT.trace, and replay
OUT.trace in sim mode with --param capacity=<allowed bytes from OUT.json>.
"""
import json
import os
import pickle
import sys

import torch

SEQUENCE_LENGTHS = [64, 200, 128, 512, 333, 1024, 700, 1500]
BATCH = 32


def build(dev="cuda"):
    """The model, its head and optimizer (also used by scripts/e2e-torch.py)."""
    torch.manual_seed(0)
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
    model = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).to(dev)
    head = nn.Linear(512, 1000).to(dev)
    opt = torch.optim.AdamW(list(model.parameters()) + list(head.parameters()), lr=1e-4)
    return model, head, opt


def train_step(model, head, opt, seq, dev="cuda", phase=None):
    """One training step at sequence length `seq`; phase(name) is called
    after the forward pass, the backward pass and the optimizer step."""
    x = torch.randn(BATCH, seq, 512, device=dev)
    y = torch.randint(0, 1000, (BATCH, seq), device=dev)
    loss = torch.nn.functional.cross_entropy(head(model(x)).reshape(-1, 1000), y.reshape(-1))
    if phase:
        phase("forward")
    opt.zero_grad()
    loss.backward()
    if phase:
        phase("backward")
    opt.step()
    if phase:
        phase("step")
    del x, y, loss


def main():
    fraction, out = float(sys.argv[1]), sys.argv[2]
    if fraction > 0:
        torch.cuda.set_per_process_memory_fraction(fraction)
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                             max_entries=10**7)
    model, head, opt = build()
    for seq in SEQUENCE_LENGTHS:
        for _ in range(3):
            train_step(model, head, opt, seq)
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    info = {k: stats.get(k) for k in ["reserved_bytes.all.peak", "allocated_bytes.all.peak",
                                      "requested_bytes.all.peak", "num_alloc_retries", "num_ooms",
                                      "num_device_alloc", "num_device_free"]}
    info.update(total=total, fraction=fraction, allowed=int(fraction * total), torch=torch.__version__,
                device=torch.cuda.get_device_name(), conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))
    with open(out + ".pickle", "wb") as f:
        pickle.dump(torch.cuda.memory._snapshot(), f)
    with open(out + ".json", "w") as f:
        json.dump(info, f)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
