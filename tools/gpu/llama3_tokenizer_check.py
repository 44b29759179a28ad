#!/usr/bin/env python3
"""Issue 19's acceptance against transformers / Hugging Face tokenizers, where they are installed (the GPU
machine: transformers 5.17, tokenizers 0.23).

1. The rendered prompt of a 3-turn conversation (system, user, assistant, user) is byte-identical to
   tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) with the same
   tokenizer_config.json: `llmtrain chat --print-prompt --tokenizer DIR`.
2. Its ids: `llmtrain tokenize --allow-special` equals tokenizer(prompt, add_special_tokens=False).
3. A few texts with specials and without (encode_special_tokens) against `tokenize` with and without
   --allow-special.
Prints one JSON line per check and exits 1 if any fails.
Usage: llama3_tokenizer_check.py LLMTRAIN TOKENIZER_DIR (data/tokenizers/llama3 after scripts/setup.sh)
"""
import json
import subprocess
import sys

from transformers import AutoTokenizer

llmtrain, tok_dir = sys.argv[1], sys.argv[2]
tok = AutoTokenizer.from_pretrained(tok_dir)
failed = False


def report(name, ok, **extra):
    global failed
    failed = failed or not ok
    print(json.dumps({"check": name, "ok": ok, **extra}), flush=True)


def run(args, stdin):
    r = subprocess.run([llmtrain] + args, input=stdin.encode(), capture_output=True, check=True)
    return r.stdout.decode()


messages = [
    {"role": "system", "content": "You are a concise assistant.\n"},
    {"role": "user", "content": "  What is the capital of France?  "},
    {"role": "assistant", "content": "Paris."},
    {"role": "user", "content": "And of Italy? Answer in one word.\n\n"},
]
want = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
got = run(["chat", "--print-prompt", "--tokenizer", tok_dir], json.dumps(messages))
report("chat_template_3_turns", got == want, bytes=len(want), got=got if got != want else None,
       want=want if got != want else None)

want_ids = tok(want, add_special_tokens=False)["input_ids"]
got_ids = json.loads(run(["tokenize", "--tokenizer", tok_dir, "--allow-special", "--json"], want))
report("prompt_ids", got_ids == want_ids, tokens=len(want_ids))

backend = tok.backend_tokenizer if hasattr(tok, "backend_tokenizer") else tok._tokenizer
for text in ["<|begin_of_text|>Hello<|eot_id|> world", "it'S 12345 ((x\r\n\n  y", "ſ 'ſ café 日本語 🙂"]:
    want_s = backend.encode(text, add_special_tokens=False).ids
    got_s = json.loads(run(["tokenize", "--tokenizer", tok_dir, "--allow-special", "--json"], text))
    backend.encode_special_tokens = True
    want_o = backend.encode(text, add_special_tokens=False).ids
    backend.encode_special_tokens = False
    got_o = json.loads(run(["tokenize", "--tokenizer", tok_dir, "--json"], text))
    report("ids", got_s == want_s and got_o == want_o, text=text)

sys.exit(1 if failed else 0)
