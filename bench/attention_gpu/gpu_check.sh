#!/usr/bin/env bash
# On the GPU machine, in one call: unpack build/attn-carry.tgz (tools/gpu/pack.sh of flash_attention_lab_test and
# attention_gpu_bench), run the flash attention test for every tile-shape variant (the kernel lab's), compute-sanitizer
# memcheck + racecheck on small shapes, then the benchmark beside PyTorch SDPA (run.sh also times cuDNN's
# attention through kernels/cuda/cudnn_attention.h as the row ours-cudnn; CUDNN=0 skips it). Logs go to $OUT.
# Env: TEST_VARIANTS, VARIANTS (bench; run.sh), SHAPES ("B T NH hs;..."), SANITIZE=0 to skip the sanitizers.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p /tmp/g /tmp/fa_json "$out"
tar xzf build/attn-carry.tgz -C /tmp/g
lt=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets /opt /usr/lib -name 'libcublasLt.so.13*' 2>/dev/null |
  head -1)
export LD_LIBRARY_PATH=/tmp/g/lib:$(dirname "${lt:-/usr/local/cuda/lib64/x}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,power.draw --format=csv,noheader
# Test tokens FWD.BWD.GROUP: every tile variant, and head groups that do and do not divide B*NH.
for v in ${TEST_VARIANTS:-d 0.0.1 1.1.5 2.2.2 3.3.3}; do
  env=()
  if [ "$v" != d ]; then
    IFS=. read -r fv bv gv <<< "$v"
    env=(LLMT_FLASH_FWD_VARIANT=$fv LLMT_FLASH_BWD_VARIANT=$bv LLMT_FLASH_GROUP=$gv)
  fi
  echo "== test, variant $v"
  env "${env[@]}" /tmp/g/bin/flash_attention_lab_test 2>&1 | tee -a "$out/fa_test.log" |
    grep -E 'FAILED|PASSED|Failure|Expected|Which is|actual' | head -20
done
grep -E 'flash-attn\] (seed|T=1024 +hs=64 +(out|dq|lse))' "$out/fa_test.log" | head -12
if [ "${SANITIZE:-1}" = 1 ]; then
  small='FlashAttention.RaggedHs64:FlashAttention.RaggedHs128'
  small+=':FlashAttention.SingleTokenHs64:FlashAttention.RaggedShortHs64'
  small+=':FlashAttention.PackedHs128:FlashAttention.PackedSingleTokens'  # packed examples (positions)
  for v in 0 1; do
    LLMT_FLASH_FWD_VARIANT=$v LLMT_FLASH_BWD_VARIANT=$v timeout 90 compute-sanitizer --tool memcheck \
      /tmp/g/bin/flash_attention_lab_test --gtest_filter="$small" >> "$out/fa_sanitizer.log" 2>&1
    echo "memcheck variant $v rc=$?"
  done
  LLMT_FLASH_FWD_VARIANT=1 LLMT_FLASH_BWD_VARIANT=1 timeout 90 compute-sanitizer --tool racecheck \
    /tmp/g/bin/flash_attention_lab_test --gtest_filter='FlashAttention.RaggedHs64:FlashAttention.PackedHs128' \
    >> "$out/fa_sanitizer.log" 2>&1
  echo "racecheck variant 1 rc=$?"
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Invalid|hazard' "$out/fa_sanitizer.log" | head -12
fi
IFS=';' read -ra shapes <<< "${SHAPES:-16 1024 12 64;32 1024 12 64;8 1024 6 128}"  # "B T NH hs;..."
for shape in "${shapes[@]}"; do
  VARIANTS="${VARIANTS:-d -.-.1 -.-.8 -.-.4096 1.-.-}" JSON_DIR=/tmp/fa_json BIN=/tmp/g/bin/attention_gpu_bench \
    bash bench/attention_gpu/run.sh $shape 2>&1 |
    tee -a "$out/fa_bench.log" | grep -v '^ours (llmt'
done
