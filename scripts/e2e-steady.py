#!/usr/bin/env python3
"""e2e-steady.py - one real PyTorch training job, every step timed, natively
or through libcmb_pluggable.so (run by scripts/gpu-cmb-steady.sh, which runs
each program natively with PyTorch's default allocator, natively with
expandable segments, and under cmb@vmm through the library, 3 times each).

  e2e-steady.py run --program P --out RUN.json [--policy SPEC --lib LIB] [--steps N]
  e2e-steady.py table --work DIR --out SUMMARY.md

Programs (shapes change where real jobs change them; a step of a shape seen
before is a "repeat" step, the first of a shape a "new-shape" step):
  transformer  scripts/record_torch_transformer.py's encoder and its 8
               sequence lengths, cycled (fp32, AdamW);
  gpt          a GPT-style decoder (8 layers, d_model 1024, 16 heads, vocab
               32000, causal attention) trained under bf16 autocast with
               AdamW; batch and length vary: (batch, length) cycled over 6
               shapes;
  convnet      ResNet-50 (torchvision) trained with SGD and momentum at 6
               image sizes, cycled (batch 32); without torchvision, a plain
               12-layer convnet of the same pattern;
  llm_decode   scripts/record_torch_workload.py's llm-decode: a 6-layer fp16
               decoder serving its 12 requests (prompt and generation lengths
               vary), one request a step, cycled;
  moe          a mixture-of-experts encoder (6 layers, d_model 768, 8 experts
               of 4 x d_model, top-2 routing) under bf16 autocast with AdamW:
               each expert's batch is the tokens routed to it, so tensor
               sizes change every step even where (batch, length), cycled
               over 4 shapes, repeats;
  unet         a U-Net (4 levels, 64-512 channels, GroupNorm, skip
               connections) denoising random images with AdamW, batch 16,
               at 5 image sizes, cycled;
  bert         a BERT-style masked-language-model encoder (6 layers, d_model
               768, 12 heads, vocab 30522) under fp16 autocast with a gradient
               scaler and AdamW, (batch, length) cycled over 5 shapes.
Each step is timed between torch.cuda.synchronize() calls. RUN.json holds
the step times with each step's shape and whether it repeats one, the peak
reserved and requested bytes (the library's counters, or
torch.cuda.memory_stats()), and the library's upstream counters, in total
and (up_allocs, up_frees) per step.
"""
import argparse
import glob
import itertools
import json
import math
import os
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)

GPT_SHAPES = [(16, 256), (8, 1024), (32, 128), (4, 2048), (12, 512), (24, 384)]
IMAGE_SIZES = [160, 224, 128, 288, 192, 256]


def descend(opt, loss):
    """One optimizer step on loss: the tail of every training program's step."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def gpt_program(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            t = x.shape[1]
            mask = torch.triu(torch.ones(t, t, device=x.device, dtype=torch.bool), 1)
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    torch.manual_seed(0)
    d, vocab = 1024, 32000
    emb, pos = nn.Embedding(vocab, d).cuda(), nn.Embedding(2048, d).cuda()
    blocks = nn.Sequential(*[Block(d, 16) for _ in range(8)]).cuda()
    head = nn.Linear(d, vocab).cuda()
    params = list(emb.parameters()) + list(pos.parameters()) + list(blocks.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)

    def step(i):
        b, t = GPT_SHAPES[i % len(GPT_SHAPES)]
        ids = torch.randint(0, vocab, (b, t + 1), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = emb(ids[:, :-1]) + pos(torch.arange(t, device="cuda"))
            logits = head(blocks(x))
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), ids[:, 1:].reshape(-1))
        descend(opt, loss)
        return f"b{b}xt{t}"
    return step


def transformer_program(torch):
    import record_torch_transformer as rt
    model, head, opt = rt.build()

    def step(i):
        seq = rt.SEQUENCE_LENGTHS[i % len(rt.SEQUENCE_LENGTHS)]
        rt.train_step(model, head, opt, seq)
        return f"seq{seq}"
    return step


def convnet_program(torch):
    nn = torch.nn
    torch.manual_seed(0)
    try:
        import torchvision
        model, name = torchvision.models.resnet50(num_classes=1000).cuda(), "resnet50"
    except ImportError:
        layers, c = [], 3
        for i, w in enumerate([64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512]):
            layers += [nn.Conv2d(c, w, 3, stride=2 if i in (2, 4, 7, 10) else 1, padding=1), nn.BatchNorm2d(w),
                       nn.ReLU()]
            c = w
        model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 1000)).cuda()
        name = "plain-convnet"
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(i):
        s = IMAGE_SIZES[i % len(IMAGE_SIZES)]
        x = torch.randn(32, 3, s, s, device="cuda")
        y = torch.randint(0, 1000, (32,), device="cuda")
        loss = torch.nn.functional.cross_entropy(model(x), y)
        descend(opt, loss)
        return f"img{s}"
    step.model_name = name
    return step


def llm_decode_program(torch):
    """scripts/record_torch_workload.py's llm-decode (the recorded
    torch_llm_decode trace): one step is one request, prefill then
    token-by-token decoding with a KV cache grown by torch.cat."""
    import record_torch_workload as rw
    torch.manual_seed(0)
    vocab, d, layers = 32000, 2048, 6
    emb = torch.nn.Embedding(vocab, d).to("cuda", torch.float16)
    blocks = torch.nn.ModuleList(rw.DecoderBlock(d, 16) for _ in range(layers)).to("cuda", torch.float16)
    head = torch.nn.Linear(d, vocab).to("cuda", torch.float16)

    def step(i):
        prompt, gen = rw.REQUESTS[i % len(rw.REQUESTS)]
        with torch.inference_mode():
            tokens = torch.randint(0, vocab, (8, prompt), device="cuda")
            x, caches = emb(tokens), [None] * layers
            for _ in range(gen):
                for j, blk in enumerate(blocks):
                    x, caches[j] = blk(x, caches[j])
                x = emb(head(x[:, -1:]).argmax(-1))
            del tokens, x, caches
        return f"p{prompt}g{gen}"
    return step


MOE_SHAPES = [(16, 256), (8, 768), (32, 128), (12, 512)]
UNET_SIZES = [96, 128, 64, 160, 112]


def moe_program(torch):
    nn, F = torch.nn, torch.nn.functional

    class Moe(nn.Module):
        def __init__(self, d, experts):
            super().__init__()
            self.gate = nn.Linear(d, experts)
            self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
                                         for _ in range(experts))

        def forward(self, x):
            flat = x.reshape(-1, x.shape[-1])
            weight, which = self.gate(flat).softmax(-1).topk(2, dim=-1)
            out = torch.zeros_like(flat)
            for e, expert in enumerate(self.experts):
                tok, slot = (which == e).nonzero(as_tuple=True)  # data-dependent: sizes vary every step
                if tok.numel():
                    out.index_add_(0, tok, (expert(flat[tok]) * weight[tok, slot, None]).to(out.dtype))
            return out.reshape(x.shape)

    class Layer(nn.Module):
        def __init__(self, d, heads, experts):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.moe = Moe(d, experts)

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.moe(self.ln2(x))

    torch.manual_seed(0)
    d, vocab = 768, 32000
    emb = nn.Embedding(vocab, d).cuda()
    layers = nn.Sequential(*[Layer(d, 12, 8) for _ in range(6)]).cuda()
    head = nn.Linear(d, vocab).cuda()
    opt = torch.optim.AdamW(list(emb.parameters()) + list(layers.parameters()) + list(head.parameters()), lr=1e-4)

    def step(i):
        b, t = MOE_SHAPES[i % len(MOE_SHAPES)]
        ids = torch.randint(0, vocab, (b, t), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = head(layers(emb(ids)))
            loss = F.cross_entropy(logits.float().reshape(-1, vocab), ids.reshape(-1))
        descend(opt, loss)
        return f"b{b}xt{t}"
    return step


def unet_program(torch):
    nn, F = torch.nn, torch.nn.functional

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(8, cout), nn.SiLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(8, cout), nn.SiLU())

    class UNet(nn.Module):
        def __init__(self, widths=(64, 128, 256, 512)):
            super().__init__()
            self.down, c = nn.ModuleList(), 3
            for w in widths:
                self.down.append(block(c, w))
                c = w
            self.mid = block(c, c)
            self.up, self.fuse = nn.ModuleList(), nn.ModuleList()
            for w in reversed(widths):
                self.up.append(nn.ConvTranspose2d(c, w, 2, stride=2))
                self.fuse.append(block(2 * w, w))
                c = w
            self.out = nn.Conv2d(c, 3, 1)

        def forward(self, x):
            skips = []
            for d in self.down:
                x = d(x)
                skips.append(x)
                x = F.max_pool2d(x, 2)
            x = self.mid(x)
            for u, f in zip(self.up, self.fuse):
                x = f(torch.cat([u(x), skips.pop()], 1))
            return self.out(x)

    torch.manual_seed(0)
    model = UNet().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(i):
        s = UNET_SIZES[i % len(UNET_SIZES)]
        x = torch.randn(16, 3, s, s, device="cuda")
        noise = torch.randn_like(x)
        loss = F.mse_loss(model(x + noise), noise)
        descend(opt, loss)
        return f"img{s}"
    return step


BERT_SHAPES = [(8, 512), (32, 128), (16, 384), (64, 64), (24, 256)]


def bert_program(torch):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    d, vocab = 768, 30522
    emb, pos = nn.Embedding(vocab, d).cuda(), nn.Embedding(512, d).cuda()
    layer = nn.TransformerEncoderLayer(d, 12, 4 * d, activation="gelu", batch_first=True, norm_first=True)
    encoder = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).cuda()
    head = nn.Linear(d, vocab).cuda()
    params = list(emb.parameters()) + list(pos.parameters()) + list(encoder.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")

    def step(i):
        b, t = BERT_SHAPES[i % len(BERT_SHAPES)]
        ids = torch.randint(0, vocab, (b, t), device="cuda")
        masked = torch.rand(b, t, device="cuda") < 0.15
        with torch.autocast("cuda", dtype=torch.float16):
            x = emb(ids.masked_fill(masked, 103)) + pos(torch.arange(t, device="cuda"))
            logits = head(encoder(x))
            loss = F.cross_entropy(logits.float()[masked], ids[masked])
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return f"b{b}xt{t}"
    return step


PROGRAMS = {"transformer": transformer_program, "gpt": gpt_program, "convnet": convnet_program,
            "llm_decode": llm_decode_program, "moe": moe_program, "unet": unet_program, "bert": bert_program}


def upstream_calls(cmb):
    """(upstream allocations, upstream frees) of the library so far, or None natively."""
    if not cmb:
        return None
    s = cmb.stats()
    return s["upstream_allocs"], s["upstream_frees"]


def run(args):
    cmb = None
    if args.policy:
        import cumembench_alloc as cmb
        cmb.install_torch(args.policy, path=args.lib, oom="raise")  # before any CUDA allocation
    import torch
    res = {"program": args.program, "mode": "library" if args.policy else "native", "policy": args.policy,
           "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "torch": torch.__version__,
           "device": torch.cuda.get_device_name(), "cuda_runtime": torch.version.cuda, "error": None,
           "steps": []}
    try:
        step = PROGRAMS[args.program](torch)
        res["model"] = getattr(step, "model_name", args.program)
        seen = set()
        up = upstream_calls(cmb)
        for i in range(args.steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            shape = step(i)
            torch.cuda.synchronize()
            rec = {"i": i, "shape": shape, "repeat": shape in seen, "ms": (time.perf_counter() - t0) * 1e3}
            if cmb:  # the step's upstream calls, read outside its timed region
                now = upstream_calls(cmb)
                rec.update(up_allocs=now[0] - up[0], up_frees=now[1] - up[1])
                up = now
            res["steps"].append(rec)
            seen.add(shape)
    except RuntimeError as e:  # OutOfMemoryError is one
        res["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    if cmb:
        s = cmb.stats()
        res["stats"] = s
        res.update(reserved_peak=s["reserved_peak"], requested_peak=s["requested_peak"])
    else:
        m = torch.cuda.memory_stats()
        res["stats"] = {k: m.get(k) for k in ("reserved_bytes.all.peak", "requested_bytes.all.peak",
                                              "num_device_alloc", "num_device_free", "num_alloc_retries")}
        res.update(reserved_peak=m.get("reserved_bytes.all.peak"), requested_peak=m.get("requested_bytes.all.peak"))
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({"event": "done", "program": args.program, "steps": len(res["steps"]),
                      "error": res["error"]}), flush=True)
    return 0 if res["error"] is None else 1


def med(xs):
    return statistics.median(xs) if xs else None


def spread(xs):
    return "—" if not xs else f"{med(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"


# issue 26's goal: every step within 3% of native expandable segments
STEP_GOAL = 1.03


def step_ms(runs, i):
    """The median over runs of step i's time."""
    return med([r["steps"][i]["ms"] for r in runs])


def new_shape_sum(run, n):
    """A run's new-shape steps summed, step 0 and steps from n on left out."""
    return sum(s["ms"] for s in run["steps"][1:n] if not s["repeat"])


def fold(x, y):
    """The larger over the smaller."""
    return max(x / y, y / x)


def spread3(xs):
    return "—" if not xs else f"{med(xs):.3f} [{min(xs):.3f}-{max(xs):.3f}]"


def table(args):
    """Per program and mode, over runs: the median step time of each run
    after its first cycle of shapes (warm-up: the steps before the first
    repeated shape), of its repeat-shape steps and of its new-shape steps
    (step 0 excluded); the median of the runs' medians with their range
    [min-max]; peak reserved; cmb's ratio to native expandable segments
    (median of run medians, steady steps)."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(args.work, "*.json"))):
        r = json.load(open(path))
        key = (r["program"], os.path.basename(path).rsplit("-", 1)[0].split("-", 1)[1])
        runs.setdefault(key, []).append(r)
    lines = ["| program | mode | runs | failed | steady step ms, median [min-max] of runs | repeat-shape ms "
             "| new-shape ms | every step ms | peak reserved B | vs native expandable (steady) "
             "| new-shape vs native expandable |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    base, rows = {}, []
    for (prog, mode), rs in sorted(runs.items()):
        ok = [r for r in rs if not r["error"] and r["steps"]]
        per = {"steady": [], "rep": [], "new": [], "all": []}
        for r in ok:
            warm = next((s["i"] for s in r["steps"] if s["repeat"]), len(r["steps"]))
            pick = {"steady": [s["ms"] for s in r["steps"][warm:]],
                    "rep": [s["ms"] for s in r["steps"] if s["repeat"]],
                    "new": [s["ms"] for s in r["steps"] if not s["repeat"] and s["i"] >= 1],
                    "all": [s["ms"] for s in r["steps"][1:]]}
            for k, v in pick.items():
                if v:
                    per[k].append(med(v))
        peak = max((r.get("reserved_peak") or 0) for r in rs)
        if mode == "native-expandable":
            base[prog] = (med(per["steady"]), med(per["new"]))
        rows.append((prog, mode, len(rs), len(rs) - len(ok), per, peak))
    for prog, mode, n, failed, per, peak in rows:
        b = base.get(prog, (None, None))
        ratio = lambda x, y: f"{x / y:.3f}" if x and y else "—"  # noqa: E731
        lines.append(f"| {prog} | {mode} | {n} | {failed} | {spread(per['steady'])} | {spread(per['rep'])} "
                     f"| {spread(per['new'])} | {spread(per['all'])} | {peak} | {ratio(med(per['steady']), b[0])} "
                     f"| {ratio(med(per['new']), b[1])} |")
    lines += steps_table(runs)
    open(args.out, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def steps_table(runs):
    """Step by step, per program: native expandable's median over runs of
    each step's time, and each other mode's median as a ratio to it (the
    goal asks every step within 3%), then the sum of the new-shape steps
    (step 0 excluded) per run, median [min-max], and the same two ratios of
    native expandable's runs half against half: what the runs can resolve."""
    lines = []
    for prog in sorted({p for p, _ in runs}):
        modes = sorted(m for p, m in runs if p == prog)
        if "native-expandable" not in modes:
            continue
        ok = {m: [r for r in runs[(prog, m)] if not r["error"] and r["steps"]] for m in modes}
        n = min(len(r["steps"]) for rs in ok.values() for r in rs) if all(ok.values()) else 0
        if not n:
            continue
        others = [m for m in modes if m != "native-expandable"]
        lines += ["", f"{prog}, step by step: native expandable's median ms over runs, the others' medians as "
                  "a ratio to it (* a new shape)", "",
                  "| step | shape | native expandable ms | " + " | ".join(others) + " |",
                  "|---|---|---|" + "---|" * len(others)]
        at = lambda m, i: step_ms(ok[m], i)  # noqa: E731
        floor = half_against_half(ok["native-expandable"], n)
        worst = {m: 0.0 for m in others}
        over = {m: [0, 0] for m in others}  # steps over STEP_GOAL: beyond native's own spread, within it
        for i in range(1, n):
            st = ok["native-expandable"][0]["steps"][i]
            b = at("native-expandable", i)
            cells = []
            for m in others:
                q = at(m, i) / b
                worst[m] = max(worst[m], q)
                mark = ""
                if q > STEP_GOAL:
                    beyond = not floor or q > floor["step"][i]
                    over[m][0 if beyond else 1] += 1
                    mark = " (over)" if beyond else " (spread)"
                cells.append(f"{q:.3f}{mark}")
            lines.append(f"| {i} | {st['shape']}{'' if st['repeat'] else '*'} | {b:.2f} | " + " | ".join(cells) + " |")
        sums = {m: [new_shape_sum(r, n) for r in ok[m]] for m in modes}
        b = med(sums["native-expandable"])
        lines += ["", "| mode | new-shape steps, sum ms per run | ratio | worst step ratio "
                  f"| steps over {STEP_GOAL:g}x: beyond native's spread, within it |", "|---|---|---|---|---|"]
        for m in modes:
            w = f"{worst[m]:.3f}" if m in worst else "—"
            v = f"{over[m][0]}, {over[m][1]} of {n - 1}" if m in over else "—"
            lines.append(f"| {m} | {spread(sums[m])} | {med(sums[m]) / b:.3f} | {w} | {v} |")
        if floor:
            lines.append(f"| native expandable, half its runs against the other half ({floor['splits']} split"
                         f"{'s' * (floor['splits'] > 1)}) | — | {spread3(floor['sum'])} | {spread3(floor['worst'])} | — |")
            lines += ["", "The last row is the floor of what these runs can tell apart: native expandable's runs "
                      "split in two halves every way, the ratio of one half's median to the other's (the larger "
                      "over the smaller), median [min-max] over the splits. A mode's ratio within that range "
                      "is not told apart from native expandable by these runs. A step's ratio over "
                      f"{STEP_GOAL:g} is marked (over) where it also exceeds the largest ratio of native's halves "
                      "at that step, (spread) where it does not: there these runs cannot tell it from native."]
    return lines


def half_against_half(rs, n):
    """Native expandable against itself: for every split of its runs into
    halves (floor(k/2) runs against the rest; past 12 runs, up to 500 of
    them drawn with a fixed seed), the new-shape sums' ratio of
    medians and the worst step-by-step ratio of medians, each folded to at
    least 1 (the larger half over the smaller), and per step the largest
    such ratio over the splits ("step", by step index). None under two runs."""
    k = len(rs)
    if k < 2:
        return None
    out = {"sum": [], "worst": [], "splits": 0, "step": [0.0] * n}
    halves = itertools.combinations(range(k), k // 2)
    if math.comb(k, k // 2) > 1000:  # past 12 runs: 500 splits drawn, the same every time
        rng = random.Random(k)
        halves = sorted({tuple(sorted(rng.sample(range(k), k // 2))) for _ in range(500)})
    for half in halves:
        if k % 2 == 0 and 0 not in half:
            continue  # an even split and its complement are one split
        a = [rs[j] for j in half]
        b = [rs[j] for j in range(k) if j not in half]
        per = [fold(step_ms(a, i), step_ms(b, i)) for i in range(1, n)]
        out["worst"].append(max(per))
        for i in range(1, n):
            out["step"][i] = max(out["step"][i], per[i - 1])
        sa, sb = med([new_shape_sum(r, n) for r in a]), med([new_shape_sum(r, n) for r in b])
        if sa and sb:
            out["sum"].append(fold(sa, sb))
        out["splits"] += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--program", choices=sorted(PROGRAMS), required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--policy")
    r.add_argument("--lib")
    r.add_argument("--steps", type=int, default=48)
    t = sub.add_parser("table")
    t.add_argument("--work", required=True)
    t.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.cmd == "run" and a.steps < 13:
        ap.error("--steps must be at least 13 (12 warm-up steps, then steady ones)")
    return run(a) if a.cmd == "run" else table(a)


if __name__ == "__main__":
    sys.exit(main())
