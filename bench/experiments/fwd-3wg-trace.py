#!/usr/bin/env python3
"""Reads the SM-clock trace of fwd-3wg-trace.patch (FA8_TRACE=FILE) and prints, per consumer warpgroup, the mean
cycles of each phase of a key-tile step, then how the warpgroups' phases overlap in time.

Phases of step it (points 0..4 of the patch): PV = P^V^ issue and wait (0->1), full = the stage's K/V wait
(1->2), QK = S's issue and wait (2->3), softmax (3->4, O's rescale included), loop = 4 -> the next step's 0.
Overlap: at every cycle of the traced window, how many warpgroups are in a GEMM phase (PV or QK) and how many in
their softmax; 'lockstep' shows as time with all three in a GEMM phase and none in softmax."""
import sys
from collections import defaultdict


def main(path):
    rows = defaultdict(dict)   # wg -> it -> (t0..t4)
    for line in open(path):
        if line.startswith('#') or not line.strip():
            continue
        w, it, *t = line.split()
        rows[int(w)][int(it)] = [int(x) for x in t]
    wgs = sorted(rows)
    names = ['PV', 'full', 'QK', 'softmax', 'loop']
    print('| wg | steps | ' + ' | '.join(names) + ' | step |')
    print('|---|---|' + '---|' * (len(names) + 1))
    for w in wgs:
        its = sorted(i for i in rows[w] if i + 1 in rows[w])
        sums = [0.0] * 5
        for i in its:
            t, n = rows[w][i], rows[w][i + 1]
            for k in range(4):
                sums[k] += t[k + 1] - t[k]
            sums[4] += n[0] - t[4]
        n_ = len(its)
        step = sum(sums) / n_
        print(f'| {w} | {n_} | ' + ' | '.join(f'{x / n_:.0f}' for x in sums) + f' | {step:.0f} |')
    # overlap over the window every warpgroup covers
    lo = max(min(r[0] for r in rows[w].values()) for w in wgs)
    hi = min(max(r[4] for r in rows[w].values()) for w in wgs)
    events = []
    for w in wgs:
        for r in rows[w].values():
            for a, b, kind in ((r[0], r[1], 'g'), (r[2], r[3], 'g'), (r[3], r[4], 's')):
                a, b = max(a, lo), min(b, hi)
                if a < b:
                    events += [(a, kind, 1), (b, kind, -1)]
    events.sort()
    cnt = {'g': 0, 's': 0}
    hist = defaultdict(int)   # (gemm count, softmax count) -> cycles
    prev = lo
    for t, kind, d in events:
        hist[(cnt['g'], cnt['s'])] += t - prev
        cnt[kind] += d
        prev = t
    total = hi - lo
    print(f'\nwindow {total} cycles; share of time by (warpgroups in a GEMM phase, in softmax):')
    for k in sorted(hist, key=lambda k: -hist[k]):
        if hist[k] / total >= 0.01:
            print(f'  gemm {k[0]}, softmax {k[1]}: {100 * hist[k] / total:.1f} %')
    g_any = sum(v for k, v in hist.items() if k[0] > 0)
    s_any = sum(v for k, v in hist.items() if k[1] > 0)
    print(f'some GEMM phase open {100 * g_any / total:.1f} %, some softmax open {100 * s_any / total:.1f} %')


if __name__ == '__main__':
    main(sys.argv[1])
