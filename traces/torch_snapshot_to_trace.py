#!/usr/bin/env python3
"""Convert a PyTorch memory snapshot to a cumembench trace.

A snapshot is what torch.cuda.memory._dump_snapshot(path) writes after
torch.cuda.memory._record_memory_history(...): a pickle of plain dicts,
lists, strings and numbers. This reads it with the standard library only
(no PyTorch), refusing anything but those plain types, and writes the
suite's trace format (traces/FORMAT.md):

  - `alloc` events become `a` lines with the unrounded request size;
  - frees follow `free_completed` (when the caching allocator really
    reused the block); where a block's free was requested but never
    completed within the trace, the `free_requested` event is used;
  - `segment_*`, `snapshot` and other allocator-internal events are
    dropped (they are what the replayed allocator decides for itself);
  - blocks alive before the trace began (freed in the trace but never
    allocated in it, or still allocated in the snapshot's segments without
    an alloc in the trace) are allocated at the start.

usage: torch_snapshot_to_trace.py SNAPSHOT.pickle OUT.trace [--device N] [--force]
Says what it wrote; an existing OUT is kept unless --force is given.
Exit status 2 with a one-line message on bad input.
"""
import argparse
import io
import pickle
import re
import sys

TRACE_HEADER = "# cumembench-trace 1"


class PlainUnpickler(pickle.Unpickler):
    """Snapshots hold only plain containers: refuse every class reference."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not a plain snapshot")


def fail(msg):
    print(f"torch_snapshot_to_trace: {one_line(msg)}", file=sys.stderr)
    sys.exit(2)


def load_snapshot(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    try:
        snap = PlainUnpickler(io.BytesIO(data)).load()
    except Exception as e:  # truncated or hostile pickles raise many types
        fail(f"{path}: not a readable snapshot pickle ({type(e).__name__}: {e})")
    if not isinstance(snap, dict) or "device_traces" not in snap:
        fail(f"{path}: not a memory snapshot (no device_traces)")
    if not isinstance(snap["device_traces"], list):
        fail(f"{path}: device_traces is not a list")
    return snap


MAX_SIZE = 1 << 48       # the largest size a trace holds (traces/FORMAT.md)
INT64_MAX = (1 << 63) - 1


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_time(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) < 1e18  # epoch microseconds are about 1.8e15


def one_line(text):
    """Text for a comment line: control characters (a newline would start
    a line the reader refuses) written as escapes."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", str(text))


def check_event(path, i, e):
    if not isinstance(e, dict):
        fail(f"{path}: event {i} is not a dict")
    for key in ("action", "addr", "size", "stream"):
        if key not in e:
            fail(f"{path}: event {i} has no '{key}'")
    if not isinstance(e["action"], str):
        fail(f"{path}: event {i} has a bad action")
    if not is_int(e["addr"]) or not is_int(e["size"]) or not 0 <= e["size"] <= MAX_SIZE:
        fail(f"{path}: event {i} has a bad address or size")
    if not is_int(e["stream"]) or not 0 <= e["stream"] <= INT64_MAX:
        fail(f"{path}: event {i} has a bad stream {one_line(repr(e['stream']))[:40]}")
    if "time_us" in e and not is_time(e["time_us"]):
        fail(f"{path}: event {i} has a bad time {one_line(repr(e['time_us']))[:40]} (microseconds expected)")


def plan_frees(events):
    """Index of the event whose position carries each allocation's free:
    free_completed, else free_requested when no completion follows."""
    free_at = {}        # alloc event index -> free event index
    open_alloc = {}     # addr -> alloc event index
    requested = {}      # alloc event index -> free_requested event index
    for i, e in enumerate(events):
        a = e["action"]
        if a == "alloc":
            if e["addr"] in open_alloc:
                # the earlier block's completion was never recorded
                j = open_alloc[e["addr"]]
                if j in requested:
                    free_at[j] = requested[j]
            open_alloc[e["addr"]] = i
        elif a == "free_requested" and e["addr"] in open_alloc:
            requested[open_alloc[e["addr"]]] = i
        elif a == "free_completed" and e["addr"] in open_alloc:
            free_at[open_alloc.pop(e["addr"])] = i
    for addr, j in open_alloc.items():
        if j in requested:
            free_at[j] = requested[j]
    return free_at


def convert(snap, path, device):
    traces = snap["device_traces"]
    if device < 0 or device >= len(traces):
        fail(f"{path}: no device {device} (the snapshot has {len(traces)})")
    events = traces[device]
    if not isinstance(events, list):
        fail(f"{path}: device_traces[{device}] is not a list")
    for i, e in enumerate(events):
        check_event(path, i, e)
    free_at = plan_frees(events)
    free_event_to_alloc = {v: k for k, v in free_at.items()}
    t0 = min((e.get("time_us", 0) for e in events), default=0)

    lines = [TRACE_HEADER,
             one_line(f"# source: PyTorch memory snapshot {path.split('/')[-1]}, device {device}"),
             one_line(f"# allocator_settings: {snap.get('allocator_settings', {})}")]
    out = []
    next_id = 1
    id_of_alloc = {}
    live_addr = {}  # addr -> id for blocks allocated in the trace and not yet freed

    # Blocks alive before the trace: frees (completed or requested) of
    # addresses with no earlier alloc in the trace.
    pre_live = {}
    seen = set()
    for e in events:
        if e["action"] == "alloc":
            seen.add(e["addr"])
        elif e["action"] in ("free_completed", "free_requested") and e["addr"] not in seen:
            pre_live.setdefault(e["addr"], e)
    # Blocks still allocated in the snapshot's segments with no alloc in the trace.
    for seg in snap.get("segments", []) or []:
        if not isinstance(seg, dict):
            continue
        for b in seg.get("blocks", []) or []:
            if (isinstance(b, dict) and b.get("state") == "active_allocated"
                    and b.get("address") not in seen and b.get("address") not in pre_live):
                size = b.get("requested_size") or b.get("size")
                stream = seg.get("stream", 0)
                if not is_int(b.get("address")) or not is_int(size) or not 0 <= size <= MAX_SIZE \
                        or not is_int(stream) or not 0 <= stream <= INT64_MAX:
                    fail(f"{path}: a segment's block has a bad address, size or stream")
                pre_live[b["address"]] = {"addr": b["address"], "size": size, "stream": stream}
    for addr, e in pre_live.items():
        if e["size"] == 0:
            continue  # nothing to allocate, so nothing to free
        out.append(f"a {next_id} {e['size']} {e.get('stream', 0)} 0")
        live_addr[addr] = next_id
        next_id += 1
    pre_freed = set()

    last_t = 0
    for i, e in enumerate(events):
        a = e["action"]
        t = round((e.get("time_us", t0) - t0) * 1000)
        if t < last_t:
            fail(f"{path}: event {i}: time goes backwards ({e.get('time_us')} us after an earlier, later time)")
        last_t = t
        if a == "alloc":
            if e["size"] == 0:
                continue
            id_of_alloc[i] = next_id
            live_addr[e["addr"]] = next_id
            out.append(f"a {next_id} {e['size']} {e['stream']} {t}")
            next_id += 1
        elif i in free_event_to_alloc:
            j = free_event_to_alloc[i]
            if j in id_of_alloc:
                out.append(f"f {id_of_alloc[j]} - {e['stream']} {t}")
                live_addr.pop(e["addr"], None)
        elif a in ("free_completed", "free_requested") and e["addr"] in pre_live and e["addr"] not in pre_freed \
                and e["addr"] in live_addr:
            # the first free of a block that was alive before the trace
            if a == "free_completed" or not any(
                    x["action"] == "free_completed" and x["addr"] == e["addr"] for x in events[i + 1:]):
                out.append(f"f {live_addr[e['addr']]} - {e['stream']} {t}")
                pre_freed.add(e["addr"])
                live_addr.pop(e["addr"], None)
        elif a == "oom":
            out.append(f"# oom reported by PyTorch at t_ns={t}")
    n_alloc = sum(1 for l in out if l.startswith("a "))
    n_free = sum(1 for l in out if l.startswith("f "))
    lines.append(f"# events: {n_alloc} allocations, {n_free} frees, {len(pre_live)} alive at start")
    return "\n".join(lines + out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot")
    ap.add_argument("out")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--force", action="store_true", help="overwrite OUT where it exists")
    args = ap.parse_args()
    import os
    if os.path.lexists(args.out) and not args.force:
        fail(f"{args.out} exists: give --force to overwrite it")
    text = convert(load_snapshot(args.snapshot), args.snapshot, args.device)
    tmp = args.out + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.out)
    except OSError as e:
        fail(f"{args.out}: {e.strerror}")
    events = re.search(r"^# events: (.*)$", text, re.M)
    print(f"torch_snapshot_to_trace: wrote {args.out} ({events.group(1) if events else 'no events'}); "
          f"replay it with: cumembench --scenario replay --param trace={args.out}")


if __name__ == "__main__":
    main()
