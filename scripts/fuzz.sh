#!/usr/bin/env bash
# Bounded fuzzing of the parsers of untrusted input (docs/security.md):
# builds the libFuzzer harnesses in fuzz/ with clang, ASan and UBSan in a
# build directory of their own, generates the seed corpora (tiny models from
# `zinc mkmodel`, plans from `zincc -o`, texts), runs each harness for
# FUZZ_SECONDS and prints how many inputs each ran. Any crash, leak,
# sanitizer report or time-out fails the script (non-zero exit), and the
# input that caused it is kept in $FUZZ_WORK/artifacts.
#
# Environment:
#   FUZZ_SECONDS    seconds per harness (default 30)
#   FUZZ_TARGETS    harnesses to run (default "gguf plan tokenizer frontend serve")
#   FUZZ_BUILD_DIR  build directory (default build-fuzz)
#   FUZZ_WORK       corpora, logs and artifacts (default $FUZZ_BUILD_DIR/fuzz-work); the
#                   corpora grow across runs, so a later run starts where the last stopped
#   FUZZ_JOBS       build parallelism (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-30}
targets=${FUZZ_TARGETS:-gguf plan tokenizer frontend serve}
build=${FUZZ_BUILD_DIR:-build-fuzz}
work=${FUZZ_WORK:-$build/fuzz-work}
jobs=${FUZZ_JOBS:-$(nproc)}

command -v clang >/dev/null || { echo "fuzz.sh: clang is needed (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }

# Longest input per harness: the seeds fit (models of 35-110 KB, plans up to
# 256 KB), and texts past 4 KB add time, not paths.
max_len() {
    case $1 in
    gguf | frontend) echo 131072 ;;
    plan) echo 262144 ;;
    tokenizer | serve) echo 4096 ;;
    *) echo 65536 ;;
    esac
}

echo "== build ($build)"
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZINC_FUZZ=ON \
    -DZINC_TESTS=OFF >/dev/null
fuzzers=()
for t in $targets; do fuzzers+=("fuzz_$t"); done
cmake --build "$build" -j"$jobs" --target zinc zincc shrink_plan "${fuzzers[@]}" >"$build/fuzz-build.log" 2>&1 ||
    { tail -40 "$build/fuzz-build.log"; exit 1; }

echo "== seeds"
rm -rf "$work/seeds"
mkdir -p "$work"/{seeds,corpus,artifacts,logs}
bash fuzz/seeds.sh "$build" "$work/seeds"
for p in "$work"/seeds/plan/*.zplan; do
    "$build/fuzz/shrink_plan" "$p" "${p%.zplan}-small.zplan"
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
printf '%-10s %12s %10s %8s %s\n' harness execs exec/s corpus result
for t in $targets; do
    log="$work/logs/$t.log"
    mkdir -p "$work/corpus/$t"
    rc=0
    "$build/fuzz/fuzz_$t" "$work/corpus/$t" "$work/seeds/$t" -max_len="$(max_len "$t")" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/$t-" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    units=$(find "$work/corpus/$t" -type f | wc -l)
    result=ok
    if [ "$rc" -ne 0 ] || grep -aqE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant broken' "$log"; then
        result="FAILED (exit $rc)"
        failed=1
    fi
    printf '%-10s %12s %10s %8s %s\n' "$t" "${execs:-?}" "${rate:-?}" "$units" "$result"
    if [ "$result" != ok ]; then
        grep -aE 'ERROR:|runtime error:|invariant broken|SUMMARY|Test unit written' "$log" | head -20 | sed 's/^/    /'
        echo "    log: $log"
        echo "    reproduce: $build/fuzz/fuzz_$t <artifact above>"
    fi
done
exit $failed
