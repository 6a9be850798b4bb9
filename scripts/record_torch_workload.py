#!/usr/bin/env python3
"""Record PyTorch memory snapshots of two more real workloads, with PyTorch's
own peak figures beside them, for replay (and for checking allocators on
traffic they were not tuned on).

  llm-decode  a decoder-only transformer (6 layers, d_model 2048, 16 heads)
              serving 12 requests one after another in inference mode:
              prefill of the prompt, then token-by-token decoding with a KV
              cache that grows by concatenation (torch.cat) at every step,
              as simple generation loops do; prompt and generation lengths
              vary from request to request, batch 8.
  convnet     ResNet-50 (torchvision) trained with SGD and momentum, 2 steps
              at each of 6 image sizes (batch 32), the sizes out of order so
              freed activations of one size are reused by the next.

PYTORCH_CUDA_ALLOC_CONF is taken from the environment as PyTorch reads it.

usage: record_torch_workload.py WORKLOAD OUT
  writes OUT.pickle (the snapshot) and OUT.json (PyTorch's peaks)
Then: traces/torch_snapshot_to_trace.py OUT.pickle OUT.trace
"""
import json
import os
import pickle
import sys

import torch

# (prompt length, tokens generated) per request
REQUESTS = [(128, 40), (900, 16), (40, 80), (512, 50), (1500, 8), (300, 60),
            (64, 24), (1024, 30), (200, 100), (700, 20), (2000, 6), (96, 50)]
IMAGE_SIZES = [160, 224, 128, 288, 192, 256]


class DecoderBlock(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.d = heads, d
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.out = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.ff = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

    def forward(self, x, cache):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(self.d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        if cache is not None:  # the cache grows by concatenation at every step
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, self.d))
        return x + self.ff(self.ln2(x)), (k, v)


def llm_decode(dev):
    vocab, d, layers = 32000, 2048, 6
    emb = torch.nn.Embedding(vocab, d).to(dev, torch.float16)
    blocks = torch.nn.ModuleList(DecoderBlock(d, 16) for _ in range(layers)).to(dev, torch.float16)
    head = torch.nn.Linear(d, vocab).to(dev, torch.float16)
    with torch.inference_mode():
        for prompt, gen in REQUESTS:
            tokens = torch.randint(0, vocab, (8, prompt), device=dev)
            x, caches = emb(tokens), [None] * layers
            for step in range(gen):
                for i, blk in enumerate(blocks):
                    x, caches[i] = blk(x, caches[i])
                nxt = head(x[:, -1:]).argmax(-1)
                x = emb(nxt)
            del tokens, x, caches, nxt


def convnet(dev):
    import torchvision
    model = torchvision.models.resnet50(num_classes=1000).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for size in IMAGE_SIZES:
        for _ in range(2):
            x = torch.randn(32, 3, size, size, device=dev)
            y = torch.randint(0, 1000, (32,), device=dev)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            del x, y, loss


def main():
    workload, out = sys.argv[1], sys.argv[2]
    run = {"llm-decode": llm_decode, "convnet": convnet}.get(workload)
    if run is None:
        sys.exit(f"record_torch_workload: unknown workload '{workload}' (llm-decode, convnet)")
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=10**7)
    torch.manual_seed(0)
    run("cuda")
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    info = {k: stats.get(k) for k in ["reserved_bytes.all.peak", "allocated_bytes.all.peak",
                                      "requested_bytes.all.peak", "num_alloc_retries", "num_ooms",
                                      "num_device_alloc", "num_device_free"]}
    info.update(workload=workload, total=total, torch=torch.__version__, device=torch.cuda.get_device_name(),
                conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))
    with open(out + ".pickle", "wb") as f:
        pickle.dump(torch.cuda.memory._snapshot(), f)
    with open(out + ".json", "w") as f:
        json.dump(info, f)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
