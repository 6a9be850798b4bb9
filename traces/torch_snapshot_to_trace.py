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

A large snapshot is read as it streams (protocols 2 and 3, as
tools/scale_gen.py writes one): each event is kept as five numbers as soon
as it is read, its frames dropped, and the trace is written as it is made;
"reading a snapshot as it streams" below says how, and when a snapshot is
read whole instead (protocol 4 and later, as PyTorch writes them).

usage: torch_snapshot_to_trace.py SNAPSHOT.pickle OUT.trace [--device N] [--force]
Says what it wrote; an existing OUT is kept unless --force is given.
Exit status 2 with a one-line message on bad input.
"""
import argparse
import array
import gc
import io
import itertools
import operator
import pickle
import re
import shutil
import sys
import tempfile

TRACE_HEADER = "# cumembench-trace 1"


class PlainUnpickler(pickle.Unpickler):
    """Snapshots hold only plain containers: refuse every class reference."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not a plain snapshot")


def fail(msg):
    print(f"torch_snapshot_to_trace: {one_line(msg)}", file=sys.stderr)
    sys.exit(2)


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


# --- events, kept as columns ---------------------------------------------------------------

# The converter needs five fields of an event; a snapshot's event also holds
# its stack (24 frames of dicts and strings in a large one), 13 KiB of
# objects. Events are kept as columns of those fields as soon as they are
# read; an event whose fields are not plain (a bad type, a missing key) is
# kept whole, for check_event to name.

ACTIONS = ("alloc", "free_requested", "free_completed", "oom")
CODE = {a: i for i, a in enumerate(ACTIONS)}
OTHER, RAW = len(ACTIONS), 255    # any other action; an event kept whole
NO_TIME, INT_TIME, FLOAT_TIME = 0, 1, 2
_ABSENT = object()
_FIELDS = operator.itemgetter("action", "addr", "size", "stream")
_TIME = operator.itemgetter("time_us")


class Events:
    """A run of events as columns (action code, addr, size, stream, time)."""

    __slots__ = ("code", "addr", "size", "stream", "tkind", "tint", "tflt", "raw")

    def __init__(self):
        self.code = array.array("B")
        self.addr, self.size, self.stream = array.array("Q"), array.array("q"), array.array("q")
        self.tkind, self.tint, self.tflt = array.array("B"), array.array("q"), array.array("d")
        self.raw = {}    # index -> the event as read, where its fields are not plain

    def __len__(self):
        return len(self.code)

    def add(self, e):
        self.add_all((e,))

    def add_all(self, items):
        """Appends the items: an event's fields where they are plain, else the item whole."""
        if not self._add_plain(items):
            self._add_each(items)

    def _add_plain(self, items):
        """The fast path, a column at a time: every item a dict with plain
        fields and an int time (False, nothing added, where one is not)."""
        try:
            if set(map(type, items)) - {dict}:
                return False
            a, ad, sz, st = zip(*map(_FIELDS, items)) if items else ((),) * 4
            t = tuple(map(_TIME, items))
        except KeyError:
            return False
        if set(map(type, a)) - {str} or set(map(type, ad + sz + st + t)) - {int}:
            return False
        if items and not (min(ad) >= 0 and max(ad) < 1 << 64 and min(sz) >= 0 and max(sz) <= MAX_SIZE and
                          min(st) >= 0 and max(st) <= INT64_MAX and min(t) > -10**18 and max(t) < 10**18):
            return False
        n = len(a)
        self.code.extend(map(CODE.get, a, itertools.repeat(OTHER, n)))
        self.addr.extend(ad)
        self.size.extend(sz)
        self.stream.extend(st)
        self.tkind.extend(itertools.repeat(INT_TIME, n))
        self.tint.extend(t)
        self.tflt.extend(itertools.repeat(0.0, n))
        return True

    def _add_each(self, items):
        code, addr, size, stream, tkind, tint, tflt = [], [], [], [], [], [], []
        raw, base, code_of = self.raw, len(self.code), CODE.get
        for e in items:
            if type(e) is dict:
                a, ad, sz, st, t = e.get("action"), e.get("addr"), e.get("size"), e.get("stream"), \
                    e.get("time_us", _ABSENT)
                tk = NO_TIME if t is _ABSENT else INT_TIME if type(t) is int and -10**18 < t < 10**18 else \
                    FLOAT_TIME if type(t) is float and abs(t) < 1e18 else None
                if type(a) is str and type(ad) is int and type(sz) is int and type(st) is int and \
                        tk is not None and 0 <= ad < 1 << 64 and 0 <= sz <= MAX_SIZE and 0 <= st <= INT64_MAX:
                    code.append(code_of(a, OTHER))
                    addr.append(ad)
                    size.append(sz)
                    stream.append(st)
                    tkind.append(tk)
                    tint.append(t if tk == INT_TIME else 0)
                    tflt.append(t if tk == FLOAT_TIME else 0.0)
                    continue
            raw[base + len(code)] = e
            code.append(RAW)
            for col in (addr, size, stream, tkind, tint):
                col.append(0)
            tflt.append(0.0)
        for mine, new in zip(self.columns(), (code, addr, size, stream, tkind, tint, tflt)):
            mine.extend(new)

    def extend(self, other):
        n = len(self.code)
        for mine, theirs in zip(self.columns(), other.columns()):
            mine.extend(theirs)
        self.raw.update((n + i, e) for i, e in other.raw.items())

    def columns(self):
        return self.code, self.addr, self.size, self.stream, self.tkind, self.tint, self.tflt

    def items(self):
        """The events as dicts (frames dropped): where a run stands for them
        outside a device's events."""
        for i in range(len(self.code)):
            if self.code[i] == RAW:
                yield self.raw[i]
                continue
            e = {"action": ACTIONS[self.code[i]] if self.code[i] < OTHER else "other",
                 "addr": self.addr[i], "size": self.size[i], "stream": self.stream[i]}
            if self.tkind[i] != NO_TIME:
                e["time_us"] = self.tint[i] if self.tkind[i] == INT_TIME else self.tflt[i]
            yield e

    def __repr__(self):
        return repr(list(self.items()))


def as_events(items):
    """A device's events (a list of dicts and Events runs) as one Events."""
    out, loose = Events(), []
    for x in items:
        if type(x) is Events:
            out.add_all(loose)
            loose.clear()
            out.extend(x)
        else:
            loose.append(x)
    out.add_all(loose)
    return out


# --- reading a snapshot as it streams ------------------------------------------------------

# The standard library's pure-Python unpickler (the reference
# implementation, pickle._Unpickler) reads the snapshot's outer structure,
# opcode by opcode, refusing every class reference as PlainUnpickler does.
# Inside a device's event list, where events start, runs of whole events
# are handed to the C unpickler (PlainUnpickler) a few MiB at a time and
# kept as columns at once, so no event's frames outlive its run. A run ends
# before a later start of an event that looks like the first (its first
# bytes), where the bytes before it close a dict; the C unpickler then
# decides: the run is taken only if it reads to exactly a list of event
# dicts. It starts from the memo as it stands and the memo is taken back
# from it, so the reading is exact. The memo is what a pickle may refer
# back to, so a reader must keep it: where it grows past MAX_MEMO (a
# pickle written by one pickler for the whole snapshot, as PyTorch's
# protocol 4 and later are, memoizes every event and frame) the snapshot
# is read whole instead, as it is from the start at protocol 4 and later.

RUN_BYTES = 4 << 20      # at most this much pickle per run handed to the C unpickler
LOOK_BYTES = 256 << 10   # the first look for a run
SIG_BYTES = 16           # the start of an event, as the first event of a run starts
MAX_FAILED_RUNS = 16     # runs in a row that did not read before runs are given up
MAX_MEMO = 4096          # a larger memo: the snapshot is read whole


class ReadWhole(Exception):
    """The snapshot is better read whole (its memo keeps everything anyway)."""


def run_end(win):
    """Where the run of events starting at win[0] ends: the start of a
    later event like the first, after which no event follows a dict's end
    in the window; 0 where there is none."""
    data, n = win.obj, len(win)   # a view of the start of a bytearray
    sig, end, k = bytes(win[:SIG_BYTES]), 0, SIG_BYTES
    while len(sig) == SIG_BYTES:
        j = data.find(sig, k, n)
        if j < 0 or data[j - 1] != 0x75:    # 'u': a dict's SETITEMS before the next event
            break
        end, k = j, j + SIG_BYTES
    return end


def _is_devices_key(x):
    return type(x) is str and x == "device_traces"


class StreamingUnpickler(pickle._Unpickler):
    """Reads a snapshot with its events' frames dropped as it goes."""

    def __init__(self, file):
        super().__init__(file)
        self._f = file
        self._failed = 0
        self._buf = memoryview(bytearray(RUN_BYTES))   # the window a run is looked for in

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not a plain snapshot")

    def load(self):
        # pickle._Unpickler.load, with a look at each dict that starts inside a device's events
        self._unframer = pickle._Unframer(self._file_read, self._file_readline)
        self.read = self._unframer.read
        self.readinto = self._unframer.readinto
        self.readline = self._unframer.readline
        self.metastack = []
        self.stack = []
        self.append = self.stack.append
        self.proto = 0
        read, dispatch = self.read, self.dispatch
        try:
            while True:
                key = read(1)
                if not key:
                    raise EOFError
                if key == b"}" and self.metastack and self._failed < MAX_FAILED_RUNS and \
                        self._unframer.current_frame is None and self._in_events() and self._run():
                    continue
                dispatch[key[0]](self)
        except pickle._Stop as stop:
            return stop.value

    def _in_events(self):
        """The list being filled is a device's events, device_traces[i]: on
        the stack below its mark, the key, the list of devices and this one;
        or this one among the devices of a batch marked inside that list."""
        below = self.metastack[-1]
        if not below or type(below[-1]) is not list:
            return False
        if len(below) >= 3 and type(below[-2]) is list and _is_devices_key(below[-3]):
            return True
        outer = self.metastack[-2] if len(self.metastack) > 1 else ()
        return len(outer) >= 2 and type(outer[-1]) is list and _is_devices_key(outer[-2]) and \
            all(type(x) is list for x in below)

    def _run(self):
        """Reads a run of events from here (its '}' just read) with the C
        unpickler; False (the file where it was) where there is none."""
        if len(self.memo) > MAX_MEMO:
            raise ReadWhole()
        f, buf = self._f, self._buf
        pos = f.tell() - 1
        f.seek(pos)
        got = f.readinto(buf[:LOOK_BYTES])   # most often the last event of a list: no run, a short look
        win = buf[:got]
        end = run_end(win)
        if end and got == LOOK_BYTES and win.obj.find(win[:SIG_BYTES], end + SIG_BYTES, got) < 0:
            got += f.readinto(buf[LOOK_BYTES:])
            win = buf[:got]
            end = run_end(win)
        run = self._read_run(buf[:end]) if end else None
        if run is None:
            self._failed += end > 0
            f.seek(pos + 1)
            return False
        self._failed = 0
        self.append(run)
        f.seek(pos + end)
        return True

    def _read_run(self, data):
        # BufferedReader: the C unpickler prefetches through its peek (a bare BytesIO
        # is read opcode by opcode, two to three times slower)
        u = PlainUnpickler(io.BufferedReader(io.BytesIO(b"".join((b"\x80\x02N(", data, b"l\x86."))), 1 << 20))
        u.memo = self.memo
        try:
            got = u.load()
        except Exception:  # the run is not whole events: read them one by one
            return None
        if type(got) is not tuple or len(got) != 2 or got[0] is not None or type(got[1]) is not list or \
                not all(type(e) is dict and "action" in e for e in got[1]):
            return None
        run = Events()
        run.add_all(got[1])
        self.memo = u.memo.copy()
        return run


def load_snapshot(path):
    try:
        with open(path, "rb") as f:
            streaming = f.read(2) in (b"\x80\x02", b"\x80\x03")   # protocol 4 and later: read whole
            f.seek(0)
            gc.disable()   # millions of containers, no cycles: the collector would only rescan them
            try:
                snap = (StreamingUnpickler(f) if streaming else PlainUnpickler(f)).load()
            except ReadWhole:
                f.seek(0)
                snap = PlainUnpickler(f).load()
            gc.enable()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except Exception as e:  # truncated or hostile pickles raise many types
        fail(f"{path}: not a readable snapshot pickle ({type(e).__name__}: {e})")
    if not isinstance(snap, dict) or "device_traces" not in snap:
        fail(f"{path}: not a memory snapshot (no device_traces)")
    if not isinstance(snap["device_traces"], list):
        fail(f"{path}: device_traces is not a list")
    return snap


# --- the trace -----------------------------------------------------------------------------

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


def fields(path, ev):
    """The columns as lists (action codes, addr, size, stream, time or None),
    every event checked; events kept whole are patched in."""
    for i in sorted(ev.raw):
        check_event(path, i, ev.raw[i])
    code, addr, size, stream = bytearray(ev.code), ev.addr.tolist(), ev.size.tolist(), ev.stream.tolist()
    time = [t if k == INT_TIME else f if k == FLOAT_TIME else None
            for k, t, f in zip(ev.tkind, ev.tint, ev.tflt)]
    for i, e in ev.raw.items():
        code[i] = CODE.get(e["action"], OTHER)
        addr[i], size[i], stream[i], time[i] = e["addr"], e["size"], e["stream"], e.get("time_us")
    return code, addr, size, stream, time


A_ALLOC, A_REQ, A_DONE, A_OOM = (CODE[a] for a in ACTIONS)


def plan_frees(code, addr):
    """Index of the event whose position carries each allocation's free:
    free_completed, else free_requested when no completion follows
    (free_at[alloc index], -1 where none)."""
    free_at = array.array("q", [-1]) * len(code)
    open_alloc = {}     # addr -> alloc event index
    requested = {}      # alloc event index -> free_requested event index
    for i, a in enumerate(code):
        if a == A_ALLOC:
            j = open_alloc.get(addr[i])
            if j is not None and j in requested:
                # the earlier block's completion was never recorded
                free_at[j] = requested.pop(j)
            open_alloc[addr[i]] = i
        elif a == A_REQ and addr[i] in open_alloc:
            requested[open_alloc[addr[i]]] = i
        elif a == A_DONE and addr[i] in open_alloc:
            j = open_alloc.pop(addr[i])
            free_at[j] = i
            requested.pop(j, None)
    for j in open_alloc.values():
        if j in requested:
            free_at[j] = requested[j]
    return free_at


def alive_at_start(path, snap, code, addr, size, stream):
    """Blocks alive before the trace: addr -> (size, stream), in the order
    the trace first meets them."""
    pre_live = {}
    seen = set()
    for i, a in enumerate(code):
        if a == A_ALLOC:
            seen.add(addr[i])
        elif (a == A_REQ or a == A_DONE) and addr[i] not in seen and addr[i] not in pre_live:
            pre_live[addr[i]] = (size[i], stream[i])
    # Blocks still allocated in the snapshot's segments with no alloc in the trace.
    for seg in snap.get("segments", []) or []:
        if not isinstance(seg, dict):
            continue
        for b in seg.get("blocks", []) or []:
            if (isinstance(b, dict) and b.get("state") == "active_allocated"
                    and b.get("address") not in seen and b.get("address") not in pre_live):
                sz = b.get("requested_size") or b.get("size")
                st = seg.get("stream", 0)
                if not is_int(b.get("address")) or not is_int(sz) or not 0 <= sz <= MAX_SIZE \
                        or not is_int(st) or not 0 <= st <= INT64_MAX:
                    fail(f"{path}: a segment's block has a bad address, size or stream")
                pre_live[b["address"]] = (sz, st)
    return pre_live


class Trace:
    """A converted trace: its header, and its events in a temporary file."""

    def __init__(self, header, body):
        self.header, self.body = header, body

    def write_to(self, out):
        out.write(self.header)
        self.body.seek(0)
        shutil.copyfileobj(self.body, out, 1 << 20)
        self.body.close()


def convert(snap, path, device):
    """The trace of device `device` (a Trace); every bad input stops here."""
    traces = snap["device_traces"]
    if device < 0 or device >= len(traces):
        fail(f"{path}: no device {device} (the snapshot has {len(traces)})")
    if not isinstance(traces[device], list):
        fail(f"{path}: device_traces[{device}] is not a list")
    ev = as_events(traces[device])
    traces[device] = None
    code, addr, size, stream, time = fields(path, ev)
    del ev
    free_at = plan_frees(code, addr)
    free_event_to_alloc = array.array("q", [-1]) * len(code)
    for j, i in enumerate(free_at):
        if i >= 0:
            free_event_to_alloc[i] = j
    del free_at
    t0 = min((t for t in time if t is not None), default=0)
    pre_live = alive_at_start(path, snap, code, addr, size, stream)
    last_done = {}   # a block alive at start: the last free_completed of it
    for i, a in enumerate(code):
        if a == A_DONE and addr[i] in pre_live:
            last_done[addr[i]] = i

    body = tempfile.TemporaryFile("w+")
    lines, n_alloc, n_free = [], 0, 0
    next_id = 1
    id_of_alloc = {}
    live_addr = {}  # addr -> id for blocks allocated and not yet freed
    for a, (sz, st) in pre_live.items():
        if sz == 0:
            continue  # nothing to allocate, so nothing to free
        lines.append(f"a {next_id} {sz} {st} 0")
        live_addr[a] = next_id
        next_id += 1
    n_alloc = len(lines)
    pre_freed = set()

    last_t = 0
    for i, a in enumerate(code):
        t = round(((t0 if time[i] is None else time[i]) - t0) * 1000)
        if t < last_t:
            fail(f"{path}: event {i}: time goes backwards ({time[i]} us after an earlier, later time)")
        last_t = t
        if a == A_ALLOC:
            if size[i] == 0:
                continue
            id_of_alloc[i] = next_id
            live_addr[addr[i]] = next_id
            lines.append(f"a {next_id} {size[i]} {stream[i]} {t}")
            n_alloc += 1
            next_id += 1
        elif free_event_to_alloc[i] >= 0:
            ident = id_of_alloc.pop(free_event_to_alloc[i], None)
            if ident is not None:
                lines.append(f"f {ident} - {stream[i]} {t}")
                n_free += 1
                live_addr.pop(addr[i], None)
        elif (a == A_DONE or a == A_REQ) and addr[i] in pre_live and addr[i] not in pre_freed \
                and addr[i] in live_addr:
            # the first free of a block that was alive before the trace
            if a == A_DONE or last_done.get(addr[i], -1) < i:
                lines.append(f"f {live_addr[addr[i]]} - {stream[i]} {t}")
                n_free += 1
                pre_freed.add(addr[i])
                live_addr.pop(addr[i], None)
        elif a == A_OOM:
            lines.append(f"# oom reported by PyTorch at t_ns={t}")
        if len(lines) >= 65536:
            body.write("\n".join(lines) + "\n")
            lines.clear()
    body.write("".join(line + "\n" for line in lines))

    header = [TRACE_HEADER,
              one_line(f"# source: PyTorch memory snapshot {path.split('/')[-1]}, device {device}"),
              one_line(f"# allocator_settings: {snap.get('allocator_settings', {})}"),
              f"# events: {n_alloc} allocations, {n_free} frees, {len(pre_live)} alive at start"]
    return Trace("\n".join(header) + "\n", body)


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
    trace = convert(load_snapshot(args.snapshot), args.snapshot, args.device)
    tmp = args.out + ".tmp"
    try:
        with open(tmp, "w") as f:
            trace.write_to(f)
        os.replace(tmp, args.out)
    except OSError as e:
        fail(f"{args.out}: {e.strerror}")
    events = re.search(r"^# events: (.*)$", trace.header, re.M)
    print(f"torch_snapshot_to_trace: wrote {args.out} ({events.group(1) if events else 'no events'}); "
          f"replay it with: cumembench --scenario replay --param trace={args.out}")


if __name__ == "__main__":
    main()
