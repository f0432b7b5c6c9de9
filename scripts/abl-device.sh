#!/usr/bin/env bash
# One device call (~180 s; carry .gl, .anchor and .dev): what the 8-row batch
# step's int8 GEMVs cost (run 82), timing only: ZINC_GEMVN_ABLATE=1 one
# token's x for all the step's tokens, =2 the weights' loads only (values
# wrong; =2 was seen to slow every kernel, attention too). Extra knobs for
# every plan as arguments (ZINC_GEMVN_XT=1 after that lands or to compare).
set -uo pipefail
DEVICE_OUT=abl.txt
. scripts/device-lib.sh
gen q8b
mkp 8 p8 X=0 "$@" & mkp 8 p8a1 ZINC_GEMVN_ABLATE=1 "$@" & mkp 8 p8a2 ZINC_GEMVN_ABLATE=2 "$@" &
wait
bp p8 8; bp p8a1 8; bp p8a2 8
