#!/usr/bin/env bash
# On the GPU machine: unpacks build/gpu-carry.tgz (tools/gpu/pack.sh), finds cuBLASLt, runs the CUDA op
# test, then the same under compute-sanitizer memcheck; logs go to $OUT.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p /tmp/g "$out"
tar xzf build/gpu-carry.tgz -C /tmp/g
lt=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets /opt /usr/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=/tmp/g/lib:$(dirname "${lt:-/usr/local/cuda/lib64/x}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "cublasLt: ${lt:-not found}"
ldd /tmp/g/bin/cuda_ops_test | grep -E 'not found|cublas' || true
/tmp/g/bin/cuda_ops_test 2>&1 | tee "$out/cuda_ops_test.log" | grep -E 'cuda-vs-cpu|FAILED|PASSED|SKIPPED|Failure|error' 
if [ "${MEMCHECK:-1}" = 1 ]; then
  LLMTRAIN_CUDA_SYNC=1 timeout 240 compute-sanitizer --tool memcheck /tmp/g/bin/cuda_ops_test > "$out/memcheck.log" 2>&1
  echo "memcheck rc=$?"; grep -E 'ERROR SUMMARY|Invalid|FAILED|PASSED' "$out/memcheck.log" | head -20
fi
