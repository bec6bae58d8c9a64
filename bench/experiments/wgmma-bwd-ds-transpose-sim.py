#!/usr/bin/env python3
"""Simulates, lane by lane, the dS^ store of wgmma-bwd-ds-packed-stores.patch: one consumer warpgroup's A fragments
(key rows, 4 query codes per register) go through two shfl_xor + byte_perm rounds (the patch's selectors) and are
stored as 32-bit words at the patch's (query, key) addresses with the 64-byte swizzle; asserts that every byte
lands where the per-element store of the current template puts it. Run: python3 THIS (prints "ok 4096")."""
def swz(row, k):
    off = row * 64 + k
    return off ^ ((off & 0x180) >> 3)
ref = {}
for key in range(64):
    for q in range(64):
        ref[swz(q, key)] = (key, q)
out = {}
for warp in range(4):
    # A fragments per lane: da[kb][r] = 4 bytes (key row, queries kb*32 + (r>>1)*16 + 4t + b)
    regs = {}
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for kb in range(2):
            for r in range(4):
                key = warp * 16 + g + (r & 1) * 8
                regs[(lane, kb, r)] = [(key, kb * 32 + (r >> 1) * 16 + 4 * t + b) for b in range(4)]
    def prmt(a, b, sel):
        src = a + b
        return [src[(sel >> (4 * i)) & 0xF] for i in range(4)]
    for kb in range(2):
        for r in range(4):
            w = {lane: regs[(lane, kb, r)] for lane in range(32)}
            sel1 = {l: (0x5410 if ((l >> 2) & 3) < 2 else 0x3276) for l in range(32)}
            sel2 = {l: (0x3715 if ((l >> 2) & 1) else 0x6240) for l in range(32)}
            w = {l: prmt(w[l], w[l ^ 8], sel1[l]) for l in range(32)}
            w = {l: prmt(w[l], w[l ^ 4], sel2[l]) for l in range(32)}
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                j = g & 3
                q = kb * 32 + (r >> 1) * 16 + 4 * t + j
                k = warp * 16 + (r & 1) * 8 + (g & ~3)
                a = swz(q, k)
                assert a % 4 == 0
                for b in range(4):
                    assert a + b not in out
                    out[a + b] = w[lane][b]
assert out == ref, [(a, out.get(a), ref[a]) for a in ref if out.get(a) != ref[a]][:5]
print("ok", len(out))
