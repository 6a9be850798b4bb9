#!/usr/bin/env python3
"""alias_model.py [--layout bestfit|plan] [--handle-pages K] [--pick mru|lru|belady] [--slack S] [--passes N] TRACE...

What physical memory and driver calls a design that keeps moved handles mapped where they were
(aliases) would make on a trace replayed for N passes. A model, not an allocator: no streams,
no stream order, no out-of-memory.

Placement is ../placement-bound/bound.py's: a plain best fit over two unbounded virtual ranges
(below 1 MiB and from 1 MiB), requests rounded to 512 B and packed byte to byte, every free
coalesced at once; it does not depend on what is mapped, so every pass after the first places
every block where the last did. With --layout plan, every block lies instead where
plan_bound.py's best layout of the whole pass puts it (one range; needs numpy). The address space is cut into slots of K 2 MiB pages, one
physical handle of K pages per slot mapped there. A slot is in use while a live block touches
it; a handle is busy while a slot it is mapped at is in use. Once mapped, a slot keeps its
handle (an alias: the same handle may be mapped at many slots) until the slot is needed while
its handle is busy through another slot: then the slot is unmapped and mapped to a free
handle (a remap). A slot never mapped gets a free handle (an alias map) or, with none free, a
new one (a create). So the handles created are the peak of slots in use, plus the slack: in
the passes after the first, while fewer than (1 + S) x the first pass's handles exist, a slot
that needs a handle gets a new one rather than a free one. Which free handle: the one freed
last (mru), first (lru), or (belady) among the 64 freed last, the one whose slots the last
pass used again furthest ahead.

Upstream calls: a create or an alias map is one map call, a remap an unmap and a map.
Driver calls: a create is cuMemCreate + cuMemMap, an alias map cuMemMap, a remap cuMemUnmap +
cuMemMap, and each allocation's newly mapped slots get one cuMemSetAccess per contiguous run
(the suite's defer_access counting). Nothing is ever released.

Prints per trace: handles held (their bytes) over the peak requested bytes after 1 and after N
passes, upstream calls a pass after the first, driver calls in the first pass and in all N."""
import argparse, bisect, collections, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'placement-bound'))
from bound import INF, PAGE, SMALL, Heap, rnd  # noqa: E402  (the placement is bound.py's)


def run(path, passes, k, pick, slack, layout='bestfit'):
    slot = PAGE * k
    planned = None
    if layout == 'plan':
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import plan_bound
        planned = plan_bound.best_layout(path)
    ev = [l.split() for l in open(path) if l[0] in 'af']
    heaps = [Heap(), Heap()]
    base = [0, 1 << 50]
    ref = {}                          # slot -> live blocks touching it
    live = {}
    handle_of = {}                    # slot -> handle mapped there
    busy = {}                         # handle -> the slot it is in use through
    free = collections.OrderedDict()  # handles not busy, in the order they became free
    aliases = {}                      # handle -> slots it is mapped at
    nh = 0
    first = 0
    prev_starts = {}
    out = []
    for p in range(passes):
        c = dict(create=0, alias=0, remap=0, access=0)
        req = peak_req = 0
        starts = {}

        def new_handle():
            nonlocal nh
            nh += 1
            c['create'] += 1
            return nh, True

        def take(t):
            if slack and first and nh < (1 + slack) * first:
                return new_handle()
            if not free:
                return new_handle()
            if pick == 'belady' and prev_starts:
                best, bt = None, -1
                for h in list(reversed(free))[:64]:
                    nu = INF
                    for v in aliases.get(h, ()):
                        L = prev_starts.get(v)
                        if L:
                            i = bisect.bisect_right(L, t)
                            nu = min(nu, L[i] if i < len(L) else L[0] + len(ev))
                    if nu > bt:
                        best, bt = h, nu
                    if nu == INF:
                        break
                del free[best]
                return best, False
            h, _ = free.popitem(last=(pick != 'lru'))
            return h, False

        def release_slots(a, z):
            for s in range(a // slot, (a + z - 1) // slot + 1):
                ref[s] -= 1
                if ref[s] == 0:
                    del ref[s]
                    h = handle_of[s]
                    del busy[h]
                    free[h] = None

        for t, e in enumerate(ev):
            if e[0] == 'a':
                z = rnd(int(e[2]))
                hp = 0 if z < SMALL else 1
                a = planned[t + 1] if planned else heaps[hp].alloc(z) + base[hp]
                live[e[1]] = (a, z, hp, int(e[2]))
                req += int(e[2])
                peak_req = max(peak_req, req)
                last = -2
                for s in range(a // slot, (a + z - 1) // slot + 1):
                    n = ref.get(s, 0)
                    ref[s] = n + 1
                    if n:
                        continue
                    starts.setdefault(s, []).append(t)
                    h = handle_of.get(s)
                    if h is not None and h not in busy:
                        del free[h]
                        busy[h] = s
                        continue
                    nh_, created = take(t)
                    if h is None:
                        c['alias'] += 0 if created else 1
                    else:
                        c['remap'] += 1
                        aliases[h].discard(s)
                    if s != last + 1:
                        c['access'] += 1
                    last = s
                    aliases.setdefault(nh_, set()).add(s)
                    handle_of[s] = nh_
                    busy[nh_] = s
            elif e[1] in live:
                a, z, hp, r = live.pop(e[1])
                req -= r
                if not planned:
                    heaps[hp].free(a - base[hp], z)
                release_slots(a, z)
        for a, z, hp, r in live.values():
            if not planned:
                heaps[hp].free(a - base[hp], z)
            release_slots(a, z)
        live.clear()
        prev_starts = starts
        if p == 0:
            first = nh
        upstream = c['create'] + c['alias'] + 2 * c['remap']
        driver = 2 * c['create'] + c['alias'] + 2 * c['remap'] + c['access']
        out.append((nh * slot / peak_req, upstream, driver))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--handle-pages', type=int, default=1)
    ap.add_argument('--pick', choices=['mru', 'lru', 'belady'], default='mru')
    ap.add_argument('--slack', type=float, default=0.0)
    ap.add_argument('--passes', type=int, default=30)
    ap.add_argument('--layout', choices=['bestfit', 'plan'], default='bestfit')
    ap.add_argument('traces', nargs='+')
    a = ap.parse_args()
    if a.handle_pages < 1 or a.passes < 2 or a.slack < 0:
        ap.error('--handle-pages >= 1, --passes >= 2, --slack >= 0')
    for t in a.traces:
        try:
            r = run(t, a.passes, a.handle_pages, a.pick, a.slack, a.layout)
        except (OSError, ValueError, IndexError) as e:
            print('alias_model.py: %s: cannot read the trace: %s' % (t, e), file=sys.stderr)
            sys.exit(2)
        print('| %s | %s | %d | %s | %g | %.4f | %.4f | %.1f | %d | %d |' % (
            t.split('/')[-1], a.layout, a.handle_pages, a.pick, a.slack, r[0][0], r[-1][0],
            sum(o[1] for o in r[1:]) / (len(r) - 1), r[0][2], sum(o[2] for o in r)), flush=True)


if __name__ == '__main__':
    main()
