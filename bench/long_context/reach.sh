#!/usr/bin/env bash
# Context reach on one GPU: the longest T at B = 1 that trains for the Llama-3.1-8B shape with LoRA r 16 on every
# linear layer (random base, bf16), ours (llama8b_lora.yaml: trainer.recompute all, the chunked LM head) then
# PEFT with gradient checkpointing (bench/train_gpu_llama/peft_checkpointing.py --shape 8b), on the corpus of
# shards.sh. For each of our T: `llmtrain validate`'s memory plan, the run's log (loss, step time, the trainer's
# GPU memory) and nvidia-smi's peak sampled every 200 ms. PEFT's lengths are tried longest first, each as a run
# of PEFT_STEPS steps, until one fits: that one is PEFT's reach. docs/benchmarks.md ("Context reach") has the
# figures.
# Usage (repository root, on the GPU host): bash bench/long_context/reach.sh [OURS_T=65536,131072] [STEPS=20]
#        [PEFT_T=73728,65536,49152,32768] [PEFT_STEPS=20] [LLMTRAIN=build/release/llmtrain]
# OURS_SET: more --set overrides for our runs, e.g. OURS_SET="trainer.lr=1e-3 trainer.min_lr=1e-4
# trainer.warmup_steps=5" (the 131,072-token run in docs/benchmarks.md). PEFT_T=none skips PEFT.
set -uo pipefail
ours_t=${1:-65536,131072}
steps=${2:-20}
peft_t=${3:-73728,65536,49152,32768}
peft_steps=${4:-20}
bin=${5:-build/release/llmtrain}
out=${OUT:-/tmp/long_context}
extra=()
for kv in ${OURS_SET:-}; do extra+=(--set "$kv"); done
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
for T in ${ours_t//,/ }; do
  echo "== ours T=$T, $steps steps"
  "$bin" validate --config bench/long_context/llama8b_lora.yaml --set model.block_size="$T" "${extra[@]}" \
    --set trainer.max_steps="$steps" | tail -1
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$out/smi_$T.txt" &
  smi=$!
  "$bin" train --config bench/long_context/llama8b_lora.yaml --set model.block_size="$T" "${extra[@]}" \
    --set trainer.max_steps="$steps" --set output.root_dir="$out/runs_$T" > "$out/train_$T.log" 2>&1
  echo "train rc=$?"
  kill "$smi"; wait "$smi" 2>/dev/null
  grep -E "^step" "$out/train_$T.log" | sed -n '1p;$p'
  echo "nvidia-smi peak: $(sort -n "$out/smi_$T.txt" | tail -1) MiB"
done
[ "$peft_t" = none ] && exit 0
echo "== PEFT + gradient checkpointing, $peft_steps steps per T, longest first, until one fits"
for T in ${peft_t//,/ }; do
  python3 bench/train_gpu_llama/peft_checkpointing.py --shape 8b --batches 1 --seqs "$T" --steps $((peft_steps - 1)) \
    --lr 2e-4 --data data/shards/llama3_corpus/train_000000.bin --out "$out/peft_$T.jsonl"
  grep -q '"oom": true' "$out/peft_$T.jsonl" || { echo "PEFT's reach: T=$T"; break; }
done
