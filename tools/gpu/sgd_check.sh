#!/usr/bin/env bash
# On the GPU machine: trainer.optimizer sgd on CUDA (issue 21). 1) cuda_case_table_test's sgd rows (the CUDA
# kernel against the CPU one: momentum, Nesterov, dampening, plain; the bf16 copy; the gap between runs
# untouched) beside the adamw rows; 2) the SGD MLP preset and the CNN preset with SGD for 60 steps on the
# CPU and on CUDA (tools/gpu/classifier_check.sh): the losses side by side, which should agree to ~5
# decimals as AdamW's do.
# Usage: here `bash tools/gpu/pack.sh build/gpu-carry build/release/llmtrain
# build/release/tests/kernels/cuda_case_table_test` (writes build/gpu-carry.tgz); on the GPU machine, carrying
# build/gpu-carry.tgz: `rm -rf /tmp/g; bash tools/gpu/sgd_check.sh` (env.sh unpacks to /tmp/g only when
# it is absent; logs under $OUT).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
/tmp/g/bin/cuda_case_table_test \
  --gtest_filter='CaseTable/CudaVsCpu.Matches/sgd_*:CaseTable/CudaVsCpu.Matches/adamw_*' \
  2>&1 | grep -E 'cuda-vs-cpu|OK|FAILED|Failure|PASSED'
echo "== fashion_mnist_mlp_sgd"
PRESET=configs/presets/fashion_mnist_mlp_sgd.yaml bash tools/gpu/classifier_check.sh /tmp/g/bin/llmtrain
echo "== fashion_mnist_cnn with sgd"
EXTRA="--set trainer.optimizer=sgd --set trainer.betas=[0.9,0.95] --set trainer.nesterov=true --set trainer.lr=0.05" \
  bash tools/gpu/classifier_check.sh /tmp/g/bin/llmtrain
