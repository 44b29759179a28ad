#!/usr/bin/env bash
# The worked example of docs/lora.md (configs/presets/llama3_tiny_cpu.yaml, then llama3_lora_chat.yaml) as a
# functional check on a lent machine's CPU cores: base, export, LoRA chat fine-tune, chat on a pipe (greedy),
# each answer's end on stderr. Carry: build/gpu-carry.tgz (llmtrain), data/tokenizers, data/corpus, data/chat.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
rm -rf /tmp/g
source tools/gpu/env.sh
bin=/tmp/g/bin/llmtrain
rm -rf runs data/models data/cache
"$bin" train --config configs/presets/llama3_tiny_cpu.yaml --set output.run_id=llama3-tiny > "$out/base.log" 2>&1
echo "== base rc=$?"; grep -E "step +(1|200)/|eval step" "$out/base.log"
"$bin" export --checkpoint runs/llama3-tiny --out data/models/llama3-tiny --dtype fp32 > "$out/export.log" 2>&1
echo "== export rc=$?"
"$bin" train --config configs/presets/llama3_lora_chat.yaml --set output.run_id=lora > "$out/lora.log" 2>&1
echo "== lora rc=$?"; grep -E "^lora:|^data:|step +(1|100|200|300)/|eval step" "$out/lora.log"
printf '%s\n' "Which book of the Bible is Gen1:1 from?" "Give me a fortune cookie." > "$out/q.txt"
"$bin" chat --model runs/lora --temperature 0 --max-new-tokens 48 < "$out/q.txt" > "$out/chat.out" 2> "$out/chat.err"
echo "== chat rc=$?"; cat "$out/chat.out"; grep -E "^chat:" "$out/chat.err"
