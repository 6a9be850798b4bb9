#!/usr/bin/env python3
"""plan_heap_model.py [--plan|--no-plan] [--pick oldest|recent] [--horizon H] [--slack S|never]
                   [--budget peak|span] [--passes N] [--per-pass] TRACE...
(needs numpy)

What a step planner that places in the heap's own address space would hold, and how many pages
it would map a pass, on a trace replayed for N passes. A model, not an allocator: no streams, no
stream order, no out of memory; pages are 2 MiB, each mapped or unmapped page one call.

Placement without a plan is ../placement-bound/bound.py's best fit (two unbounded ranges, below
1 MiB and from 1 MiB; requests rounded to 512 B and packed byte to byte; frees coalesced at
once; blind to what is mapped). The planner, online:
- every allocation's rounded size goes into a window of the last W = 8; the window's last 4
  occurrences (where they ended, in allocations) are remembered;
- with no plan being served, an allocation whose window occurred before, at most H allocations
  back, starts following that stretch (of the window's last 4 occurrences the oldest within
  reach, or with --pick recent the most recent): the next P allocations, P the distance back,
  are predicted to repeat the P that followed it, with the lifetimes they had, on a clock of
  events from the plan's start (a block still live is predicted to live as long as its
  counterpart one period before it lived, else forever). They are laid out at once, greedily
  in ../alias-and-plan-bounds/plan_bound.py's three orders (the order with the lowest top
  wins), each block at the lowest address of its heap where it overlaps no block whose
  lifetime it overlaps, among them the blocks live now at their actual addresses (each freed
  when its counterpart one period before it was, moved by the period, else never);
- a request equal in size to the prediction gets its planned address if nothing live lies
  there, else best fit; a request of another size stops the plan (best fit from there on until
  a window matches again). A plan ends after its P allocations and the next one is made at once.
  Layouts are cached by what they were made from (the predicted blocks and the obstacles), so a
  repeat of the same situation gets the same addresses.

Pages: a page is needed while a live block touches it; a needed page not mapped is mapped
(one map). With --slack S, mapped pages are kept to at most (1 + S) x the peak of needed pages
so far: before a map would pass that, cached pages (mapped, not needed) are unmapped, those
cached longest first (one unmap each). With --budget span, the limit is also at least the
number of pages in use at any time during the last plan that was served to its end (those in
use as it started included). With --slack never, nothing is unmapped.

Prints a table row per trace: peak mapped pages over the peak requested bytes after 1 pass and
after N; page maps and unmaps in the first pass, and the maps in its second half (by
allocations); page maps and unmaps a pass after the first (mean over passes 2..N) and in the
last pass; the share of allocations served at a planned address in the first and last pass.
With --per-pass, a line per trace with each pass's figures instead."""
import argparse, bisect, collections, os, sys
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'placement-bound'))
from bound import INF, PAGE, SMALL, Heap, rnd  # noqa: E402

W = 8
BASE = [0, 1 << 50]
NEVER = 1 << 62


class AddrHeap(Heap):
    """bound.py's best fit, plus taking a given range if it lies inside one free range."""

    def alloc_at(s, a, z):
        i = bisect.bisect_right(s.addrs, a) - 1
        if i < 0:
            return False
        fa = s.addrs[i]
        fz = s.by_addr[fa]
        if fz != INF and fa + fz < a + z:
            return False
        s._rm(fa)
        if a > fa:
            s._add(fa, a - fa)
        if fz == INF:
            s._add(a + z, INF)
        elif fa + fz > a + z:
            s._add(a + z, fa + fz - (a + z))
        return True


def heap_of(z):
    return 0 if z < SMALL else 1


def layout(blocks, obstacles):
    """blocks: (start, end, size, heap); obstacles: (addr, size, end, heap), live from 0.
    Greedy, each block at the lowest address free of every interval whose lifetime overlaps, in
    three orders (plan_bound.py's); the order with the lowest top wins. Returns each block's
    address (relative to its heap's base) in the order given."""
    placed = [([], [], [], []) for _ in range(2)]   # per heap: S, E, A, Z
    for (a, z, e, h) in obstacles:
        P = placed[h]
        P[0].append(0); P[1].append(e); P[2].append(a); P[3].append(z)
    arrs = []
    for h in range(2):
        P = placed[h]
        arrs.append([np.array(x, dtype=np.int64) for x in P])
    best = None
    for key in ORDERS:
        out = _layout(blocks, arrs, sorted(range(len(blocks)), key=lambda i: key(blocks[i])))
        tops = [0, 0]
        for o, b in zip(out, blocks):
            tops[b[3]] = max(tops[b[3]], o + b[2])
        top = sum(tops)
        if best is None or top < best[0]:
            best = (top, out)
    return best[1]


ORDERS = (lambda b: (-b[2], b[0]),                                  # largest first
          lambda b: (-b[2] * (min(b[1], 1 << 40) - b[0]), b[0]),      # largest size x lifetime
          lambda b: (-(min(b[1], 1 << 40) - b[0]), -b[2]))            # longest-lived


def _layout(blocks, arrs, order):
    out = [0] * len(blocks)
    cap = [len(arrs[h][0]) + len(blocks) for h in range(2)]
    buf, cnt = [], []
    for h in range(2):
        b = [np.zeros(cap[h], np.int64) for _ in range(4)]
        n = len(arrs[h][0])
        for k in range(4):
            b[k][:n] = arrs[h][k]
        buf.append(b); cnt.append(n)
    for i in order:
        s, e, z, h = blocks[i]
        n = cnt[h]
        S, E, A, Z = (x[:n] for x in buf[h])
        m = (S < e) & (E > s)
        if m.any():
            aa = A[m]; ee = aa + Z[m]
            idx = np.argsort(aa, kind='stable'); aa = aa[idx]; ee = ee[idx]
            cm = np.maximum.accumulate(ee)
            prev = np.concatenate(([0], cm[:-1]))
            ok = np.nonzero(aa - prev >= z)[0]
            off = int(prev[ok[0]]) if ok.size else int(cm[-1])
        else:
            off = 0
        out[i] = off
        for k, v in enumerate((s, e, off, z)):
            buf[h][k][n] = v
        cnt[h] = n + 1
    return out


class Model:
    def __init__(s, plan, horizon, slack, pick, span=False):
        s.plan, s.H, s.slack, s.pick = plan, horizon, slack, pick
        s.heaps = [AddrHeap(), AddrHeap()]
        s.ref = {}
        s.mapped = set()
        s.cached = collections.OrderedDict()
        s.need = s.peak_need = 0
        s.peak_mapped = 0
        s.maps = s.unmaps = 0
        s.t = 0                      # event clock
        s.rec = []                   # per allocation index: [size, t_alloc, t_free or None]
        s.win = collections.deque(maxlen=W)
        s.seen = {}                  # window -> list of allocation indices where it ended
        s.live = {}                  # id -> (abs addr, z, heap, alloc index, requested)
        s.cache = {}
        s.cur = None                 # the plan served: dict
        s.served = s.allocs = 0
        s.span = span                # keep what the last plan's period touched (--budget span)
        s.span_cap = 0
        s.period_pages = set()

    # --- pages -----------------------------------------------------------------------------
    def touch(s, a, z):
        if s.span and s.cur is not None:
            s.period_pages.update(range(a // PAGE, (a + z - 1) // PAGE + 1))
        for pg in range(a // PAGE, (a + z - 1) // PAGE + 1):
            c = s.ref.get(pg, 0)
            s.ref[pg] = c + 1
            if c:
                continue
            s.need += 1
            if pg in s.mapped:
                del s.cached[pg]
                continue
            s.peak_need = max(s.peak_need, s.need)
            if s.slack != 'never':
                cap = max(int(s.peak_need * (1 + s.slack)), s.span_cap)
                while len(s.mapped) + 1 > cap and s.cached:
                    old, _ = s.cached.popitem(last=False)
                    s.mapped.discard(old); s.unmaps += 1
            s.mapped.add(pg); s.maps += 1
            s.peak_mapped = max(s.peak_mapped, len(s.mapped))
        s.peak_need = max(s.peak_need, s.need)

    def untouch(s, a, z):
        for pg in range(a // PAGE, (a + z - 1) // PAGE + 1):
            c = s.ref[pg] - 1
            if c:
                s.ref[pg] = c
                continue
            del s.ref[pg]
            s.need -= 1
            s.cached[pg] = True

    # --- the planner -----------------------------------------------------------------------
    def make_plan(s, i, j):
        """Allocation i was the last; the stretch after allocation j (j < i) is predicted to repeat."""
        period = n = i - j
        t0 = s.rec[j + 1][1]             # j < i: the stretch's first block is recorded
        blocks = []
        for k in range(j + 1, j + 1 + n):
            z, ta, tf = s.rec[k]
            st = ta - t0
            if tf is not None:
                en = tf - t0
            elif k - period >= 0 and s.rec[k - period][2] is not None:
                # still live: it is predicted to live as long as the block one period before it
                en = st + s.rec[k - period][2] - s.rec[k - period][1]
            else:
                en = NEVER
            blocks.append((st, max(en, st + 1), z, heap_of(z)))
        obst = []
        for (a, z, h, k, _r) in s.live.values():
            e = NEVER
            if k - period >= 0:
                fr = s.rec[k - period][2]
                if fr is not None:
                    # the counterpart's free, moved by the period (in events) onto the plan's clock
                    dt = s.rec[k][1] - s.rec[k - period][1]
                    e = max(1, fr + dt - s.t)
            obst.append((a - BASE[h], z, e, h))
        key = (tuple(blocks), tuple(sorted(obst)))
        offs = s.cache.get(key)
        if offs is None:
            offs = layout(blocks, obst)
            s.cache[key] = offs
        return dict(sizes=[b[2] for b in blocks], offs=offs, pos=0)

    def start_plan(s, plan):
        s.cur = plan
        if s.span and plan is not None:
            # the pages in use as the plan starts are touched in its period too
            s.period_pages = set(s.ref)

    def end_plan(s, done):
        if s.span and done:
            s.span_cap = len(s.period_pages)
        s.cur = None
        s.period_pages = set()

    def find_stretch(s, i):
        key = tuple(s.win)
        occ = s.seen.get(key)
        if not occ:
            return None
        fits = [j for j in occ if i - j <= s.H]
        if not fits:
            return None
        return fits[-1] if s.pick == 'recent' else fits[0]

    # --- the allocator ---------------------------------------------------------------------
    def alloc(s, bid, req):
        z = rnd(req); h = heap_of(z)
        i = len(s.rec)
        a = None
        if s.plan and s.cur is not None:
            c = s.cur
            if c['sizes'][c['pos']] == z:
                off = c['offs'][c['pos']]
                if s.heaps[h].alloc_at(off, z):
                    a = off; s.served += 1
                c['pos'] += 1
                if c['pos'] == len(c['sizes']):
                    s.end_plan(done=True)
            else:
                s.end_plan(done=False)
        if a is None:
            a = s.heaps[h].alloc(z)
        a += BASE[h]
        s.live[bid] = (a, z, h, i, req)
        s.rec.append([z, s.t, None])
        s.t += 1
        s.allocs += 1
        s.touch(a, z)
        s.win.append(z)
        if len(s.win) == W:
            key = tuple(s.win)
            if s.plan and s.cur is None:
                j = s.find_stretch(i)
                if j is not None:
                    s.start_plan(s.make_plan(i, j))
            s.seen.setdefault(key, []).append(i)
            if len(s.seen[key]) > 4:
                del s.seen[key][0]

    def free(s, bid):
        a, z, h, i, req = s.live.pop(bid)
        s.heaps[h].free(a - BASE[h], z)
        s.rec[i][2] = s.t
        s.t += 1
        s.untouch(a, z)


def run(path, passes, plan, horizon, slack, pick, span=False):
    ev = []
    for l in open(path):
        if l[0] not in 'af':
            continue
        e = l.split()
        ev.append((e[0], e[1], int(e[2]) if e[0] == 'a' else 0))
    m = Model(plan, horizon, slack, pick, span)
    nalloc = sum(1 for e in ev if e[0] == 'a')
    half = 0
    req = peak_req = 0
    rows = []
    for p in range(passes):
        maps0, unmaps0 = m.maps, m.unmaps
        m.served = m.allocs = 0
        ids = {}
        na = 0
        for k, bid, sz in ev:
            if k == 'a':
                na += 1
                if p == 0 and na == nalloc // 2:
                    half = m.maps
                key = (p, bid)
                ids[bid] = key
                m.alloc(key, sz)
                req += sz; peak_req = max(peak_req, req)
            elif bid in ids:
                key = ids.pop(bid)
                req -= m.live[key][4]
                m.free(key)
        for bid, key in list(ids.items()):
            req -= m.live[key][4]
            m.free(key)
        rows.append((m.peak_mapped * PAGE / peak_req, m.maps - maps0, m.unmaps - unmaps0,
                     m.served / max(1, m.allocs)))
        if p == 0:
            second_half = m.maps - half
    return rows, second_half


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument('--plan', dest='plan', action='store_true', default=True)
    g.add_argument('--no-plan', dest='plan', action='store_false')
    ap.add_argument('--horizon', type=int, default=32768)
    ap.add_argument('--slack', default='0.01')
    ap.add_argument('--pick', choices=('recent', 'oldest'), default='oldest')
    ap.add_argument('--budget', choices=('peak', 'span'), default='peak',
                    help='span: also keep as many pages as the last plan served touched over its period')
    ap.add_argument('--passes', type=int, default=10)
    ap.add_argument('--per-pass', action='store_true',
                    help='print each pass: mapped / peak requested, page maps, unmaps, served share')
    ap.add_argument('traces', nargs='+')
    o = ap.parse_args()
    if o.horizon < 1 or o.passes < 2:
        print('plan_heap_model.py: --horizon must be at least 1 and --passes at least 2', file=sys.stderr)
        sys.exit(2)
    slack = o.slack
    if slack != 'never':
        try:
            slack = float(slack)
            if slack < 0:
                raise ValueError
        except ValueError:
            print('plan_heap_model.py: --slack must be a number >= 0 or never: %s' % o.slack, file=sys.stderr)
            sys.exit(2)
    for t in o.traces:
        try:
            rows, second_half = run(t, o.passes, o.plan, o.horizon, slack, o.pick, o.budget == 'span')
        except (OSError, ValueError, IndexError, KeyError) as e:
            print('plan_heap_model.py: %s: cannot read the trace: %s' % (t, e), file=sys.stderr)
            sys.exit(2)
        if o.per_pass:
            print('%s (%s, slack %s): ' % (os.path.basename(t), 'plan %s H=%d%s' % (o.pick, o.horizon, ', span' if o.budget == 'span' else '') if o.plan
                                           else 'best fit', o.slack) +
                  '; '.join('pass %d %.4f %d/%d %.3f' % ((k + 1,) + r) for k, r in enumerate(rows)), flush=True)
            continue
        after = rows[1:]
        print('| %s | %s | %s | %d | %.4f | %.4f | %d / %d | %d | %.1f / %.1f | %d / %d | %.3f / %.3f |' % (
            os.path.basename(t), 'plan %s H=%d%s' % (o.pick, o.horizon, ', span' if o.budget == 'span' else '') if o.plan else 'best fit', o.slack, o.passes,
            rows[0][0], rows[-1][0], rows[0][1], rows[0][2], second_half,
            sum(r[1] for r in after) / len(after), sum(r[2] for r in after) / len(after),
            rows[-1][1], rows[-1][2], rows[0][3], rows[-1][3]), flush=True)


if __name__ == '__main__':
    main()
