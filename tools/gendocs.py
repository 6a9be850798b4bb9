#!/usr/bin/env python3
"""gendocs.py - the generated blocks of README.md and docs/*.md.

A table or figure in the docs that comes from a run is written between two
markers that name the command producing it, run from the repository root:

    <!-- BEGIN generated: python3 tools/results-table.py results/... -->
    ...the command's standard output, verbatim...
    <!-- END generated -->

  gendocs.py [FILE ...]           rewrites every block with its command's output
  gendocs.py --check [FILE ...]   changes nothing; exit 1 naming each block whose
                                  text differs from what its command prints now
  gendocs.py --list [FILE ...]    the blocks and their commands

Without FILE: README.md and docs/*.md. A command runs under `sh -c` with a
timeout (CMB_GENDOCS_TIMEOUT, 300 s); `build/` at the start of a command word
stands for $CMB_BUILD_DIR when that is set (a test runs from another build
directory). A command that fails fails the run: a block is never emptied.
Exit status: 0, 1 (--check found stale blocks, or a command failed), 2 (bad
markers or usage).
"""
import argparse
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = re.compile(r"^<!-- BEGIN generated: (.+?) -->\s*$")
END = re.compile(r"^<!-- END generated -->\s*$")


class MarkerError(Exception):
    pass


def blocks(lines, path):
    """[(begin_index, end_index, command)]: the marker lines' indices."""
    out, open_at, cmd = [], None, None
    for i, line in enumerate(lines):
        m = BEGIN.match(line)
        if m:
            if open_at is not None:
                raise MarkerError(f"{path}:{i + 1}: a BEGIN inside the block opened at line {open_at + 1}")
            open_at, cmd = i, m.group(1).strip()
        elif END.match(line):
            if open_at is None:
                raise MarkerError(f"{path}:{i + 1}: END without BEGIN")
            out.append((open_at, i, cmd))
            open_at = None
        elif "generated:" in line and line.lstrip().startswith("<!--") and "BEGIN" in line:
            raise MarkerError(f"{path}:{i + 1}: malformed BEGIN marker")
    if open_at is not None:
        raise MarkerError(f"{path}:{open_at + 1}: block never ends (no <!-- END generated -->)")
    return out


def shell_command(cmd):
    build = os.environ.get("CMB_BUILD_DIR")
    if not build:
        return cmd
    return re.sub(r"(^|[\s;|&(])build/", lambda m: m.group(1) + build.rstrip("/") + "/", cmd)


def run(cmd):
    """The command's standard output as lines (newline-terminated)."""
    timeout = float(os.environ.get("CMB_GENDOCS_TIMEOUT", "300"))
    env = dict(os.environ, LC_ALL="C", TZ="UTC")
    try:
        p = subprocess.run(["sh", "-c", shell_command(cmd)], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout:g} s")
    if p.returncode != 0:
        tail = p.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise RuntimeError(f"exit {p.returncode}: {tail[0]}")
    text = p.stdout
    if text and not text.endswith("\n"):
        text += "\n"
    return text.splitlines(keepends=True)


def process(path, mode, cache):
    """(stale blocks, failures) of one file; rewrites it in 'write' mode."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    found = blocks(lines, path)
    stale, failures, out, last = [], [], [], 0
    rel = os.path.relpath(path, ROOT)
    for begin, end, cmd in found:
        if mode == "list":
            print(f"{rel}:{begin + 1}: {cmd}")
            continue
        out.extend(lines[last:begin + 1])
        old = lines[begin + 1:end]
        try:
            if cmd not in cache:
                cache[cmd] = run(cmd)
            new = cache[cmd]
        except RuntimeError as e:
            failures.append(f"{rel}:{begin + 1}: `{cmd}` failed: {e}")
            new = old
        if new != old and not any(f.startswith(f"{rel}:{begin + 1}:") for f in failures):
            stale.append(f"{rel}:{begin + 1}: stale block; regenerate with `make docs` (command: {cmd})")
        out.extend(new)
        last = end
    out.extend(lines[last:])
    if mode == "write" and out != lines:
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(out)
        os.replace(tmp, path)
    return stale, failures


def main():
    ap = argparse.ArgumentParser(description="Regenerate or check the generated blocks of the docs.")
    ap.add_argument("files", nargs="*")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true")
    group.add_argument("--list", action="store_true")
    args = ap.parse_args()
    files = args.files or [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    mode = "check" if args.check else "list" if args.list else "write"
    cache, stale, failures = {}, [], []
    for path in files:
        if not os.path.isfile(path):
            print(f"gendocs: no such file: {path}", file=sys.stderr)
            return 2
        try:
            s, f = process(path, mode, cache)
        except MarkerError as e:
            print(f"gendocs: {e}", file=sys.stderr)
            return 2
        stale += s
        failures += f
    for line in failures:
        print(f"gendocs: {line}", file=sys.stderr)
    if mode == "check":
        for line in stale:
            print(f"gendocs: {line}", file=sys.stderr)
        if not stale and not failures:
            print(f"gendocs: {len(cache)} generated blocks' commands ran; every block is current")
        return 1 if stale or failures else 0
    if mode == "write":
        print(f"gendocs: {len(cache)} commands, {len(stale)} blocks rewritten")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
