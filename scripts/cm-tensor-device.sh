#!/usr/bin/env bash
# One device call (carry .gl, .anchor and .dev as bench-device.sh's header says; ~150 s):
# ZINC_CM_TENSOR=1, step 1 of docs/coopmat2-tensor-loads.md: workgroup-scope fp16 loads from VRAM as tensor loads
set -uo pipefail
DEVICE_OUT=cm-tensor.txt
. scripts/device-lib.sh
"$B/zinc" devices 2>&1 | grep -iE "workgroup scope|tensor" | head -3 | tee -a "$O"
"$B/zinc" mkmodel $(shape s2) --vocab 32000 --quant f16 -o /tmp/s2f.gguf >/dev/null
S=("ZINC_ACT_F16=1" "ZINC_ACT_F16=1 ZINC_CM_WG=1 ZINC_CM_DIRECT=1")
for i in 0 1; do env ${S[$i]} timeout 60 "$B/zincc" /tmp/s2f.gguf -o /tmp/p$i.zplan --ctx 2048 2>&1 | tail -1 | tee -a "$O"; done
"$B/zinc" bench /tmp/p0.zplan -p 512 -n 0 -r 20 >/dev/null 2>&1
T=1,2,3,4,5,6,7,8,9,10,11
for v in "0 X=0" "1 X=0" "1 ZINC_CM_TENSOR=1"; do
  set -- $v
  echo "=== [plan $1, $2]" >> "$O"
  env $2 timeout 60 "$B/zinc" bench /tmp/p$1.zplan -p 512 -n 0 -r 5 --profile > /tmp/prof.txt 2>&1
  cat /tmp/prof.txt >> "$O"
  echo "[plan $1 $2] $(grep -E '^prefill step|rror' /tmp/prof.txt | head -2 | tr '\n' ' ') $(grep -E 'gemm' /tmp/prof.txt | awk '{print $3, $NF}' | head -3 | tr '\n' ';')" | tee -a "$O"
  env $2 timeout 60 "$B/zinc" run /tmp/p$1.zplan --tokens $T --logits-out /tmp/g-$1-${2%%=*}.f32 --mode prefill >/dev/null 2>&1
done
echo "== tensor against plain loads, prefill logits: $("$B/zinc" compare /tmp/g-1-ZINC_CM_TENSOR.f32 /tmp/g-1-X.f32 --vocab 32000 --tol 1e-3 2>&1 | tail -1)" | tee -a "$O"
