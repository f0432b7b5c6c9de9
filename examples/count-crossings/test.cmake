# ctest driver for count-crossings: generates a 2-layer Qwen3 model, runs the
# example on it, and checks rows worked out by hand (examples/README.md shows
# the arithmetic). Invoked with -DZINC=... -DEXAMPLE=... -DWORK=...

set(model ${WORK}/count-crossings-qwen3.gguf)
execute_process(
  COMMAND ${ZINC} mkmodel --arch qwen3 --layers 2 --hidden 256 --ff 768 --heads 4 --kv-heads 2 --head-dim 64
          --vocab 512 --quant q4_k_m --seed 1 -o ${model}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "zinc mkmodel failed (${rc}): ${out}")
endif()

function(run_example expect_rc)
  execute_process(COMMAND ${EXAMPLE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "count-crossings ${ARGN}: exit ${rc}, expected ${expect_rc}\n${out}${err}")
  endif()
  set(out "${out}${err}" PARENT_SCOPE)
endfunction()

function(expect_line regex)
  if(NOT out MATCHES "${regex}")
    message(FATAL_ERROR "no line matching '${regex}' in:\n${out}")
  endif()
endfunction()

# Decode on h200 (fp16): per layer the staged MLP is 6 dispatches and 14
# crossings, 6 of them of the 768-wide intermediate; fused it is two GEMVs
# (gate+up+SwiGLU, down + residual) with 5 crossings, 2 wide. Attention:
# q, k and v as one GEMV (fuse-qkv; layer 1's v is Q6_K and keeps a GEMV of
# its own), v storing its cache row, then one kernel with the q and k heads
# prepared in its prologue (fuse-attn-head), then o + residual.
run_example(0 ${model} --target h200 --phase decode)
message(STATUS "${out}")
expect_line("count-crossings: qwen3, 2 layers, hidden 256, ff 768; target h200, decode, ctx 4096")
expect_line("\n0 +mlp +6 +2 +14 +5 +6 +2 +13\\.0 +4\\.5\n")
expect_line("\n1 +mlp +6 +2 +14 +5 +6 +2 +13\\.0 +4\\.5\n")
expect_line("\n0 +attn +15 +3 +31 +10 +4 +0 +139\\.0 +4\\.2\n")
expect_line("\n1 +attn +15 +4 +31 +11 +4 +0 +139\\.0 +4\\.8\n")
expect_line("\ntotal +45 +13 +95 +34 +21 +5 +307\\.0 +20\\.0\n")

# Prefill on h200 with hidden 256: the whole MLP still fits on chip.
run_example(0 ${model} --target h200 --phase prefill)
expect_line("\n0 +mlp +6 +1 +14 +2 +6 +0 ")

# Only fuse-mlp, without the norm and residual passes: the norm, the
# gate+up+SwiGLU kernel, down and the add stay four dispatches.
run_example(0 ${model} --passes shape,width,fuse-mlp)
expect_line("\n0 +mlp +6 +4 +14 +9 +6 +2 +13\\.0 +6\\.5\n")

# Errors are one line naming what is wrong.
run_example(1 ${model} --passes shape,bogus)
expect_line("unknown pass 'bogus'")
run_example(1 ${WORK}/no-such-model.gguf)
expect_line("count-crossings: .*no-such-model.gguf")
run_example(0 --help)
expect_line("usage: count-crossings MODEL.gguf")
run_example(2 ${model} --target nope)
expect_line("unknown target")
