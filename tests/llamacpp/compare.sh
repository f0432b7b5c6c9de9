#!/usr/bin/env bash
# Compares zincc's CPU reference (`zinc ref`) with llama.cpp on generated models.
#   usage: tests/llamacpp/compare.sh BUILD_DIR
# For each architecture and file type: write a model with `zinc mkmodel`, check
# that llama.cpp loads it, tokenizes text with its vocabulary and recognises its
# chat template, then compare the logits of a teacher-forced token list, prefill
# and decode: zinc against llama.cpp, zinc against llama.cpp run in f32 on the
# model's ggml-dequantized twin (`harness dequant`), and llama.cpp against itself;
# then the quantized types bit for bit against ggml's own (de)quantizers
# (quantcheck); last, `zinc tokenize` against llama.cpp's tokenizer on a few texts.
# Tolerances are justified in docs/test-models.md. One line per check, then
# "N passed, M failed"; exits non-zero on any failure (or if nothing ran).
set -uo pipefail

[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
zinc=$build/zinc
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$zinc" ] || { echo "compare.sh: no zinc in $build (build the 'zinc' target first)" >&2; exit 2; }

bin=$("$here/build.sh" "$here/cache/bin" | tail -n 1) || { echo "compare.sh: cannot fetch or build llama.cpp" >&2; exit 1; }
harness=$bin/harness cmpf32=$bin/cmpf32
work=$(mktemp -d "${TMPDIR:-/tmp}/zinc-llamacpp.XXXXXX")
trap 'rm -rf "$work"' EXIT

passed=0 failed=0
result() { # result OK|other LABEL DETAIL
    if [ "$1" = OK ]; then passed=$((passed + 1)); echo "PASS $2${3:+: $3}"
    else failed=$((failed + 1)); echo "FAIL $2${3:+: $3}"; fi
}

# Relative-RMS tolerances, zinc vs llama.cpp, by file type (see docs/test-models.md).
declare -A TOL=([f32]=1e-5 [f16]=5e-3 [q8_0]=8e-2 [q4_k_m]=1e-1
    [q4_0]=8e-2 [q4_1]=8e-2 [q5_0]=8e-2 [q5_1]=8e-2 [iq4_nl]=8e-2 [iq4_xs]=1e-1)
# A top-1 disagreement passes only when llama.cpp's own margin is below this.
declare -A TIE=([f32]=1e-4 [f16]=2e-2 [q8_0]=3e-1 [q4_k_m]=3e-1
    [q4_0]=3e-1 [q4_1]=3e-1 [q5_0]=3e-1 [q5_1]=3e-1 [iq4_nl]=3e-1 [iq4_xs]=4e-1)
# llama.cpp prefill vs its own decode.
declare -A SELF=([f32]=1e-5 [f16]=5e-3 [q8_0]=8e-2 [q4_k_m]=8e-2
    [q4_0]=8e-2 [q4_1]=8e-2 [q5_0]=8e-2 [q5_1]=8e-2 [iq4_nl]=8e-2 [iq4_xs]=8e-2)
QTYPES=(q4_0 q4_1 q5_0 q5_1 iq4_nl iq4_xs)
# zinc on a quantized model vs llama.cpp on its F32 twin: both fp32 arithmetic.
# Most files land near 1e-6; qwen35moe's delta-rule recurrence carries the
# summation-order differences over its 53 tokens: 1.0e-5 on one machine,
# 1.34e-5 on a 2-core AMD EPYC without AVX-512 (zinc's logits bit for bit
# those of the earlier landing; llama.cpp's CPU kernels differ by ISA). A
# wrong op or a routing flip is 1e-3 or more.
TWIN_TOL=3e-5 TWIN_TIE=1e-4

TEXT="The quick brown fox jumps over the lazy dog. int main(void) { return 0; } The numbers were 12, 345 and 6789."
SHAPE=(--layers 4 --hidden 256 --ff 768 --heads 4 --kv-heads 2 --head-dim 64 --vocab 1024 --seed 7)

if ! "$zinc" ref --help >/dev/null 2>&1; then
    result FAIL "zinc ref" "'$zinc ref' is not available"
fi

check_model() { # check_model NAME QUANT [direct|twin-only] -- MKMODEL-ARGS...
    local name=$1 q=$2 direct=direct
    [ "$3" != -- ] && { direct=$3; shift; }
    shift 3
    local m=$work/$name.gguf
    if ! "$zinc" mkmodel "$@" --quant "$q" -o "$m" 2>"$work/mk.log"; then
        result FAIL "$name mkmodel" "$(tail -n 1 "$work/mk.log")"; return
    fi
    local ids
    if ! ids=$("$harness" "$m" tokenize --text "$TEXT" --add-special 2>"$work/h.log"); then
        result FAIL "$name llama.cpp load+tokenize" "$(tail -n 1 "$work/h.log")"; return
    fi
    local n=$(( $(tr -cd ',' <<<"$ids" | wc -c) + 1 ))
    [ "$n" -lt "${#TEXT}" ] && r=OK || r=FAIL
    result $r "$name llama.cpp tokenize" "${#TEXT} bytes -> $n tokens"
    if "$harness" "$m" chat >"$work/chat.txt" 2>"$work/h.log" && grep -q 'assistant' "$work/chat.txt"; then
        result OK "$name llama.cpp chat template"
    else
        result FAIL "$name llama.cpp chat template" "$(tail -n 1 "$work/h.log")"
    fi
    local mode twin=""
    if [ "$q" != f32 ]; then
        twin=$work/$name-f32twin.gguf
        "$harness" "$m" dequant "$twin" 2>"$work/h.log" || { result FAIL "$name ggml dequant" "$(tail -n 1 "$work/h.log")"; twin=""; }
    fi
    for mode in prefill decode; do
        if ! "$harness" "$m" eval --tokens "$ids" --logits-out "$work/l-$mode.f32" --mode "$mode" 2>"$work/h.log"; then
            result FAIL "$name llama.cpp eval $mode" "$(tail -n 1 "$work/h.log")"; continue
        fi
        if ! "$zinc" ref "$m" --tokens "$ids" --logits-out "$work/z-$mode.f32" --mode "$mode" >/dev/null 2>"$work/z.log"; then
            result FAIL "$name zinc ref $mode" "$(tail -n 1 "$work/z.log")"; continue
        fi
        if [ "$direct" = direct ]; then
            "$cmpf32" "$work/z-$mode.f32" "$work/l-$mode.f32" --vocab 1024 --rms-tol "${TOL[$q]}" --tie "${TIE[$q]}" \
                --label "$name $mode zinc-vs-llama.cpp" && passed=$((passed + 1)) || failed=$((failed + 1))
        fi
        # decode as an H200 plan computes it: x rounded to int8 for the GEMVs
        # (--gemv-x's default there), within llama.cpp's own rounding of x
        if [ "$direct" = direct ] && [ "$mode" = decode ] && [ "$q" = q4_k_m ]; then
            if "$zinc" ref "$m" --tokens "$ids" --logits-out "$work/z8.f32" --mode decode --target h200 \
                >/dev/null 2>"$work/z.log"; then
                "$cmpf32" "$work/z8.f32" "$work/l-decode.f32" --vocab 1024 --rms-tol "${TOL[$q]}" --tie "${TIE[$q]}" \
                    --label "$name decode int8-x-as-h200-vs-llama.cpp" && passed=$((passed + 1)) || failed=$((failed + 1))
            else
                result FAIL "$name zinc ref --target h200 decode" "$(tail -n 1 "$work/z.log")"
            fi
        fi
        [ -n "$twin" ] || continue
        if ! "$harness" "$twin" eval --tokens "$ids" --logits-out "$work/t-$mode.f32" --mode "$mode" 2>"$work/h.log"; then
            result FAIL "$name llama.cpp eval f32 twin $mode" "$(tail -n 1 "$work/h.log")"; continue
        fi
        "$cmpf32" "$work/z-$mode.f32" "$work/t-$mode.f32" --vocab 1024 --rms-tol "$TWIN_TOL" --tie "$TWIN_TIE" \
            --label "$name $mode zinc-vs-llama.cpp-f32-twin" && passed=$((passed + 1)) || failed=$((failed + 1))
    done
    if [ -f "$work/l-prefill.f32" ] && [ -f "$work/l-decode.f32" ]; then
        "$cmpf32" "$work/l-decode.f32" "$work/l-prefill.f32" --vocab 1024 --rms-tol "${SELF[$q]}" --tie "${TIE[$q]}" \
            --label "$name llama.cpp decode-vs-prefill" && passed=$((passed + 1)) || failed=$((failed + 1))
    fi
    rm -f "$work"/*.f32 "$work"/*.gguf
}

for arch in qwen3 llama qwen2; do
    for q in f32 f16 q8_0 q4_k_m; do
        check_model "$arch-$q" "$q" -- --arch "$arch" "${SHAPE[@]}"
    done
done
# Tied embeddings (token_embd becomes Q6_K under q4_k_m) and rows that K-quants
# cannot hold (320: Q4_K falls back to Q5_0, Q6_K to Q8_0), with a GQA ratio of 5.
check_model qwen3-q4_k_m-tied q4_k_m -- --arch qwen3 "${SHAPE[@]}" --tied
check_model llama-q4_k_m-odd q4_k_m -- --arch llama --layers 3 --hidden 320 --ff 640 --heads 5 --kv-heads 1 \
    --head-dim 64 --vocab 1024 --seed 9

# qwen3moe: router, top-k with renormalized weights, stacked experts. 8 experts
# also take Q4_K_M's n_expert == 8 rules (attn_k/attn_v Q8_0, attn_output Q5_K).
# On quantized files llama.cpp rounds activations to q8 for its dot products,
# which moves near-tie routing decisions to other experts (rel. RMS up to 0.7
# measured on q8_0, 0.25 on q4_k_m: docs/test-models.md): those are checked against the F32
# twin, where the arithmetic is the same and the routing must agree exactly.
MOE=(--arch qwen3moe "${SHAPE[@]}" --experts 8 --experts-used 2 --expert-ff 256)
check_model qwen3moe-f32 f32 -- "${MOE[@]}"
check_model qwen3moe-f16 f16 -- "${MOE[@]}"
check_model qwen3moe-q4_k_m q4_k_m twin-only -- "${MOE[@]}"
check_model qwen3moe-q4_k_m-e16 q4_k_m twin-only -- --arch qwen3moe --layers 3 --hidden 256 --ff 768 --heads 4 \
    --kv-heads 2 --head-dim 64 --vocab 1024 --seed 3 --experts 16 --experts-used 4 --expert-ff 128

# qwen35 / qwen35moe: gated delta-net layers (conv and delta-rule states carried
# across decode steps) between gated full-attention layers with imrope; 1,1,1,1
# sections leave every 4th rotary pair unrotated, 3 value heads over 1 key head
# check the head grouping. The MoE one adds the sigmoid-gated shared expert.
Q35=(--arch qwen35 --layers 4 --full-attn-interval 2 --hidden 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64
    --vocab 1024 --seed 5)
check_model qwen35-f32 f32 -- "${Q35[@]}"
check_model qwen35-f16 f16 -- "${Q35[@]}"
check_model qwen35-q4_k_m q4_k_m twin-only -- "${Q35[@]}"
check_model qwen35-f32-sections f32 -- --arch qwen35 --layers 3 --full-attn-interval 3 --hidden 128 --ff 256 \
    --heads 4 --kv-heads 2 --head-dim 32 --rope-dim 16 --rope-sections 1,1,1,1 --ssm-groups 1 --ssm-heads 3 \
    --ssm-state 16 --ssm-conv 3 --vocab 1024 --seed 6
Q35MOE=(--arch qwen35moe --layers 4 --full-attn-interval 2 --hidden 256 --ff 512 --heads 4 --kv-heads 2
    --head-dim 64 --vocab 1024 --seed 8 --experts 8 --experts-used 2 --expert-ff 128 --shared-ff 192)
check_model qwen35moe-f32 f32 -- "${Q35MOE[@]}"
check_model qwen35moe-q4_k_m q4_k_m twin-only -- "${Q35MOE[@]}"

# Every file type zinc mkmodel writes with one quantized type (--pure), through
# zinc ref against llama.cpp and against the ggml-dequantized F32 twin; rows of
# 320 and 640 make iq4_xs fall back to iq4_nl, as llama-quantize does.
for q in "${QTYPES[@]}"; do
    check_model "qwen3-$q" "$q" -- --arch qwen3 "${SHAPE[@]}"
done
check_model llama-iq4_xs-odd iq4_xs -- --arch llama --layers 3 --hidden 320 --ff 640 --heads 5 --kv-heads 1 \
    --head-dim 64 --vocab 1024 --seed 9

# The quantized types against ggml's own code: zinc's dequantization
# (ztype_dequant_row, what zinc ref runs) bit for bit against ggml's to_float,
# on blocks of random bytes of every type zinc reads and on blocks zinc's
# quantizers write; those quantizers byte for byte against ggml_quantize_chunk
# on data that is hard on them (tests/llamacpp/quantcheck.c).
# Adds up the PASS and FAIL lines a checker printed (and shows them); a
# checker that failed without a FAIL line, or printed nothing, fails LABEL.
tally() { # tally LABEL STATUS OUTPUT LOG
    local p f
    [ -n "$3" ] && echo "$3"
    p=$(grep -c '^PASS' <<<"$3") f=$(grep -c '^FAIL' <<<"$3")
    passed=$((passed + p)) failed=$((failed + f))
    if [ "$f" -eq 0 ] && { [ "$2" -ne 0 ] || [ "$p" -eq 0 ]; }; then
        result FAIL "$1" "exit $2: $(tail -n 1 "$4")"
    fi
}
check_dequant() { # check_dequant LABEL MODEL
    if ! "$harness" "$2" dequant "$work/twin.gguf" 2>"$work/h.log"; then
        result FAIL "$1 ggml dequant" "$(tail -n 1 "$work/h.log")"; return
    fi
    local out rc=0
    out=$("$quantcheck" dequant "$2" "$work/twin.gguf" 2>"$work/q.log") || rc=$?
    tally "$1 quantcheck dequant" $rc "$out" "$work/q.log"
}
quantcheck=$build/quantcheck
if [ -x "$quantcheck" ]; then
    if "$quantcheck" random "$work/random.gguf" 2>"$work/q.log"; then
        check_dequant "random blocks" "$work/random.gguf"
    else
        result FAIL "quantcheck random" "$(tail -n 1 "$work/q.log")"
    fi
    if ! "$quantcheck" sources "$work/src.gguf" 2>"$work/q.log"; then
        result FAIL "quantcheck sources" "$(tail -n 1 "$work/q.log")"; QTYPES=()
    fi
    for q in "${QTYPES[@]}"; do
        if ! "$quantcheck" quantize "$work/src.gguf" "$q" "$work/$q.gguf" 2>"$work/q.log"; then
            result FAIL "$q quantcheck quantize" "$(tail -n 1 "$work/q.log")"; continue
        fi
        rc=0
        out=$("$harness" "$work/src.gguf" requant "$work/$q.gguf" 2>"$work/h.log") || rc=$?
        tally "$q ggml requant" $rc "$out" "$work/h.log"
        check_dequant "$q written by zinc" "$work/$q.gguf"
    done
    rm -f "$work"/*.gguf
else
    result FAIL "quantcheck" "no $quantcheck (build the 'quantcheck' target)"
fi

# zinc's tokenizer against llama.cpp's on the same vocabulary: plain text, code,
# runs of spaces and newlines, digits, multi-byte UTF-8, and special-token text
# (parsed as specials only with --special / --parse-special).
TEXTS=("$TEXT"
    $'int main(void) {\n\tif (x < 2) return 1;\n\n    return x * 345678;\n}\n'
    $'Hello  world\n\n\n   many   spaces \t and\ttabs   '
    $'na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe6\x9d\xb1\xe4\xba\xac, it\'s 2024; we\'ll see'
    $'<|im_start|>user\nHi!<|im_end|>\n<|start_header_id|>assistant<|end_header_id|>\n\nOk<|eot_id|>')
check_tokenizer() { # check_tokenizer ARCH
    local m=$work/tok-$1.gguf special hflag zflag t bad=""
    "$zinc" mkmodel --arch "$1" --layers 1 --vocab 1024 --quant f32 -o "$m" 2>/dev/null ||
        { result FAIL "$1 tokenizer" "mkmodel failed"; return; }
    for special in no yes; do
        [ $special = yes ] && hflag=--parse-special zflag=--special || hflag="" zflag=""
        bad=""
        for t in "${TEXTS[@]}"; do
            local want got
            want=$("$harness" "$m" tokenize --text "$t" --add-special $hflag 2>&1) || { bad="llama.cpp: $want"; break; }
            got=$("$zinc" tokenize "$m" $zflag "$t" 2>&1) || { bad="zinc: $got"; break; }
            [ "$want" = "$got" ] || { bad="text '${t:0:30}...': zinc $got, llama.cpp $want"; break; }
        done
        [ -z "$bad" ] && result OK "$1 tokenizer zinc-vs-llama.cpp (specials parsed: $special)" "${#TEXTS[@]} texts agree" ||
            result FAIL "$1 tokenizer zinc-vs-llama.cpp (specials parsed: $special)" "$bad"
    done
}
for arch in qwen3 llama qwen2; do check_tokenizer "$arch"; done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
