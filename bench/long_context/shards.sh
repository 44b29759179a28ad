#!/usr/bin/env bash
# The default corpus (scripts/make_corpus.sh) tokenized with Llama 3's tokenizer (data/tokenizers/llama3) into
# data/shards/llama3_corpus, the data of this folder's runs (1.77M tokens; 7 MB). Skipped when present. Needs the
# corpus's Debian packages (make setup); on a GPU host without them, carry the shards over.
# Usage: bash bench/long_context/shards.sh [LLMTRAIN=build/release/llmtrain]
set -euo pipefail
bin=${1:-build/release/llmtrain}
out=data/shards/llama3_corpus
[ -f "$out/manifest.json" ] && exit 0
[ -f data/corpus/.complete ] || bash scripts/make_corpus.sh data/corpus
"$bin" data prepare --input data/corpus/bible data/corpus/fortunes --format text --doc-separator % \
  --tokenizer data/tokenizers/llama3 --val-fraction 0.02 --seed 0 --out "$out"
