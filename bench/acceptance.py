#!/usr/bin/env python3
"""Issue 5's acceptance lines from `fa8 bench` JSON lines (tools/device/h200-run --fa8-bench writes them to
fa8-bench.jsonl): the cost of Delta-Matching per problem (forward + backward over stale, same run) and the
throughput targets. Runs here, no GPU: it only reads what was measured, so a results README's numbers can be
regenerated instead of worked out by hand.

    python3 bench/acceptance.py bench/results/<run>/fa8-bench.jsonl [results.json ...] [--out report.md]
    python3 bench/acceptance.py --across RUN1/fa8-bench.jsonl[,RUN1/results.json] RUN2/fa8-bench.jsonl ...

--across puts several runs (machines, days) side by side: one row per line, one column per run.

A file is JSON lines (fa8 bench) or bench/run.py's results.json (its "rows", the peers' included). Each problem
(B, H, Hkv, S, head dims, causal, and the quantizer's scale rows: 128 when a row does not say, 0 per-tensor; its
scales: power-of-two, fa8's default since 2026-12-06, or amax, which a row from before the field existed used) is
judged only against rows of the same file: costs compare times taken in one run, and the backward's target also
asks for more than cuDNN's BF16 SDPA measured in that run (results.json). Where a row also has the forward timed
alone (fa8 bench's fwd_alone_*: back-to-back forwards, the protocol bench/run.py times the peers by), the forward's
target is judged under both protocols, each on its own line; the rounds' forward runs between backwards.
A problem measured in several sets of one file (the same set run again) is judged on each field's median over
the sets, and the report names every set's forward."""
import argparse
import json
import os
import statistics
import sys

from report_io import BadInput, emit

MODES = ("stale", "dohat", "matched", "split")
BUDGET = {"matched": 0.25, "split": 0.08}   # forward + backward over stale
KEY = ("B", "H", "Hkv", "S", "dqk", "dv", "causal")
NEEDED = KEY + ("system", "fwd_ms", "bwd_ms", "fwd_tflops", "bwd_tflops")
# TFLOP/s targets at S = 8K, B*H = 64 (issue 5): forward by head dim (non-causal), backward d128 by causal
FWD_TARGET = {(128, 128): 900.0, (256, 256): 1000.0}
BWD_TARGET = {False: 600.0, True: 550.0}
CAUSAL_WITHIN = 0.15   # causal forward within 15 % of non-causal


PEER_BF16 = "sdpa-bf16-cudnn"   # the backward target's "above cuDNN BF16 in the same run"
# fa8 bench's forward timed alone (back-to-back forwards after a warm-up, as bench/run.py times the peers); rows
# from before the field existed have only the rounds' forward, timed between backwards
ALONE = ("fwd_alone_ms", "fwd_alone_tflops")


def raw_rows(path):
    """(where, row) of one file: JSON lines (other lines, e.g. a tool's messages, are skipped) or a results.json
    with a "rows" list; malformed JSON is an error naming file:line"""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise BadInput(f"{path}: {e.strerror}")
    if path.endswith(".json"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise BadInput(f"{path}:{e.lineno}: not JSON ({e.msg})")
        if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
            raise BadInput(f"{path}: no \"rows\" list (bench/run.py's results.json has one)")
        return [(f"{path}: row {n}", r) for n, r in enumerate(doc["rows"], 1)]
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            out.append((f"{path}:{n}", json.loads(line)))
        except json.JSONDecodeError as e:
            raise BadInput(f"{path}:{n}: not JSON ({e.msg})")
    return out


def read_rows(path, peers=None, errors=None):
    """fa8's rows of one file, checked: a row without the fields a judgement needs, or with a time that is not
    positive, is an error naming where and the field. Peers' rows (cudnn-fp8, sdpa-...) go to `peers`
    ({problem key: {system: row}}) when given, else are skipped. A row that records a refusal or failure
    instead of times (an "error" field, as results.json has for a peer that declines a shape) goes to `errors`."""
    rows = []
    for where, r in raw_rows(path):
        if not isinstance(r, dict):
            raise BadInput(f"{where}: not an object")
        if "error" in r:
            if errors is not None:
                errors.append(f"{r.get('system', '?')} {where}: {str(r['error'])[:100]}")
            continue
        for k in NEEDED:
            if k not in r:
                raise BadInput(f"{where}: no '{k}' field")
        mode = r["system"][4:] if str(r["system"]).startswith("fa8-") else None
        if mode not in MODES:
            if peers is not None and isinstance(r.get("bwd_tflops"), (int, float)):
                peers.setdefault(tuple(r[k] for k in KEY), {})[r["system"]] = r
            continue
        for k in ("fwd_ms", "bwd_ms") + tuple(k for k in ALONE if k in r):
            if not isinstance(r[k], (int, float)) or isinstance(r[k], bool) or not r[k] > 0:
                raise BadInput(f"{where}: {k} {r[k]!r} is not a positive {'time' if k.endswith('_ms') else 'rate'}")
        sr = r.setdefault("scale_rows", 128)   # fa8 bench's default quantization (rows before the field existed)
        if not isinstance(sr, int) or isinstance(sr, bool) or sr < 0:
            raise BadInput(f"{where}: scale_rows {sr!r} is not a row count >= 0")
        vr = r.setdefault("v_scale_rows", sr)   # V quantized like Q/K/dO unless the row says (fa8 bench --v-scale-rows)
        if not isinstance(vr, int) or isinstance(vr, bool) or vr < 0:
            raise BadInput(f"{where}: v_scale_rows {vr!r} is not a row count >= 0")
        p2 = r.setdefault("pow2_scales", False)   # rows from before fa8 bench wrote the field were timed with amax scales
        if not isinstance(p2, bool):
            raise BadInput(f"{where}: pow2_scales {p2!r} is not true or false")
        r["mode"] = mode
        rows.append(r)
    return rows


def problem_key(r):
    """a row's problem: KEY's fields + (scale rows, power-of-two scales, V's scale rows)"""
    return tuple(r[k] for k in KEY) + (r["scale_rows"], r["pow2_scales"], r["v_scale_rows"])


# the fields a judgement reads; a mode measured in several sets of one file is judged on each one's median
TIMED = ("fwd_ms", "bwd_ms", "fwd_tflops", "bwd_tflops") + ALONE


def problems(rows):
    """{problem_key: {mode: row}} in first-seen order. A mode measured in several sets (the same fa8 bench set run
    again, to see past the power limiter's swings) is one row whose timed fields are the medians over its sets:
    the issue asks for medians, and the last set alone moved 9 % between identical sets at d256. repeated_sets
    lists every set."""
    sets = {}
    for r in rows:
        sets.setdefault(problem_key(r), {}).setdefault(r["mode"], []).append(r)
    out = {}
    for key, modes in sets.items():
        for mode, rs in modes.items():
            med = dict(rs[-1])
            for f in TIMED:
                if all(f in r for r in rs):
                    med[f] = statistics.median(r[f] for r in rs)
                else:
                    med.pop(f, None)   # a field some sets lack is not judged on the others alone
            out.setdefault(key, {})[mode] = med
    return out


def repeated_sets(rows):
    """{problem key: [stale rows, in order]} for the problems whose stale forward was measured more than once in
    a file (the same fa8 bench set run again): the verdicts judge the medians over the sets (problems), and the
    report lists every one, so the spread between identical sets stays in sight"""
    seen = {}
    for r in rows:
        if r["mode"] == "stale":
            seen.setdefault(problem_key(r), []).append(r)
    return {k: v for k, v in seen.items() if len(v) > 1}


def name(key):
    B, H, Hkv, S, dqk, dv, causal, rows, pow2, vrows = key
    geo = f"d{dqk}" if dqk == dv else f"{dqk}x{dv}"
    heads = f"H{H}" if H == Hkv else f"H{H}/{Hkv}"
    # the default quantization (128-row power-of-two scales) goes unnamed
    scales = ("" if rows == 128 else " per-tensor" if rows == 0 else f" scale rows {rows}") + ("" if pow2 else " amax scales")
    scales += "" if vrows == rows else f" V scale rows {vrows}"
    return f"{geo} {heads} S={S}{' B=' + str(B) if B != 1 else ''}{' causal' if causal else ''}{scales}"


def costs(modes):
    """{mode: fractional cost over stale} for the modes measured beside stale"""
    if "stale" not in modes:
        return {}
    base = modes["stale"]["fwd_ms"] + modes["stale"]["bwd_ms"]
    return {m: (r["fwd_ms"] + r["bwd_ms"]) / base - 1.0 for m, r in modes.items() if m != "stale"}


def std_fwd(modes, field="fwd_tflops"):
    """the standard forward's TFLOP/s: stale's row (matched and dohat run the same forward); None where the problem
    has none of those rows (split's forward is another kernel, with its extra GEMM) or that row lacks the field"""
    for m in ("stale", "matched", "dohat"):
        if m in modes:
            return modes[m].get(field)


def verdict(ok):
    return "pass" if ok else "**FAIL**"


def within_budget(mode, cost):
    """a Delta-Matching cost against its budget; one exactly at the budget passes (1e-9 absorbs the division's
    rounding)"""
    return cost <= BUDGET[mode] + 1e-9


def at_target_size(key):
    """the problem size issue 5's lines speak of: S = 8K, B * H = 64"""
    B, H, _, S = key[:4]
    return S == 8192 and B * H == 64


def checks(rows, probs, peers=None):
    """issue 5's lines for one file's rows and their problems(rows), in report order: dicts with `line` (what is
    judged, the same wording in every file), `value` (the figure), `ok` (True / False; None for a line that only
    informs) and `text` (the report's bullet)"""
    peers = peers or {}
    out = []
    add = lambda line, value, ok, text: out.append(dict(line=line, value=value, ok=ok, text=text))
    repeats = repeated_sets(rows)
    for key, modes in probs.items():
        if not at_target_size(key):
            continue
        B, H, Hkv, S, dqk, dv, causal, srows, pow2, vrows = key
        if key in repeats:
            each = ", ".join(f"{r['fwd_tflops']:.0f}" + (f" / {r['fwd_alone_tflops']:.0f} alone" if "fwd_alone_tflops" in r else "")
                             for r in repeats[key])
            add(f"{name(key)}: sets", str(len(repeats[key])), None,
                f"{name(key)} was measured {len(repeats[key])} times in this file; the lines judge the median over the sets. "
                f"Stale's forward in each set (TFLOP/s): {each}")
        fwd = std_fwd(modes)
        target = FWD_TARGET.get((dqk, dv))
        if target and not causal and fwd is not None:
            add(f"forward {name(key)} (≥ {target:.0f})", f"{fwd:.0f}", fwd >= target,
                f"forward {name(key)}: {fwd:.0f} TFLOP/s, target {target:.0f}: {verdict(fwd >= target)}")
            alone = std_fwd(modes, "fwd_alone_tflops")
            if alone is not None:
                add(f"forward {name(key)}, alone (≥ {target:.0f})", f"{alone:.0f}", alone >= target,
                    f"forward {name(key)}, timed alone (back-to-back forwards, the peers' protocol): "
                    f"{alone:.0f} TFLOP/s, target {target:.0f}: {verdict(alone >= target)}")
        if causal and fwd is not None:
            twin = probs.get((B, H, Hkv, S, dqk, dv, False, srows, pow2, vrows))
            full = std_fwd(twin) if twin else None
            if full:
                gap = 1.0 - fwd / full
                add(f"causal forward {name(key)}, below non-causal (≤ {CAUSAL_WITHIN * 100:.0f} %)", f"{gap * 100:.1f} %",
                    gap <= CAUSAL_WITHIN,
                    f"causal forward {name(key)}: {fwd:.0f} against {full:.0f} non-causal "
                    f"({gap * 100:.1f} % below, limit {CAUSAL_WITHIN * 100:.0f} %): {verdict(gap <= CAUSAL_WITHIN)}")
        if (dqk, dv) == (128, 128):
            exact = [modes[m]["bwd_tflops"] for m in ("matched", "split") if m in modes]
            if exact:
                t = BWD_TARGET[bool(causal)]
                add(f"backward {name(key)}, faster exact mode (≥ {t:.0f})", f"{max(exact):.0f}", max(exact) >= t,
                    f"backward {name(key)}, faster exact mode: {max(exact):.0f} TFLOP/s, target {t:.0f}: "
                    f"{verdict(max(exact) >= t)}")
                bf16 = peers.get(key[:len(KEY)], {}).get(PEER_BF16)
                if bf16:
                    b = bf16["bwd_tflops"]
                    add(f"backward {name(key)}, above cuDNN BF16", f"{max(exact):.0f} vs {b:.0f}", max(exact) > b,
                        f"backward {name(key)}, faster exact mode above cuDNN BF16 in the same run "
                        f"({b:.0f}): {verdict(max(exact) > b)}")
    return out


def report(path, rows, peers=None, errors=()):
    probs = problems(rows)
    lines = [f"## {path}", "",
             "| problem | stale fwd / bwd ms | matched cost | split cost | fwd TFLOP/s (stale) | bwd TFLOP/s (best exact) |",
             "|---|---|---|---|---|---|"]
    for key, modes in probs.items():
        c = costs(modes)
        st = modes.get("stale")
        cell = lambda m: (f"{c[m] * 100:+.1f} % ({verdict(within_budget(m, c[m]))})" if m in c else "–")
        exact = [modes[m]["bwd_tflops"] for m in ("matched", "split") if m in modes]
        times = f"{st['fwd_ms']:.3f} / {st['bwd_ms']:.2f}" if st else "(no stale row)"
        fwd = f"{st['fwd_tflops']:.0f}" if st else "–"
        bwd = f"{max(exact):.0f}" if exact else "–"
        lines.append(f"| {name(key)} | {times} | {cell('matched')} | {cell('split')} | {fwd} | {bwd} |")
    found = checks(rows, probs, peers)
    if found:
        lines += ["", "Throughput targets (S=8K, B·H=64):", ""] + [f"- {c['text']}" for c in found]
    if errors:
        lines += ["", "Rows without times (skipped):", ""] + [f"- {e}" for e in errors]
    return "\n".join(lines) + "\n"


def across(files):
    """one table of issue 5's lines over several runs ([(label, rows, peers)], e.g. one run per machine): a row per
    line, a column per run, so the spread between runs sits beside each target; the Delta-Matching costs of each
    problem measured at S=8K, B·H=64 come after the throughput lines"""
    table, order = {}, []
    for i, (_, rows, peers) in enumerate(files):
        probs = problems(rows)
        found = checks(rows, probs, peers)
        for key, modes in probs.items():
            if at_target_size(key):
                for m, c in costs(modes).items():
                    found.append(dict(line=f"{m} cost {name(key)} (≤ {BUDGET[m] * 100:.0f} %)", value=f"{c * 100:+.1f} %",
                                      ok=within_budget(m, c)))
        for c in found:
            if c["ok"] is None:
                continue
            if c["line"] not in table:
                table[c["line"]] = [None] * len(files)
                order.append(c["line"])
            table[c["line"]][i] = c
    head = [label for label, _, _ in files]
    lines = ["| line | " + " | ".join(head) + " | passes |", "|---" * (len(head) + 2) + "|"]
    for line in order:
        cells = table[line]
        shown = [f"{c['value']}" + ("" if c["ok"] else " **FAIL**") if c else "–" for c in cells]
        judged = [c for c in cells if c]
        lines.append(f"| {line} | " + " | ".join(shown) + f" | {sum(c['ok'] for c in judged)} of {len(judged)} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jsonl", nargs="+", help="fa8 bench JSON lines (fa8-bench.jsonl) or bench/run.py's results.json")
    ap.add_argument("--across", action="store_true",
                    help="one table of the lines over the files, a column per file (each file one run: its fa8 bench "
                         "rows, with a results.json of the same run given as FILE,RESULTS)")
    ap.add_argument("--out", help="write the report here instead of stdout")
    a = ap.parse_args(argv)
    try:
        parts, runs = [], []
        for arg in a.jsonl:
            peers, errors = {}, []
            paths = arg.split(",") if a.across else [arg]
            if not all(paths):
                raise BadInput(f"--across '{arg}': an empty file name (FILE or FILE,RESULTS)")
            rows = []
            for path in paths:
                before = (len(rows), sum(map(len, peers.values())), len(errors))
                rows += read_rows(path, peers, errors)
                # in FILE,RESULTS a file that gives nothing (a Markdown report given for results.json) would drop
                # its part of the run without a word (a lone file with no rows fails below)
                if len(paths) > 1 and (len(rows), sum(map(len, peers.values())), len(errors)) == before:
                    raise BadInput(f"{path}: no rows (neither fa8 bench JSON lines nor a results.json)")
            if not rows:
                raise BadInput(f"{arg}: no fa8 bench rows")
            if a.across:
                runs.append((os.path.basename(os.path.dirname(os.path.abspath(paths[0]))) or paths[0], rows, peers))
            else:
                parts.append(report(arg, rows, peers, errors))
    except BadInput as e:
        print(f"acceptance: {e}", file=sys.stderr)
        return 1
    text = across(runs) if a.across else "\n".join(parts)
    emit(text, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
