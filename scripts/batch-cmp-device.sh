#!/usr/bin/env bash
# One device call (~200 s; pack .dev with test_kernels_matmul and test_batch
# as bench-device.sh's header says; carry .gl, .anchor and .dev): the batch
# GEMVs on matmul_cmp.glsl (ZINC_BATCH_CMP=1: K permuted, the weights'
# A fragments decoded in registers, 16 token rows by 64 weight rows a
# workgroup, x from the fp16 x pass) against the tensor-core GEMV's 16 x 16
# tiles (gemvn_cm, whose gate+up run 60 measured L2-bound: each workgroup of
# 16 weight rows reads all 16 rows of x). Its kernel tests, then the 8B's
# --parallel 16 and --parallel 8 plans at 1, 8 and 16 streams, with the
# batch step's profile.
set -uo pipefail
DEVICE_OUT=batch-cmp.txt
. scripts/device-lib.sh
[ -f /tmp/q8b.gguf ] || gen q8b &
t() { local name=$1; shift; (cd /tmp && env "$@" LD_LIBRARY_PATH=$B/lib timeout 150 $B/test_kernels_matmul --verbose --filter "$F" > "$OUT/t_$name.txt" 2>&1)
  echo "== test $name: $(grep -E 'Synthesis|CRASH|Assert|assert' "$OUT/t_$name.txt" | head -4 | tr '\n' ' ') | $(grep 'max error' "$OUT/t_$name.txt" | head -12 | tr -s ' ' | tr '\n' '|')" | tee -a "$O"; }
if [ -z "${SKIP_TESTS:-}" ]; then
F='kernels_matmul/gemvn_cm*'
t bcmp ZINC_BATCH_CMP=1
(cd /tmp && ZINC_BATCH_CMP=1 ZINC_BATCH_CM=1 LD_LIBRARY_PATH=$B/lib timeout 100 $B/test_batch > "$OUT/t_batch.txt" 2>&1)
echo "== test_batch (ZINC_BATCH_CMP=1): $(grep -E 'Synthesis|CRASH|Assert' "$OUT/t_batch.txt" | head -4 | tr '\n' ' ')" | tee -a "$O"
fi
wait
mk() { local out=$1 par=$2; shift 2; env "$@" timeout 200 "$B/zincc" /tmp/q8b.gguf -o /tmp/$out.zplan --ctx 2048 --parallel $par 2>&1 | tail -1 | tee -a "$O"; }
mk b16 16 X=0 & mk b16c 16 ZINC_BATCH_CMP=1 & mk b16c2 16 ZINC_BATCH_CMP=1 ZINC_BCMP_LAYOUT=16,2 &
mk b8 8 X=0 & mk b8c 8 ZINC_BATCH_CM=1 ZINC_BATCH_CMP=1 &
wait
"$B/zinc" bench /tmp/b16.zplan -p 0 -n 64 -r 10 >/dev/null 2>&1 # the clocks up
for r in 1 2; do
  for p in b16 b16c b16c2; do
    echo "== [r$r $p] $(timeout 90 "$B/zinc" bench /tmp/$p.zplan --parallel 1,8,16 -p 0 -n 64 -r 3 2>&1 | grep -E 'tg|x[0-9]' | tr -s ' ' | tr '\n' '|')" | tee -a "$O"
  done
  for p in b8 b8c; do
    echo "== [r$r $p] $(timeout 90 "$B/zinc" bench /tmp/$p.zplan --parallel 1,8 -p 0 -n 64 -r 3 2>&1 | grep -E 'tg|x[0-9]' | tr -s ' ' | tr '\n' '|')" | tee -a "$O"
  done
done
for p in b16:16 b16c:16 b8:8 b8c:8 b16c:8; do
  n=${p#*:} p=${p%:*}
  timeout 90 "$B/zinc" bench /tmp/$p.zplan --parallel $n -p 0 -n 16 -r 1 --profile > "$OUT/prof_$p$n.txt" 2>&1
  echo "== [profile $p x$n] $(grep -A12 'batch step' "$OUT/prof_$p$n.txt" | tr -s ' ' | tr '\n' '|')" | tee -a "$O"
done
