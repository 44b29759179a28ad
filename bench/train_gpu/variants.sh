#!/usr/bin/env bash
# On the GPU machine (after tools/gpu/env.sh unpacked the carry to /tmp/g): one GPT-2 124M bf16 step time per
# speed variant, each switched by a knob of core/knobs.h (src/kernels/README.md#knobs; defaults: the fastest
# measured), in one call so the figures share a card. /tmp/g/bin/train_gpu_bench_base (optional) is the binary
# before the changes.
# Usage: bash bench/train_gpu/variants.sh [B=16]; prints "variant ms tok/s", logs under $OUT. The list below is
# the current knobs (earlier sessions' lists: git log -p of this file).
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
source tools/gpu/env.sh
B=${1:-16}
fusions_off="LLMTRAIN_CUDNN_ATTENTION=0 LLMTRAIN_FUSE_RESIDUAL=0 LLMTRAIN_FUSE_LN_COLSUM=0 LLMTRAIN_FUSE_ATTN_COLSUM=0"
variants=(
  "base|"
  "default|"
  "flash-attention|LLMTRAIN_CUDNN_ATTENTION=0"
  "adamw-per-run|LLMTRAIN_ADAMW_RUNS=0"
  "fusions-off|$fusions_off"
  "no-fused-residual|LLMTRAIN_FUSE_RESIDUAL=0"
  "no-ln-colsum|LLMTRAIN_FUSE_LN_COLSUM=0"
  "no-attn-colsum|LLMTRAIN_FUSE_ATTN_COLSUM=0"
  "default(again)|"
  "flash-attention(again)|LLMTRAIN_CUDNN_ATTENTION=0"
  "base(again)|"
)
summary=()
for v in "${variants[@]}"; do
  name=${v%%|*}
  envs=${v#*|}
  bin=/tmp/g/bin/train_gpu_bench
  case "$name" in base*) bin=/tmp/g/bin/train_gpu_bench_base; [ -x "$bin" ] || continue ;; esac
  log="$out/variant_$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_').log"
  env $envs "$bin" --batch "$B" --steps 10 --warmup 3 --no-check --no-peak > "$log" 2>&1
  rc=$?
  line=$(grep -E '^llmtrain cuda' "$log" | head -1)
  ms=$(echo "$line" | sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p')
  tok=$(echo "$line" | sed -n 's/.* \([0-9]*\) tokens\/s.*/\1/p')
  summary+=("$(printf '%-20s B=%-3s rc=%d %8s ms %9s tok/s' "$name" "$B" "$rc" "${ms:-?}" "${tok:-?}")")
done
printf '%s\n' "${summary[@]}" | tee "$out/variants.txt"
