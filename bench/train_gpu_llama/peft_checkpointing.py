#!/usr/bin/env python3
"""The largest batch at T = 2048 that trains in the GPU's memory: transformers + peft 0.21 LoRA (r 16, alpha 32 on
q, k, v, o, gate, up, down; bf16 base, fp32 adapters, bf16 autocast, fused AdamW) with
model.gradient_checkpointing_enable(), on the Llama-3.2-1B shape of bench/train_gpu_llama/torch_gpu_llama.py (random
weights), eager. Batches are tried in the order given until one runs out of memory; one JSON line each.
Usage: python3 peft_checkpointing.py --batches 8,16,32,64 [--seq 2048] [--steps 4] [--out F]"""
import argparse
import json
import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("--batches", default="8,16,32,64")
ap.add_argument("--seq", type=int, default=2048)
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--out", default="peft_checkpointing.jsonl")
a = ap.parse_args()
cfg = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                  num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-5,
                  rope_theta=500000.0, tie_word_embeddings=True,
                  rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192})
out = open(a.out, "w")
for B in [int(b) for b in a.batches.split(",")]:
    torch.manual_seed(0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    m = LlamaForCausalLM(cfg).to("cuda", dtype=torch.bfloat16)
    m.gradient_checkpointing_enable()
    m.enable_input_require_grads()
    m = get_peft_model(m, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                     "down_proj"]))
    for n, p in m.named_parameters():
        if "lora_" in n:
            p.data = p.data.float()
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, fused=True)
    x = torch.randint(0, 128256, (B, a.seq), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    try:
        step()
        torch.cuda.synchronize()
        ts = []
        for _ in range(a.steps):
            t = time.perf_counter()
            step()
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t)
        ts.sort()
        r = {"B": B, "T": a.seq, "step_ms": ts[len(ts) // 2] * 1e3, "tokens_per_s": B * a.seq / ts[len(ts) // 2],
             "peak_gib": torch.cuda.max_memory_allocated() / 2**30}
    except torch.OutOfMemoryError:
        r = {"B": B, "T": a.seq, "oom": True}
    print(json.dumps(r), flush=True)
    out.write(json.dumps(r) + "\n")
    del m, opt, x
    if r.get("oom"):
        break
