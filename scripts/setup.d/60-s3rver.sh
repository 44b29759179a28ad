#!/usr/bin/env bash
# Installs s3rver, the S3-compatible server tests/storage runs against (docs/object_storage.md), with
# `npm ci` in tests/storage/s3rver/ (s3rver 3.7.1 and its dependencies pinned by package-lock.json).
# node_modules is gitignored. Idempotent: npm ci runs only when the lock file changed since the last
# install or the server is missing.
set -euo pipefail
cd "$(dirname "$0")/../../tests/storage/s3rver"

STAMP=node_modules/.llmtrain-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -x node_modules/.bin/s3rver ] || [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  echo "60-s3rver.sh: npm ci in tests/storage/s3rver/" >&2
  if ! npm ci --loglevel=error --no-audit --no-fund >/dev/null; then
    echo "60-s3rver.sh: 'npm ci' failed in tests/storage/s3rver (no network or no npm registry?);" \
         "the object-storage tests (tests/storage) need s3rver" >&2
    exit 1
  fi
  echo "$want" > "$STAMP"
fi
