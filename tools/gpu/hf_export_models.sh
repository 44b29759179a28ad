#!/bin/bash
# On the build machine: two tiny models trained with llmtrain and exported (bf16), with what
# `llmtrain generate --model EXPORT` printed for them (ours.json), for tools/gpu/hf_export_check.py where
# transformers is installed (OUTDIR travels there; the Llama 3 tokenizer.json is gzipped to keep it small).
#   llama3_tiny: a LLaMA with Meta's Llama 3 tokenizer (tokenizer.json + tokenizer_config.json)
#   gpt2_tiny:   a GPT-2 with GPT-2's tokenizer (vocab.json + merges.txt recovered from gpt2.tiktoken)
# Both learn documents "User asks about item N. The answer is yes." separated by the end-of-text token,
# so a greedy continuation of "User asks about item 7." ends at end-of-text.
# Usage: hf_export_models.sh LLMTRAIN CHECKOUT OUTDIR
set -euo pipefail
bin=$1; src=$2; out=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out/models"
for d in $(seq 0 399); do
  printf 'User asks about item %d. The answer is yes.\n\n' $((d % 50))
done > "$work/corpus.txt"

train_one() {  # name tokenizer arch model_keys
  local name=$1 tok=$2 arch=$3 keys=$4
  "$bin" data prepare --input "$work/corpus.txt" --format text --tokenizer "$tok" --out "$work/$name-shards" \
    --val-fraction 0.2 >/dev/null
  cat > "$work/$name.yaml" <<YAML
run: {name: $name, seed: 1, device: cpu, threads: 2}
model: {arch: $arch, $keys}
trainer: {max_steps: 300, micro_batch_size: 8, lr: 1.0e-2, warmup_steps: 10, eval_every_steps: 0, log_every_steps: 100}
data: {tokenizer: $tok, train_shards: $work/$name-shards/train_*.bin, val_shards: $work/$name-shards/val_*.bin}
output: {root_dir: $work/runs, run_id: $name}
YAML
  "$bin" train --config "$work/$name.yaml" 2>&1 | grep -E "trainer:|step +300" || true
  "$bin" export --checkpoint "$work/runs/$name" --out "$out/models/$name" --dtype bf16
}
llama_keys="n_layer: 2, n_head: 2, n_kv_head: 1, d_model: 16, d_ff: 48, block_size: 64, vocab_size: 128256"
llama_keys+=", tie_embeddings: true, rope_theta: 500000.0"
train_one llama3_tiny "$src/data/tokenizers/llama3" llama "$llama_keys"
train_one gpt2_tiny gpt2 gpt2 "n_layer: 2, n_head: 2, d_model: 16, block_size: 64, vocab_size: 50257"

# What our generate prints from the exports, text and ids (greedy, 24 new tokens at most).
python3 - "$bin" "$out" <<'PY'
import json, subprocess, sys
bin, out = sys.argv[1], sys.argv[2]
def run(args, stdin=None):
    r = subprocess.run([bin] + args, input=stdin, capture_output=True, text=True, check=True)
    return r.stdout, r.stderr
models = []
for name in ("llama3_tiny", "gpt2_tiny"):
    d = f"{out}/models/{name}"
    cases = []
    for prompt in ("User asks about item 7.", "User asks about item 31. The answer", "Hello"):
        n = 24
        ids = json.loads(run(["tokenize", "--tokenizer", d, "--allow-special", "--json"], prompt)[0])
        prefix = []  # Llama 3.0 base's tokenizer.json and GPT-2 put no token before the text (what HF checks)
        prompt_ids = prefix + ids
        text_out, text_err = run(["generate", "--model", d, "--prompt", prompt, "--temperature", "0", "-n", str(n)])
        ids_out, ids_err = run(["generate", "--model", d, "--prompt-ids", ",".join(map(str, prompt_ids)),
                                "--temperature", "0", "-n", str(n)])
        all_ids = [int(t) for t in ids_out.split()]
        assert text_out.startswith(prompt) and text_out.endswith("\n"), text_out
        cases.append({"prompt": prompt, "prompt_ids": prompt_ids, "max_new_tokens": n,
                      "continuation_ids": all_ids[len(prompt_ids):], "continuation_text": text_out[len(prompt):-1],
                      "stopped": "stopped at" in text_err, "ours_stderr": text_err.strip(),
                      "ids_stopped": "stopped at" in ids_err})
    models.append({"name": name, "cases": cases})
json.dump({"models": models}, open(f"{out}/ours.json", "w"), indent=1)
print(json.dumps(models, indent=1))
PY
gzip -9 "$out/models/llama3_tiny/tokenizer.json"
du -sh "$out"
