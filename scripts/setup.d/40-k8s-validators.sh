#!/usr/bin/env bash
# Installs what tests/k8s/validate_manifests.mjs needs to check `llmtrain k8s render` output against
# upstream schemas: kubernetes-models (core kinds), ajv (JobSet/TrainJob/PyTorchJob CRD schemas from
# tests/k8s/schemas) and js-yaml, into .cache/k8s-validate (gitignored). Idempotent: nothing is
# fetched when the pinned versions are already installed.
set -euo pipefail
cd "$(dirname "$0")/../.."

DIR=.cache/k8s-validate
PKGS=(kubernetes-models@4.5.1 ajv@8.20.0 js-yaml@4.1.0)
STAMP="$DIR/.installed"
want="${PKGS[*]}"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -d "$DIR/node_modules/kubernetes-models" ]; then
  exit 0
fi
mkdir -p "$DIR"
[ -f "$DIR/package.json" ] || echo '{"name": "llmtrain-k8s-validate", "private": true}' > "$DIR/package.json"
echo "40-k8s-validators.sh: npm install ${PKGS[*]} into $DIR" >&2
npm install --loglevel=error --no-audit --no-fund --prefix "$DIR" "${PKGS[@]}" >/dev/null
echo "$want" > "$STAMP"
