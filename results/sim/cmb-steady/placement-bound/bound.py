#!/usr/bin/env python3
"""bound.py TRACE... - what a placement that never moves pages could hold at
steady state. Replays each cumembench trace (a/f lines) three times through a
plain best fit (smallest free range that fits, then lowest address; requests
rounded to 512 B and packed byte to byte; below 1 MiB and from 1 MiB in two
separate ranges, as cmb's heaps; every free coalesced at once; one infinite
range per heap) and prints, per pass, as multiples of the peak requested
bytes: the peak of the 2 MiB pages live blocks touch ("need": what cmb's
budget follows), and the pages touched at any time during the pass ("union":
what a cache that never unmaps holds once the pass repeats identically, with
zero map calls after the first pass). The placement does not depend on what
is mapped, so every pass places every block where the last did."""
import sys, bisect
PAGE=2<<20; SMALL=1<<20; INF=1<<60
def rnd(x): return (x+511)//512*512
class Heap:
    def __init__(s):
        s.by_addr={0:INF}; s.bysize=[(INF,0)]
        s.addrs=[0]
    def _rm(s,a):
        z=s.by_addr.pop(a); i=bisect.bisect_left(s.bysize,(z,a)); del s.bysize[i]
        i=bisect.bisect_left(s.addrs,a); del s.addrs[i]; return z
    def _add(s,a,z):
        s.by_addr[a]=z; bisect.insort(s.bysize,(z,a)); bisect.insort(s.addrs,a)
    def alloc(s,z):
        i=bisect.bisect_left(s.bysize,(z,-1)); fz,fa=s.bysize[i]
        s._rm(fa)
        if fz>z: s._add(fa+z, fz-z if fz<INF else INF)
        return fa
    def free(s,a,z):
        # merge with next
        if a+z in s.by_addr:
            nz=s._rm(a+z); z = INF if nz==INF else z+nz
        i=bisect.bisect_left(s.addrs,a)
        if i>0:
            pa=s.addrs[i-1]; pz=s.by_addr[pa]
            if pa+pz==a:
                s._rm(pa); a=pa; z= INF if z==INF else pz+z
        s._add(a,z)
def run(path, passes=3):
    ev=[l.split() for l in open(path) if l[0] in 'af']
    heaps=[Heap(),Heap()]; OFF=[0,1<<50]
    ref={}; live={}
    out=[]
    for p in range(passes):
        need=0; peak_need=0; union=set(); req=0; peak_req=0
        for e in ev:
            if e[0]=='a':
                z=rnd(int(e[2])); h=0 if z<SMALL else 1
                a=heaps[h].alloc(z)+OFF[h]; live[e[1]]=(a,z,h,int(e[2]))
                req+=int(e[2]); peak_req=max(peak_req,req)
                for pg in range(a//PAGE,(a+z-1)//PAGE+1):
                    c=ref.get(pg,0); ref[pg]=c+1
                    if c==0: need+=1
                    union.add(pg)
                peak_need=max(peak_need,need)
            else:
                if e[1] not in live: continue
                a,z,h,r=live.pop(e[1]); req-=r
                heaps[h].free(a-OFF[h],z)
                for pg in range(a//PAGE,(a+z-1)//PAGE+1):
                    ref[pg]-=1
                    if ref[pg]==0: need-=1; del ref[pg]
        for k,(a,z,h,r) in list(live.items()):
            heaps[h].free(a-OFF[h],z); req-=r
            for pg in range(a//PAGE,(a+z-1)//PAGE+1):
                ref[pg]-=1
                if ref[pg]==0: del ref[pg]
        live.clear()
        out.append((p, peak_need*PAGE/peak_req, len(union)*PAGE/peak_req))
    return out
if __name__ == '__main__':
    for t in sys.argv[1:]:
        print(t.split('/')[-1], ["pass %d need %.4f union %.4f"%o for o in run(t)])
