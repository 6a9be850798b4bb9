#!/usr/bin/env python3
"""scale_gen.py - large inputs for the scale benchmark (make bench-scale),
grown from a recorded trace, never committed.

    tools/scale_gen.py trace    SRC.trace OUT.trace --events N [--jitter F] [--seed S]
    tools/scale_gen.py snapshot SRC.trace OUT.pickle --events N [--frames D] [--jitter F] [--seed S]

trace: the recorded trace's events repeated as training steps repeat, each
repetition a step: block ids renumbered per step, sizes jittered by up to
+-F (default 0.05, 512 B granules, at least 1 byte), times shifted by the
step's span; what a step left live is freed at its end, so the footprint of
step k is the recorded one's. Stops at N events (a step cut short frees what
it left live). The suite's format (traces/FORMAT.md).

snapshot: the same traffic as a PyTorch memory snapshot (what
torch.cuda.memory._dump_snapshot writes: a pickle of plain dicts and lists,
device_traces[0] the events) for traces/torch_snapshot_to_trace.py: each
allocation an `alloc` event, each free a `free_requested` and a
`free_completed` event, N events in all, every one with its own stack of D
frames (default 24) whose dicts and strings are unshared objects, so the
pickle writes each in full. Written event by event, each by its own
protocol-2 pickler (the generator never holds the list), so N = 2 million
costs the generator little memory; the converter reads such a pickle as it
streams (traces/torch_snapshot_to_trace.py).

Sizes and times in the output are deterministic for a seed. Exit status 2
with a one-line message on bad input.
"""

import argparse
import pickle
import random
import sys

HEADER = "# cumembench-trace 1"
GRANULE = 512


def fail(msg):
    print(f"scale_gen: {msg}", file=sys.stderr)
    sys.exit(2)


def read_step(path):
    """The recorded trace as (op, id, size, stream, t) tuples, t in ns (0 when '-')."""
    step = []
    try:
        with open(path) as f:
            if f.readline().rstrip("\n") != HEADER:
                fail(f"{path}: not a cumembench trace (first line is not '{HEADER}')")
            for lineno, line in enumerate(f, start=2):
                if line.startswith("#") or not line.strip():
                    continue
                p = line.split()
                if len(p) != 5 or p[0] not in "afs":
                    fail(f"{path}:{lineno}: expected 'op id size stream t_ns'")
                step.append((p[0], -1 if p[1] == "-" else int(p[1]), 0 if p[2] == "-" else int(p[2]),
                             int(p[3]), 0 if p[4] == "-" else int(p[4])))
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except ValueError:
        fail(f"{path}: a field is not a number")
    if not any(e[0] == "a" for e in step):
        fail(f"{path}: no allocation to repeat")
    return step


def steps(step, n_events, jitter, seed):
    """Yields (op, id, size, stream, t) of the grown traffic, n_events of them."""
    rng = random.Random(seed)
    span = max(e[4] for e in step) + 1000
    width = max(e[1] for e in step) + 1
    done, k = 0, 0
    while done < n_events:
        base_id, base_t, live = k * width, k * span, {}
        for op, i, size, stream, t in step:
            if done >= n_events - len(live):
                break  # room left only to free what this step holds
            if op == "a":
                j = size * (1.0 + rng.uniform(-jitter, jitter))
                size = max(1, int(j) // GRANULE * GRANULE or 1)
                live[base_id + i] = stream
                yield "a", base_id + i, size, stream, base_t + t
            elif op == "f":
                if base_id + i not in live:
                    continue
                del live[base_id + i]
                yield "f", base_id + i, 0, stream, base_t + t
            else:
                yield "s", -1, 0, stream, base_t + t
            done += 1
        t_end = base_t + span - 1
        for i, stream in live.items():
            yield "f", i, 0, stream, t_end
            done += 1
        k += 1


def write_trace(src, out, n, jitter, seed):
    with open(out, "w") as f:
        f.write(f"{HEADER}\n# grown by tools/scale_gen.py from {src}: {n} events, jitter {jitter}, seed {seed}\n")
        buf = []
        for op, i, size, stream, t in steps(read_step(src), n, jitter, seed):
            if op == "a":
                buf.append(f"a {i} {size} {stream} {t}\n")
            elif op == "f":
                buf.append(f"f {i} - {stream} {t}\n")
            else:
                buf.append(f"s - - {stream} {t}\n")
            if len(buf) >= 65536:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))


# --- snapshots -----------------------------------------------------------------------------

MODULES = ("attention", "mlp", "embedding", "layernorm", "optimizer", "loss", "data", "checkpoint")


def frames(rng, depth, k):
    """A stack of `depth` frames; every dict and string a new object (unshared)."""
    out = []
    for d in range(depth):
        mod = MODULES[(k + d) % len(MODULES)]
        out.append({"filename": "".join(["/opt/venv/lib/python3.11/site-packages/model/", mod, "/layer_",
                                          str(d), ".py"]),
                    "line": rng.randrange(1, 2000),
                    "name": "".join(["forward_", mod, "_", str(rng.randrange(1000))])})
    return out


def event(rng, depth, k, action, addr, size, stream, t_ns):
    return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t_ns // 1000,
            "frames": frames(rng, depth, k)}


def write_snapshot(src, out, n, depth, jitter, seed):
    """A protocol-2 pickle of the snapshot dict, its event list written one
    event at a time: a fresh pickler per event (its memo restarts, so an
    event refers to nothing of another), APPENDS every 1000 events."""
    rng = random.Random(seed + 1)
    allocs = {}  # id -> (addr, size)
    next_addr = 1 << 40
    head = pickle.dumps({"segments": [], "allocator_settings": {"expandable_segments": False}}, protocol=2)
    with open(out, "wb") as f:
        # the dict without its STOP, then the key and an empty list to append to
        f.write(head[:-1])
        f.write(pickle.dumps("device_traces", protocol=2)[2:-1])
        f.write(b"]")                       # EMPTY_LIST: device_traces
        f.write(b"]")                       # EMPTY_LIST: device 0's events
        f.write(b"(")                       # MARK
        in_batch, written, k = 0, 0, 0
        # each free is two snapshot events: grow n / 1.6 trace events (frees are ~half)
        for op, i, size, stream, t in steps(read_step(src), n, jitter, seed):
            if written >= n:
                break
            if op == "a":
                addr = next_addr
                next_addr += (size + GRANULE - 1) // GRANULE * GRANULE
                allocs[i] = (addr, size)
                evs = [("alloc", addr, size)]
            elif op == "f":
                addr, size = allocs.pop(i)
                evs = [("free_requested", addr, size), ("free_completed", addr, size)]
            else:
                continue
            for action, addr, size in evs:
                f.write(pickle.dumps(event(rng, depth, k, action, addr, size, stream, t), protocol=2)[2:-1])
                written += 1
                in_batch += 1
                k += 1
                if in_batch == 1000:
                    f.write(b"e(")          # APPENDS, MARK
                    in_batch = 0
        f.write(b"e")                       # APPENDS: the last batch
        f.write(b"a")                       # APPEND: device 0's events to device_traces
        f.write(b"s")                       # SETITEM: snapshot["device_traces"] = [...]
        f.write(b".")                       # STOP


def main(argv=None):
    ap = argparse.ArgumentParser(prog="scale_gen.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("trace", "snapshot"))
    ap.add_argument("src", metavar="SRC.trace")
    ap.add_argument("out")
    ap.add_argument("--events", type=int, required=True, help="events to write")
    ap.add_argument("--jitter", type=float, default=0.05, help="size jitter, a fraction (default 0.05)")
    ap.add_argument("--frames", type=int, default=24, help="snapshot: frames per event (default 24)")
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args(argv)
    if args.events < 1 or not 0 <= args.jitter < 1 or args.frames < 0:
        fail("--events must be positive, --jitter in [0, 1), --frames not negative")
    try:
        if args.what == "trace":
            write_trace(args.src, args.out, args.events, args.jitter, args.seed)
        else:
            write_snapshot(args.src, args.out, args.events, args.frames, args.jitter, args.seed)
    except OSError as e:
        fail(f"{args.out}: {e.strerror}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
