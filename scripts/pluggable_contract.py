#!/usr/bin/env python3
"""pluggable_contract.py - one check of libcmb_pluggable's PyTorch contract on a
GPU, in its own process (an allocator is installed once per process); called by
scripts/gpu-pluggable-contract.sh, which gathers the JSON files into a summary.

    pluggable_contract.py CHECK POLICY --json OUT [--no-hooks]

CHECK is one of
  sidestream  a block used on a side stream B (a kernel on B sleeps, then reads
              it), freed on A, and a new block written on A at once: with
              Tensor.record_stream(B) the library must not hand the block out
              before B's work is done; without the hook (--no-hooks) the policies
              that reuse it at once corrupt what B reads (the program calls
              record_stream either way). Pass: B read only 1.0s.
  graph       a small MLP captured in a CUDA graph and replayed against eager
              runs (pass: the same results); the memory held before, during and
              after, once the graph is deleted.
  stats       the e2e program's transformer (scripts/record_torch_transformer.py)
              trained at four lengths; torch.cuda.memory_stats(), memory_allocated(),
              max_memory_allocated(), memory_reserved(), reset_peak_memory_stats()
              and empty_cache() against the library's own counters and the live
              tensors' bytes.
  oom         a batch-size search that doubles until torch.OutOfMemoryError
              (under a capacity), then bisects; a 16 TiB request.
  fraction    set_per_process_memory_fraction(0.05) refusing what it caps,
              then lifted.
  mempool     torch.cuda.MemPool over the policy's segments (torch_mem_pool):
              PyTorch's caching allocator in charge, the policy serving segments.
"""
import argparse
import gc
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import cumembench_alloc as cmb  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30


def sleep_cycles(torch, seconds):
    """Cycles of torch.cuda._sleep for about `seconds` on this GPU."""
    rate = torch.cuda.get_device_properties(0).clock_rate if hasattr(
        torch.cuda.get_device_properties(0), "clock_rate") else 1_500_000
    return int(seconds * rate * 1000)  # clock_rate is in kHz


def check_sidestream(torch, args, out):
    n = (256 * MiB) // 4
    a = torch.cuda.current_stream()
    b = torch.cuda.Stream()
    x = torch.full((n,), 1.0, device="cuda")
    xp = x.data_ptr()
    b.wait_stream(a)
    with torch.cuda.stream(b):
        torch.cuda._sleep(sleep_cycles(torch, 0.3))  # B is busy; its read of x comes late
        y = x.clone()
    x.record_stream(b)  # what a correct program does; without the hooks it reaches no one
    del x
    z = torch.full((n,), 2.0, device="cuda")  # on A, at once
    out["reused_while_pending"] = z.data_ptr() == xp
    torch.cuda.synchronize()
    bad = int((y != 1.0).sum().item())
    out.update(corrupted_elements=bad, elements=n, record_stream=not args.no_hooks)
    # after B's work, the block is free again: a later allocation may take it
    del y, z
    w = torch.empty((n,), device="cuda")
    torch.cuda.synchronize()
    out["reused_after"] = w.data_ptr() == xp
    out["ok"] = bad == 0
    out["stats"] = cmb.stats()


def mlp(torch, width=1024):
    nn = torch.nn
    return nn.Sequential(nn.Linear(512, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, 512)).cuda()


def clear_workspaces():
    import torch
    fn = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if fn is not None:
        fn()
    return fn is not None


def check_graph(torch, args, out):
    torch.manual_seed(0)
    model = mlp(torch)
    static_in = torch.randn(64, 512, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(side)
    # cuBLAS keeps a workspace per stream, allocated at its first GEMM and held
    # until cleared: the capture stream's lands in the graph's pool, and PyTorch
    # clears them around a capture for that reason (torch/_inductor/
    # cudagraph_trees.py, clear_cublas_manager). Cleared here before and after,
    # so the check measures the pool, not the workspaces' cache.
    clear_workspaces()
    before = cmb.stats()
    g = torch.cuda.CUDAGraph()
    with torch.no_grad():
        with torch.cuda.graph(g):
            static_out = model(static_in)
    captured = cmb.stats()
    worst = 0.0
    with torch.no_grad():
        for _ in range(10):
            static_in.copy_(torch.randn_like(static_in))
            g.replay()
            ref = model(static_in)
            worst = max(worst, float((static_out - ref).abs().max().item()))
    torch.cuda.synchronize()
    del g, static_out, ref
    gc.collect()
    torch.cuda.synchronize()
    kept = cmb.stats()  # the workspaces of the capture and default streams still held
    cleared = clear_workspaces()
    torch.cuda.synchronize()
    after = cmb.stats()
    out.update(allocated_after_del=kept["allocated_current"], workspaces_cleared=cleared)
    out.update(max_abs_diff=worst, replays=10,
               reserved_before=before["reserved_current"], reserved_captured=captured["reserved_current"],
               reserved_after_release=after["reserved_current"],
               allocated_before=before["allocated_current"], allocated_after=after["allocated_current"])
    # What the pool keeps after the graph is gone (a cuBLAS workspace made for the capture
    # stream stays live, as under PyTorch's own allocator) is reported, not judged.
    out["ok"] = worst < 1e-3
    out["stats"] = after


def live_tensor_bytes(modules, opt):
    total = 0
    for module in modules:
        for p in module.parameters():
            total += p.numel() * p.element_size()
            if p.grad is not None:
                total += p.grad.numel() * p.grad.element_size()
    for state in opt.state.values():
        for v in state.values():
            if hasattr(v, "is_cuda") and v.is_cuda:
                total += v.numel() * v.element_size()
    return total


def check_stats(torch, args, out):
    # the e2e program's transformer (scripts/e2e-torch.py), four lengths of its sweep
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from record_torch_transformer import build, train_step
    model, head, opt = build()
    for seq in (64, 200, 128, 512):
        train_step(model, head, opt, seq)
    torch.cuda.synchronize()
    s = cmb.stats()
    m = torch.cuda.memory_stats()
    rows = {
        "memory_stats()[allocated_bytes.all.current]": (m["allocated_bytes.all.current"], s["allocated_current"]),
        "memory_stats()[allocated_bytes.all.peak]": (m["allocated_bytes.all.peak"], s["allocated_peak"]),
        "memory_stats()[reserved_bytes.all.peak]": (m["reserved_bytes.all.peak"], s["reserved_peak"]),
        "memory_stats()[requested_bytes.all.current]": (m["requested_bytes.all.current"], s["requested_current"]),
        "memory_allocated()": (torch.cuda.memory_allocated(), s["allocated_current"]),
        "max_memory_allocated()": (torch.cuda.max_memory_allocated(), s["allocated_peak"]),
        "memory_reserved()": (torch.cuda.memory_reserved(), s["reserved_current"]),
        "max_memory_reserved()": (torch.cuda.max_memory_reserved(), s["reserved_peak"]),
    }
    live = live_tensor_bytes((model, head), opt)
    torch.cuda.reset_peak_memory_stats()
    after_reset = (torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated())
    del model, head, opt
    gc.collect()
    torch.cuda.synchronize()
    reserved_before_empty = torch.cuda.memory_reserved()
    torch.cuda.empty_cache()
    reserved_after_empty = torch.cuda.memory_reserved()
    out.update(rows={k: {"torch": v[0], "library": v[1]} for k, v in rows.items()},
               live_tensor_bytes=live, requested_current=s["requested_current"],
               peak_after_reset=after_reset[0], allocated_at_reset=after_reset[1],
               reserved_before_empty_cache=reserved_before_empty, reserved_after_empty_cache=reserved_after_empty)
    out["ok"] = (all(a == b for a, b in rows.values()) and s["requested_current"] >= live
                 and after_reset[0] == after_reset[1] and reserved_after_empty < reserved_before_empty)
    out["stats"] = cmb.stats()


def batch_fits(torch, model, bs):
    x = torch.randn(bs, 4096, device="cuda")
    loss = model(x).square().mean()
    loss.backward()
    model.zero_grad(set_to_none=True)
    del x, loss


def check_oom(torch, args, out):
    nn = torch.nn
    model = nn.Sequential(nn.Linear(4096, 8192), nn.ReLU(), nn.Linear(8192, 8192), nn.ReLU(),
                          nn.Linear(8192, 4096)).cuda()
    caught, bs, fits = [], 64, 0
    while bs <= (1 << 22):  # double until out of memory
        try:
            batch_fits(torch, model, bs)
            fits = bs
            bs *= 2
        except torch.OutOfMemoryError as e:
            caught.append({"batch": bs, "type": type(e).__name__, "message": str(e).splitlines()[0][:400]})
            break
    lo, hi = fits, bs
    while caught and hi - lo > max(1, lo // 16):  # bisect, as batch-size finders do
        mid = (lo + hi) // 2
        try:
            batch_fits(torch, model, mid)
            lo = mid
        except torch.OutOfMemoryError:
            hi = mid
    out.update(largest_batch=lo, oom_caught=caught)
    huge = {"caught": None}
    try:
        torch.empty(16 << 40, dtype=torch.uint8, device="cuda")
    except Exception as e:  # noqa: BLE001 - which one is the question
        huge = {"caught": type(e).__name__, "message": str(e).splitlines()[0][:400]}
    out["request_16TiB"] = huge
    usable = torch.ones(1024, device="cuda").sum().item() == 1024  # CUDA still usable
    out["cuda_usable_after"] = usable
    ok_oom = bool(caught) and all(c["type"] == "OutOfMemoryError" and "CUDA out of memory" in c["message"]
                                  for c in caught)
    out["ok"] = ok_oom and huge["caught"] == "OutOfMemoryError" and "out of memory" in huge.get(
        "message", "") and usable


def check_fraction(torch, args, out):
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(0.05)
    small = torch.empty(int(total * 0.02), dtype=torch.uint8, device="cuda")
    refused = None
    try:
        torch.empty(int(total * 0.06), dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError as e:
        refused = str(e).splitlines()[0][:400]
    seen = cmb.stats()["device_total"]
    torch.cuda.set_per_process_memory_fraction(1.0)
    try:  # a policy that sized itself at creation (bfc, arena) keeps that size
        big = torch.empty(int(total * 0.06), dtype=torch.uint8, device="cuda")
        lifted = big.numel() > 0
        del big
    except torch.OutOfMemoryError:
        lifted = False
    out.update(total=total, refused_over_fraction=refused, allowed_after_lifting=lifted, device_total_seen=seen)
    del small
    out["ok"] = refused is not None and "CUDA out of memory" in refused


def check_mempool(torch, args, out):
    pool = cmb.torch_mem_pool(args.policy)
    with torch.cuda.use_mem_pool(pool):
        x = torch.empty(300 * MiB, dtype=torch.uint8, device="cuda")
        y = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
    z = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")  # outside: PyTorch's own
    s = cmb.stats()
    m = torch.cuda.memory_stats()
    out.update(library_allocs=s["allocs"], library_requested=s["requested_current"],
               torch_allocated=m.get("allocated_bytes.all.current"), torch_reserved=m.get("reserved_bytes.all.current"))
    del x, y, z
    out["ok"] = s["allocs"] >= 2 and s["requested_current"] >= 303 * MiB and m["allocated_bytes.all.current"] > 0


CHECKS = {"sidestream": check_sidestream, "graph": check_graph, "stats": check_stats, "oom": check_oom,
          "fraction": check_fraction, "mempool": check_mempool}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("check", choices=sorted(CHECKS))
    ap.add_argument("policy")
    ap.add_argument("--json", required=True)
    ap.add_argument("--no-hooks", action="store_true", help="malloc and free only (the control run)")
    ap.add_argument("--capacity", type=int, default=None, help="bytes the policy may hold")
    args = ap.parse_args()
    import torch
    # no CUDA call before install_torch: torch.cuda's lazy init creates the
    # caching allocator, and PyTorch then refuses to swap it
    out = {"check": args.check, "policy": args.policy, "hooks": not args.no_hooks, "ok": False,
           "torch": torch.__version__}
    t0 = time.time()
    try:
        if args.check != "mempool":
            cmb.install_torch(args.policy, capacity=args.capacity, hooks=not args.no_hooks)
            out["hooks_wired"] = cmb.torch_hooks()
            out["oom_shim"] = bool(cmb._oom_shim())
        out["gpu"] = torch.cuda.get_device_name(0)
        CHECKS[args.check](torch, args, out)
    except Exception as e:  # noqa: BLE001 - the row says what failed
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:400] if str(e) else ''}"
        traceback.print_exc()
    out["seconds"] = round(time.time() - t0, 2)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1, default=str)
    print(json.dumps({k: out[k] for k in ("check", "policy", "hooks", "ok")}))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
