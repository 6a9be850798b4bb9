"""Each scenario's headline (scenarios/scenario.h: cmb_headline), read from
the scenario sources the binary was built from, so the report leads with
the same answer as the console line and the answer table: the status word
of a finished case, the counter "best for memory" compares (a leading '+':
higher is better), the requested peak behind it, the fragmentation ranked,
and the items of the line."""

import glob
import os
import re
from dataclasses import dataclass, field

SCENARIOS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scenarios")
_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|\b(NULL)\b|([{},])')


@dataclass
class Headline:
    ok_word: str = "ok"
    memory: str = "peak_reserved_bytes"
    memory_higher: bool = False
    requested: str = "peak_requested_bytes"   # "" when the scenario has none
    frag: str = "frag_ratio"
    items: list = field(default_factory=lambda: ["time {time}", "alloc p50 {alloc_p50_ns}",
                                                 "reserved {peak_reserved_bytes}", "frag {frag_ratio}",
                                                 "capacity {capacity_ratio}"])

    def counters(self):
        """Every counter the items name, in order."""
        return [n for item in self.items for n in re.findall(r"\{(\w+)\}", item) if n != "time"]


def _values(body):
    """The initializer's fields: strings (adjacent ones joined), None for
    NULL; the items list as a list."""
    out, stack, last_string = [], [], False
    cur = out
    for m in _TOKEN.finditer(re.sub(r"/\*.*?\*/", "", body, flags=re.S)):
        s, null, brace = m.groups()
        if brace == "{":
            stack.append(cur)
            cur.append([])
            cur = cur[-1]
            last_string = False
        elif brace == "}":
            cur = stack.pop()
            last_string = False
        elif brace == ",":
            last_string = False
        elif null:
            cur.append(None)
            last_string = False
        else:
            if last_string:
                cur[-1] += s
            else:
                cur.append(s)
            last_string = True
    return out


def _headline(fields):
    h = Headline()
    ok_word, memory, requested, frag = (fields + [None] * 4)[:4]
    items = next((f for f in fields if isinstance(f, list)), None)
    h.ok_word = ok_word or h.ok_word
    if memory:
        h.memory_higher = memory.startswith("+")
        h.memory = memory.lstrip("+")
    if requested:
        h.requested = "" if requested == "-" else requested
    h.frag = frag or h.frag
    if items is not None:
        h.items = [i for i in items if i is not None]
    return h


def parse(text):
    """{scenario name: Headline} of one source file."""
    heads = {m.group(1): _headline(_values(m.group(2)))
             for m in re.finditer(r"static const cmb_headline (\w+) = \{(.*?)\n\};", text, re.S)}
    out = {}
    for m in re.finditer(r"const cmb_scenario cmb_scenario_\w+ = \{(.*?)\n\};", text, re.S):
        name = re.search(r'\.name = "([^"]+)"', m.group(1))
        ref = re.search(r"\.headline = &(\w+)", m.group(1))
        if name:
            out[name.group(1)] = heads.get(ref.group(1)) if ref else None
    return out


_cache = {}


def all_headlines(directory=SCENARIOS):
    if directory not in _cache:
        out = {}
        for path in sorted(glob.glob(os.path.join(directory, "*.c"))):
            with open(path, encoding="utf-8") as f:
                out.update(parse(f.read()))
        _cache[directory] = out
    return _cache[directory]


def of(scenario):
    """The scenario's headline; the standard one where it declares none."""
    return all_headlines().get(scenario) or Headline()
