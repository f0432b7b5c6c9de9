#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the Criterion suite
# in a plain build and (less the kernel-arithmetic suites) under ASan+UBSan,
# a bounded run of each fuzzer, zinc serve against real clients
# (tests/serve), then the llama.cpp oracle.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)

echo "== plain build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j1)

# The kernel-arithmetic suites (label arith: test_kernels_matmul, _misc,
# _tune, _moe, _recur) ran above; under the sanitizers they would repeat the
# same GPU arithmetic at a third of the speed (about 15 of CI's minutes), and
# the host code they use runs there in test_kernels_e2e, test_batch,
# test_plan and test_passes.
echo "== sanitizer build (ASan + UBSan; the kernel-arithmetic suites ran above)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DZINC_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS=suppressions="$PWD/../tests/lsan.supp" ctest --output-on-failure -j1 -LE arith)

echo "== fuzzing (libFuzzer + ASan/UBSan, ${FUZZ_SECONDS:-30} s per harness)"
bash scripts/fuzz.sh

echo "== zinc serve: the openai npm client, the chat page in headless Chromium, a load test"
bash tests/serve/run.sh build

echo "== external oracle: llama.cpp (logits and token ids)"
bash tests/llamacpp/compare.sh build
bash tests/llamacpp/tokenize_compare.sh build
