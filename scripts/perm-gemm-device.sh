#!/usr/bin/env bash
# One device call (~250 s; pack .dev as bench-device.sh's header says, with
# test_kernels_matmul and test_kernels_e2e; carry .gl, .anchor and .dev):
# the tree as it lands after session 26, where the h200 profile's prefill
# GEMMs of Q4_K and Q6_K planes are matmul_cmp.glsl's (K permuted, fp32
# decode, 128- and 80-token tiles). First its kernel tests on the driver
# (that form has run in benchmarks only, run 68), then the 8B's and the
# 9B's pp512 beside llama.cpp, two alternated rounds, and the 2-layer
# profile of the default against the staged tiles (ZINC_CM_PERM=0) and
# against 8 subgroups a workgroup (ZINC_CMP_LAYOUT=128,8: half the x
# staging a lane, the same registers) and against Q6_K's 128-token tiles
# with one x buffer (ZINC_CMP_XBUF=1; the default takes 80 tokens in two),
# whose kernels are tested first (kernels_matmul/q6_K_planes), and against
# fp16 activations (ZINC_ACT_F16=1: half the x bytes and x registers of
# every GEMM; timing only, its values overflow on a random model).
set -uo pipefail
DEVICE_OUT=perm-gemm.txt
. scripts/device-lib.sh
gen q8b & gen q9 & gen s2 &
(cd /tmp && LD_LIBRARY_PATH=$B/lib timeout 240 $B/test_kernels_matmul --verbose > "$OUT/t_matmul.txt" 2>&1)
(cd /tmp && LD_LIBRARY_PATH=$B/lib timeout 150 $B/test_kernels_e2e > "$OUT/t_e2e.txt" 2>&1)
(cd /tmp && ZINC_CMP_XBUF=1 LD_LIBRARY_PATH=$B/lib timeout 150 $B/test_kernels_matmul --verbose --filter 'kernels_matmul/q6_K_planes' > "$OUT/t_xbuf1.txt" 2>&1)
for f in matmul e2e xbuf1; do
  echo "== test_kernels_$f: $(grep -E 'Synthesis|CRASH|FAIL' "$OUT/t_$f.txt" | head -8 | tr '\n' ' ')" | tee -a "$O"
done
grep 'max error' "$OUT/t_matmul.txt" | grep 'h200/prefill' | tr -s ' ' | head -20 | tee -a "$O"
wait
mk() { local m=$1 out=$2; shift 2; env "$@" timeout 150 "$B/zincc" /tmp/$m.gguf -o /tmp/$out.zplan --ctx 2048 2>&1 | tail -1 | tee -a "$O"; }
mk q8b q8b X=0 & mk q9 q9 X=0 & mk s2 s2 X=0 & mk s2 s2_staged ZINC_CM_PERM=0 & mk s2 s2_nsg8 ZINC_CMP_LAYOUT=128,8 &
mk s2 s2_xbuf1 ZINC_CMP_XBUF=1 & mk s2 s2_f16 ZINC_ACT_F16=1 & mk q8b q8b_xbuf1 ZINC_CMP_XBUF=1 &
wait
"$B/zinc" bench /tmp/q8b.zplan -p 512 -n 0 -r 5 >/dev/null 2>&1 # the clocks up
for r in 1 2; do
  echo "== [r$r zinc q8b_xbuf1] $(timeout 60 "$B/zinc" bench /tmp/q8b_xbuf1.zplan -p 512 -n 0 -r 5 2>&1 | grep -E ' pp' | tr -s ' ')" | tee -a "$O"
  for m in q8b q9; do
    echo "== [r$r zinc $m] $(timeout 60 "$B/zinc" bench /tmp/$m.zplan -p 512 -n 0 -r 5 2>&1 | grep -E ' pp' | tr -s ' ')" | tee -a "$O"
    echo "== [r$r llama $m] $(timeout 90 /tmp/nb/bundle/run-bench.sh -m /tmp/$m.gguf -ngl 99 -p 512 -n 0 -r 5 -fa 1 2>&1 | grep -E 'pp[0-9]' | tr -s ' ')" | tee -a "$O"
  done
done
for p in s2 s2_staged s2_nsg8 s2_xbuf1 s2_f16; do
  timeout 60 "$B/zinc" bench /tmp/$p.zplan -p 512 -n 0 -r 3 --profile > "$OUT/prof_$p.txt" 2>&1
  echo "== [2L $p] $(grep -A10 'prefill step' "$OUT/prof_$p.txt" | tr -s ' ' | tr '\n' '|')" | tee -a "$O"
done
