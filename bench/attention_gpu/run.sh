#!/usr/bin/env bash
# On the GPU machine: our flash attention bench and PyTorch's SDPA, same shapes, one invocation.
# BIN: the attention_gpu_bench binary (default build/attn/bench/attention_gpu/attention_gpu_bench).
# Usage: bench/attention_gpu/run.sh [B T NH hs]   (defaults: GPT-2 124M, 16 1024 12 64)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${BIN:-build/attn/bench/attention_gpu/attention_gpu_bench}
B=${1:-16} T=${2:-1024} NH=${3:-12} HS=${4:-64}
out=${OUT:-/tmp}
"$bin" --B "$B" --T "$T" --NH "$NH" --hs "$HS" --json "$out/attn_ours_${B}_${T}_${HS}.json"
python3 "$here/torch_sdpa.py" --B "$B" --T "$T" --NH "$NH" --hs "$HS" --ours "$out/attn_ours_${B}_${T}_${HS}.json"
