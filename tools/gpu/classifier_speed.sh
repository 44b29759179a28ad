#!/usr/bin/env bash
# On the GPU machine: the classifier's CUDA speed work (issue 21) in one command: the CUDA image-op tests
# (cuda_conv_test: conv/pool/ReLU, pixel normalisation and the evaluation's argmax + loss sum against the
# CPU ops), the CPU-vs-CUDA training check (tools/gpu/classifier_check.sh) and ours vs torch.compile at
# batch 512 (bench/classifier_gpu/run.sh). Needs build/gpu-carry.tgz from
#   tools/gpu/pack.sh build/gpu-carry build/release/llmtrain build/release/tests/kernels/cuda_conv_test
# carried (device tool: carry ["build/gpu-carry.tgz"]). Logs under $OUT.
# Usage: bash tools/gpu/classifier_speed.sh [STEPS]
set -uo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-200}
source tools/gpu/env.sh  # /tmp/g/bin, LD_LIBRARY_PATH for the scripts below
bash tools/gpu/run_cuda_tests.sh cuda_conv_test
bash tools/gpu/classifier_check.sh /tmp/g/bin/llmtrain
bash bench/classifier_gpu/run.sh /tmp/g/bin/llmtrain "$steps" python3
