#!/usr/bin/env python3
"""L2 reuse of the d128 causal backward's query side (forty-first session): does the GQA grid, whose CTAs walk 8
query heads each, miss L2 more than the MHA grid with the same work? One CTA per SM on 132 SMs, CTAs started in
fa8_lpt_tile's order (chunks of 8 heads, longest key tile first) as SMs free up; every CTA takes one item (a 64-row
query tile against its 128-key tile) per time step. An item touches its query tile's Q, Q^t, dO, dO^t (32 KB of
FP8) and its dQ accumulator rows (32 KB of FP32, reduced in L2): one 64 KB line of an LRU cache of L2's 50 MB.
Prints the misses per item for each order of a GQA CTA's (query head, query tile) sequence. A model: L2's two
partitions, its hashing and K/V's own lines are left out."""
from collections import OrderedDict

KT, QT, SMS, L2_LINES = 64, 128, 132, (50 << 20) // (64 << 10)


def lpt_grid(heads):
    """(head, key tile) per CTA in launch order: chunks of 8 heads, within a chunk rank-major"""
    order = []
    for c0 in range(0, heads, 8):
        for rank in range(KT):
            for h in range(c0, min(c0 + 8, heads)):
                order.append((h, rank))
    return order


def items(kv_head, rank, group, head_inner):
    first = 2 * rank   # the first query tile that sees key tile `rank` (64-row tiles, 128-key tiles)
    tiles = range(first, QT)
    heads = range(kv_head * group, (kv_head + 1) * group)
    if head_inner:
        return [(h, m) for m in tiles for h in heads]
    return [(h, m) for h in heads for m in tiles]


def simulate(kv_heads, group, head_inner):
    queue = [items(h, r, group, head_inner) for h, r in lpt_grid(kv_heads)]
    cache, misses, total = OrderedDict(), 0, 0
    running = []   # per SM: (item list, position)
    nxt = 0
    while nxt < len(queue) or running:
        while len(running) < SMS and nxt < len(queue):
            running.append([queue[nxt], 0])
            nxt += 1
        for slot in running:
            key = slot[0][slot[1]]
            slot[1] += 1
            total += 1
            if key in cache:
                cache.move_to_end(key)
            else:
                misses += 1
                cache[key] = True
                if len(cache) > L2_LINES:
                    cache.popitem(last=False)
        running = [s for s in running if s[1] < len(s[0])]
    return misses / total, total


if __name__ == "__main__":
    for name, kvh, g, inner in [("MHA 64 heads", 64, 1, False),
                                ("GQA 64/8, head-outer (query tiles inside each head)", 8, 8, False),
                                ("GQA 64/8, head-inner (the 8 heads inside each query tile)", 8, 8, True)]:
        rate, n = simulate(kvh, g, inner)
        print(f"{name:60s} items {n:7d}  L2 misses per item {rate:.3f}")
