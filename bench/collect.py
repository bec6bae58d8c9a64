#!/usr/bin/env python3
"""Turn one device run's artifacts (results.json from run.py, accuracy.json from peers.py, their plots) into the
committed result set bench/results/<date>-<device>.{json,md} + PNGs. Runs here, no GPU: it only re-renders what was
measured, so the table can never disagree with the JSON. Refuses artifacts from two different commits."""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as speed  # noqa: E402


def accuracy_md(acc):
    p = acc["problem"]
    lines = [f"Problem: B={p['B']}, H={p['H']}, Hkv={p['Hkv']}, d={p['D']}, S={p['S']}, causal={p['causal']}, "
             f"seed {p['seed']}; {p['inputs']}. Error: ||x - ref|| / ||ref|| against float64 attention on the same "
             "BF16 inputs.", "",
             "| system | err O | err dQ | err dK | err dV | dS row sums pre-cast (mean, rounding-aware) | post-cast |",
             "|---|---|---|---|---|---|---|"]
    for name, r in acc["systems"].items():
        if "error" in r:
            lines.append(f"| {name} | n/a ({r['error'][:80]}) | | | | | |")
            continue
        rs = r.get("rowsum")
        pre = f"{rs['pre_ra_mean']:.2e}" if rs else ""
        post = f"{rs['post_ra_mean']:.2e}" if rs else ""
        lines.append(f"| {name} | {r['err_o']:.4f} | {r['err_dq']:.4f} | {r['err_dk']:.4f} | {r['err_dv']:.4f} | "
                     f"{pre} | {post} |")
    lines += ["", f"Post-cast row-sum residual, stale / matched: {acc['ratio_stale_over_matched_post_ra_mean']:.2f}x "
              f"(rounding-aware), {acc['ratio_stale_over_matched_post_mean']:.2f}x (by sum |dS|); the published kernel "
              "probes found 5.3-6.3x."]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("artifacts", help="folder holding results.json, accuracy.json, speed.png, errors.png, rowsums.png")
    ap.add_argument("--dest", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--device", default="h200")
    ap.add_argument("--command", required=True, help="the device call that produced the artifacts (recorded)")
    a = ap.parse_args()
    with open(os.path.join(a.artifacts, "results.json")) as f:
        sp = json.load(f)
    with open(os.path.join(a.artifacts, "accuracy.json")) as f:
        acc = json.load(f)
    env = sp["env"]
    if acc["env"]["fa8_commit"] != env["fa8_commit"]:
        sys.exit(f"collect: speed and accuracy come from different commits ({env['fa8_commit']} vs "
                 f"{acc['env']['fa8_commit']}): rerun both in one device call")
    env["device_command"] = a.command
    stem = os.path.join(a.dest, f"{env['date']}-{a.device}")
    with open(stem + ".json", "w") as f:
        json.dump({"env": env, "speed": sp["rows"], "accuracy": acc}, f, indent=1)
    speed.render(sp["rows"], a.artifacts, echo=False)
    with open(os.path.join(a.artifacts, "results.md")) as f:
        table = f.read()
    with open(stem + ".md", "w") as f:
        f.write(f"# fa8 vs peers on {env['gpu']}, {env['date']}\n\n"
                f"fa8 commit {env['fa8_commit']}; driver {env['driver']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, "
                f"torch {env['torch']}. Measured in one device call: `{a.command}`.\n\n"
                "## Speed (medians of CUDA-event timings; FLOPs: forward 2·B·H·Sq·Sk·(dqk+dv), backward 2.5x, "
                "halved for causal, the same count for every system; fa8's backward includes its delta prep)\n\n"
                f"![speed]({os.path.basename(stem)}-speed.png)\n\n{table}\n"
                f"## Accuracy\n\n{accuracy_md(acc)}\n\n"
                f"![errors]({os.path.basename(stem)}-errors.png)\n![row sums]({os.path.basename(stem)}-rowsums.png)\n")
    for png in ("speed", "errors", "rowsums"):
        shutil.copyfile(os.path.join(a.artifacts, png + ".png"), f"{stem}-{png}.png")
    print(stem + ".{json,md}")


if __name__ == "__main__":
    main()
