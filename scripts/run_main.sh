#!/usr/bin/env bash
# The main job of `make run` (after setup and build): prepare the default corpus, train the default
# preset (gpt2_tiny_cpu: 4 layers, d=256, T=256 on 2 cores) and print a sample from the trained model.
# Each `make run` is a new run under runs/; RUN_ID=... reuses one (resumed if it has a checkpoint);
# MAX_STEPS=N trains N steps instead of the preset's, with N/10 warmup steps (make test-fresh uses it).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/release/llmtrain
PRESET=configs/presets/gpt2_tiny_cpu.yaml
RUN_ID=${RUN_ID:-gpt2-tiny-$(date -u +%Y%m%dT%H%M%SZ)}

make --no-print-directory data
"$BIN" version
"$BIN" validate --config "$PRESET"
"$BIN" train --config "$PRESET" --set output.run_id="$RUN_ID" \
  ${MAX_STEPS:+--set trainer.max_steps=$MAX_STEPS --set trainer.warmup_steps=$((MAX_STEPS / 10))} \
  --resume auto
echo
echo "== summary (runs/$RUN_ID/summary.json)"
cat "runs/$RUN_ID/summary.json"
echo
echo "== sample (llmtrain generate --checkpoint runs/$RUN_ID --prompt 'And God said')"
"$BIN" generate --checkpoint "runs/$RUN_ID" --prompt "And God said" --max-new-tokens 60 --temperature 0.8 --top-k 40 \
  --seed 1337 --set run.threads=1
echo
