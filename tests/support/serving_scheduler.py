#!/usr/bin/env python3
"""scripts/serving_server.py's scheduler without PyTorch, for tests/test_serving.c:
the server's serve() and schedule() over its request stream, with the model
step replaced by what it decides (graph replay or eager, who samples).

usage: serving_scheduler.py SRC KV_BLOCKS [server args...]
prints: preemptions steps graph_steps eager_steps completed peak_blocks
KV_BLOCKS is the scenario's kv_blocks: the server keeps one more (block 0
takes the padding of graph replays)."""
import os
import sys
import types

src, blocks, rest = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
sys.path.insert(0, os.path.join(src, "scripts"))
import serving_server as S  # noqa: E402

a = S.parse(rest)
torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None))
eng = types.SimpleNamespace(t=torch, a=a, rep={"kv_blocks": blocks + 1},
                            meter=types.SimpleNamespace(non_torch=lambda: 0),
                            graphs={s: None for s in S.CAPTURE_SIZES if s <= min(a.graph_max, a.max_seqs)})
peak = [0]


def decide(eng, st, sched):
    rows = [r for r in st["running"] if sched.get(id(r))]
    dec = [r for r in rows if sched[id(r)] == 1 and r["computed"] + 1 == r["prompt"] + r["gen"]]
    peak[0] = max(peak[0], sum(len(r["blocks"]) for r in st["running"]))
    if len(dec) == len(rows) and eng.graphs and len(dec) <= max(eng.graphs):
        st["graph_steps"] += 1
        return dec, None
    st["eager_steps"] += 1
    return [r for r in rows if r["computed"] + sched[id(r)] == r["prompt"] + r["gen"]], None


S.run_step = decide
S.serve(eng, S.make_requests(a))
r = eng.rep
print(r["preemptions"], r["steps"], r["graph_steps"], r["eager_steps"], r["completed"], peak[0])
