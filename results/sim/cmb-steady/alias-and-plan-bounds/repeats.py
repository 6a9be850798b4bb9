#!/usr/bin/env python3
"""repeats.py TRACE... - how much of a recorded program repeats, request for request, what it did
before: what a plan matched by order and size could serve.

Each event is written as its kind and size for an allocation, and for a free as how many
allocations ago its block was allocated, so that two stretches of a trace read the same when
they ask for the same sizes in the same order and free them in the same pattern, whatever the
block ids; a second line reads allocations only (sizes in order, lifetimes ignored). Scanning from the start, a stretch of at least 32 events that equals an earlier
stretch (a window hash, extended event by event while it matches, never into itself) counts as
repeated. Prints the events, the share of them inside repeated stretches, the number of repeated
stretches of at least 500 events and the longest."""
import sys

W = 32


def events(path, frees=True):
    idx, seq, na = {}, [], 0
    for line in open(path):
        if line[0] not in 'af':
            continue
        e = line.split()
        if e[0] == 'a':
            idx[e[1]] = na
            na += 1
            seq.append(('a', int(e[2])))
        elif frees and e[1] in idx:
            seq.append(('f', na - idx.pop(e[1])))
    return seq


def repeats(seq):
    n = len(seq)
    first, runs, covered, i = {}, [], 0, 0
    while i + W <= n:
        key = tuple(seq[i:i + W])
        j = first.get(key)
        if j is None:
            first[key] = i
            i += 1
            continue
        L = W
        while i + L < n and j + L < i and seq[j + L] == seq[i + L]:
            L += 1
        runs.append(L)
        covered += L
        for k in range(i, min(i + L, n - W + 1)):
            first.setdefault(tuple(seq[k:k + W]), k)
        i += L
    return n, covered, runs


if __name__ == '__main__':
    for path in sys.argv[1:]:
        for frees in (True, False):
            try:
                n, covered, runs = repeats(events(path, frees))
            except (OSError, ValueError, IndexError) as e:
                print('repeats.py: %s: cannot read the trace: %s' % (path, e), file=sys.stderr)
                sys.exit(2)
            print('%-30s %-19s events %7d  in repeated stretches %.3f  stretches of >= 500 events %3d  longest %6d' % (
                path.split('/')[-1], 'allocs and frees' if frees else 'allocations only', n, covered / n,
                sum(1 for r in runs if r >= 500), max(runs, default=0)))
