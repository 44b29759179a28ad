#!/usr/bin/python3
"""PyTorch's side of bench/train_cpu's generation figures: greedy decoding with a KV cache on the CPU, the model of
torch_gpt.py (same shapes, random weights: the cost of a greedy step does not depend on their values), as a minimal
PyTorch user writes it: one prefill of the prompt, then one position per step, each layer's keys and values
appended to a cache (torch.cat), attention of the new query over the cache, the tied LM head on the last row,
argmax. torch.inference_mode(), fp32, torch.set_num_threads(--threads).

Prints one JSON line: tokens/s over the decode loop (prefill included, as `llmtrain generate` times it), and tokens
per CPU-second of this process over the same loop (getrusage user+system).
Usage: torch_generate.py --config tiny|small [--threads 2] [--tokens 200] [--prompt-id 50256]
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import CONFIGS, GPT  # noqa: E402  (the training peer's model: one definition of the shapes)


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def block_cached(b, x, cache):
    """One block on the new positions x (1, n, C); cache: [k, v] of (1, H, t, hd) or None. Returns x, cache."""
    B, n, C = x.shape
    H = b.attn.H
    q, k, v = b.attn.c_attn(b.ln_1(x)).split(C, dim=2)
    q, k, v = (t.view(B, n, H, C // H).transpose(1, 2) for t in (q, k, v))
    if cache is not None:
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if n > 1:  # the prompt: causal within it (no earlier cache at prefill)
        att = att.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, n, C)
    x = x + b.attn.c_proj(y)
    x = x + b.proj(F.gelu(b.fc(b.ln_2(x)), approximate="tanh"))
    return x, [k, v]


def forward_cached(model, ids, t0, caches):
    """Logits of the last of `ids` (1, n) at positions t0..; caches: one [k, v] per layer (updated)."""
    x = model.wte(ids) + model.wpe(torch.arange(t0, t0 + ids.size(1)))
    for i, b in enumerate(model.h):
        x, caches[i] = block_cached(b, x, caches[i])
    return model.lm_head(model.ln_f(x[:, -1:, :]))[0, -1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--prompt-id", type=int, default=50256)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    c = CONFIGS[a.config]
    if a.tokens > c["T"]:
        sys.exit(f"--tokens {a.tokens} exceeds the context ({c['T']}); this peer does not re-prime")
    torch.manual_seed(0)
    model = GPT(c["n_layer"], c["n_head"], c["n_embd"], c["vocab"], c["T"]).eval()
    with torch.inference_mode():
        caches = [None] * c["n_layer"]
        t0, cpu0 = time.perf_counter(), cpu_seconds()
        logits = forward_cached(model, torch.tensor([[a.prompt_id]]), 0, caches)
        ids = []
        for pos in range(1, a.tokens + 1):
            ids.append(int(torch.argmax(logits)))
            if pos == a.tokens:
                break
            logits = forward_cached(model, torch.tensor([[ids[-1]]]), pos, caches)
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    print(json.dumps(dict(config=a.config, threads=a.threads, tokens=len(ids), tok_s=len(ids) / wall,
                          tok_per_cpu_s=len(ids) / cpu, wall_s=wall, cpu_s=cpu, torch=torch.__version__)))


if __name__ == "__main__":
    main()
