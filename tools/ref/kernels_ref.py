#!/usr/bin/python3
"""PyTorch reference for every CPU kernel of src/kernels (forward and backward).

Usage: /usr/bin/python3 tools/ref/kernels_ref.py DIR
Read by tests/reference/kernels_reference_test.cpp, which writes DIR/config.json (sizes and
hyper-parameters) and the inputs as raw little-endian arrays DIR/<name>.bin (float32, or int32 for
token ids / targets) generated with a fixed seed. This script computes each op with torch in float64
from those fp32 inputs (autograd for the backward, with the test's random output gradient) and writes
DIR/ref_<name>.bin as float64. Attention is torch's manual causal attention (torch 1.13 has no SDPA);
the classifier is F.cross_entropy over the first V of Vp columns; AdamW is torch.optim.AdamW.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

D = sys.argv[1]
cfg = json.load(open(os.path.join(D, "config.json")))
B, T, C, NH, V, Vp = (cfg[k] for k in ("B", "T", "C", "NH", "V", "Vp"))
OC = cfg["OC"]
torch.set_num_threads(1)


def load(name, shape, dtype=np.float32):
    a = np.fromfile(os.path.join(D, name + ".bin"), dtype=dtype)
    assert a.size == int(np.prod(shape)), (name, a.size, shape)
    t = torch.from_numpy(a.reshape(shape))
    return t.double() if dtype == np.float32 else t.long()


def leaf(name, shape):
    return load(name, shape).requires_grad_(True)


def save(name, t):
    t.detach().double().contiguous().numpy().tofile(os.path.join(D, "ref_" + name + ".bin"))


# encoder: out = wte[ids] + wpe[:T]
ids = load("enc_ids", (B, T), np.int32)
wte, wpe = leaf("enc_wte", (V, C)), leaf("enc_wpe", (T + 3, C))
out = wte[ids] + wpe[:T]
out.backward(load("enc_dout", (B, T, C)))
save("enc_out", out), save("enc_dwte", wte.grad), save("enc_dwpe", wpe.grad)

# layernorm
x, w, b = leaf("ln_x", (B, T, C)), leaf("ln_w", (C,)), leaf("ln_b", (C,))
out = F.layer_norm(x, (C,), w, b, eps=1e-5)
var, mean = torch.var_mean(x.detach(), dim=-1, unbiased=False)
out.backward(load("ln_dout", (B, T, C)))
save("ln_out", out), save("ln_mean", mean), save("ln_rstd", 1.0 / torch.sqrt(var + 1e-5))
save("ln_dx", x.grad), save("ln_dw", w.grad), save("ln_db", b.grad)

# layernorm with a large eps (model.norm_eps = 0.1): the same inputs, so only eps differs
x, w, b = leaf("ln_x", (B, T, C)), leaf("ln_w", (C,)), leaf("ln_b", (C,))
out = F.layer_norm(x, (C,), w, b, eps=0.1)
out.backward(load("ln_dout", (B, T, C)))
save("ln01_out", out), save("ln01_rstd", 1.0 / torch.sqrt(var + 0.1))
save("ln01_dx", x.grad), save("ln01_dw", w.grad), save("ln01_db", b.grad)

# matmul (nn.Linear layout: weight (OC, C))
x, w, b = leaf("mm_x", (B, T, C)), leaf("mm_w", (OC, C)), leaf("mm_b", (OC,))
out = F.linear(x, w, b)
out.backward(load("mm_dout", (B, T, OC)))
save("mm_out", out), save("mm_dx", x.grad), save("mm_dw", w.grad), save("mm_db", b.grad)

# causal self-attention over qkv (B, T, 3C), as nanoGPT's CausalSelfAttention without the projections
qkv = leaf("att_qkv", (B, T, 3 * C))
HS = C // NH
q, k, v = qkv.split(C, dim=2)
q = q.view(B, T, NH, HS).transpose(1, 2)
k = k.view(B, T, NH, HS).transpose(1, 2)
v = v.view(B, T, NH, HS).transpose(1, 2)
att = (q @ k.transpose(-2, -1)) * (1.0 / HS ** 0.5)
mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
att = att.masked_fill(~mask, float("-inf"))
lse = torch.logsumexp(att, dim=-1)  # (B, NH, T)
y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, C)
y.backward(load("att_dout", (B, T, C)))
save("att_out", y), save("att_lse", lse), save("att_dqkv", qkv.grad)

# GELU, tanh approximation
x = leaf("gelu_x", (B, T, OC))
y = F.gelu(x, approximate="tanh")
y.backward(load("gelu_dout", (B, T, OC)))
save("gelu_out", y), save("gelu_dx", x.grad)

# fused classifier: cross-entropy over the first V of Vp columns; targets -1 ignored
logits = leaf("cls_logits", (B, T, Vp))
tgt = load("cls_targets", (B, T), np.int32)
losses = F.cross_entropy(logits[..., :V].reshape(-1, V), tgt.reshape(-1), ignore_index=-1,
                         reduction="none").view(B, T)
(losses.sum() * cfg["dloss_scale"]).backward()
save("cls_losses", losses), save("cls_dlogits", logits.grad)
save("cls_probs", F.pad(F.softmax(logits.detach()[..., :V], dim=-1), (0, Vp - V)))

# AdamW: one step of torch.optim.AdamW from a given state (step t-1, exp_avg, exp_avg_sq)
N = cfg["adam_n"]
p = load("adam_p", (N,)).clone().requires_grad_(True)
opt = torch.optim.AdamW([p], lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"],
                        weight_decay=cfg["weight_decay"], foreach=False)
opt.state[p] = {"step": torch.tensor(float(cfg["step"] - 1)), "exp_avg": load("adam_m", (N,)).clone(),
                "exp_avg_sq": load("adam_v", (N,)).clone()}
p.grad = load("adam_g", (N,)) * cfg["grad_scale"]
opt.step()
save("adam_p", p), save("adam_m", opt.state[p]["exp_avg"]), save("adam_v", opt.state[p]["exp_avg_sq"])

# global grad norm: torch.nn.utils.clip_grad_norm_ over two tensors
g1, g2 = load("norm_g1", (B, T, C)), load("norm_g2", (OC,))
save("norm", torch.stack([torch.linalg.vector_norm(torch.cat([g1.flatten(), g2.flatten()]))]))
