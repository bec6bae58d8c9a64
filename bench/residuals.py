#!/usr/bin/env python3
"""dS row-sum residuals and gradient errors per delta mode, side by side, from a GPU suite log (testlog.txt of
tools/device/h200-run): issue 5's "post-cast residuals and gradient errors of both reported beside stale's".
Runs here, no GPU: it only regroups the suite's own lines.

    python3 bench/residuals.py bench/results/<run>/testlog.txt [--out residuals.md]

Read: `[gpu-vs-cpu]` lines (rounding-aware dS row sums on the GPU: the pre-cast maximum and the post-cast mean)
and `[gpu-vs-fp64]` lines (dQ, dK, dV errors of the GPU against the FP64 reference), per test case and mode."""
import argparse
import re
import sys

from report_io import BadInput, emit

MODES = ("stale", "dohat", "matched", "split")
# the suite prints the case padded to 30 columns, then the mode padded to 7 (tests/test_gpu.c)
ROWSUM = re.compile(r"^\[gpu-vs-cpu\] (.{30}) (stale|dohat|matched|split)\s+\S+: .*\| rowsum pre-ra max gpu (\S+) cpu \S+ "
                    r"post-ra mean gpu (\S+) cpu \S+")
GRADS = re.compile(r"^\[gpu-vs-fp64\] (.{30}) (stale|dohat|matched|split)\s+\S+: O gpu \S+ cpu \S+ dQ (\S+) \S+ "
                   r"dK (\S+) \S+ dV (\S+) \S+")


def num(text, where):
    try:
        return float(text)
    except ValueError:
        raise BadInput(f"{where}: '{text}' is not a number")


def parse(path):
    """{case: {mode: {pre_max, post_mean, dq, dk, dv}}} in the log's order; the last line of a case and mode wins
    (a suite prints each once)"""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}")
    cases = {}
    for n, line in enumerate(lines, 1):
        where = f"{path}:{n}"
        m = ROWSUM.match(line)
        if m:
            d = cases.setdefault(m.group(1).strip(), {}).setdefault(m.group(2), {})
            d["pre_max"], d["post_mean"] = num(m.group(3), where), num(m.group(4), where)
            continue
        m = GRADS.match(line)
        if m:
            d = cases.setdefault(m.group(1).strip(), {}).setdefault(m.group(2), {})
            d["dq"], d["dk"], d["dv"] = (num(m.group(i), where) for i in (3, 4, 5))
    return cases


def table(cases):
    out = ["| case | mode | dS row sums pre-cast max | post-cast mean | post-cast vs matched | dQ err | dK err | dV err |",
           "|---|---|---|---|---|---|---|---|"]
    for case, modes in cases.items():
        ref = modes.get("matched", {}).get("post_mean")
        for mode in MODES:
            d = modes.get(mode)
            if not d:
                continue
            f = lambda k: f"{d[k]:.2e}" if k in d else "–"
            ratio = f"{d['post_mean'] / ref:.2f}x" if ref and "post_mean" in d else "–"
            out.append(f"| {case} | {mode} | {f('pre_max')} | {f('post_mean')} | {ratio} | {f('dq')} | {f('dk')} | {f('dv')} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="the GPU suite's log (testlog.txt)")
    ap.add_argument("--out", help="write the table here instead of stdout")
    a = ap.parse_args(argv)
    try:
        cases = parse(a.log)
        if not cases:
            raise BadInput(f"{a.log}: no [gpu-vs-cpu] or [gpu-vs-fp64] lines (is it the GPU suite's log?)")
    except BadInput as e:
        print(f"residuals: {e}", file=sys.stderr)
        return 1
    text = table(cases)
    emit(text, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
