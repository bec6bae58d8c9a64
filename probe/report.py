#!/usr/bin/env python3
"""Plots and summary.md from the probe's results.json (called by train.py after every run; standalone:
python3 probe/report.py DIR). Numbers only: the interpretation is written by a person, next to them."""
import json
import os
import statistics
import sys

COLORS = {"sdpa-bf16": "black", "fa8-stale": "tab:red", "fa8-dohat": "tab:orange", "fa8-matched": "tab:blue",
          "fa8-split": "tab:green"}
STYLES = ["-", "--", ":", "-."]


def _runs(res):
    return [r for r in res["runs"] if "log" in r and r["log"]]


def _rowsum(r):
    """Mean over layers of the rounding-aware post-cast dS row-sum residual, last measured point (fa8 arms)."""
    for p in reversed(r["log"]):
        rs = [x for x in (p.get("rowsums") or []) if x]
        if rs:
            return sum(x["post_ra_mean"] for x in rs) / len(rs), sum(x["pre_ra_mean"] for x in rs) / len(rs)
    return None, None


def _learned_step(r, best):
    """The first logged step with validation accuracy >= half the best reachable (None: never)."""
    for p in r["log"]:
        if p["val_acc"] >= 0.5 * best:
            return p["step"]
    return None


def _final(r):
    last = r["log"][-1]
    L = last["layers"]
    post, pre = _rowsum(r)
    return dict(rowsum_post=post, rowsum_pre=pre, step=last["step"], val_loss=last["val_loss"], val_acc=last["val_acc"],
                max_gq=max(x["max_gq"] for x in L), max_gk=max(x["max_gk"] for x in L),
                top4=max(x["topk_share"] for x in L), max_prod=max(x["max_prod"] for x in L),
                max_logit=max(x["max_logit"] for x in L))


def _fmt(v, nd=3):
    return "n/a" if v is None else f"{v:.{nd}f}" if isinstance(v, float) else str(v)


EARLY_STEPS = (50, 100, 200, 300)


def _max_logit(p):
    L = p.get("layers") or []
    v = [x["max_logit"] for x in L if x.get("max_logit") is not None]
    return max(v) if v else None


def early(runs):
    """Max scaled logit (max over layers) over the first steps and where a run diverged: without QK norm, stale
    delta shows here first (the logits grow before any loss difference)."""
    lines = ["", "## Early training: max scaled logit (max over layers) and divergence", "",
             "| arm | seed | " + " | ".join(f"step {s}" for s in EARLY_STEPS) + " | diverged at step |",
             "|---|---|" + "---|" * len(EARLY_STEPS) + "---|"]
    per_arm = {}
    for r in runs:
        pts = {p["step"]: p for p in r["log"]}
        cells = []
        for s in EARLY_STEPS:
            v = _max_logit(pts[s]) if s in pts else None
            cells.append("-" if v is None else ("nan" if v != v else f"{v:.1f}"))
        div = r["log"][-1]["step"] if r.get("diverged") else None
        per_arm.setdefault(r["arm"], []).append(div is not None)
        lines.append(f"| {r['arm']} | {r['seed']} | " + " | ".join(cells) + f" | {'-' if div is None else div} |")
    lines += ["", "Diverged (non-finite loss) runs per arm: " +
              "; ".join(f"{arm} {sum(v)} of {len(v)}" for arm, v in per_arm.items()) + "."]
    return lines


def summary(res):
    c, env = res["config"], res["env"]
    runs = _runs(res)
    lines = ["# fa8 training probe: stale vs matched delta", ""]
    lines.append(f"Environment: {env.get('gpu', env.get('device'))}, torch {env.get('torch')}, CUDA {env.get('cuda', '-')}, "
                 f"fa8 commit {env.get('fa8_commit')}, generator {env.get('fa8_generator_hash', '-')}.")
    if "fa8_dispatch" in env:
        d = env["fa8_dispatch"]
        lines.append(f"fa8 kernels: fwd `{d.get('fwd')}`, delta `{d.get('delta')}`, bwd `{d.get('bwd')}`.")
    lines.append("")
    lines.append(f"Model: {c['layers']} layers, d_model {c['d_model']}, {c['heads']}/{c['kv_heads']} heads of {c['head_dim']}, "
                 f"FFN {c['ffn']}, QK RMSNorm with gains: {c['qk_norm']}. Task: MQAR, {c['pairs']} pairs + {c['queries']} "
                 f"queries ({c['seqlen']} tokens), vocab {c['vocab']}, answer noise {c.get('noise', 0)}, token shift "
                 f"{bool(c.get('token_shift', 0))}; chance accuracy {c['chance']:.4f}, best {c.get('best_acc', 1.0):.3f}. "
                 f"Batch {c['batch']}, {c['steps']} steps, AdamW lr {c['lr']} (warmup {c['warmup']}, cosine to 10%), "
                 f"wd {c['weight_decay']}, clip {c['clip']}, fa8 gradient format {c['grad_fmt']}, seeds {c['seeds']}.")
    if c.get("amax_scales"):
        lines.append("fa8 arms quantized with amax / fmt-max block scales (--amax-scales; fa8's default: powers of two).")
    if c.get("steps_reduced_from"):
        lines.append(f"**Steps were lowered from {c['steps_reduced_from']} to {c['steps']} to fit the time budget.**")
    best = c.get("best_acc", 1.0)
    lines += ["", "## Final values (max over layers for the gain columns)", "",
              "| arm | seed | step | learned at step | val loss | val acc | max abs g_q | max abs g_k | top-4 share of sum abs g_q g_k | max abs g_q g_k | max logit | dS row sums pre / post cast | ms/step |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        f = _final(r)
        flag = " (truncated)" if r.get("truncated") else " (diverged)" if r.get("diverged") else ""
        ls = _learned_step(r, best)
        lines.append(f"| {r['arm']}{flag} | {r['seed']} | {f['step']} | {ls if ls is not None else 'never'} | {f['val_loss']:.4f} | {f['val_acc']:.3f} | "
                     f"{f['max_gq']:.3f} | {f['max_gk']:.3f} | {f['top4']:.3f} | {f['max_prod']:.3f} | "
                     f"{_fmt(f['max_logit'], 1)} | "
                     + (f"{f['rowsum_pre']:.1e} / {f['rowsum_post']:.1e}" if f["rowsum_post"] is not None else "-")
                     + f" | {r.get('ms_per_step', 0):.1f} |")
    for r in res["runs"]:
        if "skipped" in r:
            lines.append(f"| {r['arm']} | {r['seed']} | skipped: {r['skipped']} | | | | | | | | | | |")
    # means over seeds, and differences against the BF16 reference
    arms = []
    for r in runs:
        if r["arm"] not in arms:
            arms.append(r["arm"])
    means = {}
    for arm in arms:
        fs = [_final(r) for r in runs if r["arm"] == arm and not r.get("truncated")]
        if fs:
            means[arm] = {k: statistics.fmean(f[k] for f in fs if f[k] is not None) for k in
                          ("val_loss", "val_acc", "max_gq", "max_gk", "top4", "max_prod")}
            means[arm]["n"] = len(fs)
            means[arm]["spread_gq"] = (max(f["max_gq"] for f in fs) - min(f["max_gq"] for f in fs)) if len(fs) > 1 else None
    if means:
        lines += ["", "## Means over seeds (complete runs)", "",
                  "| arm | seeds | val loss | val acc | max abs g_q | max abs g_k | top-4 share | max abs g_q g_k | seed spread of max abs g_q |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for arm, m in means.items():
            lines.append(f"| {arm} | {m['n']} | {m['val_loss']:.4f} | {m['val_acc']:.3f} | {m['max_gq']:.3f} | "
                         f"{m['max_gk']:.3f} | {m['top4']:.3f} | {m['max_prod']:.3f} | {_fmt(m['spread_gq'])} |")
    lines += early(runs)
    lines += ["", "## Checks", ""]
    ref = means.get("sdpa-bf16")
    if ref is None:
        lines.append("- No complete BF16 reference run: nothing to compare against.")
    else:
        learned = ref["val_acc"] >= 0.5 * c.get("best_acc", 1.0) and ref["val_acc"] >= 10 * c["chance"]
        lines.append(f"- BF16 reference accuracy {ref['val_acc']:.3f} (chance {c['chance']:.4f}, best {c.get('best_acc', 1.0):.3f}): "
                     + ("learned the task." if learned else "**did not learn the task: the comparison says little.**"))
        for arm, m in means.items():
            if arm == "sdpa-bf16":
                continue
            lines.append(f"- {arm} minus BF16: val loss {m['val_loss'] - ref['val_loss']:+.4f}, acc {m['val_acc'] - ref['val_acc']:+.3f}, "
                         f"max abs g_q {m['max_gq'] - ref['max_gq']:+.3f}, max abs g_k {m['max_gk'] - ref['max_gk']:+.3f}, "
                         f"top-4 share {m['top4'] - ref['top4']:+.3f}.")
        if "fa8-stale" in means and "fa8-matched" in means:
            s, m = means["fa8-stale"], means["fa8-matched"]
            sp = [x for x in (s.get("spread_gq"), m.get("spread_gq"), ref.get("spread_gq")) if x is not None]
            lines.append(f"- stale minus matched: max abs g_q {s['max_gq'] - m['max_gq']:+.3f}, top-4 share "
                         f"{s['top4'] - m['top4']:+.3f}, val loss {s['val_loss'] - m['val_loss']:+.4f}"
                         + (f" (seed spread of max abs g_q up to {max(sp):.3f}: a difference below it is not a finding)." if sp else "."))
    ls = {}
    for r in runs:
        ls.setdefault(r["arm"], []).append(_learned_step(r, best))
    if ls:
        lines.append("- learned at step (per seed): " + "; ".join(
            f"{arm} {', '.join('never' if x is None else str(x) for x in v)}" for arm, v in ls.items()) + ".")
    for n in res.get("notes", []):
        lines.append(f"- note: {n}")
    lines += ["", "Learned at step: the first evaluation with validation accuracy >= half the best reachable "
              f"({0.5 * best:.3f}).", "", "dS row sums: fa8_backward's collect_stats on the q, k, v and dO of the training step before each "
              "evaluation, in the arm's own delta mode, mean over rows of |sum_j dS_ij| / sum_j P_ij(|dP_ij| + |delta_i|), "
              "averaged over layers (docs/numerics.md).", "",
              "Plots: loss.png, accuracy.png, gains.png (per layer max abs g_q and g_k), concentration.png "
              "(per layer top-4 share), logits.png (per layer max scaled logit), rowsums.png (dS row sums of the fa8 "
              "arms per layer), final_gains.png (sorted |g_q g_k| per channel at the end, layer of largest product).", "",
              f"Total probe time: {res.get('seconds_total', 0):.0f} s.", ""]
    return "\n".join(lines)


def plots(res, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = _runs(res)
    if not runs:
        return
    seeds = sorted({r["seed"] for r in runs})
    nl = len(runs[0]["log"][0]["layers"])

    def style(r):
        return dict(color=COLORS.get(r["arm"], "gray"), ls=STYLES[seeds.index(r["seed"]) % len(STYLES)],
                    label=f"{r['arm']} s{r['seed']}", lw=1.2)

    fig, axs = plt.subplots(1, 2, figsize=(12, 4))
    for r in runs:
        lg = [p for p in r["log"] if p["train_loss"] is not None]
        axs[0].plot([p["step"] for p in lg], [p["train_loss"] for p in lg], **style(r))
        axs[1].plot([p["step"] for p in r["log"]], [p["val_loss"] for p in r["log"]], **style(r))
    for ax, t in zip(axs, ("train loss (answers only)", "validation loss")):
        ax.set_title(t)
        ax.set_xlabel("step")
        ax.set_yscale("log")
    axs[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss.png"), dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in runs:
        ax.plot([p["step"] for p in r["log"]], [p["val_acc"] for p in r["log"]], **style(r))
    ax.axhline(res["config"]["chance"], color="gray", lw=0.8, ls=":")
    ax.set_title("validation accuracy (MQAR answers)")
    ax.set_xlabel("step")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "accuracy.png"), dpi=100)
    plt.close(fig)

    def per_layer(fname, keys, title):
        fig, axs = plt.subplots(len(keys), nl, figsize=(3.2 * nl, 2.8 * len(keys)), squeeze=False)
        for i, (key, lab) in enumerate(keys):
            for l in range(nl):
                ax = axs[i][l]
                for r in runs:
                    ys = [p["layers"][l][key] for p in r["log"]]
                    ax.plot([p["step"] for p in r["log"]], ys, **style(r))
                ax.set_title(f"layer {l}: {lab}", fontsize=9)
                ax.set_xlabel("step", fontsize=8)
        axs[0][-1].legend(fontsize=6)
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(os.path.join(out, fname), dpi=100)
        plt.close(fig)

    per_layer("gains.png", [("max_gq", "max |g_q|"), ("max_gk", "max |g_k|")], "QK-norm gains")
    per_layer("concentration.png", [("topk_share", "top-4 share of sum |g_q g_k|"), ("max_prod", "max |g_q g_k|")],
              "concentration of the QK gains")
    per_layer("logits.png", [("max_logit", "max |scaled logit|")], "largest attention logit (first val sequence)")

    fa = [r for r in runs if any(p.get("rowsums") for p in r["log"])]
    if fa:
        fig, axs = plt.subplots(2, nl, figsize=(3.2 * nl, 5.6), squeeze=False)
        for i, key in enumerate(("pre_ra_mean", "post_ra_mean")):
            for l in range(nl):
                ax = axs[i][l]
                for r in fa:
                    pts = [(p["step"], p["rowsums"][l][key]) for p in r["log"]
                           if p.get("rowsums") and l < len(p["rowsums"]) and p["rowsums"][l]]
                    if pts:
                        ax.plot([x for x, _ in pts], [max(y, 1e-12) for _, y in pts], **style(r))
                ax.set_yscale("log")
                ax.set_title(f"layer {l}: {'before' if i == 0 else 'after'} the dS cast", fontsize=9)
                ax.set_xlabel("step", fontsize=8)
        axs[0][-1].legend(fontsize=6)
        fig.suptitle("dS row sums, rounding-aware (training tensors, each arm's delta mode)")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "rowsums.png"), dpi=100)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in runs:
        g = r.get("final_gains")
        if not g:
            continue
        prods = [sorted((abs(a * b) for a, b in zip(x["gain_q"], x["gain_k"])), reverse=True) for x in g]
        lay = max(range(len(prods)), key=lambda i: prods[i][0])
        st = style(r)
        st["label"] += f" (layer {lay})"
        ax.plot(range(len(prods[lay])), prods[lay], marker=".", ms=3, **st)
    ax.set_yscale("log")
    ax.set_xlabel("channel, sorted")
    ax.set_title("final |g_q g_k| per channel (layer with the largest product)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "final_gains.png"), dpi=100)
    plt.close(fig)


def write(res, out):
    with open(os.path.join(out, "summary.md"), "w") as fh:
        fh.write(summary(res))
    try:
        plots(res, out)
    except ImportError as e:   # matplotlib missing: the JSON and the summary still stand
        with open(os.path.join(out, "summary.md"), "a") as fh:
            fh.write(f"\n(no plots: {e})\n")


if __name__ == "__main__":
    d = sys.argv[1]
    with open(os.path.join(d, "results.json")) as fh:
        write(json.load(fh), d)
