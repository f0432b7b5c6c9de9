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
build/zincc out/demo.gguf --dump-ir | head -n 24

step "compile it for the default Vulkan device, with the fusion report"
build/zincc out/demo.gguf -o out/demo.zplan --ctx 256 --report | head -n 40
build/zinc info out/demo.zplan | head -n 12

step "run it: the GPU's logits against the CPU reference interpreter"
toks=1,17,33,250,7,99,301,5
build/zinc ref out/demo.gguf --tokens $toks --logits-out out/ref.f32
build/zinc run out/demo.zplan --tokens $toks --logits-out out/gpu.f32
build/zinc run out/demo.zplan --tokens $toks --logits-out out/gpu-decode.f32 --mode decode

step "generate text (random weights: the words are noise, the pipeline is real)"
build/zinc run out/demo.zplan -p "The quick brown fox" -n 24 --temp 0.7 --seed 1

step "throughput, like llama-bench"
build/zinc bench out/demo.zplan -p 64 -n 32 -r 3
