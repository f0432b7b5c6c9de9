#!/usr/bin/env bash
# One device call (carry .gl, .anchor and .dev as bench-device.sh's header says; ~150 s): the tree as it lands after session 23: the batch tests (KHR), the 8B's decode beside
# llama.cpp (q split by default), its --parallel 16 plan (matrix units by default) at 1, 16 streams
set -uo pipefail
DEVICE_OUT=batch-cm.txt
. scripts/device-lib.sh
gen q8b &
echo "== gemvn_cm khr: $(cd /tmp && ZINC_COOPMAT=khr LD_LIBRARY_PATH=$B/lib timeout 100 $B/test_kernels_matmul --filter 'kernels_matmul/gemvn_cm*' 2>&1 | grep -A3 -E 'Assertion|Synthesis|CRASH' | head -20 | tr '\n' ' ')" | tee -a "$O"
wait
timeout 120 "$B/zincc" /tmp/q8b.gguf -o /tmp/b.zplan --ctx 2048 --parallel 16 2>&1 | tail -1 | tee -a "$O"
"$B/zinc" bench /tmp/b.zplan -p 0 -n 64 -r 10 >/dev/null 2>&1 # the clocks up
for r in 1 2; do
  echo "== [r$r zinc] $("$B/zinc" bench /tmp/b.zplan -p 0 -n 128 -r 3 2>&1 | grep -E 'tg' | tr '\n' ' ')" | tee -a "$O"
  echo "== [r$r llama] $(/tmp/nb/bundle/run-bench.sh -m /tmp/q8b.gguf -ngl 99 -p 0 -n 128 -r 3 -fa 1 2>&1 | grep -E 'tg' | tr '\n' ' ')" | tee -a "$O"
done
"$B/zinc" bench /tmp/b.zplan --parallel 1,16 -p 0 -n 64 -r 3 2>&1 | tee -a "$O" | grep tg
