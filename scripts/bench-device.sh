#!/usr/bin/env bash
# The benchmark of docs/performance.md, for one device call on the GPU
# machine (../shared/tools/README.md): zinc beside llama.cpp on the same
# generated GGUFs, plus a correctness check of the plan against the CPU
# reference. Not part of CI (CI has no GPU).
#
# Here, before the call: build (scripts/test.sh or cmake), run
# ../shared/tools/anchor_bundle.sh (makes .gl/ and .anchor/), then pack the
# two programs:  mkdir -p .dev && strip -o .dev/zinc build/zinc && strip -o .dev/zincc build/zincc
# Kernel tests too (cooperative-matrix kernels run only on the GPU): strip the
# test binaries into .dev/ and their libraries into .dev/lib:
#   for t in test_kernels_matmul test_kernels_misc test_kernels_e2e; do strip -o .dev/$t build/$t; done
#   mkdir -p .dev/lib && for l in $(ldd build/test_kernels_matmul | awk '/=>/{print $3}' |
#     grep -v -E 'vulkan|stdc\+\+|gcc_s|libc.so|libm.so|resolv|libz'); do cp -L $l .dev/lib/; done
# They run with the NV and the KHR cooperative matrix (ZINC_COOPMAT=nv|khr).
# The call (carry .gl, .anchor and .dev):  bash scripts/bench-device.sh [--tune] [MODELS...]
# --tune also compiles each model with zincc --tune and times tg128 of the default and the tuned plan
# alternately, twice each (a layout is kept only where the step, not the tuner, says it is faster).
# It takes ~6 minutes without --tune (~8.5 with it) of a session's 30; a cold start of the machine costs
# more on top. Each model ends with a second round of both engines, alternated (run 49). Write down what each call must answer before making it (docs/performance.md, runs 11-14).
# MODELS: q8b (Qwen3-8B shape), q06 (Qwen3-0.6B shape), q9 (Qwen3.5-9B), a3b12 (12 layers of
# Qwen3-30B-A3B); default q8b and q06.
# Everything is written to $OUT/bench.txt (and printed). To compare knobs on one model in a call:
# scripts/ab-device.sh.
set -uo pipefail
tune=""
[ "${1:-}" = "--tune" ] && { tune="--tune"; shift; }
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(q8b q06)
. scripts/device-lib.sh
for m in "${models[@]}" s2; do gen "$m" & done
for t in test_kernels_matmul test_kernels_misc test_kernels_e2e test_kernels_recur test_kernels_moe; do
  [ -x "$B/$t" ] || continue
  for cm in nv khr; do
    echo "== $t, cooperative matrix $cm: $(cd /tmp && ZINC_COOPMAT=$cm LD_LIBRARY_PATH="$B/lib" \
      timeout 120 "$B/$t" 2>&1 | grep -E 'Synthesis|FAIL|CRASH' | tr '\n' ' ')" | tee -a "$O"
  done
done
wait
# Correctness at the 8B's width: prefill and decode logits against the interpreter.
T=1,2,3,4,5,6,7,8,9,10,11
"$B/zincc" /tmp/s2.gguf -o /tmp/s2.zplan --ctx 512 2>/dev/null
# Decode's GEMVs take x as int8 (llama.cpp's q8_1), which moves the logits
# ~2e-2 of the row's RMS from the exact graph on a random model (run 23): so
# decode is checked against the interpreter of the graph as zincc compiles it
# for the h200 (its roundings; 6e-2, test_kernels_e2e's bound for rows where
# one x rounds the other way), and its distance from the exact graph is
# printed beside. Prefill keeps 5e-3 against the exact graph.
"$B/zinc" ref /tmp/s2.gguf --tokens $T --logits-out /tmp/r.f32 >/dev/null 2>&1
"$B/zinc" ref /tmp/s2.gguf --tokens $T --mode decode --target h200 --ctx 512 --logits-out /tmp/r-h200.f32 >/dev/null 2>&1
for md in prefill decode; do
  "$B/zinc" run /tmp/s2.zplan --tokens $T --logits-out "/tmp/g-$md.f32" --mode $md >/dev/null 2>&1
done
echo "== prefill logits against the exact reference: $("$B/zinc" compare /tmp/g-prefill.f32 /tmp/r.f32 --vocab 151936 --tol 5e-3 2>&1)" | tee -a "$O"
echo "== decode logits against the h200 graph's interpreter: $("$B/zinc" compare /tmp/g-decode.f32 /tmp/r-h200.f32 --vocab 151936 --tol 6e-2 2>&1)" | tee -a "$O"
echo "== decode logits against the exact reference (int8 x: ~2e-2 expected): $("$B/zinc" compare /tmp/g-decode.f32 /tmp/r.f32 --vocab 151936 --tol 6e-2 2>&1)" | tee -a "$O"
for m in "${models[@]}"; do
  echo "=== zinc $m" | tee -a "$O"
  # without a plan nothing below runs
  timeout 300 "$B/zincc" "/tmp/$m.gguf" -o "/tmp/$m.zplan" --ctx 8192 2>>"$O" ||
    echo "zincc failed or timed out for $m" | tee -a "$O"
  "$B/zinc" bench "/tmp/$m.zplan" -p 512 -n 128 -r 3 --profile 2>&1 | tee -a "$O"
  if [ -n "$tune" ]; then
    # --tune times 24 layouts of each decode GEMV, each warmed 0.3 s (~2-3 minutes a model)
    timeout 400 "$B/zincc" "/tmp/$m.gguf" -o "/tmp/$m-tuned.zplan" --ctx 8192 --tune 2>>"$O" ||
      echo "zincc --tune failed or timed out for $m" | tee -a "$O"
    for rep in 1 2; do
      for p in "$m" "$m-tuned"; do
        echo "== tg128 $p ($rep): $("$B/zinc" bench "/tmp/$p.zplan" -p 0 -n 128 -r 3 2>&1 | grep tg128)" | tee -a "$O"
      done
    done
    "$B/zinc" bench "/tmp/$m-tuned.zplan" -p 0 -n 128 -r 3 --profile 2>&1 | grep -A40 '^decode step' | tee -a "$O"
  fi
  "$B/zinc" bench "/tmp/$m.zplan" -p 512 -n 128 -d 4096 -r 3 2>&1 | tee -a "$O"
  echo "=== llama.cpp $m" | tee -a "$O"
  /tmp/nb/bundle/run-bench.sh -m "/tmp/$m.gguf" -ngl 99 -p 512 -n 128 -r 3 -fa 0,1 2>&1 | grep -E '^\|' | tee -a "$O"
  /tmp/nb/bundle/run-bench.sh -m "/tmp/$m.gguf" -ngl 99 -n 128 -p 0 -d 4096 -r 3 -fa 1 2>&1 | grep -E '^\|' | tee -a "$O"
  # A second round, the engines alternated: either one's first repetitions can run at the idle clock
  # (run 49: llama.cpp's MoE pp512 4619 tok/s apart within one round, 31232 +- 314 in the next).
  echo "=== round 2: zinc $m, then llama.cpp fa 1" | tee -a "$O"
  "$B/zinc" bench "/tmp/$m.zplan" -p 512 -n 128 -r 3 2>&1 | grep -E '(pp|tg)[0-9]' | tee -a "$O"
  /tmp/nb/bundle/run-bench.sh -m "/tmp/$m.gguf" -ngl 99 -p 512 -n 128 -r 3 -fa 1 2>&1 | grep -E '(pp|tg)[0-9]' | tee -a "$O"
done
