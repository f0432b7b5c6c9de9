#!/usr/bin/env bash
# Builds the llama.cpp harness and the logits comparer into OUT_DIR (default
# tests/llamacpp/cache/bin), after fetch.sh. Prints the directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache="$here/cache"
out=${1:-$cache/bin}
"$here/fetch.sh"
mkdir -p "$out"
lib="$cache/lib"
cc=${CC:-cc}
# The harness links libllama and the two ggml libraries; the CPU backend is
# dlopen'ed at run time from the same directory (rpath).
$cc -std=c11 -O2 -Wall -Wextra -Werror -I"$cache/include" -DLLAMACPP_LIBDIR="\"$lib\"" \
    -o "$out/harness" "$here/harness.c" \
    -L"$lib" -l:libllama.vulkan.v0.5.0.so -l:libggml.vulkan.v0.5.0.so -l:libggml-base.so \
    -Wl,-rpath,"$lib" -ldl -lm
$cc -std=c11 -O2 -Wall -Wextra -Werror -o "$out/cmpf32" "$here/cmpf32.c" -lm
echo "$out"
