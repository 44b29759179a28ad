#!/usr/bin/env bash
# Context reach on one GPU: the longest T at B = 1 that trains for the Llama-3.1-8B shape with LoRA r 16 on every
# linear layer (random base, bf16), ours (llama8b_lora.yaml: trainer.recompute all, the chunked LM head) then
# PEFT with gradient checkpointing (bench/train_gpu_llama/peft_checkpointing.py --shape 8b), on the corpus of
# shards.sh. For each T: `llmtrain validate`'s memory plan, the run's log (loss, step time, the trainer's GPU
# memory) and nvidia-smi's peak sampled every 200 ms; PEFT's lengths are tried in order until one runs out of
# memory. docs/benchmarks.md ("Long context on one GPU") has the figures.
# Usage (repository root, on the GPU host): bash bench/long_context/reach.sh [OURS_T=32768,65536] [STEPS=20]
#        [PEFT_T=8192,16384,32768,65536] [PEFT_STEPS=20] [LLMTRAIN=build/release/llmtrain]
set -uo pipefail
ours_t=${1:-32768,65536}
steps=${2:-20}
peft_t=${3:-8192,16384,32768,65536}
peft_steps=${4:-20}
bin=${5:-build/release/llmtrain}
out=${OUT:-/tmp/long_context}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
for T in ${ours_t//,/ }; do
  echo "== ours T=$T, $steps steps"
  "$bin" validate --config bench/long_context/llama8b_lora.yaml --set model.block_size="$T" | tail -1
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$out/smi_$T.txt" &
  smi=$!
  "$bin" train --config bench/long_context/llama8b_lora.yaml --set model.block_size="$T" \
    --set trainer.max_steps="$steps" --set output.root_dir="$out/runs_$T" > "$out/train_$T.log" 2>&1
  echo "train rc=$?"
  kill "$smi"; wait "$smi" 2>/dev/null
  grep -E "^step" "$out/train_$T.log" | sed -n '1p;$p'
  echo "nvidia-smi peak: $(sort -n "$out/smi_$T.txt" | tail -1) MiB"
done
echo "== PEFT + gradient checkpointing, 2 steps per T until out of memory"
python3 bench/train_gpu_llama/peft_checkpointing.py --shape 8b --batches 1 --seqs "$peft_t" --steps 1 --lr 2e-4 \
  --data data/shards/llama3_corpus/train_000000.bin --out "$out/peft_probe.jsonl"
longest=$(python3 -c "
import json
ok = [json.loads(l) for l in open('$out/peft_probe.jsonl') if l.strip() and not json.loads(l).get('oom')]
print(max(r['T'] for r in ok) if ok else 0)")
[ "$longest" -gt 0 ] && python3 bench/train_gpu_llama/peft_checkpointing.py --shape 8b --batches 1 --seqs "$longest" \
  --steps $((peft_steps - 1)) --lr 2e-4 --data data/shards/llama3_corpus/train_000000.bin --out "$out/peft_steps.jsonl"
