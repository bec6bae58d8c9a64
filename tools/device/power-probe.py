#!/usr/bin/env python3
"""The SM clock and power each workload sustains on the GPU, for bench/NOTES.md's question of what sets the clock
(ncu measured 1791 MHz under the d128 forward, where nvidia-smi reports a 1980 MHz maximum).

Run THERE after a build (tools/device/h200-run builds /tmp/fa8-build/libfa8.so):
    python3 tools/device/power-probe.py --lib /tmp/fa8-build/libfa8.so --out DIR [--seconds 4] [--seqlen 8192]

Each workload runs back to back for --seconds (after a 0.5 s warm-up) while nvidia-smi samples every 20 ms; the
samples inside each window give its median SM clock, instantaneous power and clock-event reasons, and CUDA
events its median time per call. Workloads: fa8's forward (stale, split) and backward (split, its delta pass
included) on the B=1, H=64, d=128 problem of issue 5 (and the d256 forward where the build has it), with the
inputs quantized once outside the loop; torch's FP8 GEMM (cuBLAS through torch._scaled_mm, 8192^3), BF16 SDPA
forward (cuDNN) and, where nvidia-cudnn-frontend is importable (tools/device/fetch-wheels), cuDNN's FP8 SDPA
forward (bench/peers.py's graph) as the peers. Writes
DIR/power-probe.csv (the samples), DIR/power-probe.json and prints a Markdown table."""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
torch = ft = capi = None   # imported by main() once the arguments are checked (torch is only on the GPU machine)

REASONS = {0x1: "idle", 0x2: "app clocks", 0x4: "SW power cap", 0x8: "HW slowdown", 0x20: "SW thermal",
           0x40: "HW thermal", 0x80: "HW power brake"}


def sampler(path, ms=20):
    """tools/device/gpu-clocks sampling into path every ms milliseconds; returns the power field it queries
    (power.draw.instant where the driver has it: the 1 s average hides a kernel's draw), from the file's
    "# fields:" line"""
    clocks = os.path.join(ROOT, "tools", "device", "gpu-clocks")
    subprocess.run(["bash", clocks, "start", path], env=dict(os.environ, GPU_CLOCKS_MS=str(ms)), check=True)
    head = ""
    if os.path.exists(path):
        with open(path) as f:
            head = f.readline()
    if not head.startswith("# fields: "):
        sys.exit(f"power-probe: gpu-clocks wrote no samples into {path} (no nvidia-smi?)")
    return head[len("# fields: "):].split(",")[2]


def sampler_stop(path):
    subprocess.run(["bash", os.path.join(ROOT, "tools", "device", "gpu-clocks"), "stop", path],
                   stdout=subprocess.DEVNULL, check=False)


def read_samples(path):
    rows = []
    for line in open(path):
        c = [x.strip() for x in line.split(",")]
        try:
            t = datetime.datetime.strptime(c[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            rows.append((t, float(c[1]), float(c[2]), float(c[3]), float(c[4]), int(c[5], 16)))
        except (ValueError, IndexError):
            continue
    return rows


def window_stats(samples, name, t0, t1, ms, flops):
    """one workload's row: its timing and the samples taken inside its window [t0 + 0.1 s, t1] (the first 0.1 s
    is left out: nvidia-smi's sample may still describe the gap before the window)"""
    inside = [s for s in samples if t0 + 0.1 <= s[0] <= t1]
    clk = [s[1] for s in inside]
    pw = [s[2] for s in inside]
    cap = sum(1 for s in inside if s[5] & 0x4)
    return {"workload": name, "ms": ms, "tflops": flops / ms * 1e-9, "samples": len(inside),
            "sm_mhz_median": statistics.median(clk) if clk else None, "sm_mhz_min": min(clk) if clk else None,
            "sm_mhz_max": max(clk) if clk else None, "power_w_median": statistics.median(pw) if pw else None,
            "power_w_max": max(pw) if pw else None, "power_cap_share": cap / len(inside) if inside else None,
            "reasons": sorted({" + ".join(v for b, v in REASONS.items() if s[5] & b) or "none" for s in inside})}


def table(rows, power_field):
    """the rows as a Markdown table"""
    out = [f"| workload | ms / call | TFLOP/s | SM MHz median (min-max) | {power_field} W median (max) | SW power cap | samples |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["samples"]:
            out.append(f"| {r['workload']} | {r['ms']:.3f} | {r['tflops']:.0f} | {r['sm_mhz_median']:.0f} "
                       f"({r['sm_mhz_min']:.0f}-{r['sm_mhz_max']:.0f}) | {r['power_w_median']:.0f} "
                       f"({r['power_w_max']:.0f}) | {100 * r['power_cap_share']:.0f} % | {r['samples']} |")
        else:
            out.append(f"| {r['workload']} | {r['ms']:.3f} | {r['tflops']:.0f} | no samples | | | 0 |")
    return "\n".join(out)


def timed_loop(fn, seconds):
    """fn back to back for `seconds` (after 0.5 s of warm-up); returns (t0, t1, median ms per call)"""
    end = time.time() + 0.5
    while time.time() < end:
        fn()
    torch.cuda.synchronize()
    times, t0 = [], time.time()
    while time.time() - t0 < seconds:
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        ev[0].record()
        for _ in range(4):
            fn()
        ev[1].record()
        ev[1].synchronize()
        times.append(ev[0].elapsed_time(ev[1]) / 4)
    return t0, time.time(), statistics.median(times)


def fa8_calls(S, delta, D=128):
    """(forward, backward) closures over one fa8 problem (B=1, H=64, head dim D) whose inputs are quantized once"""
    L, dev = ft.lib(), torch.device("cuda")
    B, H = 1, 64
    g = torch.Generator(device=dev).manual_seed(1)
    q, k, v, dout = (torch.randn(B, S, H, D, device=dev, generator=g, dtype=torch.float32).to(torch.bfloat16)
                     for _ in range(4))
    stream = ft._stream(q)
    qq, kq, vq = (ft._quantize(L, x, "e4m3", 128, stream) for x in (q, k, v))
    dq8 = ft._quantize(L, dout, "e4m3", 128, stream)
    scale = D ** -0.5
    pf = ft._problem(L, q, B, S, S, H, H, D, D, False, scale, delta, "e4m3", "e4m3")
    o = torch.empty(B, S, H, D, dtype=torch.bfloat16, device=dev)
    o_rem = torch.empty(B, S, H, D, dtype=torch.bfloat16, device=dev) if delta == "split" else None
    lse = torch.empty(B, H, S, dtype=torch.float32, device=dev)
    ws_f = ft._size(L, "fa8_forward_workspace", pf)
    wsf = torch.empty(max(ws_f, 1), dtype=torch.uint8, device=dev)
    f = capi.FwdTensors(q=ft._qtensor(*qq, 128, "e4m3"), k=ft._qtensor(*kq, 128, "e4m3"),
                        v=ft._qtensor(*vq, 128, "e4m3"), o=ft._seq(o, "bf16"), o_f32=ft._none(),
                        o_rem=ft._seq(o_rem, "bf16") if o_rem is not None else ft._none(), lse=ft._rows(lse))

    def fwd():
        ft._call(L, "fa8_forward", ft._ref(pf), ft._ref(f), wsf.data_ptr(), ws_f, stream)

    fwd()
    delta_t = torch.empty(B, H, S, dtype=torch.float32, device=dev)
    dqt = torch.empty(B, S, H, D, dtype=torch.float32, device=dev)
    dk, dv = torch.empty_like(dqt), torch.empty_like(dqt)
    ws_b = ft._size(L, "fa8_backward_workspace", pf)
    wsb = torch.empty(ws_b // 8 + 1, dtype=torch.float64, device=dev)
    bt = capi.BwdTensors(q=ft._qtensor(*qq, 128, "e4m3"), k=ft._qtensor(*kq, 128, "e4m3"),
                         v=ft._qtensor(*vq, 128, "e4m3"), dout_q=ft._qtensor(*dq8, 128, "e4m3"),
                         dout=ft._seq(dout, "bf16"), o=ft._seq(o, "bf16"),
                         o_rem=ft._seq(o_rem, "bf16") if o_rem is not None else ft._none(), lse=ft._rows(lse),
                         delta=ft._rows(delta_t), dq=ft._seq(dqt, "f32"), dk=ft._seq(dk, "f32"),
                         dv=ft._seq(dv, "f32"), stats=None)

    def bwd():
        ft._call(L, "fa8_backward", ft._ref(pf), ft._ref(bt), wsb.data_ptr(), ws_b, stream)

    # the structs hold raw pointers: the tensors behind them must outlive the closures
    fwd.keep = bwd.keep = (q, k, v, dout, qq, kq, vq, dq8, o, o_rem, lse, delta_t, dqt, dk, dv, wsf, wsb)
    return fwd, bwd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libfa8.so of the build")
    ap.add_argument("--out", required=True, help="directory for power-probe.{csv,json}")
    ap.add_argument("--seconds", type=float, default=4.0, help="seconds per workload (4)")
    ap.add_argument("--seqlen", type=int, default=8192, help="fa8's and SDPA's sequence length (8192)")
    a = ap.parse_args()
    if not a.seconds > 0:
        ap.error(f"--seconds must be positive, got {a.seconds}")
    if a.seqlen < 128 or a.seqlen % 128:
        ap.error(f"--seqlen must be a positive multiple of 128, got {a.seqlen}")
    global torch, ft, capi
    import torch
    sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "bench")]
    import fa8.torch as ft   # the repo's binding: its helpers build fa8's structs from torch tensors
    from fa8 import capi
    ft.set_library(a.lib)
    os.makedirs(a.out, exist_ok=True)
    S, fl_fwd = a.seqlen, 4.0 * 64 * a.seqlen * a.seqlen * 128
    work = []
    f_stale, _ = fa8_calls(S, "stale")
    work.append(("fa8 fwd stale d128", f_stale, fl_fwd))
    f_split, b_split = fa8_calls(S, "split")
    work.append(("fa8 fwd split d128", f_split, fl_fwd))
    work.append(("fa8 bwd split d128 (+ delta pass)", b_split, 2.5 * fl_fwd))
    try:   # d256 where the build has it (FA8_HDIM=128,256): the head dim whose forward passes issue 5's line
        f256, _ = fa8_calls(S, "stale", 256)
        work.append(("fa8 fwd stale d256", f256, 2 * fl_fwd))
    except Exception as e:   # noqa: BLE001
        print(f"power-probe: no d256 row: {type(e).__name__}: {str(e).splitlines()[0][:200]}", file=sys.stderr)
    n = 8192
    x = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    y = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    work.append(("cuBLAS FP8 GEMM 8192^3 (torch._scaled_mm)",
                 lambda: torch._scaled_mm(x, y, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), 2.0 * n ** 3))
    qs = [torch.randn(1, 64, S, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(*qs)
    work.append(("torch SDPA BF16 fwd d128 (cuDNN)", sdpa, fl_fwd))
    try:   # cuDNN's FP8 SDPA: per-tensor scales of 1 (scales do not change its timing, as in bench/run.py)
        from peers import CudnnFp8
        x4 = [t.transpose(1, 2) for t in qs] + [qs[0].transpose(1, 2)]
        c8 = CudnnFp8(*x4, False, 1.0, 1.0, [1.0, 1.0, 1.0])
        work.append(("cuDNN FP8 SDPA fwd d128 (frontend)", c8.forward, fl_fwd))
    except Exception as e:   # noqa: BLE001  (a missing wheel or an unsupported build: the other rows stand)
        print(f"power-probe: no cuDNN FP8 row: {type(e).__name__}: {str(e).splitlines()[0][:200]}", file=sys.stderr)

    csv = os.path.join(a.out, "power-probe.csv")
    power_field = sampler(csv)
    time.sleep(0.5)
    windows = []
    for name, fn, flops in work:
        t0, t1, ms = timed_loop(fn, a.seconds)
        windows.append((name, t0, t1, ms, flops))
        time.sleep(0.3)   # a gap between windows, so the sampler's edges do not mix workloads
    sampler_stop(csv)
    samples = read_samples(csv)
    res = [window_stats(samples, *w) for w in windows]
    print(table(res, power_field))
    json.dump({"power_field": power_field, "seconds": a.seconds, "seqlen": S, "results": res},
              open(os.path.join(a.out, "power-probe.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
