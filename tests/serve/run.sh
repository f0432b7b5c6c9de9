#!/usr/bin/env bash
# zinc serve against clients not written here (docs/server.md):
#   openai_client.mjs  the official openai npm package: chat, completion, streaming, two at once, errors
#   page_test.mjs      the chat page at / in headless Chromium: a streamed reply, the stop button
#   load_test.mjs      64 concurrent streams, 500 requests, well-formed, RSS flat (bounded: ~1 min)
# on a generated model, on the default Vulkan device (llvmpipe in CI).
# Usage: tests/serve/run.sh [BUILD_DIR] [TEST...]   (tests: openai page load; default all)
# The npm packages are pinned in package-lock.json and installed in
# tests/serve/node_modules (npm ci, redone only when the lock file changes).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
shift || true
tests=${*:-openai page load}
die() { echo "serve/run.sh: $*" >&2; exit 1; }
for tool in node npm; do command -v $tool >/dev/null || die "'$tool' is not installed (scripts/install-deps.sh)"; done
[ -x "$build/zinc" ] && [ -x "$build/zincc" ] || die "no zinc and zincc in $build (build first)"

stamp="$here/node_modules/.lock-$(sha1sum "$here/package-lock.json" | cut -c1-12)"
if [ ! -f "$stamp" ]; then
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed (registry unreachable?)"
    touch "$stamp"
fi

work=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
"$build/zinc" mkmodel --arch qwen3 --layers 2 --hidden 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 \
    --vocab 400 --quant q4_k_m --seed 11 -o "$work/m.gguf" >/dev/null 2>&1 || die "zinc mkmodel failed"
"$build/zincc" "$work/m.gguf" -o "$work/m.zplan" --ctx 2048 --chunk 16 >"$work/zincc.log" 2>&1 ||
    { cat "$work/zincc.log"; die "zincc failed"; }

key=k-$RANDOM$RANDOM
"$build/zinc" serve "$work/m.zplan" --port 0 --parallel 4 --queue 64 --api-key "$key" 2>"$work/serve.log" &
pid=$!
for _ in $(seq 600); do
    grep -qs ready "$work/serve.log" && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log"; die "zinc serve exited"; }
    sleep 0.1
done
grep -q ready "$work/serve.log" || { cat "$work/serve.log"; die "zinc serve did not become ready"; }
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.log")
url=http://127.0.0.1:$port

for t in $tests; do
    case $t in
    openai) node "$here/openai_client.mjs" "$url" m.zplan "$key" ;;
    page) node "$here/page_test.mjs" "$url" "$key" ;;
    load) node "$here/load_test.mjs" "$url" "$key" "$pid" 500 64 ;;
    *) die "unknown test '$t' (openai, page, load)" ;;
    esac
done

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" -eq 0 ] || { cat "$work/serve.log"; die "zinc serve exited with $rc after SIGTERM"; }
if grep -qE 'Sanitizer|runtime error' "$work/serve.log"; then cat "$work/serve.log"; die "sanitizer report"; fi
echo "serve/run.sh: $tests passed"
