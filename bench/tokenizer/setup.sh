#!/usr/bin/env bash
# Installs the benchmark's npm peers into bench/.npm (gitignored): tiktoken (OpenAI's Rust core as WASM)
# and gpt-tokenizer (the fastest JavaScript GPT-2 tokenizer). Idempotent: nothing is fetched when the
# pinned versions are already there.
set -euo pipefail
cd "$(dirname "$0")/../.."
want_tiktoken=1.0.22
want_gpt_tokenizer=4.0.0
version_of() { node -p "require('./bench/.npm/node_modules/$1/package.json').version" 2>/dev/null || true; }
if [ "$(version_of tiktoken)" = "$want_tiktoken" ] && [ "$(version_of gpt-tokenizer)" = "$want_gpt_tokenizer" ]; then
  exit 0
fi
mkdir -p bench/.npm
echo "bench/tokenizer/setup.sh: npm install tiktoken@$want_tiktoken" \
  "gpt-tokenizer@$want_gpt_tokenizer into bench/.npm" >&2
npm install --silent --no-audit --no-fund --prefix bench/.npm \
  "tiktoken@$want_tiktoken" "gpt-tokenizer@$want_gpt_tokenizer" >/dev/null
