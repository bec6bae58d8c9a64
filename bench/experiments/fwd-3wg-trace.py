#!/usr/bin/env python3
"""Reads the SM-clock trace of fwd-3wg-trace.patch (FA8_TRACE=FILE) and prints, per consumer warpgroup, the mean
cycles of each phase of a key-tile step, then how the warpgroups' phases overlap in time.

Phases of step it (points 0..5 of the patch): vready = the V^t permute's barrier (0->1), PV = P^V^ issue and
wait (1->2), full = the stage's K/V wait (2->3), QK = S's issue and wait (3->4), softmax (4->5, O's rescale
included), loop = 5 -> the next step's 0. A five-point trace (the patch before 2026-12-02's second call) has no
vready point: its PV phase includes that wait.
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
    npts = len(next(iter(rows[wgs[0]].values())))
    names = (['vready'] if npts == 6 else []) + ['PV', 'full', 'QK', 'softmax', 'loop']
    g0 = npts - 5   # index of the PV phase's first point
    print('| wg | steps | ' + ' | '.join(names) + ' | step |')
    print('|---|---|' + '---|' * (len(names) + 1))
    for w in wgs:
        its = sorted(i for i in rows[w] if i + 1 in rows[w])
        sums = [0.0] * npts
        for i in its:
            t, n = rows[w][i], rows[w][i + 1]
            for k in range(npts - 1):
                sums[k] += t[k + 1] - t[k]
            sums[npts - 1] += n[0] - t[npts - 1]
        n_ = len(its)
        step = sum(sums) / n_
        print(f'| {w} | {n_} | ' + ' | '.join(f'{x / n_:.0f}' for x in sums) + f' | {step:.0f} |')
    # overlap over the window every warpgroup covers
    lo = max(min(r[0] for r in rows[w].values()) for w in wgs)
    hi = min(max(r[-1] for r in rows[w].values()) for w in wgs)
    events = []
    for w in wgs:
        for r in rows[w].values():
            for a, b, kind in ((r[g0], r[g0 + 1], 'g'), (r[g0 + 2], r[g0 + 3], 'g'), (r[g0 + 3], r[g0 + 4], 's')):
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
