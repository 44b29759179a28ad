#!/usr/bin/python3
"""PyTorch reference for the GPT-2 model (tests/reference/gpt2_reference_test.cpp).

Writes, in OUT_DIR:
  weights.safetensors  random GPT-2 weights in Hugging Face's layout, the way HF hub files name them
                       (no "transformer." prefix, Conv1D weights (in, out), attention-mask buffers
                       "h.N.attn.bias" included, and a position table LONGER than block_size so the
                       loader must crop it) - a file "written by PyTorch" for our loader;
  batch.safetensors    inputs and targets (I32, (B, T)), some targets -1 (ignored);
  grads.safetensors    d(mean loss)/d(every parameter), HF names with the prefix and HF layout;
  loss.txt             the mean cross-entropy.
The model is written here from the GPT-2 definition (pre-LN, GELU tanh, causal attention, tied
lm_head) and computed in float64, so it is an independent reference for our fp32 engine.
With DROPOUT P and DROPOUT_SEED S, dropout is applied after the embeddings and on both residual
branches of every layer with the masks our engine draws (kernels/cpu/dropout.h: keep element i of site
k iff the top 24 bits of splitmix64(splitmix64(S + k) + i) >= floor(P * 2^24); site 0 = embeddings,
1 + 2l / 2 + 2l = layer l's attention / MLP branch), so loss and gradients are comparable exactly.
Usage: /usr/bin/python3 tools/ref/gpt2_ref.py OUT_DIR L C NH T B V SEED [DROPOUT_P DROPOUT_SEED]
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_ref import save  # noqa: E402


M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(z):
    """SplitMix64 (Steele et al. 2014) on a uint64 array, wrapping mod 2^64 like the C++ code."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def dropout_mask(p, seed, site, shape):
    """The keep mask times 1/(1-p) our engine uses for `site` (see the module docstring)."""
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        key = splitmix64(np.array([seed + site], dtype=np.uint64) & M64)[0]
        u = splitmix64(key + np.arange(n, dtype=np.uint64)) >> np.uint64(40)
    keep = u >= np.uint64(int(p * (1 << 24)))
    return torch.from_numpy(keep.reshape(shape).astype(np.float64) / (1.0 - p))


def main():
    out, L, C, NH, T, B, V, seed = sys.argv[1], *map(int, sys.argv[2:9])
    drop_p = float(sys.argv[9]) if len(sys.argv) > 9 else 0.0
    drop_seed = int(sys.argv[10]) if len(sys.argv) > 10 else 0

    def drop(x, site):
        return x * dropout_mask(drop_p, drop_seed, site, tuple(x.shape)) if drop_p > 0 else x
    torch.manual_seed(seed)
    dt = torch.float64
    wpe_rows = T + 7  # longer than block_size (= T): our loader crops it
    std = 0.1  # larger than GPT-2's 0.02 so attention is far from uniform and every path matters
    p = {"wte.weight": torch.randn(V, C, dtype=dt) * std, "wpe.weight": torch.randn(wpe_rows, C, dtype=dt) * std}
    for l in range(L):
        h = f"h.{l}."
        p[h + "ln_1.weight"] = 1 + 0.1 * torch.randn(C, dtype=dt)
        p[h + "ln_1.bias"] = 0.1 * torch.randn(C, dtype=dt)
        p[h + "attn.c_attn.weight"] = torch.randn(C, 3 * C, dtype=dt) * std
        p[h + "attn.c_attn.bias"] = 0.1 * torch.randn(3 * C, dtype=dt)
        p[h + "attn.c_proj.weight"] = torch.randn(C, C, dtype=dt) * std
        p[h + "attn.c_proj.bias"] = 0.1 * torch.randn(C, dtype=dt)
        p[h + "ln_2.weight"] = 1 + 0.1 * torch.randn(C, dtype=dt)
        p[h + "ln_2.bias"] = 0.1 * torch.randn(C, dtype=dt)
        p[h + "mlp.c_fc.weight"] = torch.randn(C, 4 * C, dtype=dt) * std
        p[h + "mlp.c_fc.bias"] = 0.1 * torch.randn(4 * C, dtype=dt)
        p[h + "mlp.c_proj.weight"] = torch.randn(4 * C, C, dtype=dt) * std
        p[h + "mlp.c_proj.bias"] = 0.1 * torch.randn(C, dtype=dt)
    p["ln_f.weight"] = 1 + 0.1 * torch.randn(C, dtype=dt)
    p["ln_f.bias"] = 0.1 * torch.randn(C, dtype=dt)
    # The file holds float32 values; the reference computes in float64 from exactly those values.
    for k in p:
        p[k] = p[k].float().double().requires_grad_(True)

    inputs = torch.randint(0, V, (B, T), dtype=torch.int32)
    targets = torch.randint(0, V, (B, T), dtype=torch.int32)
    targets[0, :3] = -1  # ignored positions

    def ln(x, w, b):
        return torch.nn.functional.layer_norm(x, (C,), w, b, 1e-5)

    hs = C // NH
    x = drop(p["wte.weight"][inputs.long()] + p["wpe.weight"][:T], 0)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        h = f"h.{l}."
        a = ln(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"])
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + drop(y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"], 1 + 2 * l)
        m = ln(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"])
        m = torch.nn.functional.gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + drop(m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"], 2 + 2 * l)
    x = ln(x, p["ln_f.weight"], p["ln_f.bias"])
    logits = x @ p["wte.weight"].T
    loss = torch.nn.functional.cross_entropy(logits.view(-1, V), targets.view(-1).long(), ignore_index=-1)
    loss.backward()

    weights = {k: v.detach().float() for k, v in p.items()}
    for l in range(L):
        weights[f"h.{l}.attn.bias"] = torch.tril(torch.ones(1, 1, T, T))  # HF's mask buffer: ignored
    save(os.path.join(out, "weights.safetensors"), weights, {"format": "pt"})
    grads = {k: v.grad.float() for k, v in p.items()}
    grads["wpe.weight"] = grads["wpe.weight"][:T]  # the cropped rows are not part of our model
    save(os.path.join(out, "grads.safetensors"), {"transformer." + k: v for k, v in grads.items()})
    save(os.path.join(out, "batch.safetensors"), {"inputs": inputs, "targets": targets})
    with open(os.path.join(out, "loss.txt"), "w") as f:
        f.write(repr(loss.item()))


if __name__ == "__main__":
    main()
