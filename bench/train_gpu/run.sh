#!/usr/bin/env bash
# On the GPU machine, in one call: our engine (build/gpu-carry.tgz from tools/gpu/pack.sh) then the
# PyTorch peer, same card. Usage: bash bench/train_gpu/run.sh [B] ; logs under $OUT.
set -uo pipefail
B=${1:-16}
out=${OUT:-/tmp/out}
mkdir -p /tmp/g "$out"
tar xzf build/gpu-carry.tgz -C /tmp/g
lt=$(find /usr/local/cuda*/targets /usr/local/cuda*/lib64 -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=/tmp/g/lib:$(dirname "${lt:-/usr/local/cuda/lib64/x}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
/tmp/g/bin/train_gpu_bench --batch "$B" 2>&1 | tee "$out/ours_fp32.log"
LLMTRAIN_CUDA_TF32=1 /tmp/g/bin/train_gpu_bench --batch "$B" --no-check 2>&1 | tee "$out/ours_tf32.log" | tail -1
PYTHONUNBUFFERED=1 timeout 300 python3 bench/train_gpu/torch_gpu_gpt2.py --out "$out" --batch "$B" --modes eager,compile \
  --steps 10 --warmup 4 2>&1 | tee "$out/torch.log" | tail -15
