#!/usr/bin/env python3
"""check_layers.py - the rooms of the source tree may only reach down
(docs/architecture.md): reads every `#include "..."` of the C, C++ and CUDA
sources and the build files of pluggable/ and real/, and prints one line per
include that reaches a room it must not:

  common/      nothing but common/
  allocators/  allocators/, traces/ and common/ (no harness/, scenarios/, real/;
               traces/ for cmb:layout, which reads a recorded run)
  traces/      traces/ and common/
  kernels/     kernels/ and common/
  scenarios/   anything but harness/ (the harness implements scenario.h,
               so an include of harness/ would close a cycle)
  pluggable/   anything but harness/ and scenarios/, in sources and CMake
  real/        allocators/ and common/ only, in sources and CMake

  check_layers.py [ROOT]     exit 0 when clean, 1 on a violation, 2 on bad use
"""
import os
import re
import sys

ALLOWED = {
    "common": {"common"},
    "allocators": {"allocators", "traces", "common"},
    "traces": {"traces", "common"},
    "kernels": {"kernels", "common"},
    "real": {"real", "allocators", "common"},
}
FORBIDDEN = {
    "scenarios": {"harness"},
    "pluggable": {"harness", "scenarios"},
}
SOURCES = (".c", ".h", ".cc", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
CMAKE_SOURCE = re.compile(r"\$\{CMAKE_SOURCE_DIR\}/([A-Za-z_]+)/")


def room_of(root, path):
    rel = os.path.relpath(path, root)
    return rel.split(os.sep)[0] if os.sep in rel else ""


def target_room(root, src, inc):
    """The room an include resolves to: relative to the including file,
    else to the root (the build's include directory)."""
    for base in (os.path.dirname(src), root):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.exists(cand):
            return room_of(root, cand)
    return None  # a system or generated header


def allowed(room, target):
    if room in ALLOWED:
        return target in ALLOWED[room]
    return target not in FORBIDDEN.get(room, set())


def check(root):
    bad = []
    rooms = set(ALLOWED) | set(FORBIDDEN)
    for room in sorted(rooms):
        for dirpath, _, files in os.walk(os.path.join(root, room)):
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                if name.endswith(SOURCES):
                    with open(path, encoding="utf-8", errors="replace") as f:
                        text = f.read()
                    for inc in INCLUDE.findall(text):
                        t = target_room(root, path, inc)
                        if t and t != room and not allowed(room, t):
                            bad.append(f"{rel}: includes \"{inc}\" ({room}/ may not reach {t}/)")
                elif name == "CMakeLists.txt" or name.endswith(".cmake"):
                    with open(path, encoding="utf-8", errors="replace") as f:
                        text = f.read()
                    for t in sorted(set(CMAKE_SOURCE.findall(text))):
                        if t in ("harness", "scenarios") and not allowed(room, t):
                            bad.append(f"{rel}: compiles {t}/ sources ({room}/ may not reach {t}/)")
    return bad


def main(argv):
    if len(argv) > 2:
        print("usage: check_layers.py [ROOT]", file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    if not os.path.isdir(os.path.join(root, "allocators")):
        print(f"check_layers: {root} is not the source tree (no allocators/)", file=sys.stderr)
        return 2
    bad = check(root)
    for line in bad:
        print(f"check_layers: {line}")
    if not bad:
        print("check_layers: every include reaches only down")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
