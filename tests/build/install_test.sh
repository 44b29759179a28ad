#!/usr/bin/env bash
# `make install`'s rules (cmake/Install.cmake) with DESTDIR: the binary in PREFIX/bin and what it reads at
# run time in PREFIX/share/llmtrain; the installed binary, run from a directory with no checkout around
# it, finds the GPT-2 tokenizer, the throughput table and the presets there.
set -euo pipefail
BUILD=$1
SRC=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
DESTDIR="$work/stage" cmake --install "$BUILD" --prefix /opt/llmt >"$work/install.log"
root="$work/stage/opt/llmt"
for f in bin/llmtrain share/llmtrain/tokenizers/gpt2.tiktoken share/llmtrain/configs/throughput.jsonl \
         share/llmtrain/configs/presets/gpt2_tiny_cpu.yaml; do
  [ -e "$root/$f" ] || { cat "$work/install.log"; echo "FAIL: $f not installed"; exit 1; }
done
if [ -f "$SRC/web/dist/index.html" ] && [ ! -f "$root/share/llmtrain/web/index.html" ]; then
  echo "FAIL: web/dist is built but not installed"; exit 1
fi
mkdir "$work/elsewhere" && cd "$work/elsewhere"
ids=$(printf 'Hello world' | "$root/bin/llmtrain" tokenize --tokenizer gpt2)
[ "$(echo $ids)" = "15496 995" ] || { echo "FAIL: tokenize from the installed share/: '$ids'"; exit 1; }
out=$("$root/bin/llmtrain" estimate --config "$root/share/llmtrain/configs/presets/gpt2_tiny_cpu.yaml" 2>&1) || true
echo "$out" | grep -q "share/llmtrain/configs/throughput.jsonl" ||
  { echo "$out"; echo "FAIL: throughput table not found"; exit 1; }
echo "$out" | grep -q '\$0\.0000' && { echo "$out"; echo "FAIL: a \$0 cost without rates"; exit 1; }
echo ok
