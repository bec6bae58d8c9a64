"""ctypes mirror of fa8's C API (runtime/include/fa8.h): the structs, enums and entry points, for Python callers
that hand fa8 raw pointers (numpy arrays on the CPU backend, torch tensors on the GPU). Errors raise Fa8Error
with fa8_last_error()'s message, which names the bad argument."""
import ctypes as C
import os

# enums (runtime/include/fa8_types.h, fa8_fp8.h, fa8.h)
FMT = {"e4m3": 0, "e5m2": 1, "e4m3fnuz": 2, "e5m2fnuz": 3, "f32": 4}
DELTA = {"stale": 0, "dohat": 1, "matched": 2, "split": 3}
BACKEND = {"cpu": 0, "cuda": 1, "hip": 2}
DTYPE = {"f32": 0, "bf16": 1, "fp8": 2}


class Fa8Error(RuntimeError):
    def __init__(self, status, message):
        super().__init__(f"fa8 status {status}: {message}")
        self.status = status


class Tensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("dtype", C.c_int), ("stride", C.c_int64 * 4)]


class QTensor(C.Structure):
    _fields_ = [("data", Tensor), ("data_t", Tensor), ("scales", C.c_void_p), ("scale_rows", C.c_int32),
                ("fmt", C.c_int)]


class QuantProblem(C.Structure):
    _fields_ = [("batch", C.c_int32), ("seqlen", C.c_int32), ("heads", C.c_int32), ("hdim", C.c_int32),
                ("fmt", C.c_int), ("scale_rows", C.c_int32), ("pow2_scales", C.c_int32), ("backend", C.c_int),
                ("num_threads", C.c_int32)]


class Problem(C.Structure):
    _fields_ = [("batch", C.c_int32), ("seqlen_q", C.c_int32), ("seqlen_k", C.c_int32), ("heads", C.c_int32),
                ("kv_heads", C.c_int32), ("hdim_qk", C.c_int32), ("hdim_v", C.c_int32), ("causal", C.c_int32),
                ("softmax_scale", C.c_float), ("delta", C.c_int), ("fmt_qkv", C.c_int), ("fmt_grad", C.c_int),
                ("backend", C.c_int), ("instance", C.c_char_p), ("num_threads", C.c_int32),
                ("collect_stats", C.c_int32), ("scale_rows", C.c_int32)]


class FwdTensors(C.Structure):
    _fields_ = [("q", QTensor), ("k", QTensor), ("v", QTensor), ("o", Tensor), ("o_f32", Tensor), ("o_rem", Tensor),
                ("lse", Tensor)]


class RowsumStats(C.Structure):
    _fields_ = [(n, C.c_double) for n in ("pre_mean", "pre_max", "post_mean", "post_max", "pre_ra_mean", "pre_ra_max",
                                          "post_ra_mean", "post_ra_max")] + [("rows", C.c_int64)]


class BwdTensors(C.Structure):
    _fields_ = [("q", QTensor), ("k", QTensor), ("v", QTensor), ("dout_q", QTensor), ("dout", Tensor), ("o", Tensor),
                ("o_rem", Tensor), ("lse", Tensor), ("delta", Tensor), ("dq", Tensor), ("dk", Tensor), ("dv", Tensor),
                ("stats", C.POINTER(RowsumStats))]


class DispatchNames(C.Structure):
    _fields_ = [("fwd", C.c_char_p), ("delta", C.c_char_p), ("bwd", C.c_char_p), ("fwd_why", C.c_char_p),
                ("bwd_why", C.c_char_p)]


def _find_library():
    env = os.environ.get("FA8_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in ("../../build/libfa8.so", "../libfa8.so", "libfa8.so"):
        p = os.path.normpath(os.path.join(here, cand))
        if os.path.exists(p):
            return p
    raise OSError("libfa8.so not found: build fa8 (meson compile -C build) or set FA8_LIBRARY")


class Lib:
    """The loaded library; every call checks its status."""

    def __init__(self, path=None):
        self.lib = C.CDLL(path or _find_library())
        L = self.lib
        L.fa8_last_error.restype = C.c_char_p
        L.fa8_status_string.restype = C.c_char_p
        for name, args in {
            "fa8_quant_problem_init": [C.POINTER(QuantProblem)],
            "fa8_problem_init": [C.POINTER(Problem)],
        }.items():
            getattr(L, name).argtypes = args
            getattr(L, name).restype = None
        sig = {
            "fa8_quantize_workspace": [C.POINTER(QuantProblem), C.POINTER(C.c_size_t)],
            "fa8_quantize": [C.POINTER(QuantProblem), C.POINTER(Tensor), C.POINTER(QTensor), C.c_void_p, C.c_size_t,
                             C.c_void_p],
            "fa8_forward_workspace": [C.POINTER(Problem), C.POINTER(C.c_size_t)],
            "fa8_forward": [C.POINTER(Problem), C.POINTER(FwdTensors), C.c_void_p, C.c_size_t, C.c_void_p],
            "fa8_backward_workspace": [C.POINTER(Problem), C.POINTER(C.c_size_t)],
            "fa8_backward": [C.POINTER(Problem), C.POINTER(BwdTensors), C.c_void_p, C.c_size_t, C.c_void_p],
            "fa8_dispatch": [C.POINTER(Problem), C.POINTER(DispatchNames)],
            "fa8_tuning_overlay": [C.c_char_p],
            "fa8_candidates": [C.POINTER(Problem), C.c_int, C.POINTER(C.c_char_p), C.c_int, C.POINTER(C.c_int)],
            "fa8_device_info": [C.POINTER(Problem), C.POINTER(C.c_char_p), C.POINTER(C.c_int32),
                                C.POINTER(C.c_char_p)],
        }
        for name, args in sig.items():
            getattr(L, name).argtypes = args
            getattr(L, name).restype = C.c_int
        other = {   # name: (argtypes, restype)
            "fa8_tuning_enable": ([C.c_int], None),
            "fa8_tuning_bucket": ([C.POINTER(Problem), C.POINTER(C.c_int64), C.POINTER(C.c_int64)], None),
            "fa8_quant_scale_count": ([C.POINTER(QuantProblem)], C.c_int64),
            "fa8_instance_key": ([C.c_char_p], C.c_char_p),
            "fa8_bundle_backward": ([C.c_char_p], C.c_char_p),
            "fa8_generator_hash": ([], C.c_char_p),
        }
        for name, (args, res) in other.items():
            getattr(L, name).argtypes = args
            getattr(L, name).restype = res

    def check(self, status):
        if status != 0:
            raise Fa8Error(status, self.lib.fa8_last_error().decode())

    def call(self, name, *args):
        self.check(getattr(self.lib, name)(*args))

    def problem(self, **kw):
        p = Problem()
        self.lib.fa8_problem_init(C.byref(p))
        for k, v in kw.items():
            if k == "delta":
                v = DELTA[v]
            elif k in ("fmt_qkv", "fmt_grad"):
                v = FMT[v]
            elif k == "backend":
                v = BACKEND[v]
            elif k == "instance" and isinstance(v, str):
                v = v.encode()
            setattr(p, k, v)
        return p

    # ---- dispatch and tuning (fa8.h: fa8_dispatch, fa8_tuning_*, fa8_candidates, ...) ----
    def dispatch(self, p):
        """fa8_dispatch: {'fwd', 'delta', 'bwd', 'fwd_why', 'bwd_why'} (str; why = tuned-table row or heuristic)."""
        n = DispatchNames()
        self.call("fa8_dispatch", C.byref(p), C.byref(n))
        return {f: (getattr(n, f) or b"").decode() for f, _ in DispatchNames._fields_}

    def tuning_overlay(self, path):
        """Load a tuned-table CSV as the overlay dispatch consults first; None drops it."""
        self.call("fa8_tuning_overlay", None if path is None else os.fsencode(path))

    def tuning_enable(self, on):
        """False: ignore every tuned table (heuristic dispatch alone)."""
        self.lib.fa8_tuning_enable(1 if on else 0)

    def candidates(self, p, backward=False):
        """Instance (forward) or bundle (backward, for p.delta) names that can run p, in dispatch order."""
        count = C.c_int()
        self.call("fa8_candidates", C.byref(p), int(bool(backward)), None, 0, C.byref(count))
        names = (C.c_char_p * max(count.value, 1))()
        self.call("fa8_candidates", C.byref(p), int(bool(backward)), names, count.value, C.byref(count))
        return [names[i].decode() for i in range(count.value)]

    def instance_key(self, name):
        """Functional key of an instance or bundle name; None when this build does not hold it."""
        r = self.lib.fa8_instance_key(name.encode())
        return r.decode() if r is not None else None

    def bundle_backward(self, bundle):
        r = self.lib.fa8_bundle_backward(bundle.encode())
        return r.decode() if r is not None else None

    def device_info(self, p):
        """(target, sm_count, device name) for p.backend; Fa8Error (status 5) without a device."""
        target, name, sms = C.c_char_p(), C.c_char_p(), C.c_int32()
        self.call("fa8_device_info", C.byref(p), C.byref(target), C.byref(sms), C.byref(name))
        return target.value.decode(), sms.value, name.value.decode()

    def tuning_bucket(self, p):
        """(seq, bh): the shape bucket tuned tables key p on."""
        seq, bh = C.c_int64(), C.c_int64()
        self.lib.fa8_tuning_bucket(C.byref(p), C.byref(seq), C.byref(bh))
        return seq.value, bh.value

    def generator_hash(self):
        return self.lib.fa8_generator_hash().decode()

    def quant_scale_count(self, qp):
        return int(self.lib.fa8_quant_scale_count(C.byref(qp)))

    def quant_problem(self, **kw):
        p = QuantProblem()
        self.lib.fa8_quant_problem_init(C.byref(p))
        for k, v in kw.items():
            setattr(p, k, FMT[v] if k == "fmt" else BACKEND[v] if k == "backend" else v)
        return p


def tensor(ptr, dtype, strides):
    """A fa8_tensor view: ptr (int), dtype name, strides in elements (up to 4; D / S contiguous last)."""
    t = Tensor()
    t.data = ptr
    t.dtype = DTYPE[dtype]
    for i, s in enumerate(strides):
        t.stride[i] = int(s)
    return t
