#!/usr/bin/env bash
# Run THERE (the device), from the repo root, carry [".debs", ".whl"]:
#   run(command="bash bench/experiments/run-pipe-counts.sh")
# Where cuDNN's FP8 forward saves instructions against fa8's (the 13 % more work per cycle of bench/NOTES.md):
#   1. bench/micro/pipe_rates.cu, with the half-precision exponentials (is MUFU.EX2.F16 faster than FP32's?);
#   2. per-pipe executed warp instructions (hardware counters, no SASS patching: the 28th session's per-opcode
#      metrics hung ncu's replay of cuDNN's kernel) of fa8's d128 forward and cuDNN's FP8 forward, MHA B=1 H=64 S=8K.
# (cuDNN's per-opcode mix by application replay hung ncu twice, the second time without torch.profiler, in the
#  28th and 36th sessions: not asked again.)
# Everything goes to $OUT/pipes.tgz plus a summary on stdout.
set -uo pipefail
OUT=${OUT:-/tmp/fa8-out}; mkdir -p "$OUT"
ART=/tmp/pipes-art; rm -rf "$ART"; mkdir -p "$ART"
pack() { tar czf "$OUT/pipes.tgz" -C "$ART" . 2>/dev/null; }
trap 'pack; exit 143' TERM INT
t0=$(date +%s)
step() { echo "== $* ($(( $(date +%s) - t0 )) s)"; }

step pipe_rates
nvcc -arch=sm_90a -O3 -o /tmp/pipe_rates bench/micro/pipe_rates.cu > "$ART/pipe_rates.txt" 2>&1 && /tmp/pipe_rates >> "$ART/pipe_rates.txt" 2>&1
cat "$ART/pipe_rates.txt"

step build
eval "$(sh tools/device/unpack-debs .debs /tmp/fa8-prefix)"
B=/tmp/fa8-build
{ meson setup --wipe $B -Dprofile=default -Dhdim=128 -Dnvidia_targets=sm_90a || meson setup $B -Dprofile=default -Dhdim=128 -Dnvidia_targets=sm_90a; } > "$ART/build.log" 2>&1
ninja -C $B -j 16 >> "$ART/build.log" 2>&1 || { tail -n 30 "$ART/build.log"; pack; exit 1; }
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

step "metric names"
ncu --query-metrics > "$ART/query-metrics.txt" 2>&1
M=$(awk '{print $1}' "$ART/query-metrics.txt" | grep -E '^smsp__inst_executed_pipe_[a-z0-9_]+$' | sort -u | sed 's/$/.sum/' | paste -sd, -)
C=$(awk '{print $1}' "$ART/query-metrics.txt" | grep -E '^sm__pipe_[a-z0-9_]+_cycles_active$' | sort -u | sed 's/$/.avg.pct_of_peak_sustained_active/' | paste -sd, -)
ALL="sm__cycles_elapsed.avg,smsp__cycles_active.avg,smsp__inst_executed.sum${M:+,$M}${C:+,$C}"
echo "$ALL" | tr , '\n' > "$ART/metrics-asked.txt"
wc -l < "$ART/metrics-asked.txt"

step "fa8 forward counters"
timeout -k 5 150 ncu --clock-control none -k 'regex:fwd_kernel' --launch-skip 2 --launch-count 1 --metrics "$ALL" \
  $B/cli/fa8 bench --seqlen 8192 --hdim 128 --heads 64 --modes stale --reps 2 > "$ART/fa8-fwd-pipes.txt" 2>&1
tail -n 60 "$ART/fa8-fwd-pipes.txt" | cut -c1-150

step "cuDNN FP8 forward counters"
timeout -k 5 150 ncu --clock-control none -k 'regex:fprop' --launch-skip 3 --launch-count 1 --metrics "$ALL" \
  python3 bench/micro/cudnn_fp8_kernels.py --more --no-profiler > "$ART/cudnn-fwd-pipes.txt" 2>&1
tail -n 60 "$ART/cudnn-fwd-pipes.txt" | cut -c1-150

step done
pack
