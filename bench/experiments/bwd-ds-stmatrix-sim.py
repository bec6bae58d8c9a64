#!/usr/bin/env python3
"""Simulates, lane by lane, the dS^ store of bwd-ds-stmatrix.patch and the K^t pass it needs, and checks that dQ's
GEMM pairs the same key on both sides. One consumer warpgroup's A fragments (da[kb][r]: key row warp*16 + g + 8 (r&1),
the codes of queries kb*32 + (r>>1)*16 + 2t, 2t+1, 8+2t, 9+2t: fa8_acc_to_a's order) are joined by two byte_perms
per register pair (keys g and g+8 side by side) and stored by stmatrix.m8n8.x4.trans.b16 (fragment element (row,
col) of matrix i goes to memory row col, b16 slot row; lane 8i + c gives row c's address), with the 64-byte swizzle.
K^t's 16-byte units get the same byte order (four byte_perms a unit). Asserts: every byte of the 64 x 64 chunk is
written once, with a distinct (query, key); row q holds query q only; and byte j of every 16-byte unit holds key
16 u + pi(j) on both sides, so sum_j dS^[q][j] K^t[d][j] = sum_k dS[q][k] K[k][d]. Run: python3 THIS ("ok 4096")."""
def swz(row, k):
    off = row * 64 + k
    return off ^ ((off & 0x180) >> 3)
def unswz(addr):
    return addr ^ ((addr & 0x180) >> 3)   # the XOR touches bits 4-5 only, from bits 7-8, which it leaves alone
def prmt(a, b, sel):
    src = a + b
    return [src[(sel >> (4 * i)) & 0xF] for i in range(4)]
out = {}
for warp in range(4):
    regs = {}
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for kb in range(2):
            for r in range(4):
                key = warp * 16 + g + (r & 1) * 8
                base = kb * 32 + (r >> 1) * 16
                regs[(lane, kb, r)] = [(base + q, key) for q in (2 * t, 2 * t + 1, 8 + 2 * t, 9 + 2 * t)]
    for kb in range(2):
        m = {}
        for lane in range(32):
            for qb in range(2):
                a, b = regs[(lane, kb, 2 * qb)], regs[(lane, kb, 2 * qb + 1)]
                m[(lane, 2 * qb)] = prmt(a, b, 0x5140)
                m[(lane, 2 * qb + 1)] = prmt(a, b, 0x7362)
        addr = {lane: swz(kb * 32 + 8 * (lane >> 3) + (lane & 7), warp * 16) for lane in range(32)}
        for i in range(4):                # matrix i
            for lane in range(32):        # the fragment's owner: row g = lane / 4, columns 2t, 2t+1
                g, t = lane >> 2, lane & 3
                for h in range(2):
                    col = 2 * t + h
                    dst = addr[8 * i + col] + 2 * g   # .trans: memory row col, b16 slot g
                    for byte in range(2):
                        assert dst + byte not in out
                        out[dst + byte] = m[(lane, i)][2 * h + byte]
assert len(out) == 4096 and len(set(out.values())) == 4096
pi = [(j >> 1) + 8 * (j & 1) for j in range(16)]
for addr, (q, key) in out.items():
    off = unswz(addr)
    row, k = off // 64, off % 64
    assert row == q, (addr, q, key)
    assert key == 16 * (k // 16) + pi[k % 16], (addr, q, key)
# K^t: one 16-byte unit (keys 16u..16u+15 of a row) as four words, permuted by the same selectors
unit = list(range(16))
x = [unit[4 * w:4 * w + 4] for w in range(4)]
y = prmt(x[0], x[2], 0x5140) + prmt(x[0], x[2], 0x7362) + prmt(x[1], x[3], 0x5140) + prmt(x[1], x[3], 0x7362)
assert y == pi, y
print("ok", len(out))
