#!/usr/bin/env bash
# On the GPU machine, issue 19's checks there: (1) the Llama 3 encoder's speed against Hugging Face tokenizers
# and tiktoken (bench/tokenizer: tokenizer_bench then peers_py.py, same call, same cores); (2) a tiny Llama 3
# (configs/presets/llama3_tiny_cpu.yaml's shape) fine-tuned from scratch on the chat example data
# (data/chat/corpus_qa.jsonl, `make data`) on the GPU, exported as a Hugging Face directory with Meta's
# tokenizer files, then `llmtrain chat --model EXPORT` greedy on a pipe: each answer must end at <|eot_id|>.
# Carry: build/gpu-carry.tgz (llmtrain, tokenizer_bench), data/tokenizers, build/tokcarry, data/chat.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
rm -rf /tmp/g
source tools/gpu/env.sh
bin=/tmp/g/bin
corpus=build/tokcarry/tokenizer_corpus.txt
"$bin/tokenizer_bench" "$corpus" --tokenizer data/tokenizers/llama3 --threads 1,2,4,8,16 --repeat 3 \
  > "$out/tok_ours.log" 2>&1
echo "== tokenizer_bench rc=$?"; tail -8 "$out/tok_ours.log"
timeout 300 python3 bench/tokenizer/peers_py.py "$corpus" 3 data/tokenizers/llama3/tokenizer.json 1,2,4,8,16 \
  > "$out/tok_peers.log" 2>&1
echo "== peers rc=$?"; tail -14 "$out/tok_peers.log"
w=/tmp/chatw
rm -rf "$w" && mkdir -p "$w"
cat > "$w/sft.yaml" <<YAML
run: {name: sft, seed: 1337, device: cuda}
model: {arch: llama, n_layer: 4, n_head: 4, n_kv_head: 2, d_model: 128, d_ff: 352, block_size: 128,
        vocab_size: 128256, tie_embeddings: true, rope_theta: 500000.0}
trainer: {max_steps: 600, micro_batch_size: 64, lr: 3.0e-3, min_lr: 3.0e-4, warmup_steps: 30, precision: bf16,
          log_every_steps: 100, eval_every_steps: 300, eval_steps: 4, save_every_steps: 0}
data: {source: chat, paths: [$PWD/data/chat/corpus_qa.jsonl], tokenizer: $PWD/data/tokenizers/llama3, packing: true,
       val_fraction: 0.02, cache_dir: $w/cache}
output: {root_dir: $w/runs, run_id: sft}
YAML
"$bin/llmtrain" train --config "$w/sft.yaml" > "$out/sft.log" 2>&1
echo "== sft rc=$?"; grep -E "^data:|step +(1|100|300|600)/|eval step" "$out/sft.log"
"$bin/llmtrain" export --checkpoint "$w/runs/sft" --out "$w/export" --dtype bf16 > "$out/export.log" 2>&1
echo "== export rc=$?"
cp data/tokenizers/llama3/tokenizer.json data/tokenizers/llama3/tokenizer_config.json "$w/export/"
printf '%s\n' "Which book of the Bible is Gen1:1 from?" "Give me a fortune cookie." \
  "What is the first word of this verse? In the beginning God created the heaven and the earth." \
  > "$w/questions.txt"
"$bin/llmtrain" chat --model "$w/export" --temperature 0 --max-new-tokens 64 < "$w/questions.txt" \
  > "$out/chat.out" 2> "$out/chat.err"
echo "== chat rc=$?"; cat "$out/chat.out"; grep -E "^chat:" "$out/chat.err"
ended=$(grep -c "ended by <|eot_id|>" "$out/chat.err")
echo "answers ended by <|eot_id|>: $ended of 3"
