#!/usr/bin/env python3
"""probe/report.py's tables (stdlib only, no torch or matplotlib): the early-training table and the divergence
count on synthetic runs whose values are known, and on a committed H200 result whose facts are in its train.log."""
import json
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "probe"))
import report  # noqa: E402


def point(step, logit, val_acc=0.0, val_loss=4.0):
    layers = [dict(max_gq=1.0, max_gk=1.0, sum_qk=64.0, topk_share=0.0625, max_prod=1.0, mean_prod=1.0,
                   max_logit=logit * f) for f in (0.5, 1.0, 0.25)]   # the table takes the max over layers
    return dict(step=step, train_loss=val_loss, grad_norm=1.0, lr=1e-3, val_loss=val_loss, val_acc=val_acc,
                layers=layers)


def synthetic():
    nan = float("nan")
    runs = [
        dict(arm="sdpa-bf16", seed=0, diverged=False, steps_done=300, seconds=1.0, ms_per_step=1.0,
             log=[point(0, 0.5), point(50, 1.3), point(100, 6.9), point(200, 26.6), point(300, 53.2, 0.9, 0.8)]),
        dict(arm="fa8-stale", seed=0, diverged=True, steps_done=150, seconds=1.0, ms_per_step=1.0,
             log=[point(0, 0.5), point(50, 10.8), point(100, 35.8), point(150, nan, 0.0, nan)]),
        dict(arm="fa8-stale", seed=1, diverged=False, steps_done=300, seconds=1.0, ms_per_step=1.0,
             log=[point(0, 0.5), point(50, 7.0), point(100, 8.0), point(200, 9.0), point(300, 10.0, 0.9, 0.8)]),
    ]
    # the committed run's config (the summary's header reads every field), two arms and two seeds here
    with open(os.path.join(ROOT, "probe", "results", "2026-11-29-h200-ac1104c-no-qk-norm", "results.json")) as fh:
        cfg = json.load(fh)["config"]
    cfg.update(arms=["sdpa-bf16", "fa8-stale"], seeds=[0, 1])
    return dict(config=cfg, env={}, runs=runs, notes=[], seconds_total=3.0)


class Early(unittest.TestCase):
    def test_table_rows(self):
        lines = report.early(synthetic()["runs"])
        rows = [l for l in lines if l.startswith("| fa8-stale | 0 ")]
        self.assertEqual(rows, ["| fa8-stale | 0 | 10.8 | 35.8 | - | - | 150 |"])
        rows = [l for l in lines if l.startswith("| sdpa-bf16 | 0 ")]
        self.assertEqual(rows, ["| sdpa-bf16 | 0 | 1.3 | 6.9 | 26.6 | 53.2 | - |"])
        self.assertIn("Diverged (non-finite loss) runs per arm: sdpa-bf16 0 of 1; fa8-stale 1 of 2.", lines)

    def test_nan_logit_is_shown(self):
        res = synthetic()
        res["runs"][1]["log"][2] = point(100, float("nan"))
        rows = [l for l in report.early(res["runs"]) if l.startswith("| fa8-stale | 0 ")]
        self.assertEqual(rows, ["| fa8-stale | 0 | 10.8 | nan | - | - | 150 |"])

    def test_summary_contains_section(self):
        text = report.summary(synthetic())
        self.assertIn("## Early training", text)
        self.assertLess(text.index("## Early training"), text.index("## Checks"))


class CommittedH200Run(unittest.TestCase):
    """The no-QK-norm run: train.log's own last lines per run say where each diverged (train nan)."""
    DIR = os.path.join(ROOT, "probe", "results", "2026-11-29-h200-ac1104c-no-qk-norm")

    def test_divergence_matches_train_log(self):
        with open(os.path.join(self.DIR, "results.json")) as fh:
            res = json.load(fh)
        first_nan = {}
        with open(os.path.join(self.DIR, "train.log")) as fh:
            for line in fh:
                f = line.split()
                if len(f) > 6 and f[1] == "seed" and f[3] == "step" and f[6] == "nan":
                    first_nan.setdefault((f[0], int(f[2])), int(f[4]))
        rows = {}
        for l in report.early(res["runs"]):
            c = [x.strip() for x in l.strip("|").split("|")]
            if len(c) == 7 and c[1].isdigit():
                rows[(c[0], int(c[1]))] = None if c[6] == "-" else int(c[6])
        self.assertEqual(len(rows), 12)
        for key, step in rows.items():
            self.assertEqual(step, first_nan.get(key), key)


if __name__ == "__main__":
    unittest.main()
