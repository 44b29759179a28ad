#!/usr/bin/env bash
# On the GPU machine, in one call: the RMSNorm cases of the CUDA op tests (fp32 and bf16, against the CPU op), the
# LLaMA model's CUDA-vs-CPU step test, the backward under compute-sanitizer memcheck and racecheck, then
# bench/llama_ops_gpu at 8192 and 16384 rows (src's rmsnorm_backward beside the kernel lab's version 1, which it
# replaced, and the lab's other rows per step); a short summary last, logs in $OUT.
# Here: tools/gpu/pack.sh build/gpu-carry build/release/tests/kernels/cuda_case_table_test \
#   build/release/tests/models/llama_cuda_test \
#   build/release/bench/llama_ops_gpu/llama_ops_gpu_bench
# There (carry build/gpu-carry.tgz): bash tools/gpu/rmsnorm_check.sh. SANITIZE=0 skips the sanitizers;
# STEP_TIMEOUT (seconds, default 80) bounds each of the 7 runs, so that even all of them stuck fit one
# 10-minute device call.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
rm -rf /tmp/g  # env.sh unpacks only into an empty /tmp/g: never test binaries an earlier call left there
source tools/gpu/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
bin=/tmp/g/bin
fp32_filter='CaseTable/CudaVsCpu.Matches/*rmsnorm_*'
bf16_filter='CaseTable/Bf16VsCpu.Matches/*rmsnorm_*:CaseTable/Bf16VsCpu.Matches/swiglu_*'
bf16_filter+=':CaseTable/Bf16VsCpu.Matches/rope_*'
declare -A status
# run NAME CMD...: CMD's output to $OUT/NAME.log, its exit status to status[NAME].
run() {
  local name=$1
  shift
  timeout "${STEP_TIMEOUT:-80}" "$@" > "$out/$name.log" 2>&1
  status[$name]=$?
  echo "== $name rc=${status[$name]}"
}
run test_fp32 "$bin/cuda_case_table_test" --gtest_filter="$fp32_filter"
run test_bf16 "$bin/cuda_case_table_test" --gtest_filter="$bf16_filter"
run test_llama "$bin/llama_cuda_test"
if [ "${SANITIZE:-1}" = 1 ]; then
  san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  if [ -n "$san" ]; then
    run memcheck env LLMTRAIN_CUDA_SYNC=1 "$san" --tool memcheck --error-exitcode 99 "$bin/cuda_case_table_test" \
      --gtest_filter="$fp32_filter"
    run racecheck "$san" --tool racecheck --error-exitcode 99 "$bin/cuda_case_table_test" --gtest_filter="$fp32_filter"
  else
    echo "compute-sanitizer not found: sanitizers skipped"
  fi
fi
for rows in 8192 16384; do run "bench_$rows" "$bin/llama_ops_gpu_bench" --rows "$rows"; done

echo
echo "== summary"
for t in test_fp32 test_bf16 test_llama; do
  printf '%-10s rc=%s  %s\n' "$t" "${status[$t]}" "$(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$t.log" | tr '\n' ' ')"
  grep -E 'FAILED  \]|Failure' "$out/$t.log" | head -8
  # The largest error of the backward's comparisons, against its tolerance.
  awk '/rmsnorm_backward/ {for (i = 1; i <= NF; i++) if ($i == "err") print $(i + 1), $0}' "$out/$t.log" |
    sort -g | tail -1 | cut -d' ' -f2- | sed 's/^/    worst: /'
done
for s in memcheck racecheck; do
  [ -n "${status[$s]+x}" ] || continue
  printf '%-10s rc=%s  %s\n' "$s" "${status[$s]}" \
    "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$s.log" | tr '\n' ' ')"
done
for rows in 8192 16384; do
  echo "bench rows=$rows (rc=${status[bench_$rows]}):"
  grep -E '^llama ops|^op |^rmsnorm|^  lab' "$out/bench_$rows.log" | sed 's/^/    /'
done
