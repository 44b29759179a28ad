#!/usr/bin/env bash
# bench/train_gpu_llama: a training step of a Llama-3.2-1B-shaped model (random weights; 16 layers, d 2048,
# 32 heads / 8 KV heads, FFN 8192, vocab 128,256, tied, T 2048) on one GPU: ours (train_gpu_bench --arch
# llama, fp32 master weights + bf16 compute) then PyTorch + transformers (bench/train_gpu_llama/torch_gpu_llama.py,
# torch.compile, fused AdamW, SDPA) in the same call on the same card, and the ratio.
# SHAPE llama (the default), llama3.1-8b, qwen2.5-1.5b or qwen3-1.7b (train_gpu_bench --arch; the peer's --shape);
# LORA_R > 0: ours with LoRA adapters of that rank on every linear layer (compare with the peer's peft or lora
# modes).
# On the GPU machine: bash bench/train_gpu_llama/run.sh [TORCH_GPU_LLAMA_PY] [BATCH=4] [TORCH_MODES] [SHAPE=llama]
#   [LORA_R=0] [STEPS=8]   (BENCH_BIN: our binary, default /tmp/g/bin/train_gpu_bench from tools/gpu/env.sh)
set -uo pipefail
peer=$(realpath "${1:-bench/train_gpu_llama/torch_gpu_llama.py}")
B=${2:-4}
MODES=${3:-full-mixed:compile,full-bf16:compile,full-mixed:eager}
SHAPE=${4:-llama}
LORA_R=${5:-0}
STEPS=${6:-8}
out=${OUT:-/tmp/out}
mkdir -p "$out"
if [ -z "${BENCH_BIN:-}" ]; then source tools/gpu/env.sh; BENCH_BIN=/tmp/g/bin/train_gpu_bench; fi
peer_shape=$SHAPE; [ "$SHAPE" = llama ] && peer_shape=llama3.2-1b
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.sm --format=csv,noheader
"$BENCH_BIN" --arch "$SHAPE" --lora "$LORA_R" --batch "$B" --T 2048 --steps "$STEPS" --warmup 3 \
  --json "$out/ours.jsonl" > "$out/ours.log" 2>&1
echo "train_gpu_bench rc=$?"; grep -v '^  step' "$out/ours.log" | tail -5
(cd "$out" && PYTHONUNBUFFERED=1 timeout "${PEER_TIMEOUT:-480}" python3 "$peer" --modes "$MODES" --batch "$B" \
  --seq 2048 --steps "$STEPS" --shape "$peer_shape" --out "$out/torch.jsonl" > "$out/torch.log" 2>&1)
echo "torch rc=$?"; tail -6 "$out/torch.log" | cut -c1-300
python3 - "$out/ours.jsonl" "$out/torch.jsonl" <<'PY'
import json, os, sys
def rows(path, keep):  # a run cut short (timeout) may have written nothing
    return [json.loads(l) for l in open(path) if keep(l)] if os.path.exists(path) else []
ours = rows(sys.argv[1], lambda l: '"tok_s"' in l)
theirs = rows(sys.argv[2], lambda l: l.strip().startswith("{"))
if not theirs:
    print("torch: no result (see torch.log)")
for o in ours:
    print(f"llmtrain {o['arch']} {o['dtype']} lora_r={o['lora_r']} B={o['B']}: {o['tok_s']:.0f} tok/s, "
          f"MFU {100*o['mfu_989']:.1f}% of 989, {o['gib']:.1f} GiB")
for t in theirs:
    if t.get("oom"):
        print(f"torch {t['mode']}:{t['compile']}: out of memory")
        continue
    ratio = f" -> ours/theirs {ours[0]['tok_s'] / t['tokens_per_s']:.3f}x" if ours else ""
    print(f"torch {t['mode']}:{t['compile']}: {t['tokens_per_s']:.0f} tok/s, MFU {100 * t['mfu_989']:.1f}%, "
          f"peak {t['peak_gib']:.1f} GiB{ratio}")
PY
