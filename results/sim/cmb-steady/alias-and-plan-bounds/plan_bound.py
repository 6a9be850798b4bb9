#!/usr/bin/env python3
"""plan_bound.py TRACE... (needs numpy) - what a layout planned from one whole pass holds.

Every block of the pass (requests rounded to 512 B; blocks still live at the pass's end freed
there) is placed greedily in each of three orders (largest first; largest size x lifetime
first; longest-lived first), each at the lowest offset of one contiguous range where it
overlaps in address no block whose lifetime it overlaps. Prints, for each order and for the
best of them, the range's end in 2 MiB pages over the peak requested bytes: what a pass
replaying that plan would hold with every page mapped once and no upstream call after the
pass that recorded it. A bound for a planner that knows the pass, not an allocator: no
streams."""
import sys, numpy as np
PAGE=2<<20
def rnd(x): return (x+511)//512*512
def blocks(path):
    live={}; out=[]; t=0; req=0; peak=0
    for l in open(path):
        if l[0] not in 'af': continue
        e=l.split(); t+=1
        if e[0]=='a':
            live[e[1]]=(t,rnd(int(e[2])),int(e[2])); req+=int(e[2]); peak=max(peak,req)
        elif e[1] in live:
            s,z,r=live.pop(e[1]); out.append((s,t,z)); req-=r
    for k,(s,z,r) in live.items(): out.append((s,t+1,z))
    return out, peak
ORDERS={'size':lambda b:(-b[2],b[0]),'area':lambda b:(-b[2]*(b[1]-b[0]),b[0]),'lifetime':lambda b:(-(b[1]-b[0]),-b[2])}
def plan(bl,order):
    bl=sorted(bl,key=ORDERS[order])
    n=len(bl); S=np.zeros(n,np.int64); E=np.zeros(n,np.int64); O=np.zeros(n,np.int64); Z=np.zeros(n,np.int64)
    top=0; offsets={}
    for i,(s,e,z) in enumerate(bl):
        m=(S[:i]<e)&(E[:i]>s)
        off=0
        if m.any():
            oo=O[:i][m]; zz=Z[:i][m]; idx=np.argsort(oo); oo=oo[idx]; ee=oo+zz[idx]
            for a,b in zip(oo.tolist(),ee.tolist()):
                if a-off>=z: break
                if b>off: off=b
        S[i]=s;E[i]=e;O[i]=off;Z[i]=z; top=max(top,off+z); offsets[s]=off
    return top, offsets
def best_layout(path):
    """The best order's offsets, keyed by the block's a-line number in the trace (1-based)."""
    bl,peak=blocks(path)
    return min((plan(bl,o) for o in ORDERS), key=lambda r: r[0])[1]
if __name__=='__main__':
  for t in sys.argv[1:]:
      try:
          bl,peak=blocks(t)
      except (OSError, ValueError, IndexError) as e:
          print('plan_bound.py: %s: cannot read the trace: %s' % (t, e), file=sys.stderr)
          sys.exit(2)
      res={}
      for o in ORDERS:
          top=plan(bl,o)[0]; res[o]=-(-top//PAGE)*PAGE/peak
      best=min(res,key=res.get)
      print("%-34s blocks %6d  in 2 MiB pages over peak requested: %s; best %.4f (%s)"%(t.split('/')[-1],len(bl),
            ", ".join("%s %.4f"%(o,res[o]) for o in ORDERS),res[best],best))
