#!/usr/bin/env bash
# The fused LM head against the unfused one over a whole run: 1,000 bf16 steps of the Llama-3.2-1B shape on the
# corpus of shards.sh (llama1b_head_curve.yaml, B 4, T 1024), once with the head in chunks of 1024 rows
# (LLMTRAIN_LM_HEAD_ROWS=1024: 4 chunks of the 4096 rows) and once with one chunk of all rows
# (LLMTRAIN_LM_HEAD_ROWS=all: the whole batch's logits), same seed and data; head_curve_compare.py prints the
# largest relative loss difference over the logged steps (the target: within 0.5% at every one).
# The CPU variant: llama_tiny_head_curve_cpu.yaml with ROWS=256 (deterministic fp32, no GPU needed).
# Usage (repository root, on the GPU host): bash bench/long_context/head_curve.sh [LLMTRAIN=build/release/llmtrain]
#        [CONFIG=bench/long_context/llama1b_head_curve.yaml] [ROWS=1024]
set -uo pipefail
bin=${1:-build/release/llmtrain}
config=${2:-bench/long_context/llama1b_head_curve.yaml}
fused=${3:-1024}
out=${OUT:-/tmp/head_curve}
mkdir -p "$out"
for rows in "$fused" all; do
  LLMTRAIN_LM_HEAD_ROWS=$rows "$bin" train --config "$config" --set output.root_dir="$out/runs_$rows" \
    > "$out/train_$rows.log" 2>&1
  echo "head rows $rows: rc=$?"
  cp "$out"/runs_"$rows"/*/metrics.jsonl "$out/metrics_$rows.jsonl"
done
python3 bench/long_context/head_curve_compare.py "$out/metrics_$fused.jsonl" "$out/metrics_all.jsonl"
