#!/usr/bin/env bash
# Installs what zincc needs on Debian 12 (or Ubuntu); a no-op when all is there.
set -euo pipefail

pkgs=(build-essential cmake pkg-config git
      libvulkan-dev mesa-vulkan-drivers vulkan-tools
      libshaderc-dev glslang-dev spirv-tools spirv-headers glslc uthash-dev libcriterion-dev libedit-dev
      clang libclang-rt-14-dev graphviz
      libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev chromium)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# npm fetches llama.cpp's prebuilt libraries for the external oracle test, and
# the openai and puppeteer-core packages of tests/serve (pinned in its lock file).
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
