#!/usr/bin/env python3
"""Schedule model behind wgmma-fwd-persistent-causal.md: causal forward, 128-query tiles, G = 132 SMs (1 CTA each).
A tile of query-tile index mt costs  o + c1 * kpq * (mt + 2)  (its key tiles, +1 for the masked diagonal tile);
c1 from the measured non-causal time (4096 tiles = 31 full waves + 4 CTAs: 3.33 ms / 32 per tile at d=128).
o = per-CTA cost a persistent CTA hides (launch, barrier init, first Q/K/V latency, epilogue), of which it hides SAVE.
  today       hardware dispatch of the LPT grid = greedy list scheduling (an SM takes the next CTA when it frees)
  rr          persistent, CTA c takes positions c, c+G, ... of the same sequence (the patch's default)
  alt         rr over the sequence with every other 8-head chunk (counted back from the last) shortest first
  mean        perfect balance of the persistent costs"""
import heapq

G, CH, O, SAVE = 132, 8, 3.0, 0.75

def sequence(nt, nh, alt):   # fa8_lpt_at: the query-tile index mt at each position
    nch, out = (nh + CH - 1) // CH, []
    for ci in range(nch):
        cn = min(CH, nh - ci * CH)
        rev = alt and (nch - 1 - ci) % 2 == 1
        out += [(r // cn) if rev else nt - 1 - r // cn for r in range(nt * cn)]
    return out

def greedy(costs):
    h = [0.0] * min(G, len(costs))
    for c in costs:
        heapq.heappush(h, heapq.heappop(h) + c)
    return max(h)

def round_robin(costs):
    tot = [0.0] * G
    for i, c in enumerate(costs):
        tot[i % G] += c
    return max(tot), sum(tot) / G

for name, kpq, t_nc in (("d128", 1, 3330.0), ("d256", 2, 5740.0)):
    print(f"{name}: ms (ratio to today)")
    for S, nh in ((8192, 64), (8192, 32), (4096, 64), (2048, 64), (16384, 16), (8192, 128)):
        nt = S // 128
        c1 = (t_nc / 32 - O) / (kpq * 64)
        cost = lambda mt, persistent: O * (1 - SAVE * persistent) + c1 * kpq * (mt + 2)
        today = greedy([cost(mt, 0) for mt in sequence(nt, nh, False)])
        rr, mean = round_robin([cost(mt, 1) for mt in sequence(nt, nh, False)])
        alt, _ = round_robin([cost(mt, 1) for mt in sequence(nt, nh, True)])
        print(f"  S={S:5d} B*H={nh:3d}: today {today/1e3:.3f} | rr {rr/1e3:.3f} ({rr/today:.2f}) | "
              f"alt {alt/1e3:.3f} ({alt/today:.2f}) | mean {mean/1e3:.3f}")
