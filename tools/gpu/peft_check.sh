#!/usr/bin/env bash
# On the GPU machine (transformers + peft there): our LoRA adapters against PEFT itself (issue 20), with the
# carried llmtrain (tools/gpu/pack.sh build/gpu-carry build/release/llmtrain ...; carry build/gpu-carry.tgz and
# data/tokenizers). Phase base: `llmtrain merge` of a PEFT-made adapter vs merge_and_unload and PeftModel's
# logits. Then a LoRA run of ours on that base (CUDA, bf16: the frozen bf16 base and the adapters' cuBLASLt
# GEMMs), exported; phase ours: PeftModel.from_pretrained of it vs our merge. Logs in $OUT.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
source tools/gpu/env.sh
w=/tmp/peftw
rm -rf "$w" && mkdir -p "$w"
bin=/tmp/g/bin/llmtrain
export LLMTRAIN_HOME=$PWD/data  # data/tokenizers/gpt2.tiktoken (carried)
python3 tools/gpu/peft_check.py "$bin" "$w" base 2>&1 | tee "$out/peft_base.log" | grep -E "peft-check|Error|error" 
python3 - "$w/corpus.txt" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for d in range(400):
        f.write(f"Document {d} says {d % 7} and {d % 11}; the adapters learn it.\n\n")
PY
"$bin" data prepare --input "$w/corpus.txt" --format text --out "$w/shards" --val-fraction 0.1 \
  > "$out/prepare.log" 2>&1
cat > "$w/lora.yaml" <<YAML
run: {name: peft, seed: 3, device: cuda}
model: {init_from: $w/base, block_size: 64}
lora: {r: 8, alpha: 16, target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}
trainer: {max_steps: 20, micro_batch_size: 4, lr: 5.0e-3, warmup_steps: 2, precision: bf16, log_every_steps: 5,
          eval_every_steps: 0, save_every_steps: 0}
data: {train_shards: "$w/shards/train_*.bin", val_shards: "$w/shards/val_*.bin"}
output: {root_dir: $w/runs, run_id: l}
YAML
"$bin" train --config "$w/lora.yaml" > "$out/lora_train.log" 2>&1
echo "== lora train rc=$?"; grep -E "lora:|step +(1|20)/|device:|error" "$out/lora_train.log" | head
"$bin" export --checkpoint "$w/runs/l" --out "$w/our_adapter" > "$out/export.log" 2>&1
echo "== export rc=$?"
python3 tools/gpu/peft_check.py "$bin" "$w" ours 2>&1 | tee "$out/peft_ours.log" | grep -E "peft-check|Error|error"
