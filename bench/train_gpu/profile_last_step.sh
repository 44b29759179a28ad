#!/usr/bin/env bash
# On the GPU machine (after tools/gpu/env.sh unpacked the carry to /tmp/g): per-kernel GPU time of the LAST of
# two bf16 training steps of train_gpu_bench through Nsight Compute (one metric, clocks and caches left alone),
# so the first step's one-time work (cuBLASLt algorithm timing, plan building) stays out. GEMM kernels are
# summed as one line beside the top individual ones.
# Usage: bash bench/train_gpu/profile_last_step.sh [B=8] [ARCH=gpt2] [LORA_R=0] [T=1024]
#   ARCH: train_gpu_bench's --arch (gpt2, llama = the Llama-3.2-1B shape, llama3.1-8b, qwen2.5-1.5b, qwen3-1.7b);
#   LORA_R > 0: LoRA adapters of that rank on every linear layer. LLMTRAIN_LM_HEAD_ROWS=all profiles the
#   unfused LM head.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
source tools/gpu/env.sh
B=${1:-8}
ARCH=${2:-gpt2}
LORA_R=${3:-0}
T=${4:-1024}
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 300 "${ncu:-ncu}" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
  /tmp/g/bin/train_gpu_bench --arch "$ARCH" --lora "$LORA_R" --batch "$B" --T "$T" --steps 1 --warmup 1 \
  --no-check --no-peak \
  > "$out/ncu_last.csv" 2> "$out/ncu_last.err"
echo "ncu rc=$?"
python3 - "$out/ncu_last.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; k = hdr.index("Kernel Name"); v = hdr.index("Metric Value"); u = hdr.index("Metric Unit")
rows = rows[1:]
starts = [i for i, r in enumerate(rows) if r[k].startswith("void llmt::") and "encoder_forward" in r[k]]
rows = rows[starts[-1]:] if starts else rows  # the last step: from its embedding lookup on
tot = collections.Counter(); cnt = collections.Counter(); gemm = 0.0; ngemm = 0
for r in rows:
    scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}[r[u]]
    t = float(r[v].replace(",", "")) * scale
    name = r[k].split("(")[0][:70]
    if any(s in name for s in ("nvjet", "gemm", "xmma", "splitK", "cublas", "Bgrad")):
        gemm += t; ngemm += 1
    tot[name] += t; cnt[name] += 1
s = sum(tot.values())
print(f"last step: GPU time {s:.2f} ms over {len(rows)} kernels; cuBLASLt {gemm:.2f} ms ({ngemm} kernels)")
for n, t in tot.most_common(22): print(f"{t:8.3f} ms {100*t/s:5.1f}% x{cnt[n]:3d} {n}")
PY
