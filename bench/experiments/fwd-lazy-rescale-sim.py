#!/usr/bin/env python3
"""How often a lazy O rescale still rescales (bench/NOTES.md, the thirty-seventh session): 16-row warps, i.i.d.
normal logits of std SIGMA nats (fa8 bench's inputs: logit_std 3), S = 8K in 128-key tiles. A warp skips O's
rescale on a tile unless some row's tile max exceeds the max it runs on by more than TAU (log2 units); such
rows then take their new max. Prints the share of tiles (after the first) that rescale."""
import numpy as np
rng=np.random.default_rng(1)
def rate(sigma, tau, rows=16, tiles=64, bn=128, trials=400):
    hit=0; tot=0
    for _ in range(trials):
        x=rng.standard_normal((rows,tiles,bn)).astype(np.float32)*sigma*1.4426950408889634  # log2 units
        tmax=x.max(axis=2)            # rows x tiles
        m=tmax[:,0].copy()
        for j in range(1,tiles):
            need=tmax[:,j]>m+tau
            if need.any():
                hit+=1
                m=np.where(need, tmax[:,j], m)   # rows over the lag take their new max (a warp rescales)
            tot+=1
    return hit/tot
for sigma in (1.0,2.0,3.0):
    print(sigma, ' '.join('tau %.2f: %.3f'%(t,rate(sigma,t)) for t in (0.0,0.81,1.81,2.81)))
