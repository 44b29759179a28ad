#!/usr/bin/python3
"""PyTorch reference for the LLaMA model (tests/reference/llama_reference_test.cpp).

Writes, in OUT_DIR:
  weights.safetensors  random LLaMA weights under Hugging Face's LlamaForCausalLM names (q_proj, k_proj,
                       v_proj, o_proj, gate_proj, up_proj, down_proj as nn.Linear (out, in); no lm_head
                       when tied), plus an old-style "rotary_emb.inv_freq" buffer our loader must ignore;
  batch.safetensors    inputs and targets (I32, (B, T)), some targets -1 (ignored);
  grads.safetensors    d(mean loss)/d(every parameter), the same names;
  loss.txt             the mean cross-entropy.
The model is written here from the LLaMA definition (RMSNorm, rotate-half RoPE with HF's "llama3"
frequency rescaling, grouped-query attention by repeating K/V heads, SwiGLU) and computed in float64,
an independent reference for our fp32 engine.
With LoRA (PEFT's lora.Linear on the named modules: y = x W^T + scale (x A^T) B^T, the base frozen):
  adapters.safetensors base_model.model.<module>.lora_A.weight (r, in) / .lora_B.weight (out, r), both
                       random (B is zero in a fresh adapter; random here so every path carries gradient);
  grads.safetensors    then holds the adapters' gradients only, under the same names.
Usage: /usr/bin/python3 tools/ref/llama_ref.py OUT_DIR L C NH KV F T B V TIED SCALING SEED
           [R ALPHA TARGETS RSLORA]
  TIED 0|1; SCALING none|llama3 (factor 32, low 1, high 4, original context 8 so that T = 32 spans
  the low, medium and high frequency bands); TARGETS comma-separated module names (q_proj,v_proj,...);
  RSLORA 0|1 (scale alpha / sqrt(r) instead of alpha / r).
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_ref import save  # noqa: E402


def inv_freq(hd, theta, scaling):
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    if scaling != "llama3":
        return inv
    factor, low, high, old = 32.0, 1.0, 4.0, 8.0
    wavelen = 2 * math.pi / inv
    out = torch.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    blended = (1 - smooth) * out / factor + smooth * out
    medium = (wavelen <= old / low) & (wavelen >= old / high)
    return torch.where(medium, blended, out)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def main():
    out = sys.argv[1]
    L, C, NH, KV, F, T, B, V = map(int, sys.argv[2:10])
    tied, scaling, seed = sys.argv[10] == "1", sys.argv[11], int(sys.argv[12])
    torch.manual_seed(seed)
    dt = torch.float64
    hd = C // NH
    std = 0.1  # larger than LLaMA's 0.02 so attention is far from uniform and every path matters
    p = {"model.embed_tokens.weight": torch.randn(V, C, dtype=dt) * std}
    for l in range(L):
        h = f"model.layers.{l}."
        p[h + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(C, dtype=dt)
        p[h + "self_attn.q_proj.weight"] = torch.randn(NH * hd, C, dtype=dt) * std
        p[h + "self_attn.k_proj.weight"] = torch.randn(KV * hd, C, dtype=dt) * std
        p[h + "self_attn.v_proj.weight"] = torch.randn(KV * hd, C, dtype=dt) * std
        p[h + "self_attn.o_proj.weight"] = torch.randn(C, NH * hd, dtype=dt) * std
        p[h + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(C, dtype=dt)
        p[h + "mlp.gate_proj.weight"] = torch.randn(F, C, dtype=dt) * std
        p[h + "mlp.up_proj.weight"] = torch.randn(F, C, dtype=dt) * std
        p[h + "mlp.down_proj.weight"] = torch.randn(C, F, dtype=dt) * std
    p["model.norm.weight"] = 1 + 0.1 * torch.randn(C, dtype=dt)
    if not tied:
        p["lm_head.weight"] = torch.randn(V, C, dtype=dt) * std
    lora = len(sys.argv) > 13
    adapters = {}
    if lora:
        r, alpha = int(sys.argv[13]), float(sys.argv[14])
        targets_arg, rslora = sys.argv[15].split(","), sys.argv[16] == "1"
        scale = alpha / math.sqrt(r) if rslora else alpha / r
        for name in list(p):
            module = name[: -len(".weight")]
            if name.endswith(".weight") and p[name].dim() == 2 and module.split(".")[-1] in targets_arg:
                out_f, in_f = p[name].shape
                adapters[f"base_model.model.{module}.lora_A.weight"] = torch.randn(r, in_f, dtype=dt) * 0.2
                adapters[f"base_model.model.{module}.lora_B.weight"] = torch.randn(out_f, r, dtype=dt) * 0.2
    # The file holds float32 values; the reference computes in float64 from exactly those values.
    for k in p:
        p[k] = p[k].float().double().requires_grad_(not lora)
    for k in adapters:
        adapters[k] = adapters[k].float().double().requires_grad_(True)

    def linear(x, name):
        y = x @ p[name].T
        a = f"base_model.model.{name[: -len('.weight')]}.lora_A.weight"
        if a in adapters:
            b = a.replace("lora_A", "lora_B")
            y = y + scale * ((x @ adapters[a].T) @ adapters[b].T)
        return y

    inputs = torch.randint(0, V, (B, T), dtype=torch.int32)
    targets = torch.randint(0, V, (B, T), dtype=torch.int32)
    targets[0, :3] = -1  # ignored positions

    eps = 1e-5

    def rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    ang = torch.arange(T, dtype=dt)[:, None] * inv_freq(hd, 10000.0, scaling)[None, :]
    cos = torch.cat((ang.cos(), ang.cos()), dim=-1)
    sin = torch.cat((ang.sin(), ang.sin()), dim=-1)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = p["model.embed_tokens.weight"][inputs.long()]
    for l in range(L):
        h = f"model.layers.{l}."
        a = rms(x, p[h + "input_layernorm.weight"])
        q = linear(a, h + "self_attn.q_proj.weight").view(B, T, NH, hd).transpose(1, 2)
        k = linear(a, h + "self_attn.k_proj.weight").view(B, T, KV, hd).transpose(1, 2)
        v = linear(a, h + "self_attn.v_proj.weight").view(B, T, KV, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(NH // KV, dim=1)  # query head j uses kv head j // (NH / KV)
        v = v.repeat_interleave(NH // KV, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, NH * hd)
        x = x + linear(y, h + "self_attn.o_proj.weight")
        m = rms(x, p[h + "post_attention_layernorm.weight"])
        g = torch.nn.functional.silu(linear(m, h + "mlp.gate_proj.weight")) * linear(m, h + "mlp.up_proj.weight")
        x = x + linear(g, h + "mlp.down_proj.weight")
    x = rms(x, p["model.norm.weight"])
    head = p["model.embed_tokens.weight"] if tied else p["lm_head.weight"]
    logits = x @ head.T
    loss = torch.nn.functional.cross_entropy(logits.view(-1, V), targets.view(-1).long(), ignore_index=-1)
    loss.backward()

    weights = {k: v.detach().float() for k, v in p.items()}
    weights["model.layers.0.self_attn.rotary_emb.inv_freq"] = inv_freq(hd, 10000.0, scaling).float()  # ignored
    save(os.path.join(out, "weights.safetensors"), weights, {"format": "pt"})
    if lora:
        save(os.path.join(out, "adapters.safetensors"), {k: v.detach().float() for k, v in adapters.items()})
        save(os.path.join(out, "grads.safetensors"), {k: v.grad.float() for k, v in adapters.items()})
    else:
        save(os.path.join(out, "grads.safetensors"), {k: v.grad.float() for k, v in p.items()})
    save(os.path.join(out, "batch.safetensors"), {"inputs": inputs, "targets": targets})
    with open(os.path.join(out, "loss.txt"), "w") as f:
        f.write(f"{loss.item():.17g}\n")


if __name__ == "__main__":
    main()
