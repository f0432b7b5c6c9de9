#!/usr/bin/env bash
# One device call (~150 s; pack .dev with test_kernels_matmul and test_batch
# as bench-device.sh's header says; carry .gl, .anchor and .dev). For the
# next session (issue 12): the int8 batch GEMV's x scratch slot-major
# (ZINC_GEMVN_XT=1: a subgroup's x load one 512-byte run, not 32 pieces
# 64 bytes apart) against the default, 8 and 4 streams; its tests on the
# driver first.
set -uo pipefail
DEVICE_OUT=xt.txt
. scripts/device-lib.sh
gen q8b &
ktest "ZINC_GEMVN_XT=1" 'kernels_matmul/gemvn_*int8*' xt
(cd /tmp && ZINC_GEMVN_XT=1 LD_LIBRARY_PATH=$B/lib timeout 120 $B/test_batch > "$OUT/t_batch.txt" 2>&1)
echo "== test_batch XT: $(grep -E "Synthesis|FAIL|Assert" "$OUT/t_batch.txt" | head -6 | tr '\n' ' ')" | tee -a "$O"
wait
mkp 8 p8 X=0 & mkp 8 p8xt ZINC_GEMVN_XT=1 & mkp 4 p4 X=0 & mkp 4 p4xt ZINC_GEMVN_XT=1 &
timeout 150 "$B/zincc" /tmp/q8b.gguf -o /tmp/q8b.zplan --ctx 2048 2>&1 | tail -1 | tee -a "$O" &
wait
"$B/zinc" bench /tmp/q8b.zplan -p 512 -n 0 -r 3 >/dev/null 2>&1 # the clocks up
bp p8xt 8; bp p8 8; bp p8xt 8; bp p8 8; bp p4xt 4; bp p4 4
echo "== [q8b one stream] $("$B/zinc" bench /tmp/q8b.zplan -p 0 -n 128 -r 3 2>&1 | grep tg128 | tr -s ' ')" | tee -a "$O"
