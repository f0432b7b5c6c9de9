#!/usr/bin/env bash
# One device call (~450 s; pack .dev as bench-device.sh's header says, no
# tests needed; carry .gl, .anchor and .dev): the prefill GEMMs' layouts end
# to end (issue 10). The 8B's pp512 with the default layouts, with run 74's
# rule (ZINC_CMP_RULE=1) and with zincc --tune=prefill's picks, alternated,
# beside llama.cpp; the 2-layer profiles of the first two. Then issue 12's
# int8-x batch GEMV ablations (ZINC_GEMVN_ABLATE, timing only) at 8 rows.
set -uo pipefail
DEVICE_OUT=layout.txt
. scripts/device-lib.sh
gen q8b & gen s2 &
wait
mk() { local m=$1 out=$2; shift 2; env "$@" timeout 150 "$B/zincc" /tmp/$m.gguf -o /tmp/$out.zplan --ctx 2048 2>&1 | tail -1 | tee -a "$O"; }
mk q8b q8b X=0 & mk q8b q8b_r ZINC_CMP_RULE=1 & mk s2 s2 X=0 & mk s2 s2_r ZINC_CMP_RULE=1 &
wait
# the tuner times each GEMM of the 8B (its keys are the 2-layer model's too)
timeout 200 "$B/zincc" /tmp/q8b.gguf --tune=prefill -o /tmp/q8b_t.zplan --ctx 2048 > "$OUT/tune_q8b.txt" 2>&1
grep -E "^  ->|tuned|wrote" "$OUT/tune_q8b.txt" | tee -a "$O"
"$B/zinc" bench /tmp/q8b.zplan -p 512 -n 0 -r 3 >/dev/null 2>&1 # the clocks up
pp_llama r0 q8b # llama.cpp's cold round, not quoted
for r in 1 2; do pp r$r q8b; pp r$r q8b_r; pp r$r q8b_t; pp_llama r$r q8b; done
for p in s2 s2_r; do prof2l $p; done
# (env's arguments are variables only: --parallel goes after the command, run 66's lesson)
for a in 0 1 2; do
  env ZINC_GEMVN_ABLATE=$a timeout 150 "$B/zincc" /tmp/s2.gguf -o /tmp/p8g$a.zplan --ctx 2048 --parallel 8 2>&1 | tail -1
done
mv /tmp/p8g0.zplan /tmp/p8.zplan
for p in p8 p8g1 p8g2; do
  timeout 60 "$B/zinc" bench /tmp/$p.zplan --parallel 8 -p 0 -n 64 -r 3 --profile > "$OUT/prof_$p.txt" 2>&1
  echo "== [$p] $(grep -E 'tg64' "$OUT/prof_$p.txt" | tr -s ' ')" | tee -a "$O"
done
