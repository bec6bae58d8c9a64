#!/usr/bin/env python3
"""Tail of the d128 backward's grid on 132 SMs, one CTA per SM (fortieth session): the hardware hands CTAs out in
grid order as SMs free up, which for a longest-first grid is LPT list scheduling. Work unit: one 64-row query tile
against one 128-key tile. Prints the makespan over the ideal (total work / 132) per grid shape, S = 8K, B*H = 64."""
import heapq


def makespan_over_ideal(jobs, sms=132):
    loads = [0.0] * sms
    heapq.heapify(loads)
    for j in sorted(jobs, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + j)
    return max(loads) / (sum(jobs) / sms)


KT, QT = 64, 128   # 128-key tiles and 64-row query tiles at S = 8K
CASES = {
    # causal: key tile k is seen by the query tiles from its diagonal on
    "GQA 64/8 causal (a CTA: one kv head's key tile, 8 query heads)": [8 * (QT - 2 * k) for k in range(KT) for _ in range(8)],
    "GQA 64/8 causal, 4 query heads a CTA": [4 * (QT - 2 * k) for k in range(KT) for _ in range(16)],
    "MHA causal (one query head a CTA)": [QT - 2 * k for k in range(KT) for _ in range(64)],
    "GQA 64/8 non-causal": [8 * QT for _ in range(KT * 8)],
    "MHA non-causal": [QT for _ in range(KT * 64)],
}
if __name__ == "__main__":
    for name, jobs in CASES.items():
        print(f"{name:66s} {len(jobs):5d} CTAs  makespan / ideal {makespan_over_ideal(jobs):.3f}")
