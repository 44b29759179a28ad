#!/usr/bin/env bash
# On the GPU machine: our flash attention bench, cuDNN's through our backend-API graph, and PyTorch's SDPA,
# same shapes, one invocation.
# BIN: the attention_gpu_bench binary (default build/attn/bench/attention_gpu/attention_gpu_bench).
# VARIANTS="d 1.1.- -.-.8 -.-.-.4": also time other settings of flash_attention.cu side by side; each token is
# d (defaults) or FWD.BWD.GROUP[.HPB] (LLMT_FLASH_FWD_VARIANT, LLMT_FLASH_BWD_VARIANT, LLMT_FLASH_GROUP,
# LLMT_FLASH_HPB: query heads per backward block under grouped-query attention; - = default).
# Usage: bench/attention_gpu/run.sh [B T NH hs [KV]]   (defaults: GPT-2 124M, 16 1024 12 64; KV = NH)
# KV < NH: grouped-query attention (e.g. Llama-3.2-1B: 1 2048 32 64 8).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${BIN:-build/attn/bench/attention_gpu/attention_gpu_bench}
B=${1:-16} T=${2:-1024} NH=${3:-12} HS=${4:-64} KV=${5:-${3:-12}}
out=${JSON_DIR:-${OUT:-/tmp}}  # where the per-variant JSON files go
files=()
for v in ${VARIANTS:-d}; do
  env=()
  if [ "$v" != d ]; then
    IFS=. read -r fv bv gv hv <<< "$v"
    [ "${fv:--}" != - ] && env+=("LLMT_FLASH_FWD_VARIANT=$fv")
    [ "${bv:--}" != - ] && env+=("LLMT_FLASH_BWD_VARIANT=$bv")
    [ "${gv:--}" != - ] && env+=("LLMT_FLASH_GROUP=$gv")
    [ "${hv:--}" != - ] && env+=("LLMT_FLASH_HPB=$hv")
  fi
  f="$out/attn_ours_${B}_${T}_${NH}_${KV}_${HS}_${v//[^0-9a-z]/_}.json"
  env "${env[@]}" "$bin" --B "$B" --T "$T" --NH "$NH" --KV "$KV" --hs "$HS" --json "$f"
  files+=("$f")
done
# cuDNN's fused attention through our backend-API graph (kernels/cuda/cudnn_attention.h), as the row
# "ours-cudnn"; skipped (the bench says why, exit 3) where the binary or the machine lacks cuDNN. CUDNN=0: off.
if [ "${CUDNN:-1}" = 1 ]; then
  f="$out/attn_ours_${B}_${T}_${NH}_${KV}_${HS}_cudnn.json"
  if "$bin" --impl cudnn --B "$B" --T "$T" --NH "$NH" --KV "$KV" --hs "$HS" --json "$f"; then files+=("$f"); fi
fi
python3 "$here/torch_sdpa.py" --B "$B" --T "$T" --NH "$NH" --KV "$KV" --hs "$HS" --ours "${files[@]}"
