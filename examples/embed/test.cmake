# ctest driver for the embed example: compiles a generated model and checks
# that the program's greedy continuation (8 tokens) is byte for byte the one
# `zinc run --temp 0` gives.
# Invoked with -DZINC=... -DZINCC=... -DEXAMPLE=... -DWORK=...
set(model ${WORK}/embed-qwen3.gguf)
set(plan ${WORK}/embed-qwen3.zplan)
foreach(cmd
    "${ZINC};mkmodel;--arch;qwen3;--layers;2;--hidden;256;--ff;512;--heads;4;--kv-heads;2;--head-dim;64;--vocab;400;--quant;q4_k_m;--seed;5;-o;${model}"
    "${ZINCC};${model};-o;${plan};--ctx;64;--chunk;8")
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${cmd} failed (${rc}): ${out}")
  endif()
endforeach()
execute_process(COMMAND ${EXAMPLE} ${plan} "Hello world" 8 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "embed failed (${rc}): ${out}${err}")
endif()
string(LENGTH "${out}" n)
if(n LESS 1)
  message(FATAL_ERROR "embed printed nothing")
endif()
# The same continuation through zinc run: the first token's text must match.
execute_process(COMMAND ${ZINC} run ${plan} -p "Hello world" -n 8 --temp 0
                RESULT_VARIABLE rc OUTPUT_VARIABLE gen ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "zinc run failed (${rc}): ${err}")
endif()
if(NOT out STREQUAL gen)
  message(FATAL_ERROR "embed and zinc run disagree:\n embed: '${out}'\n run:   '${gen}'")
endif()
message(STATUS "embed: ${n} bytes, the same text as zinc run")
