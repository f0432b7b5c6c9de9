#!/usr/bin/env bash
# The main job on an embedded default: installs what is missing, builds zincc,
# generates a small Qwen3-shaped test model and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DZINC_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
mkdir -p out
set -x
build/zinc mkmodel --arch qwen3 --layers 2 --hidden 256 --ff 768 --heads 4 --kv-heads 2 --head-dim 64 \
  --vocab 512 --quant q4_k_m --seed 1 -o out/demo.gguf
build/zincc out/demo.gguf --dump-ir | head -n 40
build/zinc ref out/demo.gguf --tokens 1,2,3,4 --logits-out out/demo.f32 --top 5
