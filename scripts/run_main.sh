#!/usr/bin/env bash
# The main job of `make run`: checks and prints the default preset's resolved config.
# (The training engine replaces this with training the default preset on the default corpus.)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/release/llmtrain
PRESET=configs/presets/gpt2_tiny_cpu.yaml
"$BIN" version
"$BIN" validate --config "$PRESET"
"$BIN" print-config --config "$PRESET"
