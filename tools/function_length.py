#!/usr/bin/env python3
"""function_length.py - functions longer than a limit, in C sources written
in the suite's style (a function's braces at the start of a line).

usage: function_length.py [--max N] FILE...   (default 80 lines)

A function's length is the lines from its opening brace to its closing one,
both included. Prints each longer function as FILE:LINE: NAME is N lines,
and exits 1 when there is one, 2 on bad usage."""
import argparse
import re
import sys

NAME = re.compile(r"([A-Za-z_]\w*)\s*\(")


def functions(path):
    """(name, first line, length) of every function in the file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    out, start, name = [], None, None
    for i, line in enumerate(lines):
        if start is None and line == "{":
            # the signature ends on this line's predecessor; its name is the
            # first identifier followed by '(' on the signature's first line
            j = i - 1
            while j > 0 and lines[j - 1].strip() and not lines[j - 1].rstrip().endswith((";", "}", "*/")) \
                    and lines[j].startswith((" ", "\t")):
                j -= 1
            m = NAME.search(lines[j])
            start, name = i, m.group(1) if m else "?"
        elif start is not None and line.startswith("}"):
            out.append((name, start + 1, i - start + 1))
            start = None
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=80)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    long_ones = 0
    for path in a.files:
        for name, line, n in functions(path):
            if n > a.max:
                print(f"{path}:{line}: {name} is {n} lines (at most {a.max})")
                long_ones += 1
    return 1 if long_ones else 0


if __name__ == "__main__":
    sys.exit(main())
