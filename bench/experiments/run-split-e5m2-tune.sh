#!/bin/bash
# One device call, after the A/B of split-e5m2-residual.patch has passed: the patch applied, the tuner's split
# sweeps under the default 128-row scale blocks (split's forward rows of the table were chosen for the old R^V^
# path). Usage: bash bench/experiments/run-split-e5m2-tune.sh [HDIMS], HDIMS e.g. 128 (default) or 64,192x128,256.
set -u
H=${1:-128}
git apply bench/experiments/split-e5m2-residual.patch || exit 2
TA="--hdim $H --seqlen 8192 --heads 64 --kv-heads 8 --causal both --dirs fwd --delta split --reps 10 --warmup 2"
FA8_HANG_S=240 TUNE_HDIM=$H TUNE_CACHE=split-e5m2-${H//,/-} bash tools/device/h200-run --suites none --no-sanitize --tune "$TA"
