# Session 31: what the 8-row step's int8 GEMVs cost under the layout rule (ZINC_GEMVN_ABLATE=1: one token's x for all; =2: the weights' loads only; timing only)
DEVICE_OUT=abl.txt; . scripts/device-lib.sh >/dev/null; gen q8b
mkp() { local n=$1 out=$2; shift 2; env "$@" timeout 150 "$B/zincc" /tmp/q8b.gguf -o /tmp/$out.zplan --ctx 2048 --parallel $n 2>&1 | tail -1 >/dev/null; }
mkp 8 p8 X=0 & mkp 8 p8a1 ZINC_GEMVN_ABLATE=1 & mkp 8 p8a2 ZINC_GEMVN_ABLATE=2 & wait
bp() { timeout 90 "$B/zinc" bench /tmp/$1.zplan --parallel $2 -p 0 -n 64 -r 3 --profile > "$OUT/prof_$1.txt" 2>&1; echo "== [$1] $(grep -E 'tg64|step of 8' "$OUT/prof_$1.txt" | tr -s ' ' | tr '\n' '|')" | tee -a "$O"; }
bp p8 8; bp p8a1 8; bp p8a2 8
