#!/usr/bin/env python3
"""Our LoRA adapters against PEFT itself (issue 20), on the GPU machine (transformers + peft installed).

Usage: python3 tools/gpu/peft_check.py LLMTRAIN_BIN WORK_DIR [phase]
  phase "base": writes WORK_DIR/base (a random tiny LlamaForCausalLM, fp32, vocab 50257) and
                WORK_DIR/peft_adapter (PEFT LoRA r 8, alpha 16, q_proj/v_proj/down_proj, random A and B,
                save_pretrained), then checks `llmtrain merge` of PEFT's adapter against PEFT:
                merged weights vs merge_and_unload() (fp32), and logits of our merged directory vs
                PeftModel's (fp32).
  phase "ours": WORK_DIR/our_adapter (llmtrain export of a LoRA run on WORK_DIR/base) loads in
                PeftModel.from_pretrained with no missing/unexpected keys, and its logits equal those of
                `llmtrain merge` of it, loaded in transformers (fp32; bf16 too).
Prints one line per check and exits non-zero if any fails.
"""
import json
import os
import subprocess
import sys

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

BIN, WORK = sys.argv[1], sys.argv[2]
PHASE = sys.argv[3] if len(sys.argv) > 3 else "base"
failed = []


def check(name, ok, detail):
    print(f"[peft-check] {name}: {'ok' if ok else 'FAILED'} ({detail})", flush=True)
    if not ok:
        failed.append(name)


def ids():
    g = torch.Generator().manual_seed(5)
    return torch.randint(0, 50257, (2, 48), generator=g)


def logits_of(model, dtype=torch.float32):
    model = model.to("cuda", dtype).eval()
    with torch.no_grad():
        return model(ids().cuda()).logits.float().cpu()


def rel(a, b):
    return ((a - b).norm() / b.norm()).item()


def run(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    print(r.stderr.strip()[-2000:], flush=True)
    if r.returncode != 0:
        raise SystemExit(f"llmtrain {args[0]} failed with {r.returncode}")


def phase_base():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50257, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      tie_word_embeddings=False, rope_theta=10000.0, bos_token_id=50256, eos_token_id=50256)
    base = LlamaForCausalLM(cfg)
    base.save_pretrained(os.path.join(WORK, "base"), safe_serialization=True)
    lcfg = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"], lora_dropout=0.0,
                      init_lora_weights=False, task_type="CAUSAL_LM")
    peft_model = get_peft_model(LlamaForCausalLM.from_pretrained(os.path.join(WORK, "base")), lcfg)
    peft_model.save_pretrained(os.path.join(WORK, "peft_adapter"))
    ref_logits = logits_of(peft_model)
    merged_ref = peft_model.merge_and_unload().to("cpu", torch.float32)
    run("merge", "--model", os.path.join(WORK, "base"), "--adapter", os.path.join(WORK, "peft_adapter"),
        "--out", os.path.join(WORK, "merged_ours"))
    ours = AutoModelForCausalLM.from_pretrained(os.path.join(WORK, "merged_ours"), dtype=torch.float32)
    sd_ref, sd_ours = merged_ref.state_dict(), ours.state_dict()
    worst = max((sd_ours[k].float() - v.float()).abs().max().item() for k, v in sd_ref.items() if k in sd_ours)
    missing = [k for k in sd_ref if k not in sd_ours]
    # fp32 weights W + s B A: ours sums B A in double then adds once, PEFT in fp32: ~1 ulp of W.
    check("merge vs merge_and_unload (weights)", not missing and worst < 1e-5, f"max abs diff {worst:.2e}, "
          f"missing {missing[:3]}")
    d = rel(logits_of(ours), ref_logits)
    check("merged logits vs PeftModel logits (fp32)", d < 1e-5, f"rel L2 {d:.2e}")


def phase_ours():
    adapter = os.path.join(WORK, "our_adapter")
    cfg = json.load(open(os.path.join(adapter, "adapter_config.json")))
    base = LlamaForCausalLM.from_pretrained(os.path.join(WORK, "base"))
    model = PeftModel.from_pretrained(base, adapter)
    from safetensors.torch import load_file
    keys = set(load_file(os.path.join(adapter, "adapter_model.safetensors")).keys())
    lora_params = {n for n, _ in model.named_parameters() if "lora_" in n}
    check("our adapter loads in PeftModel", len(keys) == len(lora_params) and len(keys) > 0,
          f"{len(keys)} tensors in the file, {len(lora_params)} LoRA parameters in the model, r {cfg['r']}, "
          f"targets {cfg['target_modules']}")
    nonzero = max(p.abs().max().item() for n, p in model.named_parameters() if "lora_B" in n)
    check("our adapter's B is trained (non-zero)", nonzero > 0, f"max |B| {nonzero:.3e}")
    ref = logits_of(model)
    run("merge", "--model", os.path.join(WORK, "base"), "--adapter", adapter,
        "--out", os.path.join(WORK, "merged_ours2"))
    ours = AutoModelForCausalLM.from_pretrained(os.path.join(WORK, "merged_ours2"))
    d = rel(logits_of(ours), ref)
    check("PeftModel(our adapter) logits vs our merge (fp32)", d < 1e-5, f"rel L2 {d:.2e}")
    base = LlamaForCausalLM.from_pretrained(os.path.join(WORK, "base"))
    db = rel(logits_of(PeftModel.from_pretrained(base, adapter), torch.bfloat16), ref)
    check("PeftModel(our adapter) in bf16 vs fp32", db < 3e-2, f"rel L2 {db:.2e}")


phase_base() if PHASE == "base" else phase_ours()
sys.exit(1 if failed else 0)
