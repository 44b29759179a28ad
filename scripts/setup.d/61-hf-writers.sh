#!/usr/bin/env bash
# Installs the independent Parquet and Arrow IPC writers (hyparquet-writer, apache-arrow) that
# tests/data/hf_dataset_test.cpp writes its inputs with, by `npm ci` in tests/data/hf_writer/ (versions
# pinned by package-lock.json). node_modules is gitignored. Idempotent: npm ci runs only when the lock
# file changed since the last install or a package is missing.
set -euo pipefail
cd "$(dirname "$0")/../../tests/data/hf_writer"

STAMP=node_modules/.llmtrain-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -d node_modules/hyparquet-writer ] || [ ! -d node_modules/apache-arrow ] || [ ! -f "$STAMP" ] ||
   [ "$(cat "$STAMP")" != "$want" ]; then
  echo "61-hf-writers.sh: npm ci in tests/data/hf_writer/" >&2
  if ! npm ci --loglevel=error --no-audit --no-fund >/dev/null; then
    echo "61-hf-writers.sh: 'npm ci' failed in tests/data/hf_writer (no network or no npm registry?);" \
         "the Hugging Face dataset tests (tests/data/hf_dataset_test.cpp) need these writers" >&2
    exit 1
  fi
  echo "$want" > "$STAMP"
fi
