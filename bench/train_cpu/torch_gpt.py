#!/usr/bin/python3
"""PyTorch's side of bench/train_cpu: nanoGPT-style GPT-2 training steps on the CPU, fp32 or with CPU bf16
autocast (torch.autocast("cpu", dtype=torch.bfloat16) around forward and loss, fp32 master weights and AdamW, as a
PyTorch / Hugging Face user runs bf16 on a CPU). The model and step follow bench/train_cpu/torch_cpu_gpt.py (the
peer of issue 4's figures): pre-LayerNorm blocks, manual causal attention on torch 1.13 (no SDPA), tanh GELU,
tied lm_head, AdamW (lr 6e-4, betas 0.9/0.95, wd 0.1 on 2-D parameters), clip_grad_norm_ 1.0. Random token ids.

Prints one JSON line: tokens/s over the median timed step, and tokens per CPU-second of this process over the
timed steps (getrusage user+system): the figure that shows CPU time lost to waiting/spinning under contention.
Usage: torch_gpt.py --config tiny|small [--autocast] [--threads 2] [--warmup 2] [--steps 5]
"""
import argparse
import contextlib
import json
import math
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {
    "tiny": dict(n_layer=4, n_head=4, n_embd=256, T=256, B=8, vocab=50257),
    "small": dict(n_layer=6, n_head=6, n_embd=384, T=256, B=8, vocab=50257),
}


class Attention(nn.Module):
    def __init__(self, C, H, T):
        super().__init__()
        self.c_attn, self.c_proj, self.H = nn.Linear(C, 3 * C), nn.Linear(C, C), H
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, C, H, T):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(C), Attention(C, H, T), nn.LayerNorm(C)
        self.fc, self.proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, H, C, V, T):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, H, T) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for b in self.h:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--autocast", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    c = CONFIGS[a.config]
    torch.manual_seed(0)
    model = GPT(c["n_layer"], c["n_head"], c["n_embd"], c["vocab"], c["T"])
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, c["vocab"], (4, c["B"], c["T"] + 1), generator=g)
    ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.autocast else contextlib.nullcontext

    def step(i):
        d = data[i % 4]
        x, y = d[:, :-1].contiguous(), d[:, 1:].contiguous()
        with ctx():
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for i in range(a.warmup):
        step(i)
    times, cpu0 = [], cpu_seconds()
    for i in range(a.steps):
        t0 = time.perf_counter()
        loss = step(i)
        times.append(time.perf_counter() - t0)
    cpu = cpu_seconds() - cpu0
    tokens = c["B"] * c["T"]
    print(json.dumps(dict(config=a.config, mode="bf16 autocast" if a.autocast else "fp32", threads=a.threads,
                          tok_s=tokens / statistics.median(times), tok_per_cpu_s=tokens * a.steps / cpu,
                          wall_s=sum(times), cpu_s=cpu, loss=loss, torch=torch.__version__)))


if __name__ == "__main__":
    main()
