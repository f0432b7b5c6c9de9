#!/usr/bin/env bash
# One device call (~200 s; pack .dev with test_kernels_matmul,
# test_kernels_e2e and test_kernels_misc as bench-device.sh's header says;
# carry .gl, .anchor and .dev): activations that only fp16 matmuls read kept
# in fp16 (mm-f16's keep_f16: the norms before q, k, v, gate+up and the
# logits, attention's output before o and the SwiGLU product before down;
# ZINC_X16=1), against fp32 (the default until
# this call's tests pass: then flip keep_f16's default). The kernel tests
# on the driver first (the permuted GEMMs reading fp16 x), then the 8B's
# pp512 beside llama.cpp, alternated, and the 2-layer profiles.
set -uo pipefail
DEVICE_OUT=x16.txt
. scripts/device-lib.sh
gen q8b & gen s2 &
(cd /tmp && ZINC_X16=1 LD_LIBRARY_PATH=$B/lib timeout 100 $B/test_kernels_matmul --filter 'kernels_matmul/q[46]*' > "$OUT/t_matmul.txt" 2>&1)
(cd /tmp && ZINC_X16=1 LD_LIBRARY_PATH=$B/lib timeout 100 $B/test_kernels_e2e > "$OUT/t_e2e.txt" 2>&1)
(cd /tmp && ZINC_X16=1 LD_LIBRARY_PATH=$B/lib timeout 100 $B/test_kernels_misc > "$OUT/t_misc.txt" 2>&1)
for f in matmul e2e misc; do
  echo "== test_kernels_$f: $(grep -E 'Synthesis|CRASH|FAIL' "$OUT/t_$f.txt" | head -8 | tr '\n' ' ')" | tee -a "$O"
done
wait
mk() { local m=$1 out=$2; shift 2; env "$@" timeout 100 "$B/zincc" /tmp/$m.gguf -o /tmp/$out.zplan --ctx 2048 2>&1 | tail -1 | tee -a "$O"; }
mk q8b q8b ZINC_X16=1 & mk q8b q8b_32 X=0 & mk s2 s2 ZINC_X16=1 & mk s2 s2_32 X=0 &
wait
"$B/zinc" bench /tmp/q8b.zplan -p 512 -n 0 -r 5 >/dev/null 2>&1 # the clocks up
for r in 1 2; do pp r$r q8b; pp r$r q8b_32; done
for p in s2 s2_32; do prof2l $p; done
pp_llama r1 q8b
