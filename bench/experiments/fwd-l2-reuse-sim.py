#!/usr/bin/env python3
"""L2 reuse of the d128 S=8K non-causal forward's K, V^t (fifty-sixth session): does the persistent grid's order
(fa8_lpt_at: chunks of 8 heads, rank-major inside a chunk) make the MHA forward read more from DRAM than GQA 64/8,
and would a head-major order (a head's 43 query tiles consecutive) read less? 132 CTAs, one per SM, walk their
static round-robin positions; each key-tile step reads one 32 KB line (K + V^t of that kv head's key tile) of an
LRU cache of L2's 50 MB, as one cache or as two 25 MB partitions each serving half the SMs. A model: hashing,
Q, O and in-flight misses are left out; `jitter` spreads the CTAs' speeds."""
import random
from collections import OrderedDict
SMS=132; NT=43; KT=64; H=64
def lpt(lin, nt, nh, CH=8):
    """fa8_lpt_at: position lin -> (query tile, head), chunks of CH heads, rank-major inside a chunk"""
    ci=lin//(CH*nt); c0=ci*CH; cn=min(CH,nh-c0); r=lin-c0*nt
    rank=r//cn; hb=c0+r%cn
    if (((nh+CH-1)//CH-1-ci)&1): rank=nt-1-rank
    return nt-1-rank, hb
def headmajor(lin, nt, nh): return lin%nt, lin//nt
def lru_misses(ev, l2mb, parts):
    """replay (time, CTA, line) reads in time order through LRU caches of l2mb split into parts halves, each serving
    its share of the SMs; returns the misses"""
    lines=l2mb*1024//32//parts
    caches=[OrderedDict() for _ in range(parts)]
    miss=0
    for t,c,key in sorted(ev):
        cache=caches[c*parts//SMS]
        if key in cache: cache.move_to_end(key)
        else:
            miss+=1; cache[key]=1
            if len(cache)>lines: cache.popitem(last=False)
    return miss
def sim(order, group, l2mb, parts, jitter):
    ntot=NT*H
    # event sim: each CTA has a speed factor; it reads key tile k of tile at time (tile_idx*KT + k)*speed
    random.seed(1)
    ev=[]
    for c in range(SMS):
        sp=1+random.uniform(-jitter,jitter)
        t=0.0
        for lin in range(c, ntot, SMS):
            mt,h=order(lin,NT,H)
            kh=h//group
            for k in range(KT):
                ev.append((t,c,(kh,k))); t+=sp
    miss=lru_misses(ev, l2mb, parts)
    return miss, len(ev)
for parts in (1,2):
  for jit in (0.0,0.02,0.05):
    for name,o in (("lpt8",lpt),("headmajor",headmajor)):
        for g in (1,8):
            m,n=sim(o,g,50,parts,jit)
            print(f"parts={parts} jitter={jit} {name:9s} group={g}: miss {m/n*100:.2f}%  DRAM {m*32/1024:.0f} MB")

# causal: the same model with each tile's key count (192-row tiles, 128-key tiles, up to the diagonal) and fa8_lpt_at's
# chunk size varied: DRAM K, V^t and the makespan in key-tile steps (4 steps a tile for prologue and epilogue)
def sim_causal(CH, group, l2mb=50, parts=2):
    ev=[]; ends=[]
    for c in range(SMS):
        t=0.0
        for lin in range(c,NT*H,SMS):
            mt,h=lpt(lin,NT,H,CH); kh=h//group
            for k in range(-(-min((mt+1)*192,8192)//128)):
                ev.append((t,c,(kh,k))); t+=1
            t+=4
        ends.append(t)
    miss=lru_misses(ev, l2mb, parts)
    return miss*32/1024, max(ends)
for CH in (8,4,2,1):
    for g in (1,8):
        mb,mx=sim_causal(CH,g)
        print(f"causal chunk {CH} group {g}: DRAM K/V {mb:.0f} MB, makespan {mx:.0f}")
