#!/usr/bin/env bash
# One device call (~150 s; pack .dev with test_kernels_matmul and test_batch
# as bench-device.sh's header says; carry .gl, .anchor and .dev). Session 31:
#   the batch GEMV's layout from the cost model (zcost_batch_gemv_layout:
#   one row a subgroup for gate+up, o and a v of its own) against the old
#   two rows everywhere (ZINC_GEMVN_LAYOUT=2,4), 8 streams;
#   one x pass for v beside q and k (the lowering) against one each
#   (ZINC_PRE_SHARE=0), 16 streams; the batch tests on the driver.
set -uo pipefail
DEVICE_OUT=s31.txt
. scripts/device-lib.sh
gen q8b &
(cd /tmp && LD_LIBRARY_PATH=$B/lib timeout 120 $B/test_batch > "$OUT/t_batch.txt" 2>&1)
echo "== test_batch: $(grep -E "Synthesis|FAIL|Assert" "$OUT/t_batch.txt" | head -6 | tr '\n' ' ')" | tee -a "$O"
wait
mkp 8 p8 X=0 & mkp 8 p8old ZINC_GEMVN_LAYOUT=2,4 & mkp 16 p16 X=0 & mkp 16 p16ns ZINC_PRE_SHARE=0 &
timeout 150 "$B/zincc" /tmp/q8b.gguf -o /tmp/q8b.zplan --ctx 2048 2>&1 | tail -1 | tee -a "$O" &
wait
"$B/zinc" bench /tmp/q8b.zplan -p 512 -n 0 -r 3 >/dev/null 2>&1 # the clocks up
bp p8 8; bp p8old 8; bp p16 16; bp p16ns 16; bp p8 8; bp p8old 8; bp p16 16; bp p16ns 16
echo "== [q8b one stream] $("$B/zinc" bench /tmp/q8b.zplan -p 0 -n 128 -r 3 2>&1 | grep tg128 | tr -s ' ')" | tee -a "$O"
