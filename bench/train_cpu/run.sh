#!/usr/bin/env bash
# Training throughput on CPU, ours vs PyTorch, in one run (issues 4 and 26): tiny and small GPT-2 shapes, ours
# fp32 and bf16 GEMMs (where the CPU has AVX512_BF16) vs PyTorch 1.13 fp32 and PyTorch with CPU bf16 autocast;
# then the same with 2 busy processes on the cores (tokens per CPU-second idle vs loaded, training and
# `llmtrain generate` against PyTorch's greedy KV-cache decode of the same shape, torch_generate.py). Prints the
# CPU (family/model/ISA) with the figures. The driver is compare.py (BENCH_ARGS=--generate-only: generation only).
#   configs: tiny  = 4 layers, d=256, 4 heads, T=256, B=8, vocab 50257
#            small = 6 layers, d=384, 6 heads, T=256, B=8, vocab 50257
# Usage: bench/train_cpu/run.sh [BUILD_DIR] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/release}
STEPS=${2:-12}
exec /usr/bin/python3 bench/train_cpu/compare.py --bin "$BUILD/llmtrain" --steps "$STEPS" ${BENCH_ARGS:-}
