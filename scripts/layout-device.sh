#!/usr/bin/env bash
# One device call (~450 s; pack .dev with test_kernels_matmul as
# bench-device.sh's header says; carry .gl, .anchor and .dev).
# Issue 10, the prefill GEMMs' layouts and x staging: the kernel tests of
# x staged four chunks at a time and fetched after the products
# (ZINC_CMP_XQUAD=1 ZINC_CMP_XLATE=1); the 8B's pp512 with the default
# layouts, with run 74's rule (ZINC_CMP_RULE=1) and with both x knobs,
# alternated beside llama.cpp; the 2-layer profiles.
# Issue 12, the batch GEMVs: the fragment probe (B's order) and the kernel
# tests of the tensor-core batch GEMV with x's B fragments from each lane's
# own loads (ZINC_GEMVN_CM_PERM=2 ZINC_GEMVN_CM_XREG=1); the 8B at 8 and 16
# streams with it against the defaults; the int8-x GEMV's ablations
# (ZINC_GEMVN_ABLATE, timing only) at 8 rows.
set -uo pipefail
DEVICE_OUT=layout.txt
. scripts/device-lib.sh
gen q8b & gen s2 &
t() { # kernel tests with knobs: t "<vars>" <filter>
  (cd /tmp && env $1 LD_LIBRARY_PATH=$B/lib timeout 200 $B/test_kernels_matmul --filter "$2" --verbose > "$OUT/t_$3.txt" 2>&1)
  echo "== test $1 $2: $(grep -E 'Synthesis|CRASH|FAIL|fragments|B.s' "$OUT/t_$3.txt" | head -12 | tr '\n' ' ')" | tee -a "$O"
}
t "X=0" 'kernels_matmul/fragment_layout' frag
t "ZINC_GEMVN_CM_PERM=2 ZINC_GEMVN_CM_XREG=1" 'kernels_matmul/gemvn_cm*' xreg
t "ZINC_CMP_XQUAD=1 ZINC_CMP_XLATE=1" 'kernels_matmul/q[46]*' xql
wait
mk() { local m=$1 out=$2; shift 2; env "$@" timeout 150 "$B/zincc" /tmp/$m.gguf -o /tmp/$out.zplan --ctx 2048 2>&1 | tail -1 | tee -a "$O"; }
mkp() { local n=$1 out=$2; shift 2; env "$@" timeout 150 "$B/zincc" /tmp/q8b.gguf -o /tmp/$out.zplan --ctx 2048 --parallel $n 2>&1 | tail -1 | tee -a "$O"; }
XR="ZINC_BATCH_CM=1 ZINC_GEMVN_CM_PERM=2 ZINC_GEMVN_CM_XREG=1"
mk q8b q8b X=0 & mk q8b q8b_r ZINC_CMP_RULE=1 & mk q8b q8b_x ZINC_CMP_XQUAD=1 ZINC_CMP_XLATE=1 &
mk s2 s2 X=0 & mk s2 s2_r ZINC_CMP_RULE=1 & mk s2 s2_x ZINC_CMP_XQUAD=1 ZINC_CMP_XLATE=1 &
mkp 8 p8 X=0 & mkp 8 p8x $XR & mkp 16 p16 X=0 & mkp 16 p16x $XR &
wait
"$B/zinc" bench /tmp/q8b.zplan -p 512 -n 0 -r 3 >/dev/null 2>&1 # the clocks up
pp_llama r0 q8b # llama.cpp's cold round, not quoted
for r in 1 2; do pp r$r q8b; pp r$r q8b_r; pp r$r q8b_x; pp_llama r$r q8b; done
for p in s2 s2_r s2_x; do prof2l $p; done
bp() { # batch decode: bp plan streams
  timeout 90 "$B/zinc" bench /tmp/$1.zplan --parallel $2 -p 0 -n 64 -r 3 --profile > "$OUT/prof_$1.txt" 2>&1
  echo "== [$1] $(grep -E 'tg64|step' "$OUT/prof_$1.txt" | head -4 | tr -s ' ' | tr '\n' '|')" | tee -a "$O"
}
for r in 1 2; do bp p8 1,8; bp p8x 1,8; bp p16 8,16; bp p16x 8,16; done
# (env's arguments are variables only: --parallel goes after the command, run 66's lesson)
for a in 0 1 2; do
  env ZINC_GEMVN_ABLATE=$a timeout 150 "$B/zincc" /tmp/s2.gguf -o /tmp/p8g$a.zplan --ctx 2048 --parallel 8 2>&1 | tail -1
done
for p in p8g0 p8g1 p8g2; do bp $p 8; done
