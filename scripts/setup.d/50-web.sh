#!/usr/bin/env bash
# Builds the dashboard that `llmtrain serve` serves at / (docs/server.md "Dashboard"): `npm ci` in web/
# (uPlot, and playwright-core for tests/server/dashboard_test; versions pinned by web/package-lock.json)
# then `npm run build` into web/dist. Both are gitignored. Idempotent: npm ci runs only when the lock
# file changed since the last install, the build only when web/src or the lock file is newer than dist.
set -euo pipefail
cd "$(dirname "$0")/../../web"

STAMP=node_modules/.llmtrain-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  echo "50-web.sh: npm ci in web/" >&2
  npm ci --loglevel=error --no-audit --no-fund >/dev/null
  echo "$want" > "$STAMP"
fi
if [ ! -f dist/index.html ] ||
   [ -n "$(find src package-lock.json build.mjs -newer dist/index.html -print -quit)" ]; then
  npm run --silent build
fi
