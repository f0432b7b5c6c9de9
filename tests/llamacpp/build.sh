#!/usr/bin/env bash
# Builds the llama.cpp harness and the logits comparer into OUT_DIR (default
# tests/llamacpp/cache/bin), after fetch.sh. Prints the directory.
# Binaries are rebuilt only when their source is newer, under a lock and by
# rename, so that concurrent runs never execute a half-written file.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache="$here/cache"
out=${1:-$cache/bin}
"$here/fetch.sh"
mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9
lib="$cache/lib"
cc=${CC:-cc}
flags=(-std=c11 -O2 -Wall -Wextra -Werror)
build() { # build NAME SOURCE CC-ARGS...
    local name=$1 src=$2
    shift 2
    [ "$out/$name" -nt "$src" ] && [ "$out/$name" -nt "$cache/llama.cpp-commit" ] && return 0
    $cc "${flags[@]}" -o "$out/$name.tmp.$$" "$src" "$@"
    mv -f "$out/$name.tmp.$$" "$out/$name"
}
# The harness links libllama and the two ggml libraries; the CPU backend is
# dlopen'ed at run time from the same directory (rpath).
build harness "$here/harness.c" -I"$cache/include" -DLLAMACPP_LIBDIR="\"$lib\"" \
    -L"$lib" -l:libllama.vulkan.v0.5.0.so -l:libggml.vulkan.v0.5.0.so -l:libggml-base.so \
    -Wl,-rpath,"$lib" -ldl -lm
build cmpf32 "$here/cmpf32.c" -lm
echo "$out"
