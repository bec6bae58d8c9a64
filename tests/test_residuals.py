#!/usr/bin/env python3
"""bench/residuals.py (stdlib only): the GPU suite's row-sum and gradient-error lines regrouped per case and delta
mode, on synthetic lines in the suite's own format (tests/test_gpu.c: case padded to 30 columns, mode to 7) and on
a committed H200 log."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import residuals  # noqa: E402


def cpu_line(case, mode, pre, post):
    return (f"[gpu-vs-cpu] {case:<30} {mode:<7} fa8_bwd_x: O 1.0e-02 dQ 2.0e-02 dK 1.0e-02 dV 1.0e-02 lse 1.0e-02 "
            f"delta 1.0e-02 | rowsum pre-ra max gpu {pre} cpu 9.9e-01 post-ra mean gpu {post} cpu 9.9e-01")


def fp64_line(case, mode, dq, dk, dv):
    return f"[gpu-vs-fp64] {case:<30} {mode:<7} fa8_bwd_x: O gpu 1.00e-02 cpu 1.00e-02 dQ {dq} 9.9 dK {dk} 9.9 dV {dv} 9.9"


class Residuals(unittest.TestCase):
    def run_tool(self, lines):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "testlog.txt")
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            out, err = io.StringIO(), io.StringIO()
            with redirect_stdout(out), redirect_stderr(err):
                rc = residuals.main([path])
            return rc, out.getvalue(), err.getvalue()

    def test_modes_side_by_side_with_the_ratio_to_matched(self):
        rc, out, _ = self.run_tool(["noise", cpu_line("d128 gqa causal 1024", "matched", "1.5e-07", "4.0e-03"),
                                    cpu_line("d128 gqa causal 1024", "stale", "3.8e-01", "8.0e-03"),
                                    fp64_line("d128 gqa causal 1024", "stale", "7.8e-02", "3.2e-02", "2.5e-02"),
                                    fp64_line("d128 gqa causal 1024", "matched", "4.7e-02", "2.7e-02", "2.5e-02")])
        self.assertEqual(rc, 0)
        rows = [x for x in out.splitlines() if x.startswith("| d128")]
        self.assertEqual(rows[0], "| d128 gqa causal 1024 | stale | 3.80e-01 | 8.00e-03 | 2.00x | 7.80e-02 | 3.20e-02 | 2.50e-02 |")
        self.assertEqual(rows[1], "| d128 gqa causal 1024 | matched | 1.50e-07 | 4.00e-03 | 1.00x | 4.70e-02 | 2.70e-02 | 2.50e-02 |")

    def test_a_case_without_matched_has_no_ratio(self):
        _, out, _ = self.run_tool([cpu_line("d64 mha causal 256", "split", "4.6e-03", "5.3e-03")])
        self.assertIn("| d64 mha causal 256 | split | 4.60e-03 | 5.30e-03 | – | – | – | – |", out)

    def test_bad_number_and_no_lines(self):
        rc, out, err = self.run_tool([cpu_line("d64", "stale", "nan?", "1e-2")])
        self.assertEqual((rc, out), (1, ""))
        self.assertRegex(err, r"testlog\.txt:1: 'nan\?' is not a number")
        rc, _, err = self.run_tool(["[gpu] nothing here"])
        self.assertEqual(rc, 1)
        self.assertIn("no [gpu-vs-cpu] or [gpu-vs-fp64] lines", err)

    def test_missing_file_is_named(self):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = residuals.main([os.path.join(ROOT, "no-such-testlog.txt")])
        self.assertEqual((rc, out.getvalue()), (1, ""))
        self.assertIn("no-such-testlog.txt: No such file or directory", err.getvalue())

    def test_committed_log(self):
        cases = residuals.parse(os.path.join(ROOT, "bench", "results", "2026-11-30-h200-57d84f9", "testlog.txt"))
        c = cases["d128 gqa causal 1024"]
        self.assertAlmostEqual(c["stale"]["post_mean"] / c["matched"]["post_mean"], 7.568e-03 / 3.912e-03, places=6)
        self.assertLess(c["matched"]["pre_max"], 1e-6)   # matched: row sums zero to FP32 rounding before the cast
        self.assertGreater(c["stale"]["dq"], c["matched"]["dq"])


if __name__ == "__main__":
    unittest.main()
