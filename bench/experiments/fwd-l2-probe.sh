#!/bin/bash
# L2 and DRAM traffic of the d128 S=8K forward, MHA 64/64 against GQA 64/8 (fifty-sixth session): ncu on the second
# fwd_kernel launch of `fa8 bench --reps 1`, clocks left alone, for each build given (ab-patch keeps them as
# /tmp/ab-build-VARIANT). Usage (inside a device call, after ab-patch): bash bench/experiments/fwd-l2-probe.sh OUTFILE VARIANT...
set -u
[ $# -ge 2 ] || { echo "usage: $0 OUTFILE VARIANT..." >&2; exit 2; }
f=$1; shift
eval "$(sh tools/device/unpack-debs .debs /tmp/fa8-prefix)"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,sm__cycles_elapsed.avg.per_second
for v in "$@"; do
  for g in "--heads 64 --kv-heads 64" "--heads 64 --kv-heads 8"; do
    echo "== $v $g" >> "$f"
    ncu --clock-control none -k 'regex:^fwd_kernel$' --launch-skip 1 --launch-count 1 --metrics "$M" --csv --page raw \
      /tmp/ab-build-$v/cli/fa8 bench --seqlen 8192 --modes stale --hdim 128 --reps 1 $g >> "$f" 2>&1 || echo "ncu rc=$?" >> "$f"
  done
done
