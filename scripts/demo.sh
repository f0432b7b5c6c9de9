#!/usr/bin/env bash
# The main job on an embedded default: installs what is missing, builds, generates
# a small Qwen3-shaped Q4_K_M model, compiles it for the default Vulkan device
# (Mesa's llvmpipe when there is no GPU) and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target zinc zincc >/dev/null
mkdir -p out
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "generate a random-weight Qwen3-shaped model (2 layers, hidden 256, Q4_K_M)"
build/zinc mkmodel --arch qwen3 --layers 2 --hidden 256 --ff 768 --heads 4 --kv-heads 2 --head-dim 64 \
  --vocab 512 --quant q4_k_m --seed 1 -o out/demo.gguf

step "its tensor IR, as built from the GGUF (first lines)"
build/zincc out/demo.gguf --dump-ir > out/demo.zir   # (files, not pipes into head: pipefail)
head -n 24 out/demo.zir

step "compile it for the default Vulkan device, with the fusion report"
build/zincc out/demo.gguf -o out/demo.zplan --ctx 256 --report > out/report.txt
cat out/report.txt
build/zinc info out/demo.zplan > out/info.txt
head -n 12 out/info.txt

step "run it on the device, and the CPU reference interpreter on the same tokens"
toks=1,17,33,250,7,99,301,5
build/zinc ref out/demo.gguf --tokens $toks --logits-out out/ref.f32 --top 1
build/zinc run out/demo.zplan --tokens $toks --logits-out out/gpu.f32
build/zinc run out/demo.zplan --tokens $toks --logits-out out/gpu-decode.f32 --mode decode
build/zinc compare out/gpu.f32 out/ref.f32 --vocab 512         # prefill schedule vs reference
build/zinc compare out/gpu-decode.f32 out/ref.f32 --vocab 512  # recorded decode step vs reference

step "generate text (random weights: the words are noise, the pipeline is real)"
build/zinc run out/demo.zplan -p "The quick brown fox" -n 24 --temp 0.7 --seed 1

step "throughput, like llama-bench"
build/zinc bench out/demo.zplan -p 64 -n 32 -r 3
