#!/usr/bin/env bash
# Compares zinc's tokenizers with llama.cpp's, live, on the tokenizer fixtures.
#   usage: tests/llamacpp/tokenize_compare.sh BUILD_DIR [--update]
# BUILD_DIR must hold zinc and test_tokenizer (build both targets first).
# test_tokenizer writes the fixtures (qwen3 and llama byte-level BPE from
# mkmodel, spm SentencePiece; each as a full model and vocab-only). For every
# row of tests/data/tokenizer_ids.txt, llama.cpp's harness tokenizes the text
# with the full model (--add-special, and --parse-special where the row says
# special), and `zinc tokenize` does with the full and the vocab-only model
# (--special likewise): all three must agree, and agree with the stored ids,
# which the unit test checks offline. --update rewrites the stored ids from
# llama.cpp instead (for new rows, or after a deliberate fixture change).
# One line per fixture and mode, FAIL lines per differing text, then
# "N passed, M failed"; exits non-zero on any failure (or if nothing ran).
set -uo pipefail

usage() { echo "usage: $0 BUILD_DIR [--update]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
update=0
[ $# -eq 2 ] && { [ "$2" = --update ] && update=1 || usage; }
build=$(cd "$1" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
data=$here/../data/tokenizer_ids.txt
zinc=$build/zinc
for exe in zinc test_tokenizer; do
    [ -x "$build/$exe" ] || { echo "tokenize_compare.sh: no $exe in $build (build the '$exe' target first)" >&2; exit 2; }
done

bin=$("$here/build.sh" "$here/cache/bin" | tail -n 1) || { echo "tokenize_compare.sh: cannot fetch or build llama.cpp" >&2; exit 1; }
harness=$bin/harness
work=$(mktemp -d "${TMPDIR:-/tmp}/zinc-tokcmp.XXXXXX")
trap 'rm -rf "$work"' EXIT

if ! ZINC_TOK_FIXTURES=$work "$build/test_tokenizer" --filter 'fixtures/write' >"$work/fx.log" 2>&1; then
    cat "$work/fx.log" >&2
    echo "tokenize_compare.sh: test_tokenizer could not write the fixtures" >&2
    exit 1
fi

passed=0 failed=0
declare -A ok=() bad=()
out=$work/ids.txt
: >"$out"
# The text column holds printf %b escapes; the x keeps trailing newlines.
while IFS= read -r line; do
    if [ -z "$line" ] || [ "${line:0:1}" = "#" ]; then printf '%s\n' "$line" >>"$out"; continue; fi
    IFS=$'\t' read -r fx special text want <<<"$line"
    raw=$(printf '%b' "$text"; printf x); raw=${raw%x}
    hflag=() zflag=()
    [ "$special" = 1 ] && hflag=(--parse-special) zflag=(--special)
    got=$("$harness" "$work/$fx.gguf" tokenize --text "$raw" --add-special "${hflag[@]}" 2>"$work/h.log") ||
        got="harness failed: $(tail -n 1 "$work/h.log")"
    full=$("$zinc" tokenize "$work/$fx.gguf" "${zflag[@]}" -- "$raw" 2>&1)
    vocab=$("$zinc" tokenize "$work/$fx-vocab.gguf" "${zflag[@]}" -- "$raw" 2>&1)
    [ -n "$got" ] || got=-
    [ -n "$full" ] || full=-
    [ -n "$vocab" ] || vocab=-
    key="$fx special=$special"
    if [ "$got" = "$full" ] && [ "$got" = "$vocab" ] && { [ $update = 1 ] || [ "$got" = "$want" ]; }; then
        ok[$key]=$(( ${ok[$key]:-0} + 1 ))
    else
        bad[$key]=$(( ${bad[$key]:-0} + 1 ))
        echo "FAIL $key [$text]: llama.cpp $got, zinc $full, zinc vocab-only $vocab, stored $want"
    fi
    printf '%s\t%s\t%s\t%s\n' "$fx" "$special" "$text" "$got" >>"$out"
done <"$data"

for key in $(printf '%s\n' "${!ok[@]}" "${!bad[@]}" | sort -u | tr ' ' '|'); do
    k=${key//|/ }
    if [ "${bad[$k]:-0}" -eq 0 ]; then
        passed=$((passed + 1)); echo "PASS $k: ${ok[$k]} texts, zinc = llama.cpp"
    else
        failed=$((failed + 1)); echo "FAIL $k: ${bad[$k]:-0} of $(( ${ok[$k]:-0} + ${bad[$k]:-0} )) texts differ"
    fi
done
if [ $update = 1 ] && [ "$failed" -eq 0 ]; then
    cp "$out" "$data" && echo "updated $data"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
