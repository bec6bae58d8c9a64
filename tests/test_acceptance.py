#!/usr/bin/env python3
"""bench/acceptance.py (stdlib only): Delta-Matching costs and issue 5's throughput verdicts on synthetic bench rows
whose answers are worked out here, its refusals of bad input, and a committed H200 run whose costs its README
states."""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import acceptance  # noqa: E402


def row(mode, fwd_ms, bwd_ms, fwd_tf=0.0, bwd_tf=0.0, d=128, causal=False, H=64, Hkv=64, S=8192):
    # fa8 bench's row under its default quantization (128-row power-of-two scales)
    return dict(system=f"fa8-{mode}", B=1, H=H, Hkv=Hkv, S=S, dqk=d, dv=d, causal=causal, fwd_ms=fwd_ms,
                bwd_ms=bwd_ms, fwd_tflops=fwd_tf, bwd_tflops=bwd_tf, fwd="f", bwd="b", pow2_scales=True)


class Run(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, lines):
        path = os.path.join(self.dir.name, "fa8-bench.jsonl")
        with open(path, "w") as f:
            f.write("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
        return path

    def run_tool(self, *args):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = acceptance.main(list(args))
        return rc, out.getvalue(), err.getvalue()

    def expect_error(self, lines, pattern):
        rc, out, err = self.run_tool(self.write(lines))
        self.assertEqual(rc, 1)
        self.assertEqual(out, "")
        self.assertRegex(err, pattern)


class Costs(Run):
    def test_costs_and_budgets(self):
        # stale 1 + 4 = 5 ms; matched 1 + 5.2 = 6.2 (+24 %, inside 25 %); split 1.5 + 4 = 5.5 (+10 %, over 8 %)
        path = self.write([row("stale", 1.0, 4.0, 700, 450), row("matched", 1.0, 5.2, 700, 350),
                           row("split", 1.5, 4.0, 470, 450)])
        rc, out, _ = self.run_tool(path)
        self.assertEqual(rc, 0)
        line = next(x for x in out.splitlines() if x.startswith("| d128 H64 S=8192 |"))
        self.assertIn("+24.0 % (pass)", line)
        self.assertIn("+10.0 % (**FAIL**)", line)
        self.assertIn("| 700 | 450 |", line)   # stale's forward; the faster exact backward (split)

    def test_scale_rows_keep_problems_apart(self):
        # the same shape under per-tensor scales is its own problem: its costs compare within it, and a row
        # without the field counts as the default 128-row blocks
        blocks = [row("stale", 1.0, 4.0, 700, 450), row("split", 1.5, 4.0, 470, 450)]
        pt = [dict(row("stale", 0.9, 4.0, 770, 450), scale_rows=0), dict(row("split", 1.2, 4.0, 580, 450), scale_rows=0)]
        _, out, _ = self.run_tool(self.write(blocks + pt))
        self.assertIn("| d128 H64 S=8192 | 1.000 / 4.00 | – | +10.0 % (**FAIL**) | 700 | 450 |", out)
        self.assertIn("| d128 H64 S=8192 per-tensor | 0.900 / 4.00 | – | +6.1 % (pass) | 770 | 450 |", out)
        self.assertIn("- forward d128 H64 S=8192 per-tensor: 770 TFLOP/s", out)
        self.expect_error([dict(row("stale", 1.0, 4.0), scale_rows=-1)], r"scale_rows -1")

    def test_amax_scales_keep_problems_apart(self):
        # amax scales (fa8 bench --no-pow2-scales) are a quantization of their own, beside the default power-of-two
        # scales; a row without the field is from before fa8 bench wrote it, when amax scales were the default
        amax = [dict(row("stale", 1.0, 4.0, 700, 450), pow2_scales=False), dict(row("split", 1.5, 4.0, 470, 450), pow2_scales=False)]
        p2 = [row("stale", 0.95, 4.0, 737, 450), row("split", 1.3, 4.0, 540, 450)]
        _, out, _ = self.run_tool(self.write(amax + p2))
        self.assertIn("| d128 H64 S=8192 amax scales | 1.000 / 4.00 | – | +10.0 % (**FAIL**) | 700 | 450 |", out)
        self.assertIn("| d128 H64 S=8192 | 0.950 / 4.00 | – | +7.1 % (pass) | 737 | 450 |", out)
        self.assertIn("- forward d128 H64 S=8192 amax scales: 700 TFLOP/s", out)
        self.assertIn("- forward d128 H64 S=8192: 737 TFLOP/s", out)
        old = row("stale", 1.0, 4.0, 700, 450)
        del old["pow2_scales"]
        _, out, _ = self.run_tool(self.write([old]))
        self.assertIn("| d128 H64 S=8192 amax scales | 1.000 / 4.00 |", out)
        self.expect_error([dict(row("stale", 1.0, 4.0), pow2_scales=1)], r"pow2_scales 1")

    def test_v_scale_rows_keep_problems_apart(self):
        # V quantized on its own (fa8 bench --v-scale-rows, one scale per head, say) is a quantization of its own;
        # a row without the field quantizes V like the rest
        blocks = [row("stale", 1.0, 4.0, 700, 450), row("split", 1.5, 4.0, 470, 450)]
        vh = [dict(row("stale", 0.93, 4.0, 753, 450), v_scale_rows=8192), dict(row("split", 1.2, 4.0, 580, 450), v_scale_rows=8192)]
        _, out, _ = self.run_tool(self.write(blocks + vh))
        self.assertIn("| d128 H64 S=8192 | 1.000 / 4.00 | – | +10.0 % (**FAIL**) | 700 | 450 |", out)
        self.assertIn("| d128 H64 S=8192 V scale rows 8192 | 0.930 / 4.00 | – | +5.5 % (pass) | 753 | 450 |", out)
        self.expect_error([dict(row("stale", 1.0, 4.0), v_scale_rows="all")], r"v_scale_rows 'all'")

    def test_edge_of_the_budget_passes(self):
        path = self.write([row("stale", 1.0, 3.0), row("matched", 1.0, 4.0), row("split", 1.0, 3.32)])
        _, out, _ = self.run_tool(path)
        self.assertIn("+25.0 % (pass)", out)
        self.assertIn("+8.0 % (pass)", out)

    def test_peers_and_messages_are_skipped_and_costs_stay_within_a_file(self):
        path = self.write(["ptxas info: something", row("stale", 1.0, 4.0),
                           dict(row("stale", 9.0, 9.0), system="sdpa-bf16-cudnn"), row("matched", 1.0, 4.5)])
        other = os.path.join(self.dir.name, "other.jsonl")
        with open(other, "w") as f:
            f.write(json.dumps(row("stale", 2.0, 8.0)) + "\n" + json.dumps(row("split", 2.0, 8.4)) + "\n")
        rc, out, _ = self.run_tool(path, other)
        self.assertEqual(rc, 0)
        self.assertIn("+10.0 % (pass)", out)   # matched 5.5 over stale 5, this file's stale row, not the peer's
        self.assertIn("+4.0 % (pass)", out)    # split 10.4 over the other file's stale 10
        self.assertEqual(out.count("## "), 2)

    def test_no_stale_row_no_costs(self):
        path = self.write([row("matched", 1.0, 5.0, 700, 350)])
        _, out, _ = self.run_tool(path)
        self.assertIn("| d128 H64 S=8192 | (no stale row) | – | – | – | 350 |", out)


class Targets(Run):
    def test_throughput_verdicts(self):
        path = self.write([row("stale", 1.0, 4.0, 910, 500), row("split", 1.3, 4.0, 600, 610),
                           row("stale", 0.6, 2.2, 760, 480, causal=True), row("split", 0.8, 2.2, 500, 540, causal=True),
                           row("stale", 2.0, 8.0, 990, 360, d=256)])
        _, out, _ = self.run_tool(path)
        self.assertIn("- forward d128 H64 S=8192: 910 TFLOP/s, target 900: pass", out)
        self.assertIn("- backward d128 H64 S=8192, faster exact mode: 610 TFLOP/s, target 600: pass", out)
        self.assertIn("- backward d128 H64 S=8192 causal, faster exact mode: 540 TFLOP/s, target 550: **FAIL**", out)
        self.assertIn("760 against 910 non-causal (16.5 % below, limit 15 %): **FAIL**", out)
        self.assertIn("- forward d256 H64 S=8192: 990 TFLOP/s, target 1000: **FAIL**", out)

    def test_forward_alone_judged_on_its_own_line(self):
        alone = dict(row("stale", 2.45, 9.0, 880, 600), fwd_alone_ms=2.40, fwd_alone_tflops=916.0)
        path = self.write([alone, row("split", 2.8, 9.0, 770, 610)])
        _, out, _ = self.run_tool(path)
        self.assertIn("- forward d128 H64 S=8192: 880 TFLOP/s, target 900: **FAIL**", out)
        self.assertIn("- forward d128 H64 S=8192, timed alone (back-to-back forwards, the peers' protocol): "
                      "916 TFLOP/s, target 900: pass", out)
        path = self.write([row("stale", 2.45, 9.0, 880, 600)])
        _, out, _ = self.run_tool(path)
        self.assertNotIn("timed alone", out)   # rows from before the field: one line

    def test_repeated_sets_are_listed_and_their_median_judged(self):
        # the same d256 set run again (as bench/results/2026-12-06-h100-pow2-default/d256-pow2-row ran it): each
        # verdict reads the field's median over the sets, and one line names every set's forward so the spread
        # between them is not lost
        def d256(fwd_ms, tflops, alone):
            return dict(row("stale", fwd_ms, 28.0, tflops, 393, d=256), fwd_alone_ms=4.4, fwd_alone_tflops=alone)
        first, second, third = d256(3.83, 1148, 1006.0), d256(3.84, 1146, 922.0), d256(3.82, 1150, 1011.0)
        split = [row("split", 5.37, 28.0, 819, 393, d=256), row("split", 5.39, 28.0, 816, 392, d=256),
                 row("split", 5.38, 28.0, 817, 393, d=256)]
        path = self.write([first, split[0], second, split[1]])
        _, out, _ = self.run_tool(path)
        self.assertIn("- d256 H64 S=8192 was measured 2 times in this file; the lines judge the median over the sets. "
                      "Stale's forward in each set (TFLOP/s): 1148 / 1006 alone, 1146 / 922 alone", out)
        # two sets: the middle two's mean, (1006 + 922) / 2
        self.assertIn("timed alone (back-to-back forwards, the peers' protocol): 964 TFLOP/s, target 1000: **FAIL**", out)
        self.assertIn("- forward d256 H64 S=8192: 1147 TFLOP/s, target 1000: pass", out)
        # three sets: the middle one, whichever set it came from; the cost reads the median times
        # (stale 3.83 + 28.0, split 5.38 + 28.0: +4.9 %)
        path = self.write([first, split[0], second, split[1], third, split[2]])
        _, out, _ = self.run_tool(path)
        self.assertIn("measured 3 times", out)
        self.assertIn("1006 TFLOP/s, target 1000: pass", out)
        self.assertIn("| d256 H64 S=8192 | 3.830 / 28.00 | – | +4.9 % (pass) | 1148 |", out)
        # measured once (or only its split measured twice): no such line
        path = self.write([first, split[0], split[1]])
        _, out, _ = self.run_tool(path)
        self.assertNotIn("was measured", out)
        self.assertIn("1006 TFLOP/s, target 1000: pass", out)
        # a set without the alone field: the alone line is not judged on the other sets alone
        path = self.write([first, row("stale", 3.84, 28.0, 1146, 393, d=256)])
        _, out, _ = self.run_tool(path)
        self.assertNotIn("timed alone", out)

    def test_split_only_problems_get_no_forward_verdict(self):
        # split's forward is another kernel (its extra GEMM): a problem timed in split alone is judged on its
        # backward only, never as the standard forward nor against the non-causal one
        path = self.write([row("stale", 1.0, 4.0, 1080, 400, d=256), row("split", 1.5, 4.0, 714, 383, d=256, causal=True),
                           row("split", 1.3, 4.0, 700, 610)])
        _, out, _ = self.run_tool(path)
        self.assertIn("- forward d256 H64 S=8192: 1080 TFLOP/s, target 1000: pass", out)
        self.assertNotIn("causal forward", out)
        self.assertNotIn("- forward d128", out)
        self.assertIn("- backward d128 H64 S=8192, faster exact mode: 610 TFLOP/s, target 600: pass", out)

    def test_bad_forward_alone_is_named(self):
        for bad in (0, -1.0, "fast", True):
            path = self.write([dict(row("stale", 1.0, 4.0, 900, 600), fwd_alone_ms=bad, fwd_alone_tflops=900.0)])
            rc, _, err = self.run_tool(path)
            self.assertEqual(rc, 1)
            self.assertIn("fwd_alone_ms", err)

    def test_targets_only_at_8k_and_64_heads(self):
        path = self.write([row("stale", 1.0, 4.0, 100, 100, S=4096), row("stale", 1.0, 4.0, 100, 100, H=32, Hkv=32)])
        _, out, _ = self.run_tool(path)
        self.assertNotIn("Throughput targets", out)


class Peers(Run):
    def test_results_json_with_peers_and_refusals(self):
        path = os.path.join(self.dir.name, "results.json")
        rows = [row("stale", 1.0, 4.0, 700, 450, Hkv=8), row("split", 1.3, 4.0, 470, 560, Hkv=8),
                dict(row("stale", 1.0, 4.0, 690, 580, Hkv=8), system="sdpa-bf16-cudnn"),
                row("stale", 0.6, 2.2, 690, 420, Hkv=8, causal=True), row("matched", 0.6, 2.8, 690, 330, Hkv=8, causal=True),
                dict(row("stale", 1.0, 4.0, 0, 0, Hkv=8, causal=True), system="sdpa-bf16-cudnn", bwd_tflops=300.0),
                {"system": "cudnn-fp8", "B": 1, "H": 64, "Hkv": 8, "S": 8192, "dqk": 256, "dv": 256, "causal": False,
                 "error": "no engine for this graph"}]
        with open(path, "w") as f:
            json.dump({"env": {}, "rows": rows}, f)
        rc, out, _ = self.run_tool(path)
        self.assertEqual(rc, 0)
        self.assertIn("- backward d128 H64/8 S=8192, faster exact mode above cuDNN BF16 in the same run (580): **FAIL**", out)
        self.assertIn("- backward d128 H64/8 S=8192 causal, faster exact mode above cuDNN BF16 in the same run (300): pass", out)
        self.assertIn("- cudnn-fp8 " + path + ": row 7: no engine for this graph", out)
        self.assertNotIn("| d256", out)   # a refusal is not a problem row

    def test_committed_results_json(self):
        path = os.path.join(ROOT, "bench", "results", "2026-11-30-h200-f9e91d6", "results.json")
        rc, out, _ = self.run_tool(path)
        self.assertEqual(rc, 0)
        self.assertIn("- forward d256 H64/8 S=8192 amax scales: 1056 TFLOP/s, target 1000: pass", out)   # before the field
        self.assertIn("above cuDNN BF16 in the same run (528): **FAIL**", out)


class BadInput(Run):
    def test_malformed_json_names_the_line(self):
        self.expect_error([row("stale", 1.0, 4.0), '{"system": "fa8-split", '], r"fa8-bench\.jsonl:2: not JSON")

    def test_missing_field_is_named(self):
        r = row("stale", 1.0, 4.0)
        del r["bwd_ms"]
        self.expect_error([r], r"fa8-bench\.jsonl:1: no 'bwd_ms' field")

    def test_bad_time_is_named(self):
        self.expect_error([row("stale", 1.0, 0.0)], r"fa8-bench\.jsonl:1: bwd_ms 0\.0 is not a positive time")
        self.expect_error([dict(row("stale", 1.0, 4.0), fwd_ms="fast")], r"fwd_ms 'fast' is not a positive time")

    def test_results_json_without_rows(self):
        path = os.path.join(self.dir.name, "results.json")
        with open(path, "w") as f:
            f.write('{"env": {}}')
        rc, _, err = self.run_tool(path)
        self.assertEqual(rc, 1)
        self.assertIn('results.json: no "rows" list', err)

    def test_no_rows_and_missing_file(self):
        self.expect_error(["no json here"], r"no fa8 bench rows")
        rc, _, err = self.run_tool(os.path.join(self.dir.name, "absent.jsonl"))
        self.assertEqual(rc, 1)
        self.assertIn("absent.jsonl", err)


class Across(Run):
    def write_run(self, name, lines):
        os.makedirs(os.path.join(self.dir.name, name))
        path = os.path.join(self.dir.name, name, "fa8-bench.jsonl")
        with open(path, "w") as f:
            f.write("\n".join(json.dumps(x) for x in lines) + "\n")
        return path

    def test_runs_side_by_side(self):
        # two machines: the d128 forward passes on one (910) and fails on the other (880); split's cost is
        # (1.1 + 4) / (1 + 4) - 1 = +2.0 % and (1.1 + 4.4) / (1 + 4) - 1 = +10.0 %
        a = self.write_run("runA", [dict(row("stale", 1.0, 4.0, 910, 590), fwd_alone_ms=1.0, fwd_alone_tflops=905.0),
                                    row("split", 1.1, 4.0, 700, 610)])
        b = self.write_run("runB", [dict(row("stale", 1.0, 4.0, 880, 590), fwd_alone_ms=1.0, fwd_alone_tflops=870.0),
                                    row("split", 1.1, 4.4, 700, 560), row("stale", 1.0, 9.0, 1010, 390, d=256)])
        rc, out, _ = self.run_tool("--across", a, b)
        self.assertEqual(rc, 0)
        self.assertIn("| line | runA | runB | passes |", out)
        self.assertIn("| forward d128 H64 S=8192 (≥ 900) | 910 | 880 **FAIL** | 1 of 2 |", out)
        self.assertIn("| forward d128 H64 S=8192, alone (≥ 900) | 905 | 870 **FAIL** | 1 of 2 |", out)
        self.assertIn("| backward d128 H64 S=8192, faster exact mode (≥ 600) | 610 | 560 **FAIL** | 1 of 2 |", out)
        self.assertIn("| split cost d128 H64 S=8192 (≤ 8 %) | +2.0 % | +10.0 % **FAIL** | 1 of 2 |", out)
        # a line only one run measured: a dash where the other has none, judged over the one
        self.assertIn("| forward d256 H64 S=8192 (≥ 1000) | – | 1010 | 1 of 1 |", out)

    def test_peers_of_the_same_run_join_by_comma(self):
        a = self.write_run("runA", [row("stale", 1.0, 4.0, 910, 590), row("split", 1.1, 4.0, 700, 610)])
        peers = os.path.join(self.dir.name, "runA", "results.json")
        with open(peers, "w") as f:
            json.dump({"rows": [dict(row("stale", 1.0, 4.0, 650, 620), system="sdpa-bf16-cudnn")]}, f)
        rc, out, _ = self.run_tool("--across", f"{a},{peers}")
        self.assertEqual(rc, 0)
        self.assertIn("| backward d128 H64 S=8192, above cuDNN BF16 | 610 vs 620 **FAIL** | 0 of 1 |", out)
        rc, _, err = self.run_tool("--across", f"{a},{os.path.join(self.dir.name, 'absent.json')}")
        self.assertEqual(rc, 1)
        self.assertIn("absent.json", err)
        # a results.md given where results.json belongs (it has no JSON lines): named, not read as no peers
        md = os.path.join(self.dir.name, "runA", "results.md")
        with open(md, "w") as f:
            f.write("| d | S | system |\n|---|---|---|\n")
        rc, out, err = self.run_tool("--across", f"{a},{md}")
        self.assertEqual((rc, out), (1, ""))
        self.assertIn(f"{md}: no rows (neither fa8 bench JSON lines nor a results.json)", err)
        for bad in (f"{a},", f",{a}", ","):
            rc, out, err = self.run_tool("--across", bad)
            self.assertEqual((rc, out), (1, ""))
            self.assertIn(f"--across '{bad}': an empty file name", err)


class Committed(unittest.TestCase):
    def test_f9e91d6_costs_as_its_readme_states(self):
        path = os.path.join(ROOT, "bench", "results", "2026-11-30-h200-f9e91d6", "fa8-bench.jsonl")
        probs = acceptance.problems(acceptance.read_rows(path))
        c = acceptance.costs(probs[(1, 64, 64, 8192, 256, 256, False, 128, False, 128)])
        self.assertAlmostEqual(c["matched"] * 100, 19.9, delta=0.05)
        self.assertAlmostEqual(c["split"] * 100, 6.4, delta=0.05)
        c = acceptance.costs(probs[(1, 64, 64, 8192, 128, 128, False, 128, False, 128)])
        self.assertAlmostEqual(c["matched"] * 100, 22.7, delta=0.05)
        self.assertAlmostEqual(c["split"] * 100, 9.0, delta=0.05)


if __name__ == "__main__":
    unittest.main()
