#!/usr/bin/env bash
# On the GPU machine, in one call: our engine (build/gpu-carry.tgz from tools/gpu/pack.sh, unpacked to
# /tmp/g unless already there) then the PyTorch peer, same card, then the side-by-side table (compare.py).
# Usage: bash bench/train_gpu/run.sh [BATCHES=16,32] [TORCH_MODES=eager,compile]; logs under $OUT.
set -uo pipefail
BATCHES=${1:-16,32}
MODES=${2:-eager,compile}
out=${OUT:-/tmp/out}
mkdir -p "$out"
source tools/gpu/env.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.sm --format=csv,noheader
/tmp/g/bin/train_gpu_bench --batch "$BATCHES" --json "$out/ours.jsonl" > "$out/ours.log" 2>&1
echo "train_gpu_bench rc=$?"; grep -v '^  step' "$out/ours.log"
PYTHONUNBUFFERED=1 timeout 420 python3 bench/train_gpu/torch_gpu_gpt2.py --out "$out" --batch "$BATCHES" \
  --modes "$MODES" --steps 10 --warmup 4 > "$out/torch.log" 2>&1
echo "torch rc=$?"; grep -E '^torch|^bf16|^device|FAILED' "$out/torch.log" | cut -c1-220
python3 bench/train_gpu/compare.py "$out/ours.jsonl" "$out/torch_summary.json"
