#!/usr/bin/env bash
# Re-renders deploy/examples/<scenario>/manifests.yaml for every line of deploy/examples/scenarios.txt
# (run after a change to src/k8s or to the config schema; tests/k8s/manifests_test.cpp diffs them).
# Usage: scripts/render_k8s_examples.sh [path/to/llmtrain]   (default: build/release/llmtrain)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/release/llmtrain}
EX=deploy/examples
grep -v '^\s*#' "$EX/scenarios.txt" | grep -v '^\s*$' | while read -r scenario args; do
  mkdir -p "$EX/$scenario"
  # shellcheck disable=SC2086  # args are plain words by construction
  "$BIN" k8s render --config "$EX/config.yaml" $args -o "$EX/$scenario/manifests.yaml"

done
