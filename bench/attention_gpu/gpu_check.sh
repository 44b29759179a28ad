#!/usr/bin/env bash
# On the GPU machine, in one call: unpack build/attn-carry.tgz (tools/gpu/pack.sh of flash_attention_test and
# attention_gpu_bench), run the flash attention test, compute-sanitizer memcheck + racecheck on small
# shapes, then the benchmark beside PyTorch SDPA at GPT-2 124M shapes. Logs go to $OUT.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p /tmp/g "$out"
tar xzf build/attn-carry.tgz -C /tmp/g
lt=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets /opt /usr/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=/tmp/g/lib:$(dirname "${lt:-/usr/local/cuda/lib64/x}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,power.draw --format=csv,noheader
/tmp/g/bin/flash_attention_test 2>&1 | tee "$out/fa_test.log" | grep -E 'flash-attn|FAILED|PASSED|SKIPPED|Failure|error|Expected|Which is'
if [ "${SANITIZE:-1}" = 1 ]; then
  small='FlashAttention.RaggedHs64:FlashAttention.RaggedHs128:FlashAttention.SingleTokenHs64'
  timeout 90 compute-sanitizer --tool memcheck /tmp/g/bin/flash_attention_test --gtest_filter="$small" > "$out/fa_memcheck.log" 2>&1
  echo "memcheck rc=$?"; grep -E 'ERROR SUMMARY|Invalid|PASSED|FAILED' "$out/fa_memcheck.log" | head -8
  timeout 90 compute-sanitizer --tool racecheck /tmp/g/bin/flash_attention_test --gtest_filter='FlashAttention.RaggedShortHs64' > "$out/fa_racecheck.log" 2>&1
  echo "racecheck rc=$?"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard|PASSED|FAILED' "$out/fa_racecheck.log" | head -8
fi
IFS=';' read -ra shapes <<< "${SHAPES:-16 1024 12 64;32 1024 12 64}"  # "B T NH hs;..."
for shape in "${shapes[@]}"; do
  BIN=/tmp/g/bin/attention_gpu_bench OUT=$out bash bench/attention_gpu/run.sh $shape 2>&1 | tee -a "$out/fa_bench.log"
done
