# Shared by the device scripts (bench-device.sh, ab-device.sh): sourced on the
# GPU machine in a device call from the repository root, with .gl, .anchor and
# .dev carried (bench-device.sh's header says how to pack them). Not part of CI.
#
# Sets B (the packed binaries), O (the output file, under $OUT) and
# VK_DRIVER_FILES, installs the Vulkan loader, unpacks llama.cpp's bench
# bundle into /tmp/nb and prints the GPU's clocks; defines shape (a model's
# mkmodel options) and gen (writes /tmp/<model>.gguf).
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
B=$PWD/.dev
O=${OUT:-/tmp}/${DEVICE_OUT:-bench.txt}
mkdir -p /tmp/nb && tar xJf .anchor/npmbench-bundle.tar.xz -C /tmp/nb
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem \
  --format=csv | tee -a "$O"
shape() {
  local q3="--arch qwen3 --head-dim 128"
  case $1 in
  q8b) echo "$q3 --layers 36 --hidden 4096 --ff 12288 --heads 32 --kv-heads 8" ;;
  q06) echo "$q3 --layers 28 --hidden 1024 --ff 3072 --heads 16 --kv-heads 8" ;;
  s2) echo "$q3 --layers 2 --hidden 4096 --ff 12288 --heads 32 --kv-heads 8" ;;
  # issue 11: Qwen3.5-9B's shape (32 layers, every 4th gated full attention)
  q9) echo "--arch qwen35 --layers 32 --full-attn-interval 4 --hidden 4096 --heads 16 --kv-heads 4 --head-dim 256
            --ff 12288 --ssm-state 128 --ssm-groups 16 --ssm-heads 32 --ssm-conv 4" ;;
  # and Qwen3-30B-A3B's, 12 of its 48 layers (the whole model takes minutes to generate)
  a3b12) echo "--arch qwen3moe --layers 12 --hidden 2048 --heads 32 --kv-heads 4 --head-dim 128 --experts 128
               --experts-used 8 --expert-ff 768" ;;
  # and a Qwen3.5 MoE (qwen35moe: delta-net and gated attention, 256 experts, a shared expert),
  # 8 layers of a Qwen3.5-35B-A3B-like shape
  q35a8) echo "--arch qwen35moe --layers 8 --full-attn-interval 4 --hidden 2048 --heads 16 --kv-heads 2
               --head-dim 256 --experts 256 --experts-used 8 --expert-ff 512 --shared-ff 512 --ssm-state 128
               --ssm-groups 16 --ssm-heads 32 --ssm-conv 4" ;;
  esac
}
gen() { "$B/zinc" mkmodel $(shape "$1") --vocab 151936 --quant q4_k_m -o "/tmp/$1.gguf" >/dev/null; }
# pp512 of a plan (or, with llama, llama.cpp's of a GGUF), one line into $O;
# the 2-layer profile of a plan's prefill step ($OUT/prof_<plan>.txt).
pp() { echo "== [$1 zinc $2] $(timeout 60 "$B/zinc" bench /tmp/$2.zplan -p 512 -n 0 -r 5 2>&1 | grep -E ' pp' | tr -s ' ')" | tee -a "$O"; }
pp_llama() { echo "== [$1 llama $2] $(timeout 90 /tmp/nb/bundle/run-bench.sh -m /tmp/$2.gguf -ngl 99 -p 512 -n 0 -r 5 -fa 1 2>&1 | grep -E 'pp[0-9]' | tr -s ' ')" | tee -a "$O"; }
prof2l() {
  timeout 60 "$B/zinc" bench /tmp/$1.zplan -p 512 -n 0 -r 3 --profile > "$OUT/prof_$1.txt" 2>&1
  echo "== [2L $1] $(grep -A12 'prefill step' "$OUT/prof_$1.txt" | tr -s ' ' | tr '\n' '|')" | tee -a "$O"
}
# The matmul kernel tests with knobs, one line into $O and the log into
# $OUT/t_<name>.txt: ktest "<VAR=value ...>" <filter> <name> [pattern of lines to quote].
ktest() {
  (cd /tmp && env $1 LD_LIBRARY_PATH=$B/lib timeout 200 $B/test_kernels_matmul --filter "$2" --verbose > "$OUT/t_$3.txt" 2>&1)
  echo "== test $1 $2: $(grep -E "Synthesis|CRASH|FAIL|differs|RMS${4:+|$4}" "$OUT/t_$3.txt" | head -14 | tr '\n' ' ')" | tee -a "$O"
}
# A --parallel plan of the 8B shape: mkp <streams> <plan> [VAR=value ...] (the knobs zincc compiles with).
mkp() {
  local n=$1 out=$2
  shift 2
  env "$@" timeout 150 "$B/zincc" /tmp/q8b.gguf -o /tmp/$out.zplan --ctx 2048 --parallel $n 2>&1 | tail -1 | tee -a "$O"
}
# Batch decode of a plan at the given streams, with its profile in $OUT/prof_<plan>.txt: bp <plan> <streams>.
bp() {
  timeout 90 "$B/zinc" bench /tmp/$1.zplan --parallel $2 -p 0 -n 64 -r 3 --profile > "$OUT/prof_$1.txt" 2>&1
  echo "== [$1] $(grep -E 'tg64|step of [0-9]+ rows' "$OUT/prof_$1.txt" | head -4 | tr -s ' ' | tr '\n' '|')" | tee -a "$O"
}
