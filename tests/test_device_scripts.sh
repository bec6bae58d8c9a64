#!/usr/bin/env bash
# The device round-trip scripts, without a GPU (issue #5's SASS gate, tools/device/README.md):
#   * tools/device/check-sass judges fake disassemblies (a stand-in cuobjdump prints each object's text): a wgmma
#     instance without QGMMA, with local memory or with serialized wgmmas fails, a row-dot delta prep with local
#     memory fails, a portable instance with local memory is listed and counted (failed under CHECK_SASS_PORTABLE=fail);
#     no objects, no cuobjdump or a disassembly without functions (cuobjdump without its nvdisasm) is an error (2);
#   * tools/device/h200-run refuses an unknown option, a bad FA8_HANG_S and a checkout without .debs, naming what is wrong;
#   * tools/device/ab-patch refuses a missing patch, a bad round count, a bad deadline, bad AB_SUITES / AB_BASE_SUITES
#     and a patch that does not apply;
#     with a stub h200-run it benches every variant, restores the tree, packs its results and keeps a deadline;
#   * tools/device/sass-audit decodes the control bits of a known instruction pair and sums a stretch;
#   * tools/device/ncu-regions shares a fake ncu source page's samples out by stretch between sync points.
#   * tools/device/gpu-clocks summarizes a sample file (the clock under load, the power-cap samples), samples a fake
#     nvidia-smi (its file names the queried fields), does nothing without one and refuses an unknown command, a bad
#     interval or a missing file name;
#   * tools/device/power-probe.py and h200-run's --power refuse a bad number of seconds; the probe's window
#     statistics (samples inside a workload's window, median clock and power, power-cap share) on a synthetic file;
#   * tools/device/file-final-run files a fake final-run output in the committed layout and refuses a bad folder;
#   * tools/device/sanitizer-overlay writes rounds of overlays holding each d128 (or a named head dim's) GQA key's
#     distinct table instances; under them the runtime (FA8_CLI's `list --tuned`) sends final-run's sanitizer probe to
#     every d128 and d256 instance the tables ship; final-run's FINAL_SAN_ONLY=1 pass, with stubs, logs each round's
#     picks and sanitizes each round under its overlay, at d128 or at FINAL_SAN_HDIM's head dim.
set -uo pipefail
ROOT=${FA8_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
check() {   # check NAME WANT_RC PATTERN -- COMMAND...
  local name=$1 want=$2 pat=$3; shift 4
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pat" <<< "$out"; then
    echo "FAIL $name: rc $rc (want $want), output lacks /$pat/:"; echo "$out" | tail -n 15; fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
for s in h200-run check-sass unpack-debs fetch-debs fetch-wheels fetch-cuobjdump ab-patch gpu-clocks final-run file-final-run ncu-kernel set-words sanitizer-overlay; do
  [ -f "$ROOT/tools/device/$s" ] && check "bash -n $s" 0 "" -- bash -n "$ROOT/tools/device/$s"
done

mkdir -p "$T/bin" "$T/b/sub"
printf '#!/bin/sh\n[ "$1" = -sass ] && cat "$2"\n' > "$T/bin/cuobjdump"; chmod +x "$T/bin/cuobjdump"
obj() { printf '\t\tFunction : kernel\n%s\n' "$2" > "$T/b/sub/$1.o"; }   # cuobjdump -sass's shape
W=fa8_fwd_sm90a_e4m3_d128v128_gqa_full_m128n128_w12s2
obj "$W" "  QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24"
obj fa8_bwd_sm90a_e4m3_d128v128_gqa_full_m64n64_w8s1_mma "  HMMA.16816.F32 R4, R8, R12, R4
  LDL R2, [R1]"
obj fa8_delta_sm90a_e4m3_d128v128_gqa_full_stale_m64n128_w12s2 "  FFMA R1, R2, R3, R4"
obj fa8_quant_sm90a_e4m3_d128_bf16_m64n64_w4s1 "  STL [R1], R2"   # not an attention object: not judged
check "check-sass lists portable local memory" 0 "_mma +portable QGMMA=0 HMMA=1 local=1 spills \(reported\)" -- env PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
check "check-sass counts it in its verdict" 0 "no local memory; 1 portable ones use local memory \(listed\)" -- env PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
check "check-sass fails it under CHECK_SASS_PORTABLE=fail" 1 "_mma +portable QGMMA=0 HMMA=1 local=1 FAIL" -- env CHECK_SASS_PORTABLE=fail PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
check "check-sass: a bad CHECK_SASS_PORTABLE is an error" 2 "CHECK_SASS_PORTABLE must be fail or report, got 'maybe'" -- env CHECK_SASS_PORTABLE=maybe PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
obj fa8_bwd_sm90a_e4m3_d128v128_gqa_full_m64n64_w8s1_mma "  HMMA.16816.F32 R4, R8, R12, R4"
check "check-sass passes good objects" 0 "3 objects, every wgmma instance has QGMMA, unserialized, and no local memory$" -- env PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
check "check-sass: no portable local memory under CHECK_SASS_PORTABLE=fail" 0 "and no local memory, nor any portable one" -- env CHECK_SASS_PORTABLE=fail PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
check "check-sass lists a clean portable instance" 0 "_mma +portable QGMMA=0 HMMA=1 local=0 ok" -- env PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
obj "$W" "  HGMMA.64x128x16.F32 R24, gdesc[UR4], R24"
check "check-sass fails a wgmma instance without QGMMA" 1 "$W +wgmma +QGMMA=0 .* FAIL" -- env PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
obj "$W" "  QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24
  STL.64 [R1+0x8], R4"
check "check-sass fails a wgmma instance that spills" 1 "$W +wgmma +QGMMA=1 HMMA=0 local=1 FAIL" -- env PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
obj "$W" "  QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24, gsb0
  WARPGROUP.DEPBAR.LE gsb0, 0x0
  QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24, gsb0"
check "check-sass fails a wgmma instance whose wgmmas are serialized" 1 "$W +wgmma +QGMMA=2 .* FAIL \(serialized" -- env PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
obj "$W" "  QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24
  QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24, gsb0"
check "check-sass passes a group of two k-steps" 0 "$W +wgmma +QGMMA=2 HMMA=0 local=0 ok" -- env PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
obj fa8_delta_sm90a_e4m3_d128v128_gqa_full_stale_m64n128_w12s2 "  LDL R2, [R1]"
check "check-sass fails a row-dot prep with local memory" 1 "stale_m64n128_w12s2 +rowdot .* local=1 FAIL" -- env PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
printf '\nFatbin elf code:\n arch = sm_90a\n' > "$T/b/sub/$W.o"   # what cuobjdump prints when it finds no nvdisasm
check "check-sass: a disassembly without functions is an error" 2 "gave no SASS for $W" -- env PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/b"
obj "$W" "  QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR4], R24"
mkdir -p "$T/empty"
check "check-sass: no objects" 2 "no sm90a attention objects" -- env PATH="$T/bin:$PATH" bash "$ROOT/tools/device/check-sass" "$T/empty"
mkdir -p "$T/nobin"   # a PATH without cuobjdump (Debian's CUDA packages put one in /usr/bin)
check "check-sass: no cuobjdump" 2 "cuobjdump not found" -- env PATH="$T/nobin" "$(command -v bash)" "$ROOT/tools/device/check-sass" "$T/b"

# final-run refuses to start (before any build) without the call's OUT or the commit it records
check "final-run: no FA8_COMMIT" 1 "set FA8_COMMIT to the commit under test" -- env -u FA8_COMMIT OUT="$T/out" bash "$ROOT/tools/device/final-run"
check "final-run: no OUT" 1 "OUT, the output folder of the device call, is not set" -- env -u OUT FA8_COMMIT=c bash "$ROOT/tools/device/final-run"

# ab-patch's argument checks (before any build): a missing patch, a bad round count, a patch that does not apply
mkdir -p "$T/abrepo" && git -C "$T/abrepo" init -q && printf 'x\n' > "$T/abrepo/f"
printf -- '--- a/f\n+++ b/f\n@@ -1 +1 @@\n-y\n+z\n' > "$T/abrepo/p.patch"
check "ab-patch: no patch file" 2 "no patch file 'nope.patch'" -- env -C "$T/abrepo" OUT="$T/out" bash "$ROOT/tools/device/ab-patch" c 'S' 1 nope.patch
check "ab-patch: bad rounds" 2 "ROUNDS must be a positive integer, got 'x'" -- env -C "$T/abrepo" OUT="$T/out" bash "$ROOT/tools/device/ab-patch" c 'S' x p.patch
check "ab-patch: bad deadline" 2 "AB_DEADLINE_S must be a positive number of seconds, got 'soon'" -- env -C "$T/abrepo" OUT="$T/out" AB_DEADLINE_S=soon bash "$ROOT/tools/device/ab-patch" c 'S' 1 p.patch
check "ab-patch: bad AB_SUITES" 2 "AB_SUITES must be 'gpu', 'cpu', 'gpu cpu' or 'none', got 'gpu gpx'" -- env -C "$T/abrepo" OUT="$T/out" AB_SUITES='gpu gpx' bash "$ROOT/tools/device/ab-patch" c 'S' 1 p.patch
check "ab-patch: bad AB_BASE_SUITES" 2 "AB_BASE_SUITES must be 'gpu', 'cpu', 'gpu cpu' or 'none', got 'all'" -- env -C "$T/abrepo" OUT="$T/out" AB_BASE_SUITES=all bash "$ROOT/tools/device/ab-patch" c 'S' 1 p.patch
check "ab-patch: patch does not apply" 2 "'p.patch' does not apply" -- env -C "$T/abrepo" OUT="$T/out" bash "$ROOT/tools/device/ab-patch" c 'S' 1 p.patch

# ab-patch end to end with a stub h200-run (a 1 s "build" whose fa8 prints fixed timings): every variant built
# and benched, the tree restored, results packed in $OUT/ab.tgz with ab-rounds.txt; then with a deadline that
# leaves room for the base only, it builds no variant and stops its rounds early, still packed
A=$T/abfun; mkdir -p "$A/tools/device"
git -C "$A" init -q && printf 'a\n' > "$A/f"
printf -- '--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n' > "$A/p1.patch"; cp "$A/p1.patch" "$A/p2.patch"
cp "$ROOT/tools/device/gpu-clocks" "$A/tools/device/"; printf '#!/bin/sh\n' > "$A/tools/device/unpack-debs"
cat > "$A/tools/device/h200-run" <<'STUB'
#!/bin/bash
mkdir -p "$AB_BUILD/cli" "$OUT"
printf '#!/bin/sh\nsleep 1; echo "{\\"fwd_ms\\": 1.5, \\"bwd_ms\\": 2.5, \\"knob\\": \\"${KNOB:-unset}\\", \\"args\\": \\"$*\\"}"\n' > "$AB_BUILD/cli/fa8"; chmod +x "$AB_BUILD/cli/fa8"
sleep 1; echo '{"rc": 0}' > "$OUT/summary.json"; echo '{"rc": 0, "seconds": 1}'
STUB
abrun() { env -C "$A" PATH="$T/nobin:$PATH" OUT="$T/about" AB_STAGE="$T/abstage" AB_BUILD="$T/abbuild" AB_KEEP="$T/abkeep" "$@"; }
mkdir -p "$T/abkeep"
check "ab-patch: every variant benched" 0 "round 2 p2 \[S2\]: \"fwd_ms\": 1.5 \"bwd_ms\": 2.5" -- abrun bash "$ROOT/tools/device/ab-patch" c 'S1;S2' 2 p1.patch p2.patch
check "ab-patch: the tree restored" 0 "^a$" -- cat "$A/f"
check "ab-patch: results packed" 0 "inter-p1.jsonl" -- tar tzf "$T/about/ab.tgz"
check "ab-patch: rounds listed beside" 0 "round 1 base \[S1\]" -- cat "$T/about/ab-rounds.txt"
# a set's leading NAME=VALUE words are its runs' environment, not fa8 bench arguments
check "ab-patch: sets with an environment benched" 0 "round 1 p1 \[KNOB=7 S3\]" -- abrun bash "$ROOT/tools/device/ab-patch" c 'S1;KNOB=7 S3' 1 p1.patch
check "ab-patch: a set's environment" 0 '"knob": "7", "args": "bench S3"' -- tar xzOf "$T/about/ab.tgz" ./inter-p1.jsonl
check "ab-patch: other sets without it" 0 '"knob": "unset", "args": "bench S1"' -- tar xzOf "$T/about/ab.tgz" ./inter-p1.jsonl
check "ab-patch: a deadline skips builds" 0 "deadline: p1 not built" -- abrun env AB_DEADLINE_S=8 bash "$ROOT/tools/device/ab-patch" c 'S1;S2' 9 p1.patch p2.patch
check "ab-patch: a deadline stops the rounds" 0 "deadline: stopped after round [1-6] of 9" -- cat "$T/about/ab-rounds.txt"

# h200-run from a checkout without .debs (a copy of nothing: an empty directory), artifacts kept under $T
mkdir -p "$T/repo"
check "h200-run: unknown option" 2 "unknown option --bogus" -- env -C "$T/repo" OUT="$T/out" FA8_ART="$T/art" bash "$ROOT/tools/device/h200-run" --bogus
check "h200-run: .debs missing" 2 "\.debs missing: run tools/device/fetch-debs" -- env -C "$T/repo" OUT="$T/out" FA8_ART="$T/art" bash "$ROOT/tools/device/h200-run" --suites none
for bad in abc 0 -5 1.5; do
  check "h200-run: FA8_HANG_S=$bad" 2 "FA8_HANG_S '$bad' is not a positive number of seconds" -- env -C "$T/repo" OUT="$T/out" FA8_ART="$T/art" FA8_HANG_S="$bad" bash "$ROOT/tools/device/h200-run" --suites none
done
# sass-audit decodes the stall counts of a real pair (MUFU.EX2 then the FADD waiting on it: 1 + 7 cycles, the FADD
# waiting on scoreboard 1) and sums a stretch between two patterns; a missing kernel is an error naming the pattern
cat > "$T/k.sass" <<'SASS'
		Function : fwd_kernel
        /*7b00*/                   MUFU.EX2 R77, R77 ;                 /* 0x0000004d004d7308 */
                                                                       /* 0x000e220000000800 */
        /*7b10*/                   FADD R13, R4, R73 ;                 /* 0x00000049040d7221 */
                                                                       /* 0x002fce0000000000 */
SASS
if command -v python3 > /dev/null; then
  check "sass-audit: stall counts of a stretch" 0 "00002 instr +00008 stall|2 instr +8 stall" -- python3 "$ROOT/tools/device/sass-audit" "$T/k.sass" --from MUFU --to FADD
  check "sass-audit: control bits listed" 0 "7b10 stall  7 .*wait 02  FADD" -- python3 "$ROOT/tools/device/sass-audit" "$T/k.sass" --from MUFU --to FADD --list
  check "sass-audit: no such kernel" 1 "no kernel in .* matches 'bwd'" -- python3 "$ROOT/tools/device/sass-audit" "$T/k.sass" --kernel bwd
  check "sass-audit: missing input" 1 "cannot read $T/none.sass" -- python3 "$ROOT/tools/device/sass-audit" "$T/none.sass"
  check "sass-audit: --from without --to" 2 "--from and --to go together" -- python3 "$ROOT/tools/device/sass-audit" "$T/k.sass" --from MUFU
  check "sass-audit: a stretch that does not exist" 1 "no kernel has a stretch from /HMMA/ to /FADD/" -- python3 "$ROOT/tools/device/sass-audit" "$T/k.sass" --from HMMA --to FADD
fi
# ncu-regions: 100 samples over two stretches (split after the BAR); the FMUL the launch never ran is not counted
# as run; the top instruction is the spin loop's branch
cat > "$T/src.csv" <<'CSV'
"Kernel Name","fwd_kernel(Params)",
"Address","Source","# Samples","Instructions Executed","stall_long_sb","stall_wait","stall_barrier"
"0x1000","      FFMA R1, R2, R3, R4","30","100","0","30","0"
"0x1010","      MUFU.EX2 R1, R1","10","100","0","10","0"
"0x1020","      BAR.SYNC.DEFER_BLOCKING 0x1, 0x100","20","100","0","0","20"
"0x1030","      FMUL R5, R5, R6","0","0","0","0","0"
"0x1040","@!P0  BRA 0x1000","40","1,000","40","0","0"
CSV
if command -v python3 > /dev/null; then
  check "ncu-regions: first stretch" 0 "\| 00000-00020 \| 3 \| 300 \| 60.0 % \| wait 40.0, barrier 20.0 \| FFMA 1" -- python3 "$ROOT/tools/device/ncu-regions" "$T/src.csv"
  check "ncu-regions: untaken code not run" 0 "\| 00030-00040 \| 1 \| 1000 \| 40.0 % \| long_sb 40.0 \| BRA 1 \|" -- python3 "$ROOT/tools/device/ncu-regions" "$T/src.csv"
  check "ncu-regions: top instruction" 0 "\| 00040 \| 40.00 % \| \`@!P0  BRA 0x1000\` \| long_sb \|" -- python3 "$ROOT/tools/device/ncu-regions" "$T/src.csv" --top 1
  check "ncu-regions: --min hides small stretches" 1 "^0$" -- bash -c "python3 '$ROOT/tools/device/ncu-regions' '$T/src.csv' --min 50 --top 0 | grep -c 00030-00040"
  check "ncu-regions: missing input" 1 "cannot read $T/none.csv" -- python3 "$ROOT/tools/device/ncu-regions" "$T/none.csv"
  check "ncu-regions: not a source page" 1 "is not an ncu source page" -- python3 "$ROOT/tools/device/ncu-regions" "$T/k.sass"
fi
# ncu-kernel with a stub ncu (prints its environment knob and arguments): a bad kernel name is refused; the set's
# NAME=VALUE words reach ncu's environment, not fa8 bench's arguments
mkdir -p "$T/ncubin"
printf '#!/bin/sh\necho "ncu KNOB=${KNOB:-unset} $*"\n' > "$T/ncubin/ncu"; chmod +x "$T/ncubin/ncu"
check "ncu-kernel: refuses a kernel name" 2 "KERNEL must be fwd, delta or bwd, got 'quant'" -- bash "$ROOT/tools/device/ncu-kernel" /x/fa8 "$T/ncu" quant '--seqlen 64'
check "ncu-kernel: refuses a missing argument" 2 "usage: .*ncu-kernel FA8_EXE DIR KERNEL" -- bash "$ROOT/tools/device/ncu-kernel" /x/fa8 "$T/ncu" bwd
check "ncu-kernel: runs" 0 "" -- env PATH="$T/ncubin:$PATH" bash "$ROOT/tools/device/ncu-kernel" /x/fa8 "$T/ncu" bwd 'KNOB=3 --seqlen 64 --causal'
check "ncu-kernel: the set's environment and arguments" 0 "ncu KNOB=3 .*-k regex:\^bwd_kernel\\$ .* /x/fa8 bench --seqlen 64 --causal --reps 1$" -- cat "$T/ncu/bwd.csv"
# gpu-clocks: four samples under load (three of them power-capped; the last one by its power only, as a burst reads
# between utilization's windows) and one idle; a fake nvidia-smi for start/stop
cat > "$T/clk.csv" <<'CSV'
2026/12/02 01:00:00.000, 1791, 650.5, 60, 100, 0x0000000000000004
2026/12/02 01:00:00.200, 1980, 400.1, 55, 99, 0x0000000000000000
2026/12/02 01:00:00.400, 1755, 699.0, 62, 100, 0x0000000000000004
2026/12/02 01:00:00.600, 345, 80.0, 40, 0, 0x0000000000000001
2026/12/02 01:00:00.800, 1800, 600.0, 61, 0, 0x0000000000000004
CSV
if command -v python3 > /dev/null; then
  check "gpu-clocks: the clock under load" 0 "4 of 5 samples under load: SM clock median 1796 MHz \(min 1755, max 1980\), power median 625 W \(max 699\)" -- bash "$ROOT/tools/device/gpu-clocks" summary "$T/clk.csv"
  check "gpu-clocks: power-cap samples" 0 "reasons 0x4 \(SW power cap\): 3 samples" -- bash "$ROOT/tools/device/gpu-clocks" summary "$T/clk.csv"
  printf '#!/bin/sh\ncase "$*" in *-lms*) cat "%s" ;; *) echo 0x0 ;; esac\n' "$T/clk.csv" > "$T/bin/nvidia-smi"; chmod +x "$T/bin/nvidia-smi"
  check "gpu-clocks: start and stop with nvidia-smi" 0 "4 of 5 samples under load" -- env PATH="$T/bin:$PATH" bash -c "bash '$ROOT/tools/device/gpu-clocks' start '$T/s.csv' && sleep 0.5 && bash '$ROOT/tools/device/gpu-clocks' stop '$T/s.csv'"
  check "gpu-clocks: the file names its fields" 0 "^# fields: timestamp,clocks.sm,power.draw.instant,temperature.gpu,utilization.gpu,clocks_event_reasons.active$" -- head -1 "$T/s.csv"
  check "gpu-clocks: refuses a bad interval" 2 "GPU_CLOCKS_MS must be a positive number of milliseconds, got 'fast'" -- env PATH="$T/bin:$PATH" GPU_CLOCKS_MS=fast bash "$ROOT/tools/device/gpu-clocks" start "$T/s2.csv"
  rm -f "$T/bin/nvidia-smi"
fi
check "gpu-clocks: no nvidia-smi is not an error" 0 "no nvidia-smi here" -- env PATH="$T/nobin" "$(command -v bash)" "$ROOT/tools/device/gpu-clocks" start "$T/n.csv"
check "gpu-clocks: unknown command" 2 "unknown command 'go'" -- bash "$ROOT/tools/device/gpu-clocks" go "$T/n.csv"
check "gpu-clocks: no sample file named" 2 "usage: .*start\|stop\|summary FILE" -- bash "$ROOT/tools/device/gpu-clocks" start
# power-probe.py checks its arguments before it imports torch (which only the GPU machine has); h200-run checks
# --power before its minute of build
if command -v python3 > /dev/null; then
  check "power-probe: compiles" 0 "" -- python3 -m py_compile "$ROOT/tools/device/power-probe.py"
  check "power-probe: refuses --seconds 0" 2 "--seconds must be positive, got 0.0" -- python3 "$ROOT/tools/device/power-probe.py" --lib x --out "$T/pp" --seconds 0
  check "power-probe: refuses --seqlen 100" 2 "--seqlen must be a positive multiple of 128, got 100" -- python3 "$ROOT/tools/device/power-probe.py" --lib x --out "$T/pp" --seqlen 100
fi
# power-probe.py's window statistics on a synthetic nvidia-smi file: samples before the window's first 0.1 s, after
# its end and unparsable lines drop out; the rest give the median clock, power and the power-cap share
cat > "$T/pp.py" <<'PY'
import datetime, importlib.util, sys
spec = importlib.util.spec_from_file_location("pp", sys.argv[1]); pp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pp)
t0 = 1.8e9
def line(dt, clk, pw, why):
    ts = datetime.datetime.fromtimestamp(t0 + dt).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    return f"{ts}, {clk}, {pw}, 60, 100, {why:#018x}\n"
with open(sys.argv[2], "w") as f:
    f.write(line(0.05, 1980, 300.0, 0))        # inside the window's first 0.1 s: left out
    f.write(line(0.20, 1800, 690.0, 4))
    f.write(line(0.40, 1830, 700.0, 4))
    f.write(line(0.60, 1755, 710.0, 0))
    f.write("2026/12/02 01:00:00.000, 1800, [N/A], 60, 100, 0x4\n")   # unparsable power: skipped
    f.write(line(1.50, 345, 80.0, 1))          # after the window
r = pp.window_stats(pp.read_samples(sys.argv[2]), "w", t0, t0 + 1.0, 2.0, 2.0e12)
print(r["samples"], r["sm_mhz_median"], r["power_w_median"], round(r["power_cap_share"], 3), r["tflops"])
print(pp.table([r], "power.draw.instant").splitlines()[2])
PY
if command -v python3 > /dev/null; then
  check "power-probe: window statistics" 0 "^3 1800(\.0)? 700\.0 0\.667 1000\.0" -- python3 "$T/pp.py" "$ROOT/tools/device/power-probe.py" "$T/pp.csv"
  # its sampler is gpu-clocks: the power field comes from the file's "# fields:" line (a fake nvidia-smi here)
  printf '#!/bin/sh\ncase "$*" in *-lms*) cat "%s" ;; *) echo 0x0 ;; esac\n' "$T/clk.csv" > "$T/bin/nvidia-smi"; chmod +x "$T/bin/nvidia-smi"
  check "power-probe: sampler through gpu-clocks" 0 "^power.draw.instant 5 samples, the fields line skipped$" -- env PATH="$T/bin:$PATH" python3 -c "
import importlib.util, sys, time
spec = importlib.util.spec_from_file_location('pp', '$ROOT/tools/device/power-probe.py'); pp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pp)
f = pp.sampler('$T/ps.csv'); time.sleep(0.3); pp.sampler_stop('$T/ps.csv')
print(f, len(pp.read_samples('$T/ps.csv')), 'samples, the fields line skipped')"
  rm -f "$T/bin/nvidia-smi"
  check "power-probe: no sampler is an error" 1 "gpu-clocks wrote no samples" -- env PATH="$T/nobin:$PATH" python3 -c "
import importlib.util
spec = importlib.util.spec_from_file_location('pp', '$ROOT/tools/device/power-probe.py'); pp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pp); pp.sampler('$T/none.csv')"
  check "power-probe: table row" 0 "\| w \| 2\.000 \| 1000 \| 1800 \(1755-1830\) \| 700 \(710\) \| 67 % \| 3 \|" -- python3 "$T/pp.py" "$ROOT/tools/device/power-probe.py" "$T/pp.csv"
fi
check "h200-run: refuses --power 0" 2 "--power '0' is not a positive number of seconds" -- env OUT="$T/h" bash "$ROOT/tools/device/h200-run" --power 0
check "h200-run: refuses --power 1.2.3" 2 "--power '1.2.3' is not a positive number" -- env OUT="$T/h" bash "$ROOT/tools/device/h200-run" --power 1.2.3
# tools/device/file-final-run: a fake final-run output (artifacts.tgz + san/extra.txt) is filed in the committed layout
mkdir -p "$T/ff/art" "$T/ff/src/san"
for f in acceptance.md fa8-bench.jsonl results.md residuals.md gpu_vs_cpu.txt gpu-clocks.txt sass.txt; do echo "$f body" > "$T/ff/art/$f"; done
printf 'noise\n[====] Synthesis: Tested: 15 | Passing: 15 | Failing: 0 | Crashing: 0\n' > "$T/ff/art/testlog.txt"
echo '{"rc": 0, "seconds": 1, "commit": "abc1234"}' > "$T/ff/art/summary.json"
tar czf "$T/ff/src/artifacts.tgz" -C "$T/ff/art" .
echo "== memcheck" > "$T/ff/src/san/extra.txt"
mkdir -p "$T/ff/src/san/overlays"; echo "# overlay" > "$T/ff/src/san/overlays/round-1.csv"
check "file-final-run: files a run" 0 "filed 10 files in .*run9 \(commit abc1234\)" -- bash "$ROOT/tools/device/file-final-run" "$T/ff/src" "$T/ff/out/run9"
check "file-final-run: the suite's synthesis line" 0 "^\[====\] Synthesis: Tested: 15" -- cat "$T/ff/out/run9/suite-summary.txt"
check "file-final-run: the sanitizers' extra runs" 0 "^== memcheck$" -- cat "$T/ff/out/run9/sanitizer-extra.txt"
check "file-final-run: the sanitizers' overlays" 0 "^# overlay$" -- cat "$T/ff/out/run9/sanitizer-overlays/round-1.csv"
rm -r "$T/ff/src/san/overlays"; mkdir -p "$T/ff/ovt/overlays"; echo "# round 4" > "$T/ff/ovt/overlays/round-4.csv"
tar czf "$T/ff/src/san/overlays.tgz" -C "$T/ff/ovt" overlays
check "file-final-run: files a run whose overlays are one overlays.tgz" 0 "filed 10 files in .*run10" -- bash "$ROOT/tools/device/file-final-run" "$T/ff/src" "$T/ff/out/run10"
check "file-final-run: the overlays from overlays.tgz" 0 "^# round 4$" -- cat "$T/ff/out/run10/sanitizer-overlays/round-4.csv"
check "file-final-run: refuses a folder without artifacts" 1 "artifacts.tgz is missing" -- bash "$ROOT/tools/device/file-final-run" "$T/ff/none" "$T/ff/out/x"
check "file-final-run: usage" 2 "usage" -- bash "$ROOT/tools/device/file-final-run" "$T/ff/src"
check "final-run: refuses a bad FINAL_BENCH_ONLY" 2 "FINAL_BENCH_ONLY='2' is not 0 or 1" -- env OUT="$T/fr" FA8_COMMIT=x FINAL_BENCH_ONLY=2 bash "$ROOT/tools/device/final-run"
check "final-run: refuses a bad FINAL_SAN_ONLY" 2 "FINAL_SAN_ONLY='yes' is not 0 or 1" -- env OUT="$T/fr" FA8_COMMIT=x FINAL_SAN_ONLY=yes bash "$ROOT/tools/device/final-run"
check "final-run: refuses both ONLY switches" 2 "leave nothing to run" -- env OUT="$T/fr" FA8_COMMIT=x FINAL_SAN_ONLY=1 FINAL_BENCH_ONLY=1 bash "$ROOT/tools/device/final-run"
# tools/device/sanitizer-overlay: rounds of overlays that hold each d128 GQA key's distinct instances (a fake table:
# duplicates count once, other families and targets are left out), and on the repo's tables, rounds under which the
# runtime sends final-run's sanitizer probe to every instance the tables ship (a committed overlay once named one the
# build no longer had, and the probes behind the default bucket never ran the S=8K instances)
mkdir -p "$T/tabs"; H=target,sm_count,device,key,bucket,instance,median_us,p20_us,p80_us,err,runner_up,runner_up_us,fa8_commit,cuda,driver,date
row() { echo "$1,132,GPU,fa8_$2_e4m3_d128v128_gqa_$3,$4,$5,5,4,6,0.1,none,0,c,13.0,580,2026-12-07"; }
{ echo "$H"; row sm_90a fwd full s2048_bh8 B; row sm_90a fwd full s8192_bh64 A; row sm_90a fwd full s2048_bh64 B
  row sm_90a fwd causal_split s8192_bh64 C; row sm_90a bwd causal s2048_bh64 D; row sm_89 fwd full s2048_bh64 E
  echo "sm_90a,132,GPU,fa8_fwd_e4m3_d64v64_gqa_full,s2048_bh64,F,5,4,6,0.1,none,0,c,13.0,580,2026-12-07"
  echo "sm_90a,132,GPU,fa8_bwd_e4m3_d192v128_gqa_full,s2048_bh64,G,5,4,6,0.1,none,0,c,13.0,580,2026-12-07"; } > "$T/tabs/t.csv"
check "sanitizer-overlay: one round per distinct instance" 0 "^round-1.csv: 3 keys
round-2.csv: 1 keys$" -- bash "$ROOT/tools/device/sanitizer-overlay" "$T/tabs" "$T/ovf"
check "sanitizer-overlay: round 1, every key's first instance by name" 0 "^A C D$" -- bash -c "awk -F, 'NR > 2 { print \$6 }' '$T/ovf/round-1.csv' | sort | paste -sd' '"
check "sanitizer-overlay: round 2, the full forward's second" 0 "^sm_90a,132,GPU,fa8_fwd_e4m3_d128v128_gqa_full,s2048_bh64,B,1,1,1,0,none,0,sanitizer,13.0,580,2026-12-07$" -- tail -n 1 "$T/ovf/round-2.csv"
check "sanitizer-overlay: no round 3" 1 "" -- test -e "$T/ovf/round-3.csv"
check "sanitizer-overlay: a named head dim takes only its keys" 0 "^round-1.csv: 1 keys$" -- bash "$ROOT/tools/device/sanitizer-overlay" "$T/tabs" "$T/ov64" 64
check "sanitizer-overlay: 192x128 is the d192v128 family" 0 "^G$" -- bash -c "bash '$ROOT/tools/device/sanitizer-overlay' '$T/tabs' '$T/ovm' 192x128 > /dev/null && awk -F, 'NR > 2 { print \$6 }' '$T/ovm/round-1.csv'"
check "sanitizer-overlay: refuses a bad head dim" 2 "HDIM 'd256' is not a head dim like 128 or 192x128" -- bash "$ROOT/tools/device/sanitizer-overlay" "$T/tabs" "$T/ovf" d256
check "sanitizer-overlay: a head dim without rows" 2 "no sm_90a row of a d256v256 GQA forward or backward" -- bash "$ROOT/tools/device/sanitizer-overlay" "$T/tabs" "$T/ovf" 256
echo "$H" > "$T/tabs/t.csv"
check "sanitizer-overlay: refuses tables without a d128 GQA row" 2 "no sm_90a row of a d128v128 GQA forward or backward in" -- bash "$ROOT/tools/device/sanitizer-overlay" "$T/tabs" "$T/ovf"
check "sanitizer-overlay: refuses a missing folder" 2 "'$T/none' is not a folder of tuned tables" -- bash "$ROOT/tools/device/sanitizer-overlay" "$T/none" "$T/ovf"
check "sanitizer-overlay: usage" 2 "usage" -- bash "$ROOT/tools/device/sanitizer-overlay" "$T/tabs"
for hd in 128 256; do
check "sanitizer-overlay: the repo's d$hd tables" 0 "^round-1.csv" -- bash "$ROOT/tools/device/sanitizer-overlay" "$ROOT/tune/tables" "$T/ov$hd" $hd
if [ -x "${FA8_CLI:-}" ] && "$FA8_CLI" list --tuned --backend cuda --device sm_90a:132 --hdim $hd > /dev/null 2>&1; then
  # final-run's probes (H=8/2 and 144/36, 700 keys, matched and split, causal or not) under each round run each row's instance
  want=$(awk -F, -v re="^fa8_(fwd|bwd)_e4m3_d${hd}v${hd}_gqa_(full|causal)(_split)?\$" '$1 == "sm_90a" && $4 ~ re { print $6 }' "$ROOT"/tune/tables/*.csv | sort -u)
  : > "$T/ran.txt"
  for ov in "$T"/ov$hd/round-*.csv; do
    while IFS=, read -r _ _ _ key _ inst _; do
      case $key in fa8_fwd_*|fa8_bwd_*) ;; *) continue ;; esac
      c=; case $key in *_causal*) c=--causal ;; esac
      d=matched; case $key in *_split) d=split ;; esac
      dir=${key#fa8_}; dir=${dir%%_*}
      for h in "8 --kv-heads 2" "144 --kv-heads 36"; do   # racecheck's problem and memcheck's
        check "sanitizer-overlay: d$hd $(basename "$ov") runs $inst at H=${h%% *}" 0 "^$dir +$inst\$" -- "$FA8_CLI" list --tuned --backend cuda --device sm_90a:132 --overlay "$ov" --hdim $hd --seqlen 700 --heads $h --delta $d $c
      done
      echo "$inst" >> "$T/ran.txt"
    done < "$ov"
  done
  check "sanitizer-overlay: the rounds cover every d$hd GQA instance of the tables" 0 "^same$" -- bash -c "[ \"\$(sort -u '$T/ran.txt')\" = '$want' ] && echo same"
else
  echo "skip sanitizer-overlay's d$hd runtime picks: FA8_CLI (the built fa8) is not set or has no sm_90a d$hd instances (-Dcuda=disabled)"
fi
done
# final-run's sanitizer pass alone (FINAL_SAN_ONLY=1), with stubs for the build, the debs, compute-sanitizer and fa8:
# every round's picks are logged and each round's probes run under both tools, causal and not, with its overlay
F="$T/frun"; mkdir -p "$F/tools/device" "$F/tune" "$F/bin"
cp "$ROOT/tools/device/final-run" "$ROOT/tools/device/sanitizer-overlay" "$F/tools/device/"; cp -r "$ROOT/tune/tables" "$F/tune/"
printf '#!/bin/bash\necho "$FA8_HDIM" > "$OUT/build-hdim.txt"\n' > "$F/tools/device/h200-run"; printf 'echo :\n' > "$F/tools/device/unpack-debs"
printf '#!/bin/bash\nshift 4; "$@"; echo "========= ERROR SUMMARY: 0 errors"\n' > "$F/bin/compute-sanitizer"
printf '#!/bin/bash\necho "stub fa8 $* table=${FA8_TUNED_TABLE:-none}"\n' > "$F/bin/fa8"; chmod +x "$F/bin/"*
check "final-run: FINAL_SAN_ONLY=1 walks every round" 0 "^== round-4: racecheck --no-causal, --heads 8 --kv-heads 2$" -- env -C "$F" PATH="$F/bin:$PATH" OUT="$F/out" FA8_COMMIT=x FINAL_SAN_ONLY=1 FINAL_FA8="$F/bin/fa8" bash tools/device/final-run
check "final-run: refuses a FINAL_FA8 that is no program" 2 "no fa8 at '$F/nope'" -- env -C "$F" PATH="$F/bin:$PATH" OUT="$F/out2" FA8_COMMIT=x FINAL_SAN_ONLY=1 FINAL_FA8="$F/nope" bash tools/device/final-run
check "final-run: a round's picks are logged" 0 "^stub fa8 list --tuned --backend cuda --overlay $F/out/san/overlays/round-2.csv .* --delta split --causal table=none$" -- cat "$F/out/san/extra.txt"
check "final-run: a round's probe runs under its overlay" 0 "^stub fa8 probe --backend cuda --seqlen-q 200 --seqlen-k 700 --heads 8 --kv-heads 2 --hdim 128 --no-causal table=$F/out/san/overlays/round-3.csv$" -- cat "$F/out/san/extra.txt"
check "final-run: memcheck runs H=144/36 (persistent CTAs walk a second tile)" 0 "^stub fa8 probe --backend cuda --seqlen-q 200 --seqlen-k 700 --heads 144 --kv-heads 36 --hdim 128 --causal table=$F/out/san/overlays/round-3.csv$" -- grep -A1 "^== round-3: memcheck --causal, --heads 144 --kv-heads 36$" "$F/out/san/extra.txt"
check "final-run: racecheck runs H=8/2" 0 "^stub fa8 probe --backend cuda --seqlen-q 200 --seqlen-k 700 --heads 8 --kv-heads 2 --hdim 128 --causal table=$F/out/san/overlays/round-2.csv$" -- grep -A1 "^== round-2: racecheck --causal, --heads 8 --kv-heads 2$" "$F/out/san/extra.txt"
check "final-run: a round's picks are listed for both problems" 0 "^stub fa8 list --tuned --backend cuda --overlay $F/out/san/overlays/round-1.csv --seqlen 700 --heads 144 --kv-heads 36 --hdim 128 --delta matched table=none$" -- cat "$F/out/san/extra.txt"
check "final-run: the 4 rounds come back as one file (run() returns 8)" 0 "^overlays/round-1.csv overlays/round-2.csv overlays/round-3.csv overlays/round-4.csv$" -- bash -c "tar tzf '$F/out/san/overlays.tgz' | grep csv | sort | paste -sd' '"
check "final-run: no folder of rounds left under OUT" 1 "" -- test -e "$F/out/san/overlays"
check "final-run: 16 sanitizer runs for 4 rounds" 0 "^16$" -- grep -c "ERROR SUMMARY: 0 errors" "$F/out/san/extra.txt"
check "final-run: the sanitizer build is d128 by default" 0 "^128$" -- cat "$F/out/san/build-hdim.txt"
check "final-run: FINAL_SAN_HDIM=256 walks the d256 rounds" 0 "^== round-3: racecheck --no-causal, --heads 8 --kv-heads 2$" -- env -C "$F" PATH="$F/bin:$PATH" OUT="$F/o256" FA8_COMMIT=x FINAL_SAN_ONLY=1 FINAL_SAN_HDIM=256 FINAL_FA8="$F/bin/fa8" bash tools/device/final-run
check "final-run: FINAL_SAN_HDIM=256 builds d256" 0 "^256$" -- cat "$F/o256/san/build-hdim.txt"
check "final-run: FINAL_SAN_HDIM=256 probes d256 under a d256 round" 0 "^stub fa8 probe .* --hdim 256 --causal table=$F/o256/san/overlays/round-1.csv$" -- cat "$F/o256/san/extra.txt"
check "final-run: the d256 rounds hold only d256 keys" 0 "^ok$" -- bash -c "tar xzOf '$F/o256/san/overlays.tgz' --wildcards '*.csv' | awk -F, '/^sm_90a/ && \$4 !~ /_d256v256_/ { bad = 1 } END { print bad ? \"bad\" : \"ok\" }'"
check "final-run: a head dim without table rows stops before the build" 2 "no sm_90a row of a d192v128 GQA.*
final-run: no sanitizer overlays \(above\); the sanitizer build and pass skipped" -- env -C "$F" PATH="$F/bin:$PATH" OUT="$F/o192" FA8_COMMIT=x FINAL_SAN_ONLY=1 FINAL_SAN_HDIM=192x128 FINAL_FA8="$F/bin/fa8" bash tools/device/final-run
check "final-run: no sanitizer build for a head dim without rows" 1 "" -- test -e "$F/o192/san/build-hdim.txt"
check "final-run: rounds past FINAL_DEADLINE_S are skipped, said, and fail the rc" 3 "^== round-1 and later: not run, [0-9]+ s \+ FINAL_ROUND_S 60 > FINAL_DEADLINE_S 0" -- env -C "$F" PATH="$F/bin:$PATH" OUT="$F/odl" FA8_COMMIT=x FINAL_SAN_ONLY=1 FINAL_DEADLINE_S=0 FINAL_FA8="$F/bin/fa8" bash tools/device/final-run
check "final-run: no sanitizer run after the deadline" 1 "" -- grep -q "SUMMARY" "$F/odl/san/extra.txt"
check "final-run: the skipped rounds' overlays still come back" 0 "overlays/round-1.csv" -- tar tzf "$F/odl/san/overlays.tgz"
check "final-run: refuses a FINAL_DEADLINE_S that is no number" 2 "FINAL_DEADLINE_S='soon' and FINAL_ROUND_S='60' must be whole seconds" -- env OUT="$T/fr" FA8_COMMIT=x FINAL_DEADLINE_S=soon bash "$ROOT/tools/device/final-run"
check "final-run: refuses a bad FINAL_SAN_HDIM" 2 "FINAL_SAN_HDIM='x' is not a head dim" -- env OUT="$T/fr" FA8_COMMIT=x FINAL_SAN_HDIM=x bash "$ROOT/tools/device/final-run"
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
