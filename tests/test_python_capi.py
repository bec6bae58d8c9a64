#!/usr/bin/env python3
"""The ctypes binding (python/fa8/capi.py) against libfa8.so on the CPU backend: quantize + forward + backward
through raw pointers, checked against a float64 numpy reference on the dequantized inputs, and bad input raising
Fa8Error with the C API's message. Exit 77 (meson: skipped) without numpy."""
import ctypes as C
import os
import sys

try:
    import numpy as np
except ImportError:
    print("numpy not installed: skipped")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from fa8 import capi  # noqa: E402

L = capi.Lib(os.environ.get("FA8_LIBRARY"))
fails = passes = 0


def check(cond, what):
    global fails, passes
    print(("ok   " if cond else "FAIL ") + what)
    fails += 0 if cond else 1
    passes += 1 if cond else 0


def seq(a, dtype):
    s = [x // a.itemsize for x in a.strides]
    return capi.tensor(a.ctypes.data, dtype, s)


def rows(a):
    return capi.tensor(a.ctypes.data, "f32", [a.strides[0] // 4, a.strides[1] // 4, 1, 0])


def quantize(x, fmt="e4m3"):
    B, S, H, D = x.shape
    codes = np.zeros(x.shape, np.uint8)
    scales = np.zeros(B * H * ((S + 63) // 64), np.float32)
    qp = L.quant_problem(batch=B, seqlen=S, heads=H, hdim=D, fmt=fmt, scale_rows=64)
    q = capi.QTensor()
    q.data = seq(codes, "fp8")
    q.scales = scales.ctypes.data
    L.call("fa8_quantize", C.byref(qp), C.byref(seq(x, "f32")), C.byref(q), None, 0, None)
    # dequantize with the library's own decode table through the FP8 format definition (E4M3 OCP)
    e = ((codes >> 3) & 0xF).astype(np.int32)
    m = (codes & 7).astype(np.float64)
    v = np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * 2.0 ** (e - 7))
    v = np.where(codes & 0x80, -v, v)
    sc = scales.reshape(B, H, -1)[:, :, (np.arange(S) // 64)].transpose(0, 2, 1)[..., None]
    return q, codes, scales, v * sc


rng = np.random.default_rng(3)
B, S, H, Hkv, D = 1, 96, 4, 2, 64
x = {n: rng.standard_normal((B, S, h, D)).astype(np.float32) for n, h in (("q", H), ("k", Hkv), ("v", Hkv), ("do", H))}
# keep the code and scale arrays alive: the QTensors only hold their addresses
qq, *keep_q, qh = quantize(x["q"])
kq, *keep_k, kh = quantize(x["k"])
vq, *keep_v, vh = quantize(x["v"])
dq8, *keep_do, doh = quantize(x["do"])

p = L.problem(batch=B, seqlen_q=S, seqlen_k=S, heads=H, kv_heads=Hkv, hdim_qk=D, hdim_v=D, causal=1, delta="matched",
              collect_stats=1)
# the binding's struct ends where the C one does: fa8_problem_init's last field (scale_rows, 128) reads back here
check(p.scale_rows == 128 and p.collect_stats == 1, "Problem mirrors fa8_problem (scale_rows %d)" % p.scale_rows)
o = np.zeros((B, S, H, D), np.uint16)
o32 = np.zeros((B, S, H, D), np.float32)
lse = np.zeros((B, H, S), np.float32)
f = capi.FwdTensors(q=qq, k=kq, v=vq, o=seq(o, "bf16"), o_f32=seq(o32, "f32"), lse=rows(lse))
L.call("fa8_forward", C.byref(p), C.byref(f), None, 0, None)

# float64 reference on the dequantized inputs
g = H // Hkv
kr, vr = np.repeat(kh, g, axis=2), np.repeat(vh, g, axis=2)
s = np.einsum("bihd,bjhd->bhij", qh, kr) / np.sqrt(D)
s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
pr = np.exp(s - s.max(-1, keepdims=True))
pr /= pr.sum(-1, keepdims=True)
oref = np.einsum("bhij,bjhd->bihd", pr, vr)
err = np.linalg.norm(o32 - oref) / np.linalg.norm(oref)
check(1e-4 < err < 5e-2, f"forward O matches float64 within FP8 error ({err:.2e})")
lref = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
check(np.abs(lse - lref).max() < 1e-4, f"LSE matches ({np.abs(lse - lref).max():.1e})")

ws_size = C.c_size_t()
L.call("fa8_backward_workspace", C.byref(p), C.byref(ws_size))
ws = np.zeros(ws_size.value // 8 + 1, np.float64)
delta = np.zeros((B, H, S), np.float32)
dq = np.zeros((B, S, H, D), np.float32)
dk = np.zeros((B, S, Hkv, D), np.float32)
dv = np.zeros((B, S, Hkv, D), np.float32)
stats = capi.RowsumStats()
bt = capi.BwdTensors(q=qq, k=kq, v=vq, dout_q=dq8, dout=seq(x["do"], "f32"), o=seq(o, "bf16"), lse=rows(lse),
                     delta=rows(delta), dq=seq(dq, "f32"), dk=seq(dk, "f32"), dv=seq(dv, "f32"), stats=C.pointer(stats))
L.call("fa8_backward", C.byref(p), C.byref(bt), ws.ctypes.data, ws_size.value, None)
check(stats.rows == B * H * S and stats.pre_ra_max < 1e-5, f"matched pre-cast row sums {stats.pre_ra_max:.1e}")
dp = np.einsum("bihd,bjhd->bhij", doh, vr)
dref = (pr * dp).sum(-1)
check(np.abs(delta - dref).max() < 1e-4 * np.abs(dref).max() + 1e-6, "matched delta = sum_j P dP^")
dsr = pr * (dp - dref[..., None])
dvref = np.einsum("bhij,bihd->bjhd", pr, doh).reshape(B, S, Hkv, g, D).sum(3)
dkref = (np.einsum("bhij,bihd->bjhd", dsr, qh) / np.sqrt(D)).reshape(B, S, Hkv, g, D).sum(3)
for name, a, r in (("dV", dv, dvref), ("dK", dk, dkref)):
    e = np.linalg.norm(a - r) / np.linalg.norm(r)
    check(e < 0.1, f"{name} matches float64 within FP8 error ({e:.2e})")

# bad input names the argument
try:
    L.call("fa8_forward", C.byref(L.problem(heads=6, kv_heads=4)), C.byref(f), None, 0, None)
    check(False, "heads % kv_heads refused")
except capi.Fa8Error as e:
    check("kv_heads" in str(e) and "6" in str(e), f"heads % kv_heads refused: {e}")
bad = capi.FwdTensors(q=qq, k=kq, v=vq, o=capi.tensor(None, "bf16", [0, 0, 0, 1]), lse=rows(lse))
try:
    L.call("fa8_forward", C.byref(p), C.byref(bad), None, 0, None)
    check(False, "NULL o refused")
except capi.Fa8Error as e:
    check("o.data" in str(e), f"NULL o refused: {e}")

# dispatch and tuning API (fa8.h): names, why, candidates, keys, tuning switches, bucket, device info
names = L.dispatch(p)
check(names["fwd"].startswith("fa8_fwd_cpu") and names["bwd"].startswith("fa8_bwd_cpu") and names["fwd_why"] != "",
      f"dispatch names + why: {names['fwd']} ({names['fwd_why']})")
cands = L.candidates(p)
check(names["fwd"] in cands, f"forward candidates hold the dispatched instance ({len(cands)})")
bund = L.candidates(p, backward=True)
check(len(bund) >= 1 and L.bundle_backward(bund[0]) is not None and L.instance_key(bund[0]) is not None,
      f"backward bundles {bund[:1]} -> {L.bundle_backward(bund[0]) if bund else None}")
check(L.instance_key("no_such_instance") is None, "instance_key of an unknown name is None")
L.tuning_enable(False)
check("disabled" in L.dispatch(p)["fwd_why"], "tuning_enable(False): heuristic dispatch")
L.tuning_enable(True)
try:
    L.tuning_overlay("/nonexistent/fa8-table.csv")
    check(False, "missing overlay refused")
except capi.Fa8Error as e:
    check("/nonexistent/fa8-table.csv" in str(e), f"missing overlay refused: {e}")
L.tuning_overlay(None)
check(L.tuning_bucket(p) == (128, 4), f"tuning bucket {L.tuning_bucket(p)}")
check(L.device_info(p)[0] == "cpu" and len(L.generator_hash()) > 0, f"device_info {L.device_info(p)}")
qp = L.quant_problem(batch=B, seqlen=S, heads=H, hdim=D, scale_rows=64)
check(L.quant_scale_count(qp) == B * H * 2, "quant_scale_count")
print(f"{passes} passed, {fails} failed")
sys.exit(1 if fails else 0)
