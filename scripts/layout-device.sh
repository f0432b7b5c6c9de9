#!/usr/bin/env bash
# One device call (~540 s; pack .dev with test_kernels_matmul as
# bench-device.sh's header says; carry .gl, .anchor and .dev): the prefill
# GEMMs' layouts and x staging end to end (issue 10). First the kernel
# tests of x staged four chunks at a time and fetched after the products
# (ZINC_CMP_XQUAD=1, ZINC_CMP_XLATE=1). The 8B's pp512 with the default
# layouts, with run 74's rule (ZINC_CMP_RULE=1), with zincc
# --tune=prefill's picks and with both x knobs, alternated, beside
# llama.cpp; the 2-layer profiles. Then issue 12's int8-x batch GEMV
# ablations (ZINC_GEMVN_ABLATE, timing only) at 8 rows.
set -uo pipefail
DEVICE_OUT=layout.txt
. scripts/device-lib.sh
gen q8b & gen s2 &
for v in "ZINC_CMP_XQUAD=1 ZINC_CMP_XLATE=1" "ZINC_CMP_XQUAD=1" "ZINC_CMP_XLATE=1"; do
  (cd /tmp && env $v LD_LIBRARY_PATH=$B/lib timeout 150 $B/test_kernels_matmul --filter 'kernels_matmul/q[46]*' \
     > "$OUT/t_x.txt" 2>&1)
  echo "== test $v: $(grep -E 'Synthesis|CRASH|FAIL' "$OUT/t_x.txt" | head -6 | tr '\n' ' ')" | tee -a "$O"
done
wait
mk() { local m=$1 out=$2; shift 2; env "$@" timeout 150 "$B/zincc" /tmp/$m.gguf -o /tmp/$out.zplan --ctx 2048 2>&1 | tail -1 | tee -a "$O"; }
mk q8b q8b X=0 & mk q8b q8b_r ZINC_CMP_RULE=1 & mk q8b q8b_x ZINC_CMP_XQUAD=1 ZINC_CMP_XLATE=1 &
mk s2 s2 X=0 & mk s2 s2_r ZINC_CMP_RULE=1 & mk s2 s2_q ZINC_CMP_XQUAD=1 & mk s2 s2_l ZINC_CMP_XLATE=1 &
mk s2 s2_rq ZINC_CMP_RULE=1 ZINC_CMP_XQUAD=1 &
wait
# the tuner times each GEMM of the 8B (its keys are the 2-layer model's too)
timeout 200 "$B/zincc" /tmp/q8b.gguf --tune=prefill -o /tmp/q8b_t.zplan --ctx 2048 > "$OUT/tune_q8b.txt" 2>&1
grep -E "^  ->|tuned|wrote" "$OUT/tune_q8b.txt" | tee -a "$O"
"$B/zinc" bench /tmp/q8b.zplan -p 512 -n 0 -r 3 >/dev/null 2>&1 # the clocks up
pp_llama r0 q8b # llama.cpp's cold round, not quoted
for r in 1 2; do pp r$r q8b; pp r$r q8b_r; pp r$r q8b_t; pp r$r q8b_x; pp_llama r$r q8b; done
for p in s2 s2_r s2_q s2_l s2_rq; do prof2l $p; done
# (env's arguments are variables only: --parallel goes after the command, run 66's lesson)
for a in 0 1 2; do
  env ZINC_GEMVN_ABLATE=$a timeout 150 "$B/zincc" /tmp/s2.gguf -o /tmp/p8g$a.zplan --ctx 2048 --parallel 8 2>&1 | tail -1
done
mv /tmp/p8g0.zplan /tmp/p8.zplan
for p in p8 p8g1 p8g2; do
  timeout 60 "$B/zinc" bench /tmp/$p.zplan --parallel 8 -p 0 -n 64 -r 3 --profile > "$OUT/prof_$p.txt" 2>&1
  echo "== [$p] $(grep -E 'tg64' "$OUT/prof_$p.txt" | tr -s ' ')" | tee -a "$O"
done
