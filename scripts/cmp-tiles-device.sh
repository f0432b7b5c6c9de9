#!/usr/bin/env bash
# One device call (~250 s; pack .dev with test_kernels_matmul and
# test_kernels_e2e as bench-device.sh's header says; carry .gl, .anchor and
# .dev): the permuted GEMM's token tile chosen by its grid (cmp_tokens: k
# and v of 1024 rows at 64 tokens, where 128 left half of the SMs idle) and
# Q6_K's 128-token tiles in one x buffer, against the tiles before
# (ZINC_CMP_FILL=0 ZINC_CMP_XBUF=2) and against k and v at 32 tokens
# (ZINC_CMP_FILL=150). The kernel tests first (the small test models take
# 32- and 64-token tiles), then the 8B's pp512 beside llama.cpp, two
# alternated rounds, and the 2-layer profiles.
set -uo pipefail
DEVICE_OUT=cmp-tiles.txt
. scripts/device-lib.sh
gen q8b & gen s2 &
(cd /tmp && LD_LIBRARY_PATH=$B/lib timeout 200 $B/test_kernels_matmul --verbose --filter 'kernels_matmul/q[46]*' > "$OUT/t_matmul.txt" 2>&1)
(cd /tmp && LD_LIBRARY_PATH=$B/lib timeout 150 $B/test_kernels_e2e > "$OUT/t_e2e.txt" 2>&1)
for f in matmul e2e; do
  echo "== test_kernels_$f: $(grep -E 'Synthesis|CRASH|FAIL' "$OUT/t_$f.txt" | head -8 | tr '\n' ' ')" | tee -a "$O"
done
grep 'max error' "$OUT/t_matmul.txt" | grep 'h200/prefill' | grep gemm | tr -s ' ' | head -12 | tee -a "$O"
wait
mk() { local m=$1 out=$2; shift 2; env "$@" timeout 150 "$B/zincc" /tmp/$m.gguf -o /tmp/$out.zplan --ctx 2048 2>&1 | tail -1 | tee -a "$O"; }
mk q8b q8b X=0 & mk q8b q8b_old ZINC_CMP_FILL=0 ZINC_CMP_XBUF=2 & mk s2 s2 X=0 &
mk s2 s2_old ZINC_CMP_FILL=0 ZINC_CMP_XBUF=2 & mk s2 s2_f150 ZINC_CMP_FILL=150 &
wait
"$B/zinc" bench /tmp/q8b.zplan -p 512 -n 0 -r 5 >/dev/null 2>&1 # the clocks up
for r in 1 2; do pp r$r q8b; pp r$r q8b_old; pp_llama r$r q8b; done
for p in s2 s2_old s2_f150; do prof2l $p; done
