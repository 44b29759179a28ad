#!/usr/bin/env bash
# Tokenizer benchmark, one command: our encoder (1 thread, 2 threads, all cores) and the peers on the
# 6.98 MB reference corpus (KJV Bible + fortunes), in one run on this machine, for each encoding of
# ENCODINGS (default "gpt2 llama3"). GPT-2: npm tiktoken (encode_ordinary) and gpt-tokenizer. Llama 3
# (data/tokenizers/llama3, scripts/setup.d/11-tokenizer-llama3.sh): npm tiktoken given its ranks, and
# where $PYTHON (default /usr/bin/python3) imports them, Hugging Face tokenizers and native tiktoken,
# single call and batched on the same thread counts (peers_py.py). Prints MB/s for each and our ratio to
# the fastest peer; token counts must agree.
# MB/s is wall-clock (best of REPEAT); "MB per CPU-second" divides by the CPU time of the process, which
# other load on a shared machine disturbs less (for N threads it is the total over the threads).
# Usage: bench/tokenizer/run.sh [BUILD_DIR (default build/release)]   env: REPEAT (default 5), ENCODINGS, PYTHON
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
repeat=${REPEAT:-5}

bash scripts/setup.d/10-tokenizer.sh
bash bench/tokenizer/setup.sh
cmake --build "$build" --target tokenizer_bench >/dev/null

# The reference corpus (the text of scripts/make_corpus.sh in one file; needs bible-kjv, fortunes, fortunes-min).
corpus="$build/bench/tokenizer_corpus.txt"
want=1021d9575220966c33be32eff97cf202baefa4cfeb22204620168f7ab1cc174c
if [ ! -f "$corpus" ] || [ "$(sha256sum "$corpus" | cut -d' ' -f1)" != "$want" ]; then
  mkdir -p "$(dirname "$corpus")"
  {
    bible -f Gen1:1-Rev22:21 </dev/null
    dpkg -L fortunes fortunes-min | grep -E '^/usr/share/games/fortunes/[^./]+$' | LC_ALL=C sort -u | xargs cat
  } >"$corpus"
  got=$(sha256sum "$corpus" | cut -d' ' -f1)
  [ "$got" = "$want" ] || echo "run.sh: warning: corpus sha256 $got is not the reference corpus's $want" >&2
fi

threads="1,2"
[ "$(nproc)" -gt 2 ] && threads="$threads,$(nproc)"
python=${PYTHON:-/usr/bin/python3}
for encoding in ${ENCODINGS:-gpt2 llama3}; do
  case "$encoding" in
    gpt2) spec=gpt2; tokjson="" ;;
    llama3) bash scripts/setup.d/11-tokenizer-llama3.sh; spec=data/tokenizers/llama3
            tokjson=data/tokenizers/llama3/tokenizer.json ;;
    *) echo "run.sh: unknown encoding '$encoding' in ENCODINGS (gpt2, llama3)" >&2; exit 2 ;;
  esac
  echo "## $encoding"
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  ours=$("$build/bench/tokenizer/tokenizer_bench" "$corpus" --tokenizer "$spec" --threads "$threads" \
    --repeat "$repeat")
  peers=$(NODE_PATH="$PWD/bench/.npm/node_modules" node bench/tokenizer/peers.mjs "$corpus" "$repeat" $tokjson)
  # Hugging Face tokenizers and native tiktoken, where the Python has them (the GPU host; not Debian 12).
  if [ -n "$tokjson" ] && [ -x "$python" ]; then
    peers="$peers
$("$python" bench/tokenizer/peers_py.py "$corpus" "$repeat" "$tokjson" "$threads")"
  fi
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)

  OURS="$ours" PEERS="$peers" node -e '
const rows = (process.env.OURS + "\n" + process.env.PEERS).split("\n").filter(Boolean).map(JSON.parse);
const load = rows.find(r => r.what === "load");
const enc = rows.filter(r => r.what !== "load");
const peers = enc.filter(r => r.what !== "llmtrain");
const fastest = peers.reduce((a, b) => (b.mb_per_s > a.mb_per_s ? b : a));
const loadMs = (load.seconds * 1000).toFixed(0);
console.log(`corpus: ${enc[0].bytes} bytes; best of '"$repeat"' runs; llmtrain tokenizer load ${loadMs} ms`);
console.log("| encoder | threads | MB/s (wall) | MB per CPU-second | tokens | vs fastest peer (wall) |");
console.log("|---|---:|---:|---:|---:|---:|");
for (const r of enc) {
  const how = r.mode ? `, ${r.mode}` : "";
  const name = r.what === "llmtrain" ? "llmtrain"
    : r.mode ? `${r.what} ${r.version} (Python${how})` : `${r.what} ${r.version} (npm)`;
  const ratio = (r.mb_per_s / fastest.mb_per_s).toFixed(2);
  const cells = [name, r.threads, r.mb_per_s.toFixed(2), r.mb_per_cpu_s.toFixed(2), r.tokens, `${ratio}x`];
  console.log(`| ${cells.join(" | ")} |`);
}
const bad = enc.filter(r => r.tokens !== enc[0].tokens);
if (bad.length) { console.error("token counts differ: " + bad.map(r => r.what).join(", ")); process.exit(1); }
'
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
    "load average before ${load_before}, after ${load_after}"
done
