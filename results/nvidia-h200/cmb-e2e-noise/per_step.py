#!/usr/bin/env python3
"""per_step.py WORK PROGRAM [MODE] - step by step over a work directory of
scripts/e2e-steady.py runs: native expandable's median ms over its runs,
the standard deviation across runs (ms) and its ratio to the mean, and
MODE's (default cmb) median minus native's (ms), the library's upstream map calls
(handles) in the step, median over MODE's runs, and the excess per handle
(us); step 0 first, which the tables leave out; then the native runs' worst-step ratio
half against half for halves of 1 to k/2 runs (as e2e-steady.py table
gives it for k/2): how many runs a step-by-step comparison needs."""
import glob
import itertools
import json
import os
import statistics as st
import sys


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(2)


def load(work, prog, mode):
    return [json.load(open(f))["steps"] for f in sorted(glob.glob(os.path.join(work, f"{prog}-{mode}-*.json")))]


def main(work, prog, mode="cmb"):
    nat, cmb = load(work, prog, "native-expandable"), load(work, prog, mode)
    for name, runs, need in (("native-expandable", nat, 2), (mode, cmb, 1)):
        if len(runs) < need:
            fail(f"per_step.py: {len(runs)} runs of {prog}-{name}-*.json in {work} (need {need})")
    n = min(len(r) for r in nat + cmb)
    print(f"{prog}: {len(nat)} native expandable runs, {len(cmb)} {mode} runs ({work})")
    print(f"step shape        native median ms   sd ms   sd/mean   {mode} - native ms (medians)   {mode} handles mapped"
          "   excess us a handle")
    for i in range(n):
        v, c = [r[i]["ms"] for r in nat], [r[i]["ms"] for r in cmb]
        s = nat[0][i]
        d, h = st.median(c) - st.median(v), st.median(r[i].get("up_allocs", 0) for r in cmb)
        per = f"{1000 * d / h:10.1f}" if h else "         —"
        print(f"{i:4d} {s['shape'] + ('*' if not s['repeat'] else ''):12s} {st.median(v):14.2f} {st.stdev(v):7.2f}"
              f" {st.stdev(v) / st.mean(v):9.3f} {d:+14.2f} {h:20.0f} {per}")
    print("native expandable, worst step ratio of two disjoint halves of h runs each, median [min-max] over splits:")
    k = len(nat)
    for h in range(1, k // 2 + 1):
        w = []
        for a in itertools.combinations(range(k), h):
            rest = [j for j in range(k) if j not in a]
            for b in itertools.combinations(rest, h):
                if b < a:
                    continue
                med = lambda g, i: st.median(nat[j][i]["ms"] for j in g)  # noqa: E731
                w.append(max(max(med(a, i) / med(b, i), med(b, i) / med(a, i)) for i in range(1, n)))
        print(f"  h={h}: {st.median(w):.3f} [{min(w):.3f}-{max(w):.3f}] over {len(w)} splits")


if __name__ == "__main__":
    if not 3 <= len(sys.argv) <= 4:
        fail("usage: per_step.py WORK PROGRAM [MODE]")
    main(*sys.argv[1:4])
