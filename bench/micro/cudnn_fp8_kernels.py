"""The kernels cuDNN's FP8 SDPA (bench/peers.py's CudnnFp8 graph, MHA, B=1, H=64, S=8192, d=128) launches, with
their device times (torch.profiler), for comparing launch shapes with fa8's under Nsight Compute:
    python3 bench/micro/cudnn_fp8_kernels.py            # kernel names and times of one forward + backward
    ncu --clock-control none --section LaunchStats -k regex:fprop --launch-skip 3 --launch-count 1 \\
        python3 bench/micro/cudnn_fp8_kernels.py --more  # --more: three more forwards for ncu to pick from
    --no-profiler: skip torch.profiler, whose CUPTI subscription collides with ncu's metrics beyond the launch
    statistics (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; the 28th session's instruction-mix run hung)
Needs torch and nvidia-cudnn-frontend (tools/device/fetch-wheels) on the GPU machine."""
import os
import sys

import torch

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")]
from peers import CudnnFp8  # noqa: E402

S = 8192
qs = [torch.randn(1, 64, S, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
x4 = [t.transpose(1, 2) for t in qs] + [qs[0].transpose(1, 2)]   # [B, S, H, D] views, as CudnnFp8 takes them
c8 = CudnnFp8(*x4, False, 1.0, 1.0, [1.0, 1.0, 1.0])
for _ in range(3):
    c8.forward()
torch.cuda.synchronize()
if "--no-profiler" not in sys.argv:
    from torch.profiler import ProfilerActivity, profile  # noqa: E402

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        c8.forward()
        c8.backward()
        torch.cuda.synchronize()
    for e in prof.events():
        if e.device_type.name == "CUDA":
            print("KERNEL", e.name, f"{e.device_time / 1000.0:.3f} ms")
if "--more" in sys.argv:
    for _ in range(3):
        c8.forward()
    torch.cuda.synchronize()
