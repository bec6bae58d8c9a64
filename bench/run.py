#!/usr/bin/env python3
"""Speed benchmark (runs on the GPU machine): fa8 (via `fa8 bench`, which times the C API calls with CUDA events)
next to torch SDPA BF16 (cuDNN and flash backends) and cuDNN's own FP8 SDPA (nvidia-cudnn-frontend), same shapes,
same run. Writes results.json, results.md (with fa8 / best peer per cell) and speed.png to --out.
FLOPs: forward 2*B*H*Sq*Sk*(dqk+dv), backward 2.5x, halved for causal (the same count for every system)."""
import argparse, datetime, json, os, subprocess, sys, time

GEOMS = [(64, 64), (128, 128), (256, 256), (192, 128)]
SEQS = [1024, 4096, 16384, 32768]
H, HKV, B = 64, 8, 1
MHA_CELLS = [(128, 128, 4096), (128, 128, 16384)]   # also measured with H = Hkv = 64 (MHA)


def median_ms(fn, warmup=3, reps=10):
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def sdpa(backend, S, dqk, dv, causal, hkv=HKV):
    import torch
    from torch.nn.attention import sdpa_kernel, SDPBackend
    be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend]
    q = torch.randn(B, H, S, dqk, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(B, hkv, S, dqk, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(B, hkv, S, dv, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    do = torch.randn(B, H, S, dv, device="cuda", dtype=torch.bfloat16)
    with sdpa_kernel(be):
        f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        o = f()
        tf = median_ms(f)
        bw = lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        tb = median_ms(bw)
    return tf, tb


def cudnn_fp8(S, dqk, dv, causal, hkv):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    from peers import CudnnFp8
    q = torch.randn(B, S, H, dqk, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, S, hkv, dqk, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(B, S, hkv, dv, device="cuda", dtype=torch.bfloat16)
    do = torch.randn(B, S, H, dv, device="cuda", dtype=torch.bfloat16)
    c = CudnnFp8(q, k, v, do, causal, 1.0, 1.0, [1.0, 1.0, 1.0])   # scales do not change the timing
    return median_ms(c.forward, reps=5), median_ms(c.backward, reps=5)


def plot(rows, path):
    """TFLOP/s vs S, one panel per head dim and direction; one colour per system, dashed = causal (GQA cells)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    geoms = sorted({(r["dqk"], r["dv"]) for r in rows})
    systems = sorted({r["system"] for r in rows})
    colour = {s: plt.get_cmap("tab10")(i % 10) for i, s in enumerate(systems)}
    fig, axs = plt.subplots(2, len(geoms), figsize=(4 * len(geoms), 7.5), squeeze=False)
    for j, (dqk, dv) in enumerate(geoms):
        for i, key in enumerate(("fwd_tflops", "bwd_tflops")):
            ax = axs[i][j]
            for sysname in systems:
                for causal in (False, True):
                    pts = sorted((r["S"], r[key]) for r in rows if r["system"] == sysname and r["dqk"] == dqk and
                                 r["dv"] == dv and r["causal"] == causal and key in r and r.get("Hkv", HKV) == HKV)
                    if pts:
                        ax.plot(*zip(*pts), marker="o", color=colour[sysname], linestyle="--" if causal else "-")
            ax.set_xscale("log", base=2)
            ax.set_title(f"d={dqk}x{dv} {'forward' if i == 0 else 'backward'} (H={H}/{HKV})")
            ax.set_xlabel("S")
            ax.set_ylabel("TFLOP/s")
    handles = [Line2D([], [], color=colour[s], marker="o", label=s) for s in systems]
    handles += [Line2D([], [], color="k", label="non-causal"), Line2D([], [], color="k", linestyle="--", label="causal")]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=100)

def render(rows, out, echo=True):
    """results.md (one line per system and cell, fa8 matched / best peer) and speed.png from the measured rows;
    `--render results.json` redoes this anywhere, without a GPU."""
    def key(x):
        return (x["dqk"], x["dv"], x["S"], x["causal"], x.get("Hkv", HKV))
    lines = ["| d | S | causal | H/Hkv | system | fwd TFLOP/s | bwd TFLOP/s | fa8 matched / best peer (fwd, bwd) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cell = [x for x in rows if key(x) == key(r)]
        peers = [x for x in cell if not x["system"].startswith("fa8") and "error" not in x]
        mine = [x for x in cell if x["system"] == "fa8-matched" and "error" not in x]
        ratio = ""
        if r["system"] == "fa8-matched" and peers and mine:
            ratio = "%.2f, %.2f" % (mine[0]["fwd_tflops"] / max(p["fwd_tflops"] for p in peers),
                                    mine[0]["bwd_tflops"] / max(p["bwd_tflops"] for p in peers))
        head = f"| {r['dqk']}x{r['dv']} | {r['S']} | {r['causal']} | {r.get('H', H)}/{r.get('Hkv', HKV)} | {r['system']} |"
        if "error" in r:
            lines.append(f"{head} n/a | n/a ({r['error'][:70]}) | |")
        else:
            lines.append(f"{head} {r['fwd_tflops']:.1f} | {r['bwd_tflops']:.1f} | {ratio} |")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if echo:
        print("\n".join(lines))
    plot([r for r in rows if "error" not in r], os.path.join(out, "speed.png"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fa8", help="the fa8 CLI to time (required unless --render)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--render", metavar="RESULTS_JSON", help="only redo results.md and speed.png from a results.json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--geoms", help="QKxV list, e.g. 128x128,192x128 (default: all)")
    ap.add_argument("--seqs", help="sequence lengths, e.g. 4096,16384 (default: 1K,4K,16K,32K; 32K for d=128 only)")
    a = ap.parse_args()
    if a.render:
        with open(a.render) as f:
            render(json.load(f)["rows"], a.out)
        return
    if not a.fa8:
        ap.error("--fa8 is required to measure")
    geoms = [tuple(int(x) for x in g.split("x")) for g in a.geoms.split(",")] if a.geoms else GEOMS
    import torch
    rows = []
    seqs = [int(x) for x in a.seqs.split(",")] if a.seqs else (SEQS[:2] if a.quick else SEQS)
    t0 = time.time()
    def cell(S, dqk, dv, causal, hkv):
        flops = 2.0 * B * H * S * S * (dqk + dv) * (0.5 if causal else 1.0)
        # long sequences: the modes issue #5's acceptance compares (matched and split against stale); dohat only short
        modes = "stale,dohat,matched,split" if S <= 4096 else "stale,matched,split"
        cmd = [a.fa8, "bench", "--heads", str(H), "--kv-heads", str(hkv), "--seqlen", str(S),
               "--hdim", f"{dqk}x{dv}", "--modes", modes, "--reps", "5" if S > 4096 else "10"]
        if causal:
            cmd.append("--causal")
        r = subprocess.run(cmd, capture_output=True, text=True)
        for line in r.stdout.splitlines():
            rows.append(json.loads(line))
        if r.returncode:
            rows.append({"system": "fa8", "S": S, "dqk": dqk, "dv": dv, "causal": causal, "Hkv": hkv,
                         "error": r.stderr.strip()})
        base = {"B": B, "H": H, "Hkv": hkv, "S": S, "dqk": dqk, "dv": dv, "causal": causal}
        row = dict(base, system="cudnn-fp8")
        try:
            tf, tb = cudnn_fp8(S, dqk, dv, causal, hkv)
            row.update(fwd_ms=tf, bwd_ms=tb, fwd_tflops=flops / tf * 1e-9, bwd_tflops=2.5 * flops / tb * 1e-9)
        except Exception as e:  # noqa: BLE001 - record which geometries cuDNN FP8 refuses
            row["error"] = (type(e).__name__ + ": " + str(e)).splitlines()[0][:160]
        rows.append(row)
        torch.cuda.empty_cache()
        for be in ("cudnn", "flash"):
            row = dict(base, system=f"sdpa-bf16-{be}")
            try:
                tf, tb = sdpa(be, S, dqk, dv, causal, hkv)
                row.update(fwd_ms=tf, bwd_ms=tb, fwd_tflops=flops / tf * 1e-9, bwd_tflops=2.5 * flops / tb * 1e-9)
            except Exception as e:  # noqa: BLE001 - unsupported geometry for that backend
                row["error"] = str(e).splitlines()[0][:160]
            rows.append(row)
            torch.cuda.empty_cache()
        print(f"[bench] d{dqk}x{dv} S={S} causal={causal} Hkv={hkv} done ({time.time() - t0:.0f} s)", flush=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:   # partial results survive a time-out
            json.dump({"rows": rows, "partial": True}, f)

    for dqk, dv in geoms:
        for S in seqs:
            if S > 16384 and (dqk, dv) != (128, 128):
                continue   # 32K: d=128 only, to keep the whole run inside one device call
            for causal in (False, True):
                cell(S, dqk, dv, causal, HKV)
    if not a.geoms:
        for dqk, dv, S in MHA_CELLS:
            for causal in (False, True):
                cell(S, dqk, dv, causal, H)
    env = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "command": " ".join(sys.argv),
           "driver": subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                    capture_output=True, text=True).stdout.strip(),
           "fa8_commit": os.environ.get("FA8_COMMIT", "unknown"),
           "fa8_version": subprocess.run([a.fa8, "version"], capture_output=True, text=True).stdout.strip()}
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"env": env, "rows": rows}, f, indent=1)
    render(rows, a.out)


if __name__ == "__main__":
    main()
