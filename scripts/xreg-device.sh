#!/usr/bin/env bash
# One device call (~220 s; pack .dev with test_kernels_matmul as
# bench-device.sh's header says; carry .gl, .anchor and .dev).
# Issue 12: the fragment probe with B's order as run 75 found it, the
# kernel tests of the tensor-core batch GEMV with x's B fragments built by
# each lane (ZINC_GEMVN_CM_PERM=2 ZINC_GEMVN_CM_XREG=1), and the 8B at 8
# and 16 streams with it (4 and 8 subgroups) against the defaults.
# Issue 10: the layout rule as the default (Q4_K only) against
# ZINC_CMP_RULE=0, the 8B's pp512 beside llama.cpp, and its kernel tests.
set -uo pipefail
DEVICE_OUT=xreg.txt
. scripts/device-lib.sh
gen q8b &
t() { # kernel tests with knobs: t "<vars>" <filter> <name>
  (cd /tmp && env $1 LD_LIBRARY_PATH=$B/lib timeout 200 $B/test_kernels_matmul --filter "$2" --verbose > "$OUT/t_$3.txt" 2>&1)
  echo "== test $1 $2: $(grep -E 'Synthesis|CRASH|FAIL|B.s frag|differs|RMS' "$OUT/t_$3.txt" | head -14 | tr '\n' ' ')" | tee -a "$O"
}
t "X=0" 'kernels_matmul/fragment_layout' frag
t "ZINC_GEMVN_CM_PERM=2 ZINC_GEMVN_CM_XREG=1" 'kernels_matmul/gemvn_cm*' xreg
wait
mk() { local out=$1; shift; env "$@" timeout 150 "$B/zincc" /tmp/q8b.gguf -o /tmp/$out.zplan --ctx 2048 2>&1 | tail -1 | tee -a "$O"; }
mkp() { local n=$1 out=$2; shift 2; env "$@" timeout 150 "$B/zincc" /tmp/q8b.gguf -o /tmp/$out.zplan --ctx 2048 --parallel $n 2>&1 | tail -1 | tee -a "$O"; }
XR="ZINC_BATCH_CM=1 ZINC_GEMVN_CM_PERM=2 ZINC_GEMVN_CM_XREG=1"
mk q8b X=0 & mk q8b_0 ZINC_CMP_RULE=0 &
mkp 8 p8 X=0 & mkp 8 p8x $XR & mkp 8 p8x8 $XR ZINC_GEMVN_CM_NSG=8 & mkp 16 p16 X=0 & mkp 16 p16x $XR &
wait
bp() { # batch decode: bp plan streams
  timeout 90 "$B/zinc" bench /tmp/$1.zplan --parallel $2 -p 0 -n 64 -r 3 --profile > "$OUT/prof_$1.txt" 2>&1
  echo "== [$1] $(grep -E 'tg64|step' "$OUT/prof_$1.txt" | head -4 | tr -s ' ' | tr '\n' '|')" | tee -a "$O"
}
"$B/zinc" bench /tmp/q8b.zplan -p 512 -n 0 -r 3 >/dev/null 2>&1 # the clocks up
for p in p8 p8x p8x8 p16 p16x; do case $p in p16*) bp $p 8,16 ;; *) bp $p 1,8 ;; esac; done
pp r1 q8b; pp r1 q8b_0
pp_llama r0 q8b # llama.cpp's cold round, not quoted
pp_llama r1 q8b; pp r2 q8b
