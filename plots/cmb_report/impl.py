"""What an allocator is: the original library (`real`), a policy imitating
one (`emulation`), or one of the suite's own policies (`suite`). Results
written since the `impl` column exists say so in every row; for older
results this reads the same fact from allocators/registry.c, the table the
binary itself was built from: an entry whose fifth field (`emulates`) names
a library is an emulation.

Why it matters: an emulation reproduces which memory the original holds,
not what a call costs. Its time is the policy's own bookkeeping, a lower
bound of the original's (issue 15's H100 table: PyTorch's allocator 340-737
ns per pair where its emulation took 49-78 ns), so it is never ranked
against real libraries."""

import os
import re

REGISTRY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "allocators", "registry.c")
REAL, EMULATION, SUITE = "real", "emulation", "suite"
IMPLS = (REAL, EMULATION, SUITE)
# The suite's own policies that imitate no library (the registry has no
# field for this; harness/cmb_allocator_impl() says the same for new runs).
SUITE_POLICIES = {"buddy", "cmb"}
TIME_LABEL = "policy bookkeeping (not the original's cost)"

_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([A-Za-z_&][A-Za-z_0-9]*)|([{},])')
_cache = {}


def _entries(text):
    """[(name, emulates or None)] from the `entries[]` table of registry.c."""
    start = text.find("cmb_allocator_entry entries[]")
    if start < 0:
        return []
    body = text[text.find("{", start) + 1:text.find("};", start)]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    out, fields, depth, last_string = [], [], 0, False
    for m in _TOKEN.finditer(body):
        s, ident, punct = m.groups()
        if punct == "{":
            depth, fields, last_string = depth + 1, [], False
        elif punct == "}":
            depth -= 1
            if fields:
                out.append((fields[0], fields[4] if len(fields) >= 5 else None))  # then the walk
        elif punct == ",":
            last_string = False
        elif s is not None:
            if last_string:  # adjacent literals concatenate, as in C
                fields[-1] = (fields[-1] or "") + s
            else:
                fields.append(s)
            last_string = True
        elif ident is not None:
            fields.append(None if ident == "NULL" else ident)
    return out


def registry(path=REGISTRY):
    """{name: emulates or None}; {} when the source is not beside the report."""
    if path not in _cache:
        try:
            with open(path, encoding="utf-8") as f:
                _cache[path] = dict(_entries(f.read()))
        except OSError:
            _cache[path] = {}
    return _cache[path]


def base_name(label):
    """The allocator's registry name in a label name[:options][@upstream]."""
    prefix = next((p for p in ("real:", "external:") if label.startswith(p)), "")
    return prefix + label[len(prefix):].split("@", 1)[0].split(":", 1)[0]


def impl_of(label, column=""):
    """`real`, `emulation` or `suite`: the CSV's impl column when it has one,
    else from the registry. Users' plug-ins and unknown names are taken as
    real: their time is their own."""
    if column in IMPLS:
        return column
    name = base_name(label)
    if name.startswith(("real:", "external:")):
        return REAL
    if name in SUITE_POLICIES:
        return SUITE
    return EMULATION if registry().get(name) else REAL
