"""fa8 for PyTorch: FP8 attention as an autograd-aware custom op over libfa8.so (through fa8.capi / ctypes).

    import fa8
    o = fa8.attention(q, k, v, causal=True, delta="matched")     # q [B,Sq,H,Dqk], k [B,Sk,Hkv,Dqk], v [B,Sk,Hkv,Dv]

* Inputs: BF16 tensors [B, S, heads, D] (the layout of fa8.h: sequence-major, heads third), on one CUDA device
  (fa8's CUDA backend) or on the CPU (fa8's portable-C backend: slow, for tests). H % Hkv == 0 (MHA/GQA/MQA);
  Dqk != Dv (MLA) where the build holds that geometry (192x128 in every profile). Any strides whose last one is
  1 are passed to fa8 as they are; other views (last stride != 1, broadcast dims with stride 0) are copied
  with .contiguous() first.
* Inside: fa8_quantize (fa8's quantizer, block scales of `scale_rows` rows) for Q, K, V in the forward and dO
  in the backward, fa8_forward (O BF16, LSE, and the BF16 remainder for delta="split"), fa8_backward
  (delta prep + backward; dQ/dK/dV FP32 from fa8, GQA's dK/dV summed over the group of query heads by fa8,
  returned as BF16). The forward saves the FP8 codes (+ transposed copies on the GPU) and scales, O, LSE and
  the remainder: the backward re-quantizes nothing but dO.
* pow2_scales: block scales rounded up to powers of two (default, exact descaling; docs/numerics.md), False:
  amax / fmt max; one convention for Q, K, V and dO.
* Every fa8 call runs on torch's current stream of the tensors' device; buffers and workspace come from torch's
  allocator (fa8 never allocates).
* `torch.library.custom_op`s fa8::attention_fwd / fa8::attention_bwd with fake (meta) implementations and
  registered autograd: torch.compile(fullgraph=True) traces fa8.attention without a graph break.
* Errors: TypeError for a wrong type/dtype (causal and pow2_scales take a bool), ValueError naming the bad value
  (device, shape, head counts, delta, scale, a head geometry this build has no kernel for: fa8's own error text).
  Other fa8 failures raise fa8.capi.Fa8Error (RuntimeError) with fa8_last_error()'s text.

The library: $FA8_LIBRARY, else build/libfa8.so of this checkout (fa8.capi._find_library); fa8.torch.set_library()
picks one explicitly (before the first call)."""
import ctypes
import math
import threading
from typing import Optional, Tuple

import torch

from . import capi

Tensor = torch.Tensor
DELTA_MODES = tuple(capi.DELTA)            # ("stale", "dohat", "matched", "split")
FP8_FORMATS = ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz")
DEFAULT_SCALE_ROWS = 128                   # multiple of every tile (64, 128): the Hopper wgmma forward fits
_VALUE_STATUS = (1, 3, 4, 5)               # INVALID_ARGUMENT, MISALIGNED, BAD_STRIDES, UNSUPPORTED

_lock = threading.Lock()
_lib_path = None
_lib = None
_supported = {}


class Fa8ValueError(capi.Fa8Error, ValueError):
    """An fa8 refusal of a value (a shape, a head geometry no kernel covers, ...): both ValueError and Fa8Error."""


def set_library(path):
    """Use this libfa8.so (before the first attention call)."""
    global _lib_path, _lib
    with _lock:
        _lib_path, _lib = path, None


def lib():
    """The loaded capi.Lib (loaded once)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = capi.Lib(_lib_path)
    return _lib


def _raise(L, status):
    msg = L.lib.fa8_last_error().decode()
    if status in _VALUE_STATUS:
        raise Fa8ValueError(status, msg)
    raise capi.Fa8Error(status, msg)


def _call(L, name, *args):
    st = getattr(L.lib, name)(*args)
    if st != 0:
        _raise(L, st)


# ---------------------------------------------------------------------------------------------------------------
# argument checks (pure torch: torch.compile traces them as guards)

def _check_inputs(q, k, v, causal, scale, delta, fmt, grad_fmt, scale_rows, pow2_scales=True):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"fa8.attention: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype != torch.bfloat16:
            raise TypeError(f"fa8.attention: {name}.dtype is {t.dtype}; fa8 takes torch.bfloat16 [B, S, heads, D] "
                            "(cast with .to(torch.bfloat16); under autocast, cast q/k/v explicitly)")
        if t.dim() != 4:
            raise ValueError(f"fa8.attention: {name} has shape {tuple(t.shape)}; expected 4 dims [B, S, heads, D]")
        if t.device.type not in ("cuda", "cpu"):
            raise ValueError(f"fa8.attention: {name} is on device {t.device}; fa8 runs on cuda (or the cpu backend)")
    if k.device != q.device or v.device != q.device:
        raise ValueError(f"fa8.attention: q, k, v on different devices ({q.device}, {k.device}, {v.device})")
    B, Sq, H, Dqk = q.shape
    if k.shape[0] != B or v.shape[0] != B:
        raise ValueError(f"fa8.attention: batch sizes differ: q {B}, k {k.shape[0]}, v {v.shape[0]}")
    if k.shape[3] != Dqk:
        raise ValueError(f"fa8.attention: head dim of k ({k.shape[3]}) differs from q's ({Dqk})")
    if v.shape[1] != k.shape[1] or v.shape[2] != k.shape[2]:
        raise ValueError(f"fa8.attention: v {tuple(v.shape)} and k {tuple(k.shape)} must agree in seqlen and kv heads")
    Hkv = k.shape[2]
    if min(Sq, k.shape[1], H, Hkv, Dqk, v.shape[3]) < 1:
        raise ValueError(f"fa8.attention: empty dimension in q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if H % Hkv != 0:
        raise ValueError(f"fa8.attention: query heads ({H}) are not a multiple of kv heads ({Hkv})")
    if not isinstance(delta, str) or delta not in DELTA_MODES:
        raise ValueError(f"fa8.attention: delta={delta!r}; expected one of {', '.join(DELTA_MODES)}")
    if fmt not in FP8_FORMATS:
        raise ValueError(f"fa8.attention: fmt={fmt!r}; expected one of {', '.join(FP8_FORMATS)}")
    if grad_fmt not in FP8_FORMATS:
        raise ValueError(f"fa8.attention: grad_fmt={grad_fmt!r}; expected one of {', '.join(FP8_FORMATS)}")
    if not isinstance(causal, bool):
        raise TypeError(f"fa8.attention: causal must be a bool, got {causal!r}")
    if scale is not None and (not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0):
        raise ValueError(f"fa8.attention: scale={scale!r}; expected a finite float > 0 (None: 1/sqrt(D_qk))")
    if not isinstance(scale_rows, int) or scale_rows < 0:
        raise ValueError(f"fa8.attention: scale_rows={scale_rows!r}; expected an int >= 0 (0: one scale per tensor)")
    if not isinstance(pow2_scales, bool):
        raise TypeError(f"fa8.attention: pow2_scales must be a bool, got {pow2_scales!r} "
                        "(True: power-of-two block scales, False: amax / fmt max)")


# ---------------------------------------------------------------------------------------------------------------
# plumbing: torch tensors -> fa8_tensor / fa8_qtensor views

def _backend(t):
    return "cuda" if t.device.type == "cuda" else "cpu"


def _stream(t):
    """torch's current stream on t's device, as the void* fa8 takes (None on the CPU)."""
    return torch.cuda.current_stream(t.device).cuda_stream if t.device.type == "cuda" else None


class _DeviceGuard:
    def __init__(self, t):
        self.ctx = torch.cuda.device(t.device) if t.device.type == "cuda" else None

    def __enter__(self):
        if self.ctx is not None:
            self.ctx.__enter__()

    def __exit__(self, *exc):
        if self.ctx is not None:
            self.ctx.__exit__(*exc)


def _usable(x):
    """x itself when fa8 can read it through its strides (last stride 1, no aliasing stride 0), else a copy."""
    if x.stride(-1) != 1 and x.shape[-1] > 1:
        return x.contiguous()
    if any(s == 0 and n > 1 for s, n in zip(x.stride(), x.shape)):
        return x.contiguous()
    return x


def _seq(t, dtype):
    return capi.tensor(t.data_ptr(), dtype, list(t.stride()))


def _rows(t):
    """[B, H, S] float32 row statistics."""
    return capi.tensor(t.data_ptr(), "f32", [t.stride(0), t.stride(1), 1, 0])


def _none():
    return capi.tensor(None, "bf16", [0, 0, 0, 0])


def _nblocks(S, scale_rows):
    return 1 if scale_rows <= 0 or scale_rows >= S else (S + scale_rows - 1) // scale_rows


def _spad(S):
    return (S + 15) // 16 * 16


def _qshapes(x_shape, scale_rows, gpu):
    B, S, H, D = x_shape
    return (B, S, H, D), ((B, H, D, _spad(S)) if gpu else (0,)), (B, H, _nblocks(S, scale_rows))


def _qtensor(codes, codes_t, scales, scale_rows, fmt):
    q = capi.QTensor()
    q.data = _seq(codes, "fp8")
    q.data_t = _seq(codes_t, "fp8") if codes_t.numel() else capi.tensor(None, "fp8", [0, 0, 0, 0])
    q.scales = scales.data_ptr()
    q.scale_rows = scale_rows
    q.fmt = capi.FMT[fmt]
    return q


def _quantize(L, x, fmt, scale_rows, stream, pow2_scales=True):
    """fa8_quantize of a BF16 [B,S,H,D] tensor: (codes uint8 [B,S,H,D], transposed codes [B,H,D,S_pad] on the
    GPU (empty on the CPU, which does not read them), scales float32 [B,H,nblk]). pow2_scales: block scales
    rounded up to powers of two (True) or amax / fmt max (False)."""
    x = _usable(x)
    gpu = x.device.type == "cuda"
    B, S, H, D = x.shape
    s_codes, s_t, s_sc = _qshapes(x.shape, scale_rows, gpu)
    codes = torch.empty(s_codes, dtype=torch.uint8, device=x.device)
    codes_t = torch.empty(s_t, dtype=torch.uint8, device=x.device)
    scales = torch.empty(s_sc, dtype=torch.float32, device=x.device)
    qp = L.quant_problem(batch=B, seqlen=S, heads=H, hdim=D, fmt=fmt, scale_rows=scale_rows,
                         pow2_scales=int(bool(pow2_scales)), backend=_backend(x))
    ws_bytes = _size(L, "fa8_quantize_workspace", qp)
    ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device=x.device) if ws_bytes else None
    out = _qtensor(codes, codes_t, scales, scale_rows, fmt)
    _call(L, "fa8_quantize", _ref(qp), _ref(_seq(x, "bf16")), _ref(out),
          ws.data_ptr() if ws is not None else None, ws_bytes, stream)
    return codes, codes_t, scales


def _ref(x):
    return ctypes.byref(x)


def _size(L, fn, p):
    """A workspace query: bytes."""
    n = ctypes.c_size_t()
    _call(L, fn, ctypes.byref(p), ctypes.byref(n))
    return n.value


def _problem(L, dev_t, B, Sq, Sk, H, Hkv, Dqk, Dv, causal, scale, delta, fmt, grad_fmt, collect_stats=0):
    return L.problem(batch=B, seqlen_q=Sq, seqlen_k=Sk, heads=H, kv_heads=Hkv, hdim_qk=Dqk, hdim_v=Dv,
                     causal=int(causal), softmax_scale=float(scale), delta=delta, fmt_qkv=fmt, fmt_grad=grad_fmt,
                     backend=_backend(dev_t), collect_stats=int(collect_stats))


def check_supported(device, B, Sq, Sk, H, Hkv, Dqk, Dv, causal, delta="matched", fmt="e4m3", grad_fmt="e4m3",
                    scale_rows=DEFAULT_SCALE_ROWS):
    """Raise Fa8ValueError (a ValueError, with fa8's text naming the geometry) when this build has no forward,
    delta prep or backward for the problem on `device` with scale blocks of `scale_rows` rows (0: per-tensor);
    cached per problem key. Returns fa8_dispatch's names (some instances serve only some scale layouts)."""
    dev = torch.device(device)
    key = (dev.type, dev.index, B, Sq, Sk, H, Hkv, Dqk, Dv, bool(causal), delta, fmt, grad_fmt, scale_rows)
    hit = _supported.get(key)
    if hit is not None:
        return hit
    L = lib()
    p = L.problem(batch=B, seqlen_q=Sq, seqlen_k=Sk, heads=H, kv_heads=Hkv, hdim_qk=Dqk, hdim_v=Dv,
                  causal=int(causal), delta=delta, fmt_qkv=fmt, fmt_grad=grad_fmt,
                  backend="cuda" if dev.type == "cuda" else "cpu", scale_rows=scale_rows)
    n = capi.DispatchNames()
    if dev.type == "cuda":
        with torch.cuda.device(dev):
            st = L.lib.fa8_dispatch(ctypes.byref(p), ctypes.byref(n))
    else:
        st = L.lib.fa8_dispatch(ctypes.byref(p), ctypes.byref(n))
    if st != 0:
        _raise(L, st)
    names = {f: (getattr(n, f) or b"").decode() for f, _ in capi.DispatchNames._fields_}
    _supported[key] = names
    return names


# ---------------------------------------------------------------------------------------------------------------
# the two halves, as plain functions (the custom ops and attention_with_stats call them)

def _forward(q, k, v, causal, scale, delta, fmt, grad_fmt, scale_rows, pow2_scales=True):
    L = lib()
    B, Sq, H, Dqk = q.shape
    Sk, Hkv, Dv = k.shape[1], k.shape[2], v.shape[3]
    check_supported(q.device, B, Sq, Sk, H, Hkv, Dqk, Dv, causal, delta, fmt, grad_fmt, scale_rows)
    dev = q.device
    with _DeviceGuard(q):
        stream = _stream(q)
        qq, kq, vq = (_quantize(L, x, fmt, scale_rows, stream, pow2_scales) for x in (q, k, v))
        p = _problem(L, q, B, Sq, Sk, H, Hkv, Dqk, Dv, causal, scale, delta, fmt, "e4m3")
        o = torch.empty(B, Sq, H, Dv, dtype=torch.bfloat16, device=dev)
        o_rem = torch.empty((B, Sq, H, Dv) if delta == "split" else (0,), dtype=torch.bfloat16, device=dev)
        lse = torch.empty(B, H, Sq, dtype=torch.float32, device=dev)
        ws_bytes = _size(L, "fa8_forward_workspace", p)
        ws = torch.empty(ws_bytes, dtype=torch.uint8, device=dev) if ws_bytes else None
        f = capi.FwdTensors(q=_qtensor(*qq, scale_rows, fmt), k=_qtensor(*kq, scale_rows, fmt),
                            v=_qtensor(*vq, scale_rows, fmt), o=_seq(o, "bf16"), o_f32=_none(),
                            o_rem=_seq(o_rem, "bf16") if o_rem.numel() else _none(), lse=_rows(lse))
        _call(L, "fa8_forward", _ref(p), _ref(f), ws.data_ptr() if ws is not None else None, ws_bytes, stream)
    return (o, lse, o_rem) + qq + kq + vq


def _backward(dout, o, lse, o_rem, q8, q8t, qs, k8, k8t, ks, v8, v8t, vs, causal, scale, delta, fmt, grad_fmt,
              scale_rows, pow2_scales=True, collect_stats=False):
    L = lib()
    B, Sq, H, Dqk = q8.shape
    Sk, Hkv, Dv = k8.shape[1], k8.shape[2], v8.shape[3]
    dev = q8.device
    if dout.dtype != torch.bfloat16:
        dout = dout.to(torch.bfloat16)
    dout = _usable(dout)
    with _DeviceGuard(q8):
        stream = _stream(q8)
        dq8 = _quantize(L, dout, grad_fmt, scale_rows, stream, pow2_scales)   # dO: the forward's convention
        p = _problem(L, q8, B, Sq, Sk, H, Hkv, Dqk, Dv, causal, scale, delta, fmt, grad_fmt, collect_stats)
        delta_t = torch.empty(B, H, Sq, dtype=torch.float32, device=dev)
        dq = torch.empty(B, Sq, H, Dqk, dtype=torch.float32, device=dev)
        dk = torch.empty(B, Sk, Hkv, Dqk, dtype=torch.float32, device=dev)
        dv = torch.empty(B, Sk, Hkv, Dv, dtype=torch.float32, device=dev)
        ws_bytes = _size(L, "fa8_backward_workspace", p)
        ws = torch.empty(ws_bytes // 8 + 1, dtype=torch.float64, device=dev) if ws_bytes else None
        stats = capi.RowsumStats()
        b = capi.BwdTensors(q=_qtensor(q8, q8t, qs, scale_rows, fmt), k=_qtensor(k8, k8t, ks, scale_rows, fmt),
                            v=_qtensor(v8, v8t, vs, scale_rows, fmt), dout_q=_qtensor(*dq8, scale_rows, grad_fmt),
                            dout=_seq(dout, "bf16"), o=_seq(o, "bf16"),
                            o_rem=_seq(o_rem, "bf16") if o_rem.numel() else _none(), lse=_rows(lse),
                            delta=_rows(delta_t), dq=_seq(dq, "f32"), dk=_seq(dk, "f32"), dv=_seq(dv, "f32"),
                            stats=ctypes.pointer(stats) if collect_stats else None)
        _call(L, "fa8_backward", _ref(p), _ref(b), ws.data_ptr() if ws is not None else None, ws_bytes, stream)
    if collect_stats:
        return dq, dk, dv, delta_t, {n: getattr(stats, n) for n, _ in capi.RowsumStats._fields_}
    return dq.to(torch.bfloat16), dk.to(torch.bfloat16), dv.to(torch.bfloat16)


# ---------------------------------------------------------------------------------------------------------------
# custom ops (torch.library): fa8::attention_fwd, fa8::attention_bwd

_T12 = Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]


@torch.library.custom_op("fa8::attention_fwd", mutates_args=())
def attention_fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, delta: str, fmt: str,
                  grad_fmt: str, scale_rows: int, pow2_scales: bool) -> _T12:
    """(o, lse, o_rem, q8, q8t, qs, k8, k8t, ks, v8, v8t, vs). grad_fmt is the backward's (kept for autograd);
    pow2_scales: power-of-two block scales (True) or amax / fmt max (False), for Q, K, V here and dO there."""
    return _forward(q, k, v, causal, scale, delta, fmt, grad_fmt, scale_rows, pow2_scales)


@attention_fwd.register_fake
def _attention_fwd_fake(q, k, v, causal, scale, delta, fmt, grad_fmt, scale_rows, pow2_scales):
    B, Sq, H, Dqk = q.shape
    Sk, Hkv, Dv = k.shape[1], k.shape[2], v.shape[3]
    if q.device.type in ("cuda", "cpu") and all(isinstance(n, int) for n in (B, Sq, Sk, H, Hkv, Dqk, Dv)):
        # refuse at trace time what fa8 would refuse at run time (fa8_dispatch is host-only)
        check_supported(q.device, B, Sq, Sk, H, Hkv, Dqk, Dv, causal, delta, fmt, grad_fmt, scale_rows)
    gpu = q.device.type == "cuda"
    out = [q.new_empty((B, Sq, H, Dv), dtype=torch.bfloat16), q.new_empty((B, H, Sq), dtype=torch.float32),
           q.new_empty((B, Sq, H, Dv) if delta == "split" else (0,), dtype=torch.bfloat16)]
    for x in (q, k, v):
        s_codes, s_t, s_sc = _qshapes(x.shape, scale_rows, gpu)
        out += [x.new_empty(s_codes, dtype=torch.uint8), x.new_empty(s_t, dtype=torch.uint8),
                x.new_empty(s_sc, dtype=torch.float32)]
    return tuple(out)


@torch.library.custom_op("fa8::attention_bwd", mutates_args=())
def attention_bwd(dout: Tensor, o: Tensor, lse: Tensor, o_rem: Tensor, q8: Tensor, q8t: Tensor, qs: Tensor,
                  k8: Tensor, k8t: Tensor, ks: Tensor, v8: Tensor, v8t: Tensor, vs: Tensor, causal: bool,
                  scale: float, delta: str, fmt: str, grad_fmt: str, scale_rows: int,
                  pow2_scales: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) in BF16, shaped like q, k, v (GQA: dk, dv summed over each group by fa8)."""
    return _backward(dout, o, lse, o_rem, q8, q8t, qs, k8, k8t, ks, v8, v8t, vs, causal, scale, delta, fmt,
                     grad_fmt, scale_rows, pow2_scales)


@attention_bwd.register_fake
def _attention_bwd_fake(dout, o, lse, o_rem, q8, q8t, qs, k8, k8t, ks, v8, v8t, vs, causal, scale, delta, fmt,
                        grad_fmt, scale_rows, pow2_scales):
    return (q8.new_empty(q8.shape, dtype=torch.bfloat16), k8.new_empty(k8.shape, dtype=torch.bfloat16),
            v8.new_empty((v8.shape[0], v8.shape[1], v8.shape[2], v8.shape[3]), dtype=torch.bfloat16))


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale, delta, fmt, grad_fmt, scale_rows, pow2_scales = inputs
    ctx.save_for_backward(*output)
    ctx.args = (causal, scale, delta, fmt, grad_fmt, scale_rows, pow2_scales)


def _backward_formula(ctx, grad_o, *unused):
    if grad_o is None:
        return (None,) * 10                     # one per input of fa8::attention_fwd
    dq, dk, dv = torch.ops.fa8.attention_bwd(grad_o, *ctx.saved_tensors, *ctx.args)
    return (dq, dk, dv) + (None,) * 7           # causal, scale, delta, fmt, grad_fmt, scale_rows, pow2_scales


attention_fwd.register_autograd(_backward_formula, setup_context=_setup_context)


# ---------------------------------------------------------------------------------------------------------------
# public API

def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: Optional[float] = None,
              delta: str = "matched", fmt: str = "e4m3", grad_fmt: str = "e4m3",
              scale_rows: int = DEFAULT_SCALE_ROWS, pow2_scales: bool = True) -> Tensor:
    """FP8 attention (forward + backward by fa8). q [B,Sq,H,Dqk], k [B,Sk,Hkv,Dqk], v [B,Sk,Hkv,Dv], BF16, one
    device. Returns O [B,Sq,H,Dv] BF16. causal: bottom-right aligned (FlashAttention 2+). scale: softmax scale
    (None: 1/sqrt(Dqk)). delta: the backward's softmax correction, "matched" (Delta-Matching, default), "split",
    "dohat" or "stale" (docs/numerics.md). fmt / grad_fmt: FP8 format of Q,K,V / of dO and dS ("e5m2" gradients
    need a build that holds them: the default profile does). scale_rows: rows per quantization scale block.
    pow2_scales: block scales rounded up to powers of two (default, exact descaling; docs/numerics.md), False:
    amax / fmt max (Q, K, V and dO alike)."""
    _check_inputs(q, k, v, causal, scale, delta, fmt, grad_fmt, scale_rows, pow2_scales)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    out = torch.ops.fa8.attention_fwd(q, k, v, causal, float(scale), delta, fmt, grad_fmt, scale_rows, pow2_scales)
    return out[0]


def attention_with_stats(q, k, v, dout, causal=False, scale=None, delta="matched", fmt="e4m3", grad_fmt="e4m3",
                         scale_rows=DEFAULT_SCALE_ROWS, pow2_scales=True):
    """One forward + backward outside autograd, with fa8's dS row-sum statistics (collect_stats): returns
    dict(o=BF16, lse, dq, dk, dv (FP32, as fa8 writes them), delta (the correction the backward used, [B,H,Sq]),
    stats={pre_mean, pre_max, post_mean, post_max, pre_ra_*, post_ra_*, rows}) (docs/numerics.md). pow2_scales
    as in attention()."""
    _check_inputs(q, k, v, causal, scale, delta, fmt, grad_fmt, scale_rows, pow2_scales)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    if not isinstance(dout, torch.Tensor) or dout.dtype != torch.bfloat16:
        raise TypeError("fa8.attention_with_stats: dout must be a torch.bfloat16 tensor")
    if tuple(dout.shape) != (q.shape[0], q.shape[1], q.shape[2], v.shape[3]) or dout.device != q.device:
        raise ValueError(f"fa8.attention_with_stats: dout has shape {tuple(dout.shape)} on {dout.device}; "
                         f"expected {(q.shape[0], q.shape[1], q.shape[2], v.shape[3])} on {q.device}")
    with torch.no_grad():
        saved = _forward(q, k, v, causal, float(scale), delta, fmt, grad_fmt, scale_rows, pow2_scales)
        dq, dk, dv, dl, st = _backward(dout, *saved, causal, float(scale), delta, fmt, grad_fmt, scale_rows,
                                       pow2_scales, collect_stats=True)
    return dict(o=saved[0], lse=saved[1], dq=dq, dk=dk, dv=dv, delta=dl, stats=st)


def dispatch_names(q, k, v, causal=False, delta="matched", fmt="e4m3", grad_fmt="e4m3", scale_rows=DEFAULT_SCALE_ROWS):
    """The fa8 instances (fwd, delta, bwd) and why (tuned row or heuristic) a call with these tensors runs."""
    B, Sq, H, Dqk = q.shape
    return dict(check_supported(q.device, B, Sq, k.shape[1], H, k.shape[2], Dqk, v.shape[3], causal, delta, fmt,
                                grad_fmt, scale_rows))
