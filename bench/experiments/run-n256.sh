#!/bin/bash
# One device call: cuDNN's 2x(64x256) forward shape (fwd-2wg-n256-serial.patch) priced by the tuner against the
# shipping candidates, per-tensor, then with turns and for split. Usage: bash bench/experiments/run-n256.sh
set -u
git apply bench/experiments/fwd-2wg-n256-serial.patch || exit 2
TA='--hdim 128 --seqlen 8192 --heads 64 --kv-heads 8 --causal both --dirs fwd --scale-rows 0 --reps 10 --warmup 2'
FA8_HANG_S=240 TUNE_HDIM=128 TUNE_CACHE=fwd-n256 bash tools/device/h200-run --suites none --no-sanitize --tune "$TA"
eval "$(sh tools/device/unpack-debs .debs /tmp/fa8-prefix)"
mkdir -p $OUT/x
FA8_EXP_TURNS=1 timeout 120 /tmp/fa8-build-tune/cli/fa8 tune $TA --cache /tmp/fwd-n256-turns.tsv --out /tmp/t.csv --report $OUT/x/turns.md > $OUT/x/turns.log 2>&1
timeout 120 /tmp/fa8-build-tune/cli/fa8 tune $TA --delta split --cache /tmp/fwd-n256-split.tsv --out /tmp/s.csv --report $OUT/x/split.md > $OUT/x/split.log 2>&1
cp tune/cache/fwd-n256.tsv /tmp/fwd-n256-*.tsv $OUT/x/ 2>/dev/null
tar czf $OUT/x.tgz -C $OUT x && rm -rf $OUT/x
