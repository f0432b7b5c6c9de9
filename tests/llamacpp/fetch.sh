#!/usr/bin/env bash
# Fetches llama.cpp's prebuilt libraries and the matching headers from npm into
# tests/llamacpp/cache/ (gitignored):
#   cache/lib/      libllama, libggml, libggml-base and the CPU backend variants
#   cache/include/  llama.h and the ggml headers, read from the git bundle of
#                   llama.cpp's source that node-llama-cpp ships
# Idempotent: a completed fetch leaves cache/.fetched-<version> and is not redone.
# Any failure prints why and exits non-zero; it never passes silently.
set -euo pipefail

VERSION=3.22.1
# sha1 of the two tarballs (npm's "shasum"), pinned so that a changed upload is noticed.
SHA_LIBS=ce2481e4ad87002dfe569d61e0d03fba937b4158
SHA_SRC=e908932762f21939024263d58f1d6dc3e88b23e6

here=$(cd "$(dirname "$0")" && pwd)
cache="$here/cache"
stamp="$cache/.fetched-$VERSION"

die() { echo "fetch.sh: $*" >&2; exit 1; }

[ -f "$stamp" ] && exit 0
# Several checkouts' scripts may share this cache: one fetch at a time.
mkdir -p "$cache"
exec 9>"$cache/.fetch.lock"
flock 9
[ -f "$stamp" ] && exit 0
[ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] ||
    die "the prebuilt llama.cpp libraries exist for Linux x86_64 only, this is $(uname -s)-$(uname -m)"
for tool in npm git tar sha1sum flock; do
    command -v "$tool" >/dev/null || die "'$tool' is not installed (needed to fetch llama.cpp)"
done

rm -rf "$cache/dl" "$cache/lib" "$cache/include" "$cache/src.git"
mkdir -p "$cache/dl" "$cache/lib" "$cache/include"
cd "$cache/dl"
if ! npm pack --loglevel=error "@node-llama-cpp/linux-x64-vulkan@$VERSION" "node-llama-cpp@$VERSION" >npm.log 2>&1; then
    cat npm.log >&2
    die "npm pack of @node-llama-cpp/linux-x64-vulkan@$VERSION / node-llama-cpp@$VERSION failed (registry unreachable?)"
fi
libs=node-llama-cpp-linux-x64-vulkan-$VERSION.tgz
src=node-llama-cpp-$VERSION.tgz
check() { [ "$(sha1sum "$1" | cut -d' ' -f1)" = "$2" ] || die "$1: sha1 is not the pinned $2"; }
check "$libs" "$SHA_LIBS"
check "$src" "$SHA_SRC"

tar xzf "$libs" --strip-components=3 -C "$cache/lib" --wildcards --exclude='*/libggml-vulkan.so' \
    --exclude='*/libllama-common.so' 'package/bins/linux-x64-vulkan/*.so' ||
    die "cannot extract the libraries from $libs"
tar xzf "$src" package/llama/gitRelease.bundle || die "cannot extract the source bundle from $src"

# The headers come from the exact llama.cpp commit the libraries were built from.
git init -q --bare "$cache/src.git"
git -C "$cache/src.git" fetch -q "$cache/dl/package/llama/gitRelease.bundle" HEAD ||
    die "cannot read llama.cpp's git bundle"
commit=$(git -C "$cache/src.git" rev-parse FETCH_HEAD)
for h in include/llama.h ggml/include/ggml.h ggml/include/ggml-cpu.h ggml/include/ggml-backend.h \
         ggml/include/ggml-alloc.h ggml/include/ggml-opt.h ggml/include/gguf.h; do
    git -C "$cache/src.git" show "$commit:$h" >"$cache/include/$(basename "$h")" || die "no $h in the bundle"
done
echo "$commit" >"$cache/llama.cpp-commit"
for f in libllama.vulkan.v0.5.0.so libggml.vulkan.v0.5.0.so libggml-base.so libggml-cpu-x64.so; do
    [ -f "$cache/lib/$f" ] || die "the package no longer holds $f"
done
rm -rf "$cache/dl" "$cache/src.git"
touch "$stamp"
echo "fetch.sh: llama.cpp $commit (node-llama-cpp $VERSION) in $cache"
