#!/usr/bin/env python3
"""Training probe (issue #10): does the backward's delta mode change what a model learns under FP8 attention?

Same model, same initialization, same data order, four attention arms:
  sdpa-bf16    torch SDPA in BF16 (the reference)
  fa8-stale    fa8, delta = rowsum(dO o O)  (the FP8 shortcut: mismatched under FP8 operands)
  fa8-matched  fa8, Delta-Matching (delta from the operands the backward uses)
  fa8-split    fa8, two-term P in the forward + delta from dO^ and the two-term output
(+ fa8-dohat with --arms). Task: multi-query associative recall generated on the fly (probe/task.py): the answer
needs attention. Model (probe/model.py): decoder-only, pre-norm, GQA, RoPE, QK RMSNorm with learnable per-channel
gains gain_q / gain_k per layer. Logged from step 0 every --eval-every steps: train loss, validation loss and
accuracy, per-layer max|gain_q|, max|gain_k|, the share of sum_c |gain_q[c] gain_k[c]| held by the top 4 channels
(uniform: 4/64 = 0.0625), the largest |scaled logit|, the gradient norm, and for the fa8 arms fa8's dS row-sum
residuals (collect_stats) on the q, k, v and dO of the step before each evaluation, in the arm's delta mode. An emulated study (FP8 casts in
plain torch, 4 layers, d=256, 2000 steps) saw stale delta grow the gains and concentrate them in a few channels
while matched tracked BF16, with no loss difference: hence gains from step 0, not only the loss.

Output (--out DIR): results.json (config, environment, every logged point, final gain vectors), PNG plots and
summary.md (probe/report.py; rewritten after every run, so a run killed at its time limit still leaves a report).

Budget (one H200 device call of <= 10 minutes: ~30 s build, ~1 min binding tests, the rest here). Default model:
4 layers, d_model 256, 8 query / 2 KV heads of head dim 64 (fa8 has d64 kernels in every profile), FFN 1024,
~3.5 M parameters; task: 64 pairs + 64 queries = 256 tokens, batch 64 -> 16 K tokens and 4 K scored answers a
step. Arithmetic: ~6 x 3.5e6 x 16384 = 3.4e11 FLOP of matmuls plus ~4 x 3.2e10 of attention per step is
< 1 ms of H200 time; the step is bound by launch overhead: eager PyTorch ~300 kernels (forward, backward,
fused AdamW) ~ 6-10 ms, and each fa8 attention call adds its ctypes plumbing (3 quantize + forward, 1 quantize
+ backward: ~0.5-1 ms a layer) -> ~10 ms (sdpa) and ~15 ms (fa8) a step. 3000 steps x (10 + 3 x 15) ms =
165 s a seed, evaluation (4 x 64-sequence forward batches + fa8 row-sum statistics every 50 steps) ~2 %;
2 seeds ~ 340 s.
--time-budget-s (default 420; h200-run passes what is left of its 540 s) is enforced twice: before training,
the probe times 20 steps of the sdpa arm and of one fa8 arm and, if all arms x seeds would not fit, lowers
--steps for every run alike (reported as steps_reduced_from: "as many steps as fit, up to 3000"); while
training, a run that reaches the deadline stops and is marked truncated, and the runs after it are skipped.
Runs go seed by seed, arms inside a seed, so a cut leaves whole seeds.

Learnability (the BF16 reference must learn the task, or the comparison says little). Plain MQAR needs an
induction circuit (a value position reads the key before it, then the query key finds that position); on the
preparing session's 2 CPU cores, 2-layer models (d_model 64-128, 8-16 pairs, lr 1e-3 and 3e-3) sat on the
"copy any value from the context" plateau (12-28 % accuracy) for 500-1500 steps without the transition. So the
default gives the model its previous token (token shift, model.py: one extra embedding added to the input), which
makes recall one attention hop: the same CPU check then solved 8 pairs in 100 steps, 32 pairs in 200 and 64
pairs of 128 keys (2 layers, d_model 128, batch 16) in 300 (acc 0.998). With 10 % answer noise the onset is
strongly seed-dependent, in every arm alike (probe/results/2026-11-29-cpu-preliminary, fa8 arms through the
CPU backend: seed 0 sdpa 400, matched 500, stale not by 600; seed 1 stale ~750, sdpa not by 800), so a
difference in *when* an arm learns says nothing at one or two seeds; the gains after the onset are the signal. The attention still has to be sharp: with
QK RMSNorm the logits are bounded by the gains (|logit| <= sum_c |g_q g_k| / sqrt(64), 8 at gain 1, less for
content matching under RoPE), and the gains grow while it learns (1.0 -> 1.2 in that run). A noiseless task,
once solved, stops producing gradients (loss 1e-5), so nothing more happens to the gains; the default replaces 10 %
of the answer targets by random values (task.py: noise), which keeps dO, and with it the FP8 gradient error,
alive for the whole run (best accuracy 0.901). Expectation for the default on the H200 (bigger model, 4x the
batch): the BF16 reference near 0.90 accuracy within a few hundred steps, then thousands of steps at a loss
floor of ~0.8 where the gains settle under the push of the correct and the noisy answers: where a systematic
drift from stale delta would show. This is an expectation, not a measurement; the report flags a reference below
half the best accuracy as "did not learn". --token-shift 0 --noise 0 gives plain MQAR (induction), to try
with more steps.

Usage:
  python3 probe/train.py --out /tmp/probe                    # defaults above, seeds 0 1, all four arms
  python3 probe/train.py --smoke --out /tmp/probe-smoke      # tiny, CPU (fa8 arms through fa8's CPU backend)
  python3 probe/train.py --lr 3e-3 --grad-fmt e5m2 --no-qk-norm --arms sdpa-bf16,fa8-stale,fa8-matched ...
  python3 probe/train.py --amax-scales --out /tmp/amax       # fa8 arms: amax/fmt-max scales, not powers of two
"""
import argparse
import json
import math
import os
import platform
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from model import Decoder, gain_stats, sdpa_bf16  # noqa: E402
from task import MQAR  # noqa: E402

DEFAULT_ARMS = "sdpa-bf16,fa8-stale,fa8-matched,fa8-split"
PRESETS = {
    # the H200 default (see the header)
    "default": dict(layers=4, d_model=256, heads=8, kv_heads=2, head_dim=64, ffn=1024, n_keys=128, n_values=128,
                    pairs=64, queries=64, batch=64, steps=3000, eval_every=50, val_batches=4, lr=2e-3, warmup=100,
                    token_shift=1, noise=0.1),
    # tiny, for a CPU without a GPU: checks that everything runs end to end (not that anything is learned)
    "smoke": dict(layers=2, d_model=64, heads=2, kv_heads=1, head_dim=64, ffn=128, n_keys=16, n_values=16,
                  pairs=8, queries=8, batch=8, steps=12, eval_every=6, val_batches=1, lr=1e-3, warmup=2,
                  token_shift=1, noise=0.1),
    # CPU learnability check of the sdpa arm (minutes on 2 cores)
    "cpu-check": dict(layers=2, d_model=128, heads=4, kv_heads=2, head_dim=64, ffn=256, n_keys=128, n_values=128,
                      pairs=64, queries=32, batch=16, steps=600, eval_every=100, val_batches=1, lr=2e-3, warmup=50,
                      token_shift=1, noise=0.1),
}


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="default")
    ap.add_argument("--smoke", action="store_true", help="= --preset smoke (CPU unless --device)")
    ap.add_argument("--arms", default=DEFAULT_ARMS, help="comma list of sdpa-bf16, fa8-{stale,dohat,matched,split}")
    ap.add_argument("--seeds", default="0,1", help="comma list; one initialization and data order per seed")
    ap.add_argument("--device", default=None, help="cuda (default when present) or cpu")
    ap.add_argument("--lib", default=None, help="libfa8.so (default: $FA8_LIBRARY, then build/libfa8.so)")
    ap.add_argument("--time-budget-s", type=float, default=420.0, help="the whole probe, calibration included")
    ap.add_argument("--grad-fmt", default="e4m3", choices=["e4m3", "e5m2"], help="fa8's dO / dS format")
    ap.add_argument("--no-qk-norm", action="store_true", help="plain QK (no RMSNorm, no gains)")
    ap.add_argument("--amax-scales", action="store_true",
                    help="fa8 arms quantize Q, K, V, dO with amax / fmt-max block scales (pow2_scales=False) "
                         "instead of fa8's default power-of-two scales")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0, help="gradient-norm clip (0: off)")
    ap.add_argument("--no-calibrate", action="store_true", help="do not lower --steps to fit the budget")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    for k, v in PRESETS["default"].items():   # every preset field can be overridden
        ap.add_argument("--" + k.replace("_", "-"), type=type(v), default=None)
    a = ap.parse_args()
    if a.smoke:
        a.preset = "smoke"
    cfg = dict(PRESETS[a.preset])
    for k in PRESETS["default"]:
        if getattr(a, k) is not None:
            cfg[k] = getattr(a, k)
    a.cfg = cfg
    a.arm_list = [x for x in a.arms.split(",") if x]
    for arm in a.arm_list:
        if arm != "sdpa-bf16" and not (arm.startswith("fa8-") and arm[4:] in ("stale", "dohat", "matched", "split")):
            ap.error(f"unknown arm {arm!r}")
    a.seed_list = [int(s) for s in a.seeds.split(",") if s != ""]
    if a.device is None:
        a.device = "cuda" if torch.cuda.is_available() and a.preset != "smoke" else "cpu"
    return a


def attn_fn(arm, grad_fmt, pow2_scales=True):
    if arm == "sdpa-bf16":
        return sdpa_bf16
    import fa8
    mode = arm[4:]
    return lambda q, k, v: fa8.attention(q, k, v, causal=True, delta=mode, grad_fmt=grad_fmt, pow2_scales=pow2_scales)


class Capture:
    """Wraps an attention function; when armed, keeps each layer's BF16 q, k, v and the gradient of its output
    (dO) from one training step, for fa8's dS row-sum statistics on the tensors training really produced."""

    def __init__(self, fn):
        self.fn, self.armed, self.layers = fn, False, []

    def __call__(self, q, k, v):
        o = self.fn(q, k, v)
        if self.armed and torch.is_grad_enabled() and o.requires_grad:
            rec = {"qkv": (q.detach(), k.detach(), v.detach())}
            o.register_hook(lambda g, rec=rec: rec.__setitem__("do", g.detach()))
            self.layers.append(rec)
        return o


def rowsum_stats(cap, mode, grad_fmt, pow2_scales=True):
    """fa8_backward's row-sum statistics (collect_stats) per layer for the captured step, in the arm's delta mode:
    the mean rounding-aware residual |sum_j dS_ij| / sum_j P_ij(|dP_ij| + |delta_i|) before and after the cast."""
    import fa8
    out = []
    for rec in cap.layers:
        if "do" not in rec:
            out.append(None)
            continue
        q, k, v = rec["qkv"]
        st = fa8.attention_with_stats(q, k, v, rec["do"].to(torch.bfloat16).contiguous(), causal=True, delta=mode,
                                      grad_fmt=grad_fmt, pow2_scales=pow2_scales)["stats"]
        out.append({kk: st[kk] for kk in ("pre_ra_mean", "post_ra_mean", "pre_ra_max", "post_ra_max")})
    cap.layers = []
    return out


def lr_at(step, cfg, steps):
    if step < cfg["warmup"]:
        return cfg["lr"] * (step + 1) / cfg["warmup"]
    t = (step - cfg["warmup"]) / max(1, steps - cfg["warmup"])
    return cfg["lr"] * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


class Run:
    """One arm x seed: model, optimizer, data stream."""

    def __init__(self, arm, seed, a, task):
        self.arm, self.seed, self.a, self.task, self.cfg = arm, seed, a, task, a.cfg
        self.dev = torch.device(a.device)
        torch.manual_seed(seed)                                 # identical initialization in every arm
        c = self.cfg
        self.model = Decoder(task.vocab, task.seqlen, c["layers"], c["d_model"], c["heads"], c["kv_heads"],
                             c["head_dim"], c["ffn"], qk_norm=not a.no_qk_norm,
                             token_shift=bool(c["token_shift"])).to(self.dev)
        fused = self.dev.type == "cuda"
        self.opt = torch.optim.AdamW(self.model.param_groups(a.weight_decay), lr=c["lr"], betas=(0.9, 0.95),
                                     eps=1e-8, fused=fused)
        self.fn = Capture(attn_fn(arm, a.grad_fmt, pow2_scales=not a.amax_scales))
        self.step = 0
        self.last_rowsums = None

    def loss(self, x, y, probe_logits=False):
        with torch.autocast(self.dev.type, dtype=torch.bfloat16):
            logits = self.model(x, self.fn, probe_logits)
        return F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=-100), logits

    def train_step(self, steps, capture=False):
        x, y = self.task.batch(self.cfg["batch"], 1_000_003 * (self.seed + 1) + self.step)   # same order per seed
        for g in self.opt.param_groups:
            g["lr"] = lr_at(self.step, self.cfg, steps)
        self.fn.armed = capture and self.arm.startswith("fa8-")
        loss, _ = self.loss(x, y)
        loss.backward()
        if self.fn.armed:
            self.fn.armed = False
            self.last_rowsums = rowsum_stats(self.fn, self.arm[4:], self.a.grad_fmt, pow2_scales=not self.a.amax_scales)
        gn = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.a.clip if self.a.clip > 0 else float("inf"))
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step += 1
        return loss.detach(), gn.detach()

    @torch.no_grad()
    def evaluate(self):
        tot, correct, n, logit = 0.0, 0, 0, None
        for i in range(self.cfg["val_batches"]):
            x, y = self.task.batch(self.cfg["batch"], 7_777_777 + i)    # one validation set for every run
            loss, logits = self.loss(x, y, probe_logits=(i == 0))
            m = y != -100
            tot += float(loss) * int(m.sum())
            correct += int((logits.argmax(-1)[m] == y[m]).sum())
            n += int(m.sum())
            if i == 0:
                logit = [b.attn.last_max_logit for b in self.model.blocks]
        layers = gain_stats(self.model)
        for L, lg in zip(layers, logit):
            L["max_logit"] = lg
        return dict(val_loss=tot / n, val_acc=correct / n, layers=layers)

    def final_gains(self):
        return [dict(gain_q=b.attn.gain_q.detach().float().cpu().tolist(),
                     gain_k=b.attn.gain_k.detach().float().cpu().tolist()) for b in self.model.blocks]


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def calibrate(a, task, arms, n=20):
    """Seconds a training step takes for the sdpa arm and for one fa8 arm (after 5 warm-up steps), and one eval."""
    out = {}
    kinds = sorted({("sdpa-bf16" if arm == "sdpa-bf16" else "fa8") for arm in arms})
    for kind in kinds:
        arm = "sdpa-bf16" if kind == "sdpa-bf16" else next(x for x in arms if x.startswith("fa8-"))
        r = Run(arm, 12345, a, task)
        for _ in range(5):
            r.train_step(10 ** 9)
        sync(r.dev)
        t = time.time()
        for _ in range(n):
            r.train_step(10 ** 9)
        sync(r.dev)
        step_s = (time.time() - t) / n
        t = time.time()
        r.evaluate()
        out[kind] = dict(step_s=step_s, eval_s=time.time() - t)
        del r
    return out


def environment(a):
    env = {"python": platform.python_version(), "torch": torch.__version__, "device": a.device,
           "fa8_commit": os.environ.get("FA8_COMMIT", "unknown")}
    if a.device == "cuda":
        env.update(gpu=torch.cuda.get_device_name(), cuda=torch.version.cuda)
    if any(x.startswith("fa8-") for x in a.arm_list):
        try:
            import fa8
            env["fa8_library"] = fa8.torch.lib().lib._name
            env["fa8_generator_hash"] = fa8.torch.lib().generator_hash()
            c = a.cfg
            S = 2 * (c["pairs"] + c["queries"])   # the training problem's shape (tuned tables key on it)
            env["fa8_dispatch"] = dict(fa8.check_supported(a.device, c["batch"], S, S, c["heads"], c["kv_heads"],
                                                           c["head_dim"], c["head_dim"], True, "matched", "e4m3",
                                                           a.grad_fmt))
        except Exception as e:  # noqa: BLE001 - recorded; the fa8 arms will fail (and say why) on their own
            env["fa8_error"] = f"{type(e).__name__}: {e}"
    return env


def train_one(arm, seed, a, task, steps, deadline, res):
    """One arm x seed from step 0; returns its record (log, final gains, truncated / diverged)."""
    c = a.cfg
    r = Run(arm, seed, a, task)
    rec = dict(arm=arm, seed=seed, log=[], truncated=False, diverged=False)
    t0 = time.time()
    ev = r.evaluate()
    rec["log"].append(dict(step=0, train_loss=None, grad_norm=None, lr=0.0, **ev))
    acc_loss, acc_gn, acc_n = torch.zeros((), device=r.dev), torch.zeros((), device=r.dev), 0
    while r.step < steps:
        # the step before each evaluation also measures fa8's dS row sums on its own tensors (fa8 arms)
        loss, gn = r.train_step(steps, capture=(r.step + 1) % c["eval_every"] == 0 or r.step + 1 == steps)
        acc_loss += loss
        acc_gn += gn
        acc_n += 1
        if r.step % c["eval_every"] == 0 or r.step == steps:
            tl = float(acc_loss) / acc_n
            ev = r.evaluate()
            rec["log"].append(dict(step=r.step, train_loss=tl, grad_norm=float(acc_gn) / acc_n,
                                   lr=lr_at(r.step - 1, c, steps), rowsums=r.last_rowsums, **ev))
            r.last_rowsums = None
            acc_loss.zero_()
            acc_gn.zero_()
            acc_n = 0
            L = ev["layers"]
            print(f"{arm:12s} seed {seed} step {r.step:5d}  train {tl:.4f}  val {ev['val_loss']:.4f}  "
                  f"acc {ev['val_acc']:.3f}  max|gq| {max(x['max_gq'] for x in L):.2f}  "
                  f"max|gk| {max(x['max_gk'] for x in L):.2f}  top4 {max(x['topk_share'] for x in L):.3f}  "
                  f"logit {max(x['max_logit'] for x in L):.1f}"
                  + (f"  dS rowsum post {max(x['post_ra_mean'] for x in rec['log'][-1]['rowsums'] if x):.1e}"
                     if rec["log"][-1].get("rowsums") else "") + f"  ({time.time() - t0:.0f} s)", flush=True)
            if not math.isfinite(tl):
                rec["diverged"] = True
                break
        if time.time() >= deadline:
            rec["truncated"] = True
            res["notes"].append(f"{arm} seed {seed} stopped at step {r.step} by the time budget")
            break
    sync(r.dev)
    rec.update(steps_done=r.step, seconds=time.time() - t0,
               ms_per_step=1000 * (time.time() - t0) / max(1, r.step), final_gains=r.final_gains())
    return rec


def main():
    a = parse()
    os.makedirs(a.out, exist_ok=True)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.device == "cpu":
        torch.set_flush_denormal(True)
    t_start = time.time()
    deadline = t_start + a.time_budget_s
    if a.lib:
        os.environ["FA8_LIBRARY"] = a.lib
    if any(x.startswith("fa8-") for x in a.arm_list):
        import fa8
        fa8.set_library(a.lib or os.environ.get("FA8_LIBRARY") or None)
    c = a.cfg
    task = MQAR(c["n_keys"], c["n_values"], c["pairs"], c["queries"], device=a.device, noise=c["noise"])
    res = dict(config=dict(c, arms=a.arm_list, seeds=a.seed_list, grad_fmt=a.grad_fmt, qk_norm=not a.no_qk_norm,
                           amax_scales=a.amax_scales,
                           weight_decay=a.weight_decay, clip=a.clip, preset=a.preset, seqlen=task.seqlen,
                           vocab=task.vocab, chance=task.chance(), best_acc=task.best(),
                           time_budget_s=a.time_budget_s),
               env=environment(a), runs=[], notes=[])
    steps = c["steps"]
    if not a.no_calibrate:
        try:
            cal = calibrate(a, task, a.arm_list)
        except Exception as e:  # noqa: BLE001 - e.g. fa8 failing: keep the arms that run, say why
            import traceback
            traceback.print_exc()
            res["notes"].append(f"calibration failed ({type(e).__name__}: {str(e).splitlines()[0][:300]}); "
                                "fa8 arms dropped, sdpa arm only")
            a.arm_list = [x for x in a.arm_list if x == "sdpa-bf16"]
            cal = calibrate(a, task, a.arm_list)
        res["calibration"] = cal
        per_seed = 0.0
        for arm in a.arm_list:
            k = cal["sdpa-bf16" if arm == "sdpa-bf16" else "fa8"]
            per_seed += k["step_s"] * steps + k["eval_s"] * (steps // c["eval_every"] + 1)
        left = deadline - time.time()
        need = per_seed * len(a.seed_list)
        print(f"calibration: {json.dumps(cal)}; {steps} steps need ~{need:.0f} s, {left:.0f} s left", flush=True)
        if need > 0.92 * left:
            new = int(steps * 0.92 * left / need) // c["eval_every"] * c["eval_every"]
            new = max(new, c["eval_every"])
            res["config"]["steps_reduced_from"] = steps
            res["notes"].append(f"steps lowered from {steps} to {new} to fit the time budget")
            print(f"steps lowered from {steps} to {new} to fit --time-budget-s", flush=True)
            steps = new
    res["config"]["steps"] = steps
    import report
    for seed in a.seed_list:
        for arm in a.arm_list:
            if time.time() >= deadline:
                res["runs"].append(dict(arm=arm, seed=seed, skipped="time budget spent"))
                continue
            try:
                rec = train_one(arm, seed, a, task, steps, deadline, res)
            except Exception as e:  # noqa: BLE001 - one failing arm must not lose the others' results
                import traceback
                traceback.print_exc()
                rec = dict(arm=arm, seed=seed, skipped=f"error: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            res["runs"].append(rec)
            res["seconds_total"] = time.time() - t_start
            with open(os.path.join(a.out, "results.json"), "w") as fh:
                json.dump(res, fh, indent=1)
            report.write(res, a.out)
    res["seconds_total"] = time.time() - t_start
    with open(os.path.join(a.out, "results.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    report.write(res, a.out)
    print(f"probe done in {res['seconds_total']:.0f} s: {a.out}/results.json, summary.md, *.png", flush=True)


if __name__ == "__main__":
    main()
