#!/usr/bin/env python3
"""What fits in the GPU's memory for transformers + peft 0.21 LoRA (r 16, alpha 32 on q, k, v, o, gate, up, down;
bf16 base, fp32 adapters, bf16 autocast, fused AdamW) with model.gradient_checkpointing_enable(), eager, random
weights: the largest batch at one T (--batches), or the longest T at one batch (--seqs, the context reach).
Shapes: --shape 1b, the Llama-3.2-1B shape of bench/train_gpu_llama/torch_gpu_llama.py (tied); --shape 8b,
Llama-3.1-8B's (32 layers, d 4096, 32 / 8 heads, FFN 14336, untied). Tokens: random, or --data SHARD (an llm.c
uint32 shard, e.g. the corpus with the Llama 3 tokenizer) read as consecutive windows, so the loss can fall.
The (B, T) pairs are tried in the order given until one runs out of memory; one JSON line each with the median
step time, the peak memory and every step's loss.
Usage: python3 peft_checkpointing.py --batches 8,16,32,64 [--seq 2048] [--steps 4] [--out F]
       python3 peft_checkpointing.py --shape 8b --batches 1 --seqs 8192,16384,32768 --steps 2 [--data SHARD]"""
import argparse
import json
import time

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("--shape", choices=["1b", "8b"], default="1b")
ap.add_argument("--batches", default="8,16,32,64")
ap.add_argument("--seq", type=int, default=2048)
ap.add_argument("--seqs", default="", help="T values at the first of --batches (overrides --seq)")
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--lr", type=float, default=1e-5)
ap.add_argument("--data", default="", help="llm.c uint32 token shard (default: random tokens)")
ap.add_argument("--out", default="peft_checkpointing.jsonl")
a = ap.parse_args()
shape = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, tie_word_embeddings=True,
             rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192})
if a.shape == "8b":
    shape = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, tie_word_embeddings=False,
                 rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 8192})
cfg = LlamaConfig(vocab_size=128256, num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                  rms_norm_eps=1e-5, rope_theta=500000.0, **shape)
tokens = None
if a.data:  # llm.c shard: a 256-int32 header, then the tokens (uint32 for vocabularies beyond 65,536)
    tokens = torch.from_numpy(np.fromfile(a.data, dtype=np.uint32, offset=1024).astype(np.int64))
batches = [int(b) for b in a.batches.split(",")]
pairs = [(batches[0], int(t)) for t in a.seqs.split(",")] if a.seqs else [(b, a.seq) for b in batches]
out = open(a.out, "w")
for B, T in pairs:
    torch.manual_seed(0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    with torch.device("cuda"):  # random init on the GPU (an 8B model on the host would take minutes)
        m = LlamaForCausalLM(cfg).to(dtype=torch.bfloat16)
    m.gradient_checkpointing_enable()
    m.enable_input_require_grads()
    m = get_peft_model(m, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                     "down_proj"]))
    for n, p in m.named_parameters():
        if "lora_" in n:
            p.data = p.data.float()
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, fused=True)
    cursor = 0

    def batch():
        global cursor
        if tokens is None:
            return torch.randint(0, 128256, (B, T), device="cuda")
        if cursor + B * T > len(tokens):
            cursor = 0
        x = tokens[cursor: cursor + B * T].view(B, T)
        cursor += B * T
        return x.cuda()

    def step():
        x = batch()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = m(input_ids=x, labels=x).loss  # transformers shifts the labels
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    losses = []
    try:
        losses.append(step())
        torch.cuda.synchronize()
        ts = []
        for _ in range(a.steps):
            t = time.perf_counter()
            losses.append(step())
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t)
        ts.sort()
        r = {"shape": a.shape, "B": B, "T": T, "step_ms": ts[len(ts) // 2] * 1e3,
             "tokens_per_s": B * T / ts[len(ts) // 2], "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
             "losses": [round(v, 4) for v in losses]}
    except torch.OutOfMemoryError:
        r = {"shape": a.shape, "B": B, "T": T, "oom": True, "losses": [round(v, 4) for v in losses]}
    print(json.dumps(r), flush=True)
    out.write(json.dumps(r) + "\n")
    del m, opt
    if r.get("oom"):
        break
