#!/usr/bin/env bash
# The commands the docs show, run as written, so the docs cannot drift from the program: every fenced block
# of README.md and docs/*.md opened with "```sh runnable" runs in bash (-euo pipefail) in a fresh working
# directory that has the checkout's configs/ and data/tokenizers/ and `llmtrain` on PATH, and every block
# opened with "```yaml validate" must pass `llmtrain validate` as written. Blocks marked so keep their own
# settings short (a few steps). Fails when a block fails (its output is printed) or when no block is marked.
# Usage: docs_commands_test.sh CHECKOUT LLMTRAIN_BINARY
set -euo pipefail
src=$(cd "$1" && pwd)
bin=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
ln -s "$bin" "$work/bin/llmtrain"

# Extracts the marked blocks of one file into $work/blocks/<n>.<kind> with <n>.where = "FILE:LINE".
n=0
extract() {
  local file=$1 rel=${1#"$src"/}
  awk -v out="$work/blocks" -v rel="$rel" -v start="$n" '
    BEGIN { k = start }
    /^```/ {
      if (kind != "") { close(path); kind = ""; next }
      if ($0 == "```sh runnable") kind = "sh"
      else if ($0 == "```yaml validate") kind = "yaml"
      else { skip = !skip; next }
      k++; path = out "/" k "." kind
      printf "%s:%d\n", rel, NR > (out "/" k ".where"); close(out "/" k ".where")
      printf "" > path
      next
    }
    kind != "" { print >> path }
    END { print k > (out "/count") }
  ' "$file"
  n=$(cat "$work/blocks/count")
}
mkdir -p "$work/blocks"
for f in "$src/README.md" "$src"/docs/*.md; do extract "$f"; done

if [ "$n" -eq 0 ]; then
  echo "docs_commands_test: no block marked '\`\`\`sh runnable' or '\`\`\`yaml validate' in README.md or docs/*.md" >&2
  exit 1
fi

failed=0
for i in $(seq 1 "$n"); do
  where=$(cat "$work/blocks/$i.where")
  dir="$work/run$i"
  mkdir -p "$dir/data"
  ln -s "$src/configs" "$dir/configs"
  ln -s "$src/data/tokenizers" "$dir/data/tokenizers"
  start=$(date +%s)
  rc=0
  if [ -e "$work/blocks/$i.sh" ]; then
    kind=sh
    ( cd "$dir" && PATH="$work/bin:$PATH" timeout 600 bash -euo pipefail "$work/blocks/$i.sh" ) \
      > "$dir/output.txt" 2>&1 || rc=$?
  else
    kind=yaml
    ( cd "$dir" && cp "$work/blocks/$i.yaml" block.yaml && "$bin" validate --config block.yaml ) \
      > "$dir/output.txt" 2>&1 || rc=$?
  fi
  if [ $rc -eq 0 ]; then
    echo "ok   $where ($kind, $(( $(date +%s) - start )) s)"
  else
    failed=$((failed + 1))
    echo "FAIL $where ($kind, exit $rc); the block:"
    sed 's/^/    | /' "$work/blocks/$i.$kind"
    echo "  its output (last 40 lines):"
    tail -n 40 "$dir/output.txt" | sed 's/^/    /'
  fi
done
echo "docs_commands_test: $n block(s), $failed failed"
[ "$failed" -eq 0 ]
