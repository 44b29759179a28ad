#!/usr/bin/env bash
# On the GPU machine: unpacks build/gpu-carry.tgz (tools/gpu/pack.sh) to /tmp/g, finds cuBLASLt, runs the
# CUDA test binaries given (default: every *_test* binary carried), printing each one's comparison lines
# and verdict; with MEMCHECK=1 also cuda_case_table_test under compute-sanitizer memcheck. Logs go to $OUT.
# The trainer test reads the default corpus from data/shards/gpt2_corpus (carry it).
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
source tools/gpu/env.sh
export LLMT_TEST_SHARDS=${LLMT_TEST_SHARDS:-$PWD/data/shards/gpt2_corpus}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=($(cd /tmp/g/bin && ls | grep _test))
for t in "${tests[@]}"; do
  timeout 300 /tmp/g/bin/$t > "$out/$t.log" 2>&1
  echo "== $t rc=$?"
  grep -E '\] |FAILED|PASSED|SKIPPED|Failure|error|Expected|Which is' "$out/$t.log" |
    grep -v '^\[ RUN\|^\[       OK' | cut -c1-200
done
if [ "${MEMCHECK:-0}" = 1 ]; then
  LLMTRAIN_CUDA_SYNC=1 timeout 240 compute-sanitizer --tool memcheck /tmp/g/bin/cuda_case_table_test \
    > "$out/memcheck.log" 2>&1
  echo "memcheck rc=$?"; grep -E 'ERROR SUMMARY|Invalid|FAILED|PASSED' "$out/memcheck.log" | head -20
fi
