#!/usr/bin/env python3
"""Exports of llmtrain, loaded by transformers as a user would: AutoTokenizer + AutoModelForCausalLM from
the exported directory alone, then greedy generate(). Compared with what `llmtrain generate --model EXPORT`
printed on the build machine (ours.json, made there by tools/gpu/hf_export_models.sh):
  - the tokenizer's ids for each prompt equal ours (the prompt ids our generate used);
  - the greedy continuation's ids and text equal ours, and both stop at the same end-of-sequence id
    (or both run to max_new_tokens);
  - config.json / generation_config.json ids as transformers reads them.
Prints one JSON line per check; exits 1 when any fails.
Usage: hf_export_check.py MODELS_DIR OURS_JSON (where transformers is installed; no GPU is used)
"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

models_dir, ours_path = sys.argv[1], sys.argv[2]
ours = json.load(open(ours_path))
failed = []


def report(name, ok, **kw):
    print(json.dumps({"check": name, "ok": bool(ok), **kw}), flush=True)
    if not ok:
        failed.append(name)


for model in ours["models"]:
    d = f"{models_dir}/{model['name']}"
    tok = AutoTokenizer.from_pretrained(d)
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    gc = GenerationConfig.from_pretrained(d)
    report(f"{model['name']}/ids", True, tokenizer=type(tok).__name__, bos=m.config.bos_token_id,
           eos=m.config.eos_token_id, pad=m.config.pad_token_id, gen_eos=gc.eos_token_id, gen_pad=gc.pad_token_id)
    report(f"{model['name']}/eos_set", m.config.eos_token_id is not None and gc.eos_token_id is not None,
           config_eos=m.config.eos_token_id, generation_eos=gc.eos_token_id)
    for case in model["cases"]:
        enc = tok(case["prompt"], return_tensors="pt")
        prompt_ids = enc["input_ids"][0].tolist()
        report(f"{model['name']}/prompt_ids", prompt_ids == case["prompt_ids"], prompt=case["prompt"],
               hf=prompt_ids, ours=case["prompt_ids"])
        with torch.no_grad():
            out = m.generate(**enc, max_new_tokens=case["max_new_tokens"], do_sample=False)
        new = out[0][len(prompt_ids):].tolist()
        stop_ids = gc.eos_token_id if isinstance(gc.eos_token_id, list) else [gc.eos_token_id]
        stopped = bool(new) and new[-1] in stop_ids
        continuation = new[:-1] if stopped else new
        text = tok.decode(continuation, skip_special_tokens=False)
        same = (continuation == case["continuation_ids"] and text == case["continuation_text"]
                and stopped == case["stopped"])
        report(f"{model['name']}/greedy", same, prompt=case["prompt"], hf_ids=continuation,
               ours_ids=case["continuation_ids"],
               hf_text=text, ours_text=case["continuation_text"], hf_stopped_at=new[-1] if stopped else None,
               ours_stopped=case["stopped"])
print(json.dumps({"failed": failed}))
sys.exit(1 if failed else 0)
