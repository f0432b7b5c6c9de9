#!/usr/bin/env bash
# A/B on the GPU machine (one device call; ../shared/tools/README.md): one
# model's GGUF compiled under each setting of compile-time knobs, every plan
# profiled, then pp and tg of each plan and llama.cpp's, alternated for two
# rounds, all in one call so that the rows compare. Not part of CI.
#
#   bash scripts/ab-device.sh [-p 512] [-n 128] [-t TEST]... MODEL SETTING...
#
# MODEL is one of scripts/device-lib.sh's shapes (q8b, q06, s2, q9, a3b12, q35a8).
# A SETTING is "-" (the defaults) or space-separated words: NAME=VALUE knobs
# set for zincc and for each -t test binary (run once a setting, KHR and NV),
# and zincc flags (words starting with -, e.g. --tune), e.g.
#   bash scripts/ab-device.sh -t test_kernels_moe a3b12 - ZINC_MOE_CM=1 "ZINC_MOE_CM=1 --tune"
# Carry .gl, .anchor and .dev (bench-device.sh's header says how to pack
# them). Everything goes to $OUT/ab-MODEL.txt; stdout gets the step and
# pp/tg lines.
set -uo pipefail
p=512 n=128 tests=()
while [ $# -gt 0 ]; do
  case $1 in
  -p) p=$2; shift 2 ;;
  -n) n=$2; shift 2 ;;
  -t) tests+=("$2"); shift 2 ;;
  *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "usage: ab-device.sh [-p N] [-n N] [-t TEST]... MODEL SETTING..." >&2; exit 2; }
m=$1
shift
settings=("$@")
DEVICE_OUT=ab-$m.txt
. scripts/device-lib.sh
knobs() { for w in $1; do case $w in -*) ;; *) echo "$w" ;; esac; done; }
flags() { for w in $1; do case $w in -?*) echo "$w" ;; esac; done; }
[ -s "/tmp/$m.gguf" ] || gen "$m" & # a caller may have made it already
for t in "${tests[@]}"; do
  for s in "${settings[@]}"; do
    for cm in khr nv; do
      echo "== $t [$s] $cm: $(cd /tmp && env $(knobs "$s") ZINC_COOPMAT=$cm LD_LIBRARY_PATH="$B/lib" \
        timeout 150 "$B/$t" 2>&1 | grep -E 'Synthesis|FAIL|CRASH|rror|of the RMS' | head -12 | tr '\n' ' ')" | tee -a "$O"
    done
  done
done
wait
for i in "${!settings[@]}"; do
  rm -f "/tmp/$m-$i.zplan" # a setting that does not compile must not bench an older plan
  env $(knobs "${settings[$i]}") timeout 400 "$B/zincc" "/tmp/$m.gguf" -o "/tmp/$m-$i.zplan" --ctx 8192 \
    $(flags "${settings[$i]}") 2>&1 |
    tail -1 | sed "s/^/[${settings[$i]}] /" | tee -a "$O"
done
"$B/zinc" bench "/tmp/$m-0.zplan" -p "$p" -n "$n" -r 10 >/dev/null 2>&1 # the clocks up
for i in "${!settings[@]}"; do
  "$B/zinc" bench "/tmp/$m-$i.zplan" -p "$p" -n "$n" -r 3 --profile >"/tmp/profile-$i.txt" 2>&1
  { echo "=== profile [${settings[$i]}]"; cat "/tmp/profile-$i.txt"; } >>"$O"
  grep -E '^(prefill|decode) step|^  the cost model' "/tmp/profile-$i.txt" | sed "s/^/[${settings[$i]}] /"
done
for round in 1 2; do
  for i in "${!settings[@]}"; do
    "$B/zinc" bench "/tmp/$m-$i.zplan" -p "$p" -n "$n" -r 3 2>&1 | grep -E '(pp|tg)[0-9]' |
      sed "s/^/[round $round, ${settings[$i]}] /" | tee -a "$O"
  done
  /tmp/nb/bundle/run-bench.sh -m "/tmp/$m.gguf" -ngl 99 -p "$p" -n "$n" -r 3 -fa 1 2>&1 | grep -E '(pp|tg)[0-9]' |
    sed "s/^/[round $round, llama.cpp fa 1] /" | tee -a "$O"
done
