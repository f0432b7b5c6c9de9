#!/usr/bin/env bash
# One device call (~250 s; pack .dev with test_kernels_matmul as
# bench-device.sh's header says; carry .gl, .anchor and .dev).
# Issue 12, the tensor-core batch GEMV's staging (matmul_gemvn_cm.glsl):
#   M: the fp32 decode's bits without integer-to-float conversions
#      (ZINC_GEMVN_CM_F32M=1), q6_K planes read raw a step ahead
#      (ZINC_GEMVN_CM_Q6RAW=1), raw blocks two steps ahead (ZINC_GEMVN_CM_DEPTH=2);
#   ALL: the same with the quants decoded in fp16 pairs (ZINC_GEMVN_CM_H2=2)
#      instead of F32M (run 77: H2=1 +5.3 % at 16 streams, past the tolerance);
# their kernel tests, and the 8B at 8 and 16 streams against the defaults
# (the deciding rows first); one stream's tg128 for the ratio.
# Lanes in clusters of 8 or 4 rows' worth in the int8 batch GEMV
# (ZINC_GEMVN_GL: a warp's x loads touch 8 or 4 groups, not 32), 8 streams.
# Issue 10: x staged four chunks a lane (ZINC_CMP_XQUAD=1) alone: run 75
# measured it only with XLATE, whose exposed latency lost; pp512 of the 8B
# beside the default and llama.cpp.
set -uo pipefail
DEVICE_OUT=h2.txt
. scripts/device-lib.sh
gen q8b &
M="ZINC_GEMVN_CM_F32M=1 ZINC_GEMVN_CM_DEPTH=2 ZINC_GEMVN_CM_Q6RAW=1"
ALL="ZINC_GEMVN_CM_H2=2 ZINC_GEMVN_CM_DEPTH=2 ZINC_GEMVN_CM_Q6RAW=1"
ktest "$M" 'kernels_matmul/gemvn_cm*' m
ktest "$ALL" 'kernels_matmul/gemvn_cm*' all
ktest "ZINC_GEMVN_GL=8" 'kernels_matmul/gemvn_*int8*' gl8
wait
mk() { local out=$1; shift; env "$@" timeout 150 "$B/zincc" /tmp/q8b.gguf -o /tmp/$out.zplan --ctx 2048 2>&1 | tail -1 | tee -a "$O"; }
mkp() { local n=$1 out=$2; shift 2; env "$@" timeout 150 "$B/zincc" /tmp/q8b.gguf -o /tmp/$out.zplan --ctx 2048 --parallel $n 2>&1 | tail -1 | tee -a "$O"; }
mk q8b X=0 & mk q8bx ZINC_CMP_XQUAD=1 &
mkp 16 p16 X=0 & mkp 16 p16m $M & mkp 16 p16all $ALL & mkp 16 p16q6 ZINC_GEMVN_CM_Q6RAW=1 &
mkp 8 p8 X=0 & mkp 8 p8gl8 ZINC_GEMVN_GL=8 & mkp 8 p8gl4 ZINC_GEMVN_GL=4 & mkp 8 p8m ZINC_BATCH_CM=1 $M & mkp 8 p8all ZINC_BATCH_CM=1 $ALL &
wait
bp() { # batch decode: bp plan streams
  timeout 90 "$B/zinc" bench /tmp/$1.zplan --parallel $2 -p 0 -n 64 -r 3 --profile > "$OUT/prof_$1.txt" 2>&1
  echo "== [$1] $(grep -E 'tg64|step of (8|16)' "$OUT/prof_$1.txt" | head -4 | tr -s ' ' | tr '\n' '|')" | tee -a "$O"
}
"$B/zinc" bench /tmp/q8b.zplan -p 512 -n 0 -r 3 >/dev/null 2>&1 # the clocks up
for p in p16m p16all p16; do bp $p 8,16; done
bp p8m 8; bp p8all 8; bp p8 8; bp p8gl8 8; bp p8gl4 8; bp p16q6 16
echo "== [q8b one stream] $("$B/zinc" bench /tmp/q8b.zplan -p 0 -n 128 -r 3 2>&1 | grep tg128 | tr -s ' ')" | tee -a "$O"
pp 8B q8b; pp 8B q8bx; pp_llama 8B q8b; pp 8B q8bx; pp 8B q8b
