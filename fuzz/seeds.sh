#!/usr/bin/env bash
# Generates the seed corpora of the fuzz harnesses (nothing is committed):
#   seeds.sh BUILD_DIR OUT_DIR
# BUILD_DIR holds the zinc and zincc programs; OUT_DIR gets one folder per
# harness: gguf/ and frontend/ (tiny models from zinc mkmodel, every
# architecture and weight type; frontend/ also model recipes), plan/ (zincc
# -o plans of four: plain, with sequence slots, with recurrent states), tokenizer/ (texts and id lists behind the
# harness's control byte), and serve/ (request bodies of zinc serve's
# endpoints behind fuzz_serve's endpoint byte).
set -euo pipefail
build=${1:?usage: seeds.sh BUILD_DIR OUT_DIR}
out=${2:?usage: seeds.sh BUILD_DIR OUT_DIR}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"/{gguf,frontend,plan,tokenizer,serve}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Tiny models: one layer, hidden 32 (a K-quant falls back to q8_0 at this
# width, as llama-quantize does), so that each seed stays near 35-110 KB.
tiny="--layers 1 --hidden 32 --ff 64 --heads 2 --kv-heads 1 --head-dim 16 --vocab 270"
for arch in qwen3 llama qwen2; do
    for quant in q8_0 f16 q4_k_m; do
        "$build/zinc" mkmodel --arch "$arch" $tiny --quant "$quant" --seed 1 -o "$tmp/$arch-$quant.gguf" 2>/dev/null
    done
done
"$build/zinc" mkmodel --arch qwen3 $tiny --quant f32 --tied -o "$tmp/qwen3-tied.gguf" 2>/dev/null
cp "$tmp"/*.gguf "$out/gguf/"
cp "$tmp"/*.gguf "$out/frontend/"

# Recipes for fuzz_frontend (inputs under 64 bytes describe a model; see
# fuzz_frontend.c): 16 fixed 33-byte patterns.
for i in $(seq 0 15); do
    bytes=""
    for j in $(seq 0 32); do bytes+=$(printf '\\%03o' $(((i * 37 + j * 11 + i * j) % 256))); done
    printf "$bytes" >"$out/frontend/recipe-$i"
done

# Plans for a named profile, so that no Vulkan device is needed: two plain
# ones, one with sequence slots and a batch schedule (--parallel), one with
# recurrent state buffers (qwen35).
"$build/zinc" mkmodel --arch qwen35 --layers 2 --hidden 32 --ff 64 --heads 2 --kv-heads 1 --head-dim 16 \
    --vocab 270 --full-attn-interval 2 --quant q8_0 --seed 1 -o "$tmp/qwen35-q8_0.gguf" 2>/dev/null
plan() { # model name, extra zincc flags
    "$build/zincc" "$tmp/$1.gguf" -o "$out/plan/$2.zplan" --target llvmpipe --ctx 16 --chunk 4 ${3:-} \
        >/dev/null 2>"$tmp/log" || { cat "$tmp/log" >&2; exit 1; }
}
plan qwen3-q8_0 qwen3-q8_0
plan llama-f16 llama-f16
plan qwen3-q8_0 qwen3-q8_0-parallel2 "--parallel 2"
plan qwen35-q8_0 qwen35-q8_0

# Tokenizer seeds: control byte (see fuzz_tokenizer.c), then the payload.
n=0
seed_text() { # control-byte text
    printf "\\x$1" >"$out/tokenizer/t$n"
    printf '%s' "$2" >>"$out/tokenizer/t$n"
    n=$((n + 1))
}
texts=("Hello world" "  leading spaces and   runs   of spaces  " "numbers 1234567 3.14159 and 2024-11-30"
    "<|im_start|>user
Hi there!<|im_end|>
<|im_start|>assistant
" "<|begin_of_text|><|start_header_id|>user<|end_header_id|>" "ünïcödé 中文字符 emoji 😀🎉 ça va?"
    "tabs	and
newlines
" "<tool> <s> </s> <unk>" "don't we'll I'm you're THEY'RE" "a")
for t in "${texts[@]}"; do
    for c in 00 01 02 0c 0d 0e; do seed_text "$c" "$t"; done
done
# Paragraphs of the project's own documentation.
for f in "$src"/docs/tokenizer.md "$src"/README.md; do
    [ -f "$f" ] && head -c 2000 "$f" >"$tmp/doc" && for c in 00 01 02; do seed_text "$c" "$(cat "$tmp/doc")"; done
done
# Invalid UTF-8, NULs and stray continuation bytes.
for c in 00 01 02; do
    printf "\\x$c\\xff\\xfe a \\xc3 b \\x80\\x80 \\xe4\\xb8 \\x00 end \\xf4\\x90\\x80\\x80" >"$out/tokenizer/t$n"
    n=$((n + 1))
done
# Id lists (two bytes per id) for detokenize (0x20) and the stream (0x30).
for c in 20 21 22 30 31 32 e0 f0; do
    printf "\\x$c" >"$out/tokenizer/t$n"
    head -c 64 /dev/zero | tr '\0' '\001' >>"$out/tokenizer/t$n"
    printf '\x00\x00\x01\x00\x02\x00\xff\x00\x0a\x01\x30\x01\xff\xff' >>"$out/tokenizer/t$n"
    n=$((n + 1))
done
# zinc serve's request bodies: endpoint byte (0 chat, 1 completion, 2
# tokenize, 3 detokenize), then the JSON.
k=0
seed_body() {
    printf "\\x$1" >"$out/serve/s$k"
    printf '%s' "$2" >>"$out/serve/s$k"
    k=$((k + 1))
}
seed_body 00 '{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0.7,"top_p":0.9,"top_k":40,"min_p":0.05,"repeat_penalty":1.1,"seed":42,"stop":["\n","END"],"stream":true,"stream_options":{"include_usage":true}}'
seed_body 00 '{"messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":null},{"role":"user","content":"\u00e9\ud83d\ude00"}],"n":1,"max_completion_tokens":3}'
seed_body 01 '{"prompt":"Once upon a time","max_tokens":16,"stop":"x","temperature":0,"n_predict":4,"repeat_last_n":-1,"ignore_eos":true}'
seed_body 01 '{"prompt":["a\u0000b"],"stream":false,"seed":-1}'
seed_body 02 '{"content":"Hello <|im_start|> world","add_special":true,"with_pieces":true}'
seed_body 03 '{"tokens":[1,2,3,399,0]}'

echo "seeds: $(ls "$out/gguf" | wc -l) GGUF, $(ls "$out/frontend" | grep -c recipe) recipes," \
    "$(ls "$out/plan" | wc -l) plans, $n tokenizer inputs, $k serve bodies in $out"
