#!/usr/bin/env python3
"""A property test of traces/torch_snapshot_to_trace.py.

For random snapshots, plain or hostile (fields holding newlines and control
characters, strings or floats or None where numbers belong, huge and
negative numbers, times out of order), the converter either writes a trace
whose every line the suite's format accepts, or stops with exit status 2
and one line naming the problem: never a Python traceback, never a line a
reader refuses (a snapshot field holding a newline wrote broken lines; a
non-numeric time raised a TypeError). Each snapshot is written three ways
(protocol 4, read whole; protocol 2 and each event by its own pickler, as
tools/scale_gen.py writes a large one, read as they stream): all three
convert alike. Pickles that run a command when loaded are refused in every
layout, the command never run. A few of the traces written are also
replayed by the suite's own reader (cumembench, sim mode).
"""
import os
import pickle
import random
import re
import subprocess
import sys
import tempfile

SRC = os.environ.get("CMB_SRC", os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("CMB_BIN")
CONVERTER = os.path.join(SRC, "traces", "torch_snapshot_to_trace.py")

EVENT = re.compile(r"^(a (\d+) (\d+)|f (\d+) -) (\d+) (\d+)$")
MAX_SIZE = 1 << 48
INT64_MAX = (1 << 63) - 1


def valid_trace(text):
    """The reason the text is not a valid trace, or None."""
    if not text.endswith("\n"):
        return "no final newline"
    lines = text[:-1].split("\n")
    if lines[0] != "# cumembench-trace 1":
        return "bad header"
    live, last_t = set(), -1
    for n, line in enumerate(lines[1:], 2):
        if len(line.encode()) >= 4096:
            return f"line {n} too long"
        if any(ord(c) < 0x20 and c != "\t" for c in line):
            return f"line {n}: control character"
        if not line or line.startswith("#"):
            continue
        m = EVENT.match(line)
        if not m:
            return f"line {n}: not an event: {line!r}"
        stream, t = int(m.group(5)), int(m.group(6))
        if stream > INT64_MAX or t > INT64_MAX or t < last_t:
            return f"line {n}: bad stream or time"
        last_t = t
        if m.group(2):
            ident, size = int(m.group(2)), int(m.group(3))
            if ident in live or not 1 <= size <= MAX_SIZE or ident >= (1 << 64) - 1:
                return f"line {n}: bad allocation"
            live.add(ident)
        else:
            ident = int(m.group(4))
            if ident not in live:
                return f"line {n}: free of a block not live"
            live.discard(ident)
    return None


def has_allocation(path):
    """A written trace with an allocation: replay refuses one without (nothing to measure)."""
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8", errors="replace") as f:
        return any((m := EVENT.match(line.rstrip("\n"))) and m.group(2) for line in f)


HOSTILE = ["x\ny", "a 1 2 0 0", "\r", "\x00", "", None, 1.5, -1, 1 << 70, float("nan"), float("inf"),
           [], {}, "12", True, "tab\there"]


def value(rng, good):
    return rng.choice(HOSTILE) if rng.random() < 0.08 else good()


def random_snapshot(rng):
    events, addrs, t = [], [], rng.randint(0, 10**6)
    for _ in range(rng.randint(0, 40)):
        t += rng.randint(0, 1000) if rng.random() > 0.05 else -rng.randint(1, 1000)
        if addrs and rng.random() < 0.45:
            addr = rng.choice(addrs)
            action = rng.choice(["free_requested", "free_completed", "free_completed"])
        else:
            addr = rng.randrange(1 << 20, 1 << 40, 512)
            addrs.append(addr)
            action = rng.choice(["alloc", "alloc", "alloc", "segment_alloc", "oom"])
        e = {"action": value(rng, lambda: action), "addr": value(rng, lambda: addr),
             "size": value(rng, lambda: rng.choice([0, 1, 512, 1 << 20, rng.randint(1, 1 << 30)])),
             "stream": value(rng, lambda: rng.choice([0, 0, 7, 140000000000000])),
             "time_us": value(rng, lambda: t)}
        if rng.random() < 0.05:
            del e[rng.choice(list(e))]
        events.append(e)
    segments = []
    if rng.random() < 0.3:
        segments.append({"stream": value(rng, lambda: 0), "blocks": [
            {"state": "active_allocated", "address": value(rng, lambda: rng.randrange(1 << 41, 1 << 42, 512)),
             "size": value(rng, lambda: 4096), "requested_size": value(rng, lambda: 1000)}
            for _ in range(rng.randint(0, 3))]})
    return {"device_traces": [events], "segments": segments,
            "allocator_settings": value(rng, lambda: {"expandable_segments": rng.random() < 0.5})}


def per_event_pickle(snap, batch=7):
    """The snapshot as tools/scale_gen.py writes a large one: protocol 2,
    each event by its own pickler, APPENDS every `batch` events; the
    converter reads these events in runs, as they stream."""
    rest = {k: v for k, v in snap.items() if k != "device_traces"}
    out = [pickle.dumps(rest, protocol=2)[:-1], pickle.dumps("device_traces", protocol=2)[2:-1], b"]"]
    for events in snap["device_traces"]:
        if not isinstance(events, list):   # not a device's events: as it is
            out.append(pickle.dumps(events, protocol=2)[2:-1] + b"a")
            continue
        out.append(b"](")
        for k, e in enumerate(events):
            out.append(pickle.dumps(e, protocol=2)[2:-1])
            if k % batch == batch - 1:
                out.append(b"e(")
        out.append(b"ea")
    return b"".join(out) + b"s."


LAYOUTS = {  # how a snapshot is written: protocol 4 is read whole, the others as they stream
    "protocol 4": lambda snap: pickle.dumps(snap, protocol=4),
    "protocol 2": lambda snap: pickle.dumps(snap, protocol=2),
    "per event": per_event_pickle,
}


def convert(snap, tmp, name="s.pickle", layout="protocol 4"):
    src = os.path.join(tmp, name)
    out = os.path.join(tmp, "out.trace")
    with open(src, "wb") as f:
        f.write(LAYOUTS[layout](snap))
    if os.path.exists(out):
        os.unlink(out)
    p = subprocess.run([sys.executable, CONVERTER, src, out], capture_output=True, text=True)
    text = open(out).read() if os.path.exists(out) else None
    return p, text, out


def check(snap, tmp, name="s.pickle"):
    """Why the conversion is wrong, or None; every layout must give the same."""
    p, text, out = convert(snap, tmp, name)
    for layout in ("protocol 2", "per event"):
        p2, text2, _ = convert(snap, tmp, name, layout)
        if (p2.returncode, p2.stderr, text2) != (p.returncode, p.stderr, text):
            return f"{layout} converts otherwise than protocol 4: {p2.stderr[-200:]!r} vs {p.stderr[-200:]!r}"
    if p.returncode == 0:
        why = valid_trace(text)
        if why:
            return f"wrote an invalid trace ({why})"
        return None
    if p.returncode != 2:
        return f"exit {p.returncode}: {p.stderr[-400:]}"
    if "Traceback" in p.stderr or p.stderr.count("\n") != 1 or not p.stderr.startswith("torch_snapshot_to_trace: "):
        return f"not one clear line: {p.stderr[-400:]!r}"
    if text is not None:
        return "wrote a trace although it failed"
    return None


class Shell:
    """A pickle that runs a command when loaded: the converter must refuse it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def hostile(tmp):
    """Class references (a command run when loaded) at the top, in the
    first, a middle and the last event's frames, in every layout: refused,
    nothing run."""
    bad = []
    marker = os.path.join(tmp, "ran")
    events = [{"action": "alloc", "addr": 4096 * (i + 1), "size": 512, "stream": 0, "time_us": i,
               "frames": [{"filename": "f.py", "line": i, "name": "g"}]} for i in range(40)]
    for where in ("top", 0, 20, 39):
        snap = {"device_traces": [[dict(e, frames=list(e["frames"])) for e in events]]}
        if where == "top":
            snap["allocator_settings"] = Shell(marker)
        else:
            snap["device_traces"][0][where]["frames"].append({"filename": Shell(marker)})
        for layout in LAYOUTS:
            p, text, _ = convert(snap, tmp, "s.pickle", layout)
            if p.returncode != 2 or "refusing to load" not in p.stderr or text is not None or \
                    os.path.exists(marker):
                bad.append(f"a command in a pickle ({where}, {layout}): exit {p.returncode}, {p.stderr[-200:]!r}, "
                           f"{'ran' if os.path.exists(marker) else 'not run'}")
    return bad


def main():
    rng = random.Random(int(os.environ.get("CMB_PROPERTY_SEED", "20261127")))
    n = int(os.environ.get("CMB_PROPERTY_RUNS", "300"))
    bad = []
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        # the two reported cases, then random ones
        fixed = [{"device_traces": [[{"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 1}]],
                  "allocator_settings": {"note": "two\nlines"}},
                 {"device_traces": [[{"action": "alloc", "addr": 4096, "size": 512, "stream": 0,
                                      "time_us": "soon"}]]}]
        # one pickler's memo past MAX_MEMO (the converter then reads the snapshot whole)
        fixed.append({"device_traces": [[{"action": "alloc", "addr": 4096 * (i + 1), "size": 512, "stream": 0,
                                          "time_us": i, "frames": [{"filename": f"f{i}.py", "line": i}]}
                                         for i in range(2000)]]})
        # two devices, events directly in device_traces
        two = [[{"action": "alloc", "addr": 4096 * (i + 1), "size": 512 * d + 512, "stream": d, "time_us": i}
                for i in range(30)] for d in range(2)]
        fixed += [{"device_traces": two}, {"device_traces": two[0]}]
        snaps = fixed + [random_snapshot(rng) for _ in range(n)]
        bad += hostile(tmp)
        for i, snap in enumerate(snaps):
            why = check(snap, tmp, "a\nb.pickle" if i % 50 == 7 else "s.pickle")
            if why:
                bad.append(f"snapshot {i}: {why}: {snap!r}"[:800])
            elif i >= len(fixed) and len(written) < 3 and has_allocation(os.path.join(tmp, "out.trace")):
                kept = os.path.join(tmp, f"kept{len(written)}.trace")
                os.replace(os.path.join(tmp, "out.trace"), kept)
                written.append(kept)
        if BIN:
            for path in written:
                out = os.path.join(tmp, "run-" + os.path.basename(path))
                p = subprocess.run([BIN, "--mode", "sim", "--quiet", "--scenario", "replay", "--allocator", "cuda",
                                    "--param", f"trace={path}", "--repetitions", "1", "--timeline", "off",
                                    "--out", out], capture_output=True, text=True)
                if p.returncode != 0 and "cannot open" not in p.stderr:
                    bad.append(f"{path}: the suite's reader refused it: {p.stdout[-300:]} {p.stderr[-300:]}")
    for b in bad[:10]:
        print(b)
    print(f"{len(snaps)} snapshots, {len(bad)} bad, {len(written)} replayed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
