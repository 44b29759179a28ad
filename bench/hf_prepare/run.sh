#!/usr/bin/env bash
# `data prepare` from Parquet (a hub-snapshot-shaped folder of 4 shards) vs the same documents from JSONL,
# in one run: alternating runs of each, the median wall time of each and their ratio; the shards of the two
# are compared byte for byte first. Tokenizing dominates both (docs/benchmarks.md, "data prepare: Parquet vs JSONL").
# Usage: bench/hf_prepare/run.sh [BUILD_DIR] [MB] [RUNS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/release}
MB=${2:-40}
RUNS=${3:-3}
THREADS=${4:-2}
work=$(mktemp -d /tmp/hf_prepare_bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
node bench/hf_prepare/make_inputs.mjs "$work/in" "$MB"
du -b "$work/in/docs.jsonl" | awk '{printf "jsonl: %.1f MB\n", $1/1e6}'
du -bc "$work"/in/hf/data/*.parquet | tail -1 | awk '{printf "parquet: %.1f MB (snappy)\n", $1/1e6}'
tok=data/tokenizers/gpt2.tiktoken
prep() {  # format input out
  "$BUILD/llmtrain" data prepare --format "$1" --input "$2" --out "$3" --tokenizer "$tok" --threads "$THREADS" \
    --quiet >/dev/null
}
prep jsonl "$work/in/docs.jsonl" "$work/j"
prep hf "$work/in/hf" "$work/p"
for f in "$work"/j/*.bin; do
  cmp -s "$f" "$work/p/$(basename "$f")" || { echo "shards differ: $(basename "$f")" >&2; exit 1; }
done
echo "shards identical: $(ls "$work"/j/*.bin | wc -l) files"
declare -a tj tp
for i in $(seq "$RUNS"); do
  s=$(date +%s.%N); prep jsonl "$work/in/docs.jsonl" "$work/j"; e=$(date +%s.%N); tj+=("$(echo "$e - $s" | bc)")
  s=$(date +%s.%N); prep hf "$work/in/hf" "$work/p"; e=$(date +%s.%N); tp+=("$(echo "$e - $s" | bc)")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mj=$(median "${tj[@]}"); mp=$(median "${tp[@]}")
echo "jsonl runs: ${tj[*]}"
echo "parquet runs: ${tp[*]}"
printf 'median: jsonl %.2f s, parquet %.2f s, parquet/jsonl %.3f (threads %s, %s)\n' "$mj" "$mp" \
  "$(echo "$mp / $mj" | bc -l)" "$THREADS" "$(nproc) cores"
