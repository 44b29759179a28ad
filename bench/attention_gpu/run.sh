#!/usr/bin/env bash
# On the GPU machine: our flash attention bench and PyTorch's SDPA, same shapes, one invocation.
# BIN: the attention_gpu_bench binary (default build/attn/bench/attention_gpu/attention_gpu_bench).
# VARIANTS="d 1 2": also time flash_attention.cu's other tile shapes (d = default) side by side.
# Usage: bench/attention_gpu/run.sh [B T NH hs]   (defaults: GPT-2 124M, 16 1024 12 64)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${BIN:-build/attn/bench/attention_gpu/attention_gpu_bench}
B=${1:-16} T=${2:-1024} NH=${3:-12} HS=${4:-64}
out=${JSON_DIR:-${OUT:-/tmp}}  # where the per-variant JSON files go
files=()
for v in ${VARIANTS:-d}; do
  f="$out/attn_ours_${B}_${T}_${HS}_$v.json"
  if [ "$v" = d ]; then
    "$bin" --B "$B" --T "$T" --NH "$NH" --hs "$HS" --json "$f"
  else
    LLMT_FLASH_FWD_VARIANT=$v LLMT_FLASH_BWD_VARIANT=$v "$bin" --B "$B" --T "$T" --NH "$NH" --hs "$HS" --json "$f"
  fi
  files+=("$f")
done
python3 "$here/torch_sdpa.py" --B "$B" --T "$T" --NH "$NH" --hs "$HS" --ours "${files[@]}"
