#!/usr/bin/env python3
"""The quantizer's own error under both scale conventions (docs/numerics.md, "Why power-of-two by default"):
fa8_quantize (CPU backend, e4m3, 128-row blocks) on synthetic [1, S, 4, 128] tensors of several magnitude
distributions, with power-of-two scales and with amax scales; prints ||x - x̂|| / ||x|| for each, and the same
leaving out every block's largest element (amax scales store that one exactly). Stdlib only (ctypes + fa8.capi).

    python3 bench/quant_error.py [--library build/libfa8.so] [--seqlen 512] [--seed 5]
"""
import argparse
import ctypes as C
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from fa8 import capi  # noqa: E402

H, D, ROWS = 4, 128, 128


def e4m3(code):
    """decode one e4m3 (OCP, fn) code"""
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 15, code & 7
    return s * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


DECODE = [e4m3(c) for c in range(256)]

DISTRIBUTIONS = {
    "gaussian": lambda r, d: r.gauss(0, 1),
    "gaussian, 4 outlier channels x6": lambda r, d: r.gauss(0, 1) * (6.0 if d < 4 else 1.0),
    "log-normal magnitudes, sigma 0.5": lambda r, d: r.gauss(0, 1) * math.exp(r.gauss(0, 0.5)),
    "log-normal magnitudes, sigma 1.0": lambda r, d: r.gauss(0, 1) * math.exp(r.gauss(0, 1.0)),
    "log-normal magnitudes, sigma 1.5": lambda r, d: r.gauss(0, 1) * math.exp(r.gauss(0, 1.5)),
    "log-normal 1.0, 4 outlier channels x6": lambda r, d: r.gauss(0, 1) * math.exp(r.gauss(0, 1.0)) * (6.0 if d < 4 else 1.0),
}


def errors(L, x, S, pow2):
    """(relative error of all elements, relative error without each block's largest element)"""
    n = S * H * D
    qp = L.quant_problem(batch=1, seqlen=S, heads=H, hdim=D, fmt="e4m3", scale_rows=ROWS, backend="cpu",
                         pow2_scales=int(pow2))
    codes, scales = (C.c_uint8 * n)(), (C.c_float * L.quant_scale_count(qp))()
    out = capi.QTensor()
    out.data = capi.tensor(C.addressof(codes), "fp8", [n, H * D, D, 1])
    out.data_t = capi.tensor(None, "fp8", [0, 0, 0, 0])
    out.scales = C.addressof(scales)
    L.call("fa8_quantize", C.byref(qp), C.byref(capi.tensor(C.addressof(x), "f32", [n, H * D, D, 1])), C.byref(out),
           None, 0, None)
    nblk = (S + ROWS - 1) // ROWS
    block = lambda i: ((i // D) % H) * nblk + (i // (H * D)) // ROWS   # scales are [B, H, nblk]
    top = {}
    for i in range(n):
        top[block(i)] = max(top.get(block(i), 0.0), abs(x[i]))
    num = den = num_rest = den_rest = 0.0
    for i in range(n):
        e2 = (x[i] - DECODE[codes[i]] * scales[block(i)]) ** 2
        num, den = num + e2, den + x[i] ** 2
        if abs(x[i]) < top[block(i)]:
            num_rest, den_rest = num_rest + e2, den_rest + x[i] ** 2
    return math.sqrt(num / den), math.sqrt(num_rest / den_rest)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", help="libfa8.so (default: $FA8_LIBRARY, else build/libfa8.so)")
    ap.add_argument("--seqlen", type=int, default=512)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args(argv)
    if a.seqlen < 1:
        ap.error(f"--seqlen {a.seqlen} is not a length >= 1")
    L = capi.Lib(a.library)
    print("| values | amax scales | power-of-two | ratio | ratio without each block's largest |")
    print("|---|---|---|---|---|")
    for name, gen in DISTRIBUTIONS.items():
        rnd = random.Random(a.seed)
        x = (C.c_float * (a.seqlen * H * D))(*(gen(rnd, i % D) for i in range(a.seqlen * H * D)))
        (amax, amax_rest), (p2, p2_rest) = errors(L, x, a.seqlen, False), errors(L, x, a.seqlen, True)
        print(f"| {name} | {amax:.4e} | {p2:.4e} | {p2 / amax:.3f} | {p2_rest / amax_rest:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
