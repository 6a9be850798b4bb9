#!/usr/bin/env python3
"""A continuous-batching decode server in plain PyTorch: the memory life of an
LLM serving engine, for the serving scenario (docs/scenarios.md, serving) to be
checked against.

A small GPT-style model with random weights (RMSNorm, grouped-query attention,
SwiGLU; no positional encoding: what is computed does not matter, what is
allocated does) serves a seeded request stream, in the order vLLM's engine
does it:
  1. weights: every tensor allocated, then filled through a float32 staging
     copy on the GPU (freed at once);
  2. one profiling forward pass at --max-batched-tokens tokens split over
     min(--max-seqs, tokens) fresh prompts, with the sampler; the profile
     peak is the rise of allocated bytes over the weights, non-torch memory
     is what the device uses beyond what the allocator reserved;
  3. the paged KV cache, one tensor per layer [2, blocks, block_size,
     kv_heads, head_dim], blocks = (total x u - weights - profile peak -
     non-torch - graph estimate) / block bytes, as the scenario sizes it;
     block 0 takes the padding of graph replays;
  4. torch.cuda.graph capture of the decode step for [1, 2, 4, 8, 16, ...]
     up to --graph-max, largest first, into one private pool (--graphs off;
     auto under --allocator captures where install_torch wired PyTorch's
     graph-pool hooks, cumembench_alloc.torch_hooks(), and runs decode eager
     where this PyTorch has none; the report's "graphs" says what ran);
  5. continuous batching on a virtual clock (--step-ms per step): running
     requests first (a decode token or the next prefill chunk), preempting
     the newest when blocks run out (recompute), then admissions within the
     token budget (chunked prefill), max_seqs and free blocks; a step of
     decodes only, at most --graph-max of them, replays the captured graph.
The stream is the scenario's: the same xoshiro256** generator, seed, arrival
process and length distributions (scripts/serving_server.py --print-stream
prints it without PyTorch).

--record PATH writes a PyTorch memory snapshot of the whole run
(torch.cuda.memory._record_memory_history / _dump_snapshot) for
traces/torch_snapshot_to_trace.py; --allocator SPEC serves the run from
libcmb_pluggable (python/cumembench_alloc.py) instead of PyTorch's allocator.
--report PATH writes the run's figures as JSON (what scripts/serving_ceiling.py
reads: total; non_torch, non_torch_capture, non_torch_peak = device used
(cudaMemGetInfo) - reserved after profiling, after capture, at its highest;
graph_pool_private = the bytes the graphs' private pool reserved; under
--record also the trace's capture markers, capture_marks). The last line
printed is the report line; exit status 0 when the whole stream was served,
1 when it ran out of memory or failed, 2 on bad usage.
"""
import argparse
import json
import math
import os
import sys
import time

MASK = (1 << 64) - 1
CAPTURE_SIZES = [1, 2, 4] + [8 * i for i in range(1, 33)]  # vLLM's _BATCH_SIZES_TO_CAPTURE (v0.4-0.6)
# Under --record, one allocation of each size (bytes, uint8, freed at once) just
# before and just after the capture: the trace's capture window, whose
# allocations scripts/serving_ceiling.py moves into a held pool. Odd sizes no
# tensor of the model has.
CAPTURE_MARKS = (4093, 4091)


# --- the request stream: scenarios/serving.c's generator, number for number ------------------

class Rng:
    """xoshiro256** seeded by splitmix64 (common/cmb_rng.h)."""

    def __init__(self, seed):
        x = seed & MASK
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & MASK
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def _rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & MASK

    def next(self):
        s = self.s
        result = (self._rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self._rotl(s[3], 45)
        return result

    def uniform(self):
        return (self.next() >> 11) * (2.0 ** -53)

    def normal(self):
        u1 = 1.0 - self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * 3.14159265358979323846 * u2)

    def gamma(self, shape):
        if shape < 1.0:
            g = self.gamma(shape + 1.0)
            return g * math.pow(1.0 - self.uniform(), 1.0 / shape)
        d = shape - 1.0 / 3.0
        k = 1.0 / math.sqrt(9.0 * d)
        while True:
            x = self.normal()
            v = 1.0 + k * x
            if v <= 0:
                continue
            v = v * v * v
            u = 1.0 - self.uniform()
            if math.log(u) < 0.5 * x * x + d - d * v + d * math.log(v):
                return d * v

    def lognormal(self, mean, sigma):
        v = math.exp(math.log(mean) - 0.5 * sigma * sigma + sigma * self.normal())
        return 1 if v < 1.0 else int(math.floor(v + 0.5))  # llround for v >= 1


# (prompt mean, output mean): ShareGPT and Alpaca (vLLM, SOSP'23, Fig. 11); sigmas 1.0 / 0.8
LENGTHS = {"sharegpt": (161.31, 337.99), "alpaca": (19.31, 58.45)}


def make_requests(a):
    r = Rng(a.seed)
    t = 0.0
    out = []
    for _ in range(a.requests):
        if a.rate > 0:
            if a.burstiness == 1.0:
                t += -math.log(1.0 - r.uniform()) / a.rate
            else:
                t += r.gamma(a.burstiness) / (a.rate * a.burstiness)
        if a.lengths == "fixed":
            prompt, gen = a.prompt_len, a.output_len
        else:
            pm, om = LENGTHS[a.lengths]
            prompt = r.lognormal(pm, 1.0)
            gen = r.lognormal(om, 0.8)
        prompt = min(prompt, a.max_model_len - 1)
        gen = min(gen, a.max_model_len - prompt)
        out.append((t, prompt, gen))
    return out


# --- the model ---------------------------------------------------------------------------------

class Model:
    def __init__(self, torch, a):
        self.t = torch
        self.a = a
        self.dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
        self.heads = a.hidden // a.head_dim
        self.g = self.heads // a.kv_heads
        h, kvd, inter = a.hidden, a.kv_heads * a.head_dim, a.intermediate
        shapes = [("embed", (a.vocab, h))]
        for i in range(a.layers):
            shapes += [(f"ln1.{i}", (h,)), (f"qkv.{i}", (h + 2 * kvd, h)), (f"o.{i}", (h, h)),
                       (f"ln2.{i}", (h,)), (f"gu.{i}", (2 * inter, h)), (f"down.{i}", (h, inter))]
        shapes += [("norm", (h,)), ("lm_head", (a.vocab, h))]
        self.w = {n: torch.empty(s, dtype=self.dtype, device="cuda") for n, s in shapes}
        gen = torch.Generator(device="cuda").manual_seed(a.seed)
        for n, p in self.w.items():  # the checkpoint is float32, converted on the GPU
            staging = torch.randn(p.shape, dtype=torch.float32, device="cuda", generator=gen) * 0.02
            p.copy_(staging if p.dim() > 1 else staging + 1.0)
            del staging
        self.cache = None

    def rms(self, x, w):
        t = self.t
        if hasattr(t.nn.functional, "rms_norm"):
            return t.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6)
        return (x.float() * t.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

    def write_kv(self, i, k, v, slots):
        if self.cache is None:
            return
        kvh, hd = self.a.kv_heads, self.a.head_dim
        self.cache[i][0].view(-1, kvh, hd).index_copy_(0, slots, k)
        self.cache[i][1].view(-1, kvh, hd).index_copy_(0, slots, v)

    def attn_decode(self, i, q, table, lens):
        """q (b, heads, hd) against each sequence's blocks (table (b, max_blocks), lens (b,))."""
        t, a = self.t, self.a
        b = q.shape[0]
        k = self.cache[i][0][table].view(b, -1, a.kv_heads, a.head_dim)
        v = self.cache[i][1][table].view(b, -1, a.kv_heads, a.head_dim)
        qg = q.reshape(b, a.kv_heads, self.g, a.head_dim)
        s = t.einsum("bkgd,blkd->bkgl", qg, k).float() * (a.head_dim ** -0.5)
        pos = t.arange(k.shape[1], device=q.device)
        s.masked_fill_((pos[None, :] >= lens[:, None])[:, None, None, :], float("-inf"))
        p = t.softmax(s, dim=-1).to(q.dtype)
        return t.einsum("bkgl,blkd->bkgd", p, v).reshape(b, -1)

    def attn_prefill(self, i, q, k, v, start, blocks):
        """One sequence's chunk: queries at start.., keys of the cache (or its own when start is 0)."""
        t, a = self.t, self.a
        n = q.shape[0]
        if start > 0:
            ctx = start + n
            k = self.cache[i][0][blocks].view(-1, a.kv_heads, a.head_dim)[:ctx]
            v = self.cache[i][1][blocks].view(-1, a.kv_heads, a.head_dim)[:ctx]
        qh = q.transpose(0, 1)
        kh = k.transpose(0, 1).repeat_interleave(self.g, dim=0)
        vh = v.transpose(0, 1).repeat_interleave(self.g, dim=0)
        ctx = kh.shape[1]
        mask = t.arange(ctx, device=q.device)[None, :] <= (start + t.arange(n, device=q.device))[:, None]
        o = t.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask)
        return o.transpose(0, 1).reshape(n, -1)

    def forward(self, ids, slots, decode=None, prefills=()):
        """Hidden states of every token: `decode` = (table, lens) for the first
        rows (one token each), then `prefills` = [(n, start, blocks)] chunks."""
        t, a, w = self.t, self.a, self.w
        kvd = a.kv_heads * a.head_dim
        x = w["embed"][ids]
        nd = 0 if decode is None else decode[0].shape[0]
        for i in range(a.layers):
            hq = self.rms(x, w[f"ln1.{i}"]) @ w[f"qkv.{i}"].t()
            q, k, v = hq.split([a.hidden, kvd, kvd], dim=-1)
            q = q.reshape(-1, self.heads, a.head_dim)
            k = k.reshape(-1, a.kv_heads, a.head_dim)
            v = v.reshape(-1, a.kv_heads, a.head_dim)
            del hq
            self.write_kv(i, k, v, slots)
            outs = []
            if nd:
                outs.append(self.attn_decode(i, q[:nd], decode[0], decode[1]))
            row = nd
            for n, start, blocks in prefills:
                outs.append(self.attn_prefill(i, q[row:row + n], k[row:row + n], v[row:row + n], start, blocks))
                row += n
            o = outs[0] if len(outs) == 1 else t.cat(outs)
            del outs, q, k, v
            x = x + o @ w[f"o.{i}"].t()
            del o
            gu = self.rms(x, w[f"ln2.{i}"]) @ w[f"gu.{i}"].t()
            gate, up = gu.chunk(2, dim=-1)
            act = t.nn.functional.silu(gate) * up
            del gu, gate, up
            x = x + act @ w[f"down.{i}"].t()
            del act
        return x

    def sample(self, hidden_rows):
        """The sampler outside any graph: norm, logits in float32, greedy."""
        t = self.t
        logits = (self.rms(hidden_rows, self.w["norm"]) @ self.w["lm_head"].t()).float()
        probs = t.softmax(logits, dim=-1)
        return t.argmax(probs, dim=-1)


# --- memory figures ------------------------------------------------------------------------------

class Meter:
    """Allocated / reserved bytes from PyTorch, or from the library under --allocator."""

    def __init__(self, torch, cmb):
        self.t, self.cmb = torch, cmb

    def allocated(self):
        return self.cmb.stats()["requested_current"] if self.cmb else self.t.cuda.memory_allocated()

    def peak_allocated(self):
        return self.cmb.stats()["requested_peak"] if self.cmb else self.t.cuda.max_memory_allocated()

    def reserved(self):
        return self.cmb.stats()["reserved_current"] if self.cmb else self.t.cuda.memory_reserved()

    def peak_reserved(self):
        return self.cmb.stats()["reserved_peak"] if self.cmb else self.t.cuda.max_memory_reserved()

    def reset_peaks(self):
        if self.cmb:
            self.cmb.reset_peaks()
        else:
            self.t.cuda.reset_peak_memory_stats()

    def non_torch(self):
        free, total = self.t.cuda.mem_get_info()
        return max(0, total - free - self.reserved())

    def private_pools(self):
        """Bytes reserved in private (graph) pools: PyTorch's segments whose
        pool id is not the default (0, 0); None under the library."""
        if self.cmb:
            return None
        return sum(s["total_size"] for s in self.t.cuda.memory_snapshot()
                   if tuple(s.get("segment_pool_id", (0, 0))) != (0, 0))


# --- the engine --------------------------------------------------------------------------------------

class Engine:
    def __init__(self, torch, a, model, meter, rep):
        self.t, self.a, self.m, self.meter, self.rep = torch, a, model, meter, rep
        self.max_blocks = -(-a.max_model_len // a.block_size)
        self.graphs = {}
        self.static = None
        self.cmb = meter.cmb

    def pool_hooks(self):
        """True when install_torch wired PyTorch's graph-pool hooks."""
        hooks = self.cmb.torch_hooks()
        return all(hooks.get(h) == "wired" for h in
                   ("set_begin_allocate_to_pool", "set_end_allocate_to_pool_fn", "set_release_pool"))

    def profile(self):
        a, t = self.a, self.t
        n = min(a.max_seqs, a.max_batched_tokens)
        base, extra = divmod(a.max_batched_tokens, n)
        lens = [base + (1 if i < extra else 0) for i in range(n)]
        ids = t.zeros(sum(lens), dtype=t.long, device="cuda")
        slots = t.zeros(sum(lens), dtype=t.long, device="cuda")
        x = self.m.forward(ids, slots, prefills=[(ln, 0, None) for ln in lens])
        ends = t.tensor([sum(lens[:i + 1]) - 1 for i in range(n)], device="cuda")
        self.m.sample(x[ends])
        del x, ids, slots, ends
        t.cuda.synchronize()

    def graph_estimate(self):
        """What the capture will hold: the largest size's attention gathers
        (K and V of max_model_len per sequence), its hidden states and inputs."""
        a = self.a
        b = max([s for s in CAPTURE_SIZES if s <= min(a.graph_max, a.max_seqs)], default=0)
        dt = 4 if a.dtype == "f32" else 2
        ctx = self.max_blocks * a.block_size
        return b * (2 * ctx * a.kv_heads * a.head_dim * dt + 8 * a.hidden * dt + 2 * a.intermediate * dt * 2)

    def allocate_kv(self, util):
        a, t, rep = self.a, self.t, self.rep
        block_bytes = a.block_size * 2 * a.layers * a.kv_heads * a.head_dim * (4 if a.dtype == "f32" else 2)
        budget = rep["total"] * util - rep["weights"] - rep["profile_peak"] - rep["non_torch"] - rep["graph_estimate"]
        blocks = int(budget // block_bytes) if budget > 0 else 0
        rep.update(kv_blocks=blocks, kv_block_bytes=block_bytes, kv_layer_bytes=blocks * block_bytes // a.layers)
        if (blocks - 1) * a.block_size < a.max_model_len:
            raise ValueError(f"the KV budget at utilization {util:.3f} holds {max(0, blocks - 1) * a.block_size} "
                             f"tokens, fewer than max_model_len {a.max_model_len}")
        self.m.cache = [t.empty((2, blocks, a.block_size, a.kv_heads, a.head_dim), dtype=self.m.dtype, device="cuda")
                        for _ in range(a.layers)]
        return blocks

    def mark(self, size):
        if self.a.record:
            self.rep.setdefault("capture_marks", []).append(size)
            marker = self.t.empty(size, dtype=self.t.uint8, device="cuda")
            del marker

    def capture(self):
        a, t = self.a, self.t
        sizes = [s for s in CAPTURE_SIZES if s <= min(a.graph_max, a.max_seqs)]
        if not sizes:
            self.rep["graphs"] = "off (no size to capture)"
            return
        if a.graphs == "off" or (a.graphs == "auto" and self.cmb and not self.pool_hooks()):
            self.rep["graphs"] = ("off: " + ("--graphs off" if a.graphs == "off" else
                                  "this PyTorch offers the pluggable allocator no graph-pool hooks") + ", decode eager")
            return
        top = sizes[-1]
        ids = t.zeros(top, dtype=t.long, device="cuda")
        slots = t.zeros(top, dtype=t.long, device="cuda")  # block 0: the padding's
        table = t.zeros((top, self.max_blocks), dtype=t.long, device="cuda")
        lens = t.ones(top, dtype=t.long, device="cuda")
        self.static = (ids, slots, table, lens)
        for b in reversed(sizes):  # warm-up, as vLLM runs each size before capturing it
            self.m.forward(ids[:b], slots[:b], decode=(table[:b], lens[:b]))
        t.cuda.synchronize()
        pool = t.cuda.graph_pool_handle()
        # --graphs on under the library: its upstream calls during capture need
        # the relaxed mode, and may still invalidate the capture
        kw = {"capture_error_mode": "relaxed"} if self.a.allocator else {}
        self.mark(CAPTURE_MARKS[0])
        try:
            for b in reversed(sizes):
                g = t.cuda.CUDAGraph()
                with t.cuda.graph(g, pool=pool, **kw):
                    out = self.m.forward(ids[:b], slots[:b], decode=(table[:b], lens[:b]))
                self.graphs[b] = (g, out)
            t.cuda.synchronize()
        except RuntimeError as e:
            # a failed capture leaves the context's error sticky: no eager step
            # after it could be trusted, so the run ends here and says why
            self.graphs = {}
            self.rep["graphs"] = f"capture failed: {str(e).splitlines()[0][:200]}"
            raise
        self.mark(CAPTURE_MARKS[1])
        self.rep["graphs"] = f"{len(sizes)} sizes captured"
        self.rep["graph_pool_private"] = self.meter.private_pools()
        if self.cmb:
            self.rep["torch_hooks"] = self.cmb.torch_hooks()

    def slots_for(self, req, first, n):
        bs = self.a.block_size
        return [req["blocks"][p // bs] * bs + p % bs for p in range(first, first + n)]


def schedule(eng, st):
    """vLLM V1's order: running first (preempting the newest when blocks run
    out), admissions only when nothing was preempted."""
    a = eng.a
    budget, preempted, sched = a.max_batched_tokens, False, {}
    i = 0
    while i < len(st["running"]) and budget:
        r = st["running"][i]
        k = min(r["prompt"] + r["gen"] - r["computed"], budget)
        need = -(-(r["computed"] + k) // a.block_size) - len(r["blocks"])
        while need > len(st["free"]) and len(st["running"]) > i:
            v = st["running"].pop()
            st["free"].extend(v["blocks"])
            v.update(blocks=[], computed=0)
            sched.pop(id(v), None)
            st["waiting"].insert(0, v)
            st["preemptions"] += 1
            preempted = True
        if len(st["running"]) <= i:
            break
        r["blocks"] += [st["free"].pop() for _ in range(need)]
        sched[id(r)] = k
        budget -= k
        i += 1
    while not preempted and st["waiting"] and budget and len(st["running"]) < a.max_seqs:
        r = st["waiting"][0]
        k = min(r["prompt"] + r["gen"], budget)
        need = -(-k // a.block_size)
        if need > len(st["free"]):
            st["kv_blocked_steps"] += 1
            break
        st["waiting"].pop(0)
        r["blocks"] = [st["free"].pop() for _ in range(need)]
        st["running"].append(r)
        sched[id(r)] = k
        budget -= k
    return sched


def run_step(eng, st, sched):
    t, a = eng.t, eng.a
    rows = [r for r in st["running"] if sched.get(id(r))]
    dec = [r for r in rows if sched[id(r)] == 1 and r["computed"] + 1 == r["prompt"] + r["gen"]]
    is_dec = {id(r) for r in dec}
    pre = [r for r in rows if id(r) not in is_dec]
    n = len(dec)
    if not pre and eng.graphs and n <= max(eng.graphs):
        b = min(s for s in eng.graphs if s >= n)
        ids, slots, table, lens = eng.static
        tab = [r["blocks"] + [0] * (eng.max_blocks - len(r["blocks"])) for r in dec]
        ids[:n].copy_(t.tensor([r["last"] for r in dec], device="cuda"))
        slots[:n].copy_(t.tensor([eng.slots_for(r, r["computed"], 1)[0] for r in dec], device="cuda"))
        table[:n].copy_(t.tensor(tab, device="cuda"))
        lens[:n].copy_(t.tensor([r["computed"] + 1 for r in dec], device="cuda"))
        slots[n:b].zero_()
        lens[n:b].fill_(1)
        table[n:b].zero_()
        eng.graphs[b][0].replay()
        hidden = eng.graphs[b][1][:n]
        st["graph_steps"] += 1
        return dec, eng.m.sample(hidden)
    st["eager_steps"] += 1
    order = dec + pre
    ids, slots, prefills = [], [], []
    for r in order:
        k = sched[id(r)]
        ids += ([r["last"]] if id(r) in is_dec else [0] * k)
        slots += eng.slots_for(r, r["computed"], k)
    for r in pre:
        prefills.append((sched[id(r)], r["computed"], t.tensor(r["blocks"], device="cuda")))
    decode = None
    if dec:
        tab = [r["blocks"] + [0] * (eng.max_blocks - len(r["blocks"])) for r in dec]
        decode = (t.tensor(tab, device="cuda"), t.tensor([r["computed"] + 1 for r in dec], device="cuda"))
    x = eng.m.forward(t.tensor(ids, device="cuda"), t.tensor(slots, device="cuda"), decode, prefills)
    sampling, ends, row = [], [], 0
    for r in order:
        row += sched[id(r)]
        if r["computed"] + sched[id(r)] == r["prompt"] + r["gen"]:
            sampling.append(r)
            ends.append(row - 1)
    tokens = eng.m.sample(x[t.tensor(ends, device="cuda")]) if ends else None
    return sampling, tokens


def serve(eng, reqs):
    a = eng.a
    st = {"running": [], "waiting": [], "free": list(range(eng.rep["kv_blocks"] - 1, 0, -1)),
          "preemptions": 0, "graph_steps": 0, "eager_steps": 0, "kv_blocked_steps": 0, "steps": 0, "done": 0}
    pending = [{"arrival": t0, "prompt": p, "out": o, "gen": 0, "computed": 0, "blocks": [], "last": 0}
               for t0, p, o in reqs]
    now, nxt, non_torch_peak = 0.0, 0, eng.rep.get("non_torch_capture", 0)
    while st["done"] < len(pending):
        while nxt < len(pending) and pending[nxt]["arrival"] <= now:
            st["waiting"].append(pending[nxt])
            nxt += 1
        if not st["running"] and not st["waiting"]:
            now = pending[nxt]["arrival"]
            continue
        sched = schedule(eng, st)
        sampled, tokens = run_step(eng, st, sched)
        if tokens is not None:
            for r, tok in zip(sampled, tokens.tolist()):
                r["last"] = tok
        kept = []
        for r in st["running"]:
            r["computed"] += sched.get(id(r), 0)
            if r["computed"] == r["prompt"] + r["gen"]:
                r["gen"] += 1
            if r["gen"] >= r["out"]:
                st["free"].extend(r["blocks"])
                r["blocks"] = []
                st["done"] += 1
            else:
                kept.append(r)
        st["running"] = kept
        st["steps"] += 1
        now += a.step_ms / 1e3
        if st["steps"] % 16 == 0:
            non_torch_peak = max(non_torch_peak, eng.meter.non_torch())
    eng.t.cuda.synchronize()
    non_torch_peak = max(non_torch_peak, eng.meter.non_torch())
    eng.rep.update({k: st[k] for k in ("preemptions", "graph_steps", "eager_steps", "kv_blocked_steps", "steps")},
                   completed=st["done"], non_torch_peak=non_torch_peak)


# --- the run -------------------------------------------------------------------------------------------

def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu-memory-utilization", type=float, default=0.5, dest="util")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--rate", type=float, default=20.0, help="arrivals per second of virtual time (0: all at once)")
    p.add_argument("--burstiness", type=float, default=1.0, help="gamma shape: 1 Poisson, below 1 bursty")
    p.add_argument("--step-ms", type=float, default=25.0)
    p.add_argument("--lengths", choices=["sharegpt", "alpaca", "fixed"], default="sharegpt")
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--intermediate", type=int, default=2816)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--max-batched-tokens", type=int, default=2048)
    p.add_argument("--max-seqs", type=int, default=64)
    p.add_argument("--graph-max", type=int, default=64)
    p.add_argument("--graphs", choices=["auto", "on", "off"], default="auto",
                   help="decode graphs (auto: on, and under --allocator where its graph-pool hooks are wired)")
    p.add_argument("--allocator", default=None, help="serve from libcmb_pluggable with this spec (e.g. cmb@vmm)")
    p.add_argument("--lib", default=None, help="libcmb_pluggable.so (default: cumembench_alloc's search)")
    p.add_argument("--record", default=None, help="write a PyTorch memory snapshot (pickle) here")
    p.add_argument("--report", default=None, help="write the run's figures as JSON here")
    p.add_argument("--print-stream", action="store_true", help="print the request stream and exit (no PyTorch)")
    a = p.parse_args(argv)
    bad = None
    if not 0 < a.util <= 1.2:
        bad = "--gpu-memory-utilization must be in (0, 1.2]"
    elif a.burstiness <= 0:
        bad = "--burstiness must be above 0"
    elif a.hidden % a.head_dim or (a.hidden // a.head_dim) % a.kv_heads:
        bad = "--hidden must be a multiple of --head-dim, and the heads a multiple of --kv-heads"
    elif a.lengths == "fixed" and a.prompt_len + a.output_len > a.max_model_len:
        bad = "--prompt-len + --output-len exceeds --max-model-len"
    elif a.record and a.allocator:
        bad = "--record takes PyTorch's snapshot: it cannot be combined with --allocator"
    if bad:
        print(f"serving_server: {bad}", file=sys.stderr)
        sys.exit(2)
    return a


def write_report(a, rep):
    if a.report:
        with open(a.report + ".tmp", "w") as f:
            json.dump(rep, f, indent=1, sort_keys=True)
        os.replace(a.report + ".tmp", a.report)


def life(torch, a, rep, meter):
    """Phases 1-5; raises on out of memory."""
    t0 = time.perf_counter()
    model = Model(torch, a)
    torch.cuda.synchronize()
    rep["weights"] = meter.allocated()
    meter.reset_peaks()
    eng = Engine(torch, a, model, meter, rep)
    eng.profile()
    rep["profile_peak"] = meter.peak_allocated() - rep["weights"]
    rep["non_torch"] = meter.non_torch()
    rep["graph_estimate"] = eng.graph_estimate()
    rep["phase"] = "kv"
    eng.allocate_kv(a.util)
    rep["phase"] = "capture"
    eng.capture()
    rep["non_torch_capture"] = meter.non_torch()  # the graphs' executables live outside the allocator
    rep["graph_pool"] = meter.reserved() - rep["weights"] - sum(c.numel() * c.element_size() for c in model.cache)
    rep["phase"] = "serve"
    serve(eng, make_requests(a))
    rep["phase"] = "done"
    rep["wall_s"] = time.perf_counter() - t0


def main(argv):
    a = parse(argv)
    if a.print_stream:
        for t0, p, o in make_requests(a):
            print(f"{t0:.9f} {p} {o}")
        return 0
    rep = {"util": a.util, "allocator": a.allocator or "native",
           "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "args": vars(a), "outcome": "started"}
    write_report(a, rep)  # kept if the process dies
    cmb = None
    if a.allocator:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
        import cumembench_alloc as cmb
        cmb.install_torch(a.allocator, path=a.lib, oom="raise")
    import torch
    meter = Meter(torch, cmb)
    free0, total = torch.cuda.mem_get_info()
    rep.update(total=total, free_at_start=free0, device=torch.cuda.get_device_name(), torch=torch.__version__,
               cuda_runtime=torch.version.cuda)
    if a.record:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=10**8)
    try:
        life(torch, a, rep, meter)
        rep["outcome"] = "completed"
    except torch.cuda.OutOfMemoryError as e:
        rep.update(outcome="oom", error=f"OutOfMemoryError: {str(e).splitlines()[0][:300]}",
                   error_full=str(e))  # PyTorch's figures of the moment: in use, allocated, reserved
    except (RuntimeError, ValueError) as e:
        msg = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
        oom = "out of memory" in msg.lower() or isinstance(e, ValueError)
        rep.update(outcome="oom" if oom else "error", error=f"{type(e).__name__}: {msg}")
    try:
        torch.cuda.synchronize()
        rep["peak_reserved"] = meter.peak_reserved()
        rep["peak_allocated"] = meter.peak_allocated()
    except RuntimeError as e:  # a sticky CUDA error after the failure
        rep["cuda_after"] = str(e).splitlines()[0][:200]
    if a.record:
        import pickle
        with open(a.record, "wb") as f:
            pickle.dump(torch.cuda.memory._snapshot(), f)
        torch.cuda.memory._record_memory_history(enabled=None)
    write_report(a, rep)
    print(f"serving_server: {rep['outcome']} at utilization {a.util:.3f} under {rep['allocator']}"
          f"{' (' + rep['conf'] + ')' if rep['conf'] else ''}: peak reserved {rep.get('peak_reserved', 'n/a')} B, "
          f"KV blocks {rep.get('kv_blocks', 'n/a')}, requests {rep.get('completed', 0)}/{a.requests}"
          f"{', ' + rep['error'] if rep.get('error') else ''}", flush=True)
    return 0 if rep["outcome"] == "completed" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
