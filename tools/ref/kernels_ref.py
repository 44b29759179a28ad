#!/usr/bin/python3
"""PyTorch reference for every CPU kernel of src/kernels (forward and backward).

Usage: /usr/bin/python3 tools/ref/kernels_ref.py DIR
Read by tests/reference/kernels_reference_test.cpp, which writes DIR/config.json (sizes and
hyper-parameters) and the inputs as raw little-endian arrays DIR/<name>.bin (float32, or int32 for
token ids / targets) generated with a fixed seed. This script computes each op with torch in float64
from those fp32 inputs (autograd for the backward, with the test's random output gradient) and writes
DIR/ref_<name>.bin as float64. Attention is torch's manual causal attention (torch 1.13 has no SDPA);
the classifier is F.cross_entropy over the first V of Vp columns; AdamW is torch.optim.AdamW. The LLaMA ops
follow transformers' modeling_llama.py (LlamaRMSNorm, SiLU(gate) * up, rotate_half / apply_rotary_pos_emb with
LlamaRotaryEmbedding's cos/sin, repeat_kv before the attention).
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

# ---- LLaMA ops, as Hugging Face transformers writes them (modeling_llama.py), in float64 ----
F_SWI, GQ_NH, GQ_KV, GQ_HS = cfg["swi_f"], cfg["gq_nh"], cfg["gq_kv"], cfg["gq_hs"]
GQ_C = GQ_NH * GQ_HS
GQ_C3 = GQ_C + 2 * GQ_KV * GQ_HS
POS0, TMAX, THETA, RMS_EPS = cfg["rope_pos0"], cfg["rope_tmax"], cfg["rope_theta"], cfg["rms_eps"]


def llama_rmsnorm(x, w, eps):  # LlamaRMSNorm.forward
    variance = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + eps))


# RMSNorm: out, rstd, and autograd's dx, dw
x, w = leaf("rms_x", (B, T, C)), leaf("rms_w", (C,))
out = llama_rmsnorm(x, w, RMS_EPS)
out.backward(load("rms_dout", (B, T, C)))
save("rms_out", out), save("rms_dx", x.grad), save("rms_dw", w.grad)
save("rms_rstd", torch.rsqrt(x.detach().pow(2).mean(-1) + RMS_EPS))
# the residual add fused in front: h = x1 + x2 (in fp32, as the kernel stores it), then RMSNorm of h
h = (load("rms_x", (B, T, C)).float() + load("rms_x2", (B, T, C)).float()).double()
save("rmsres_h", h), save("rmsres_out", llama_rmsnorm(h, load("rms_w", (C,)), RMS_EPS))

# SwiGLU: LlamaMLP's act_fn(gate_proj(x)) * up_proj(x), act_fn = SiLU; gate and up as the halves of one input
x = leaf("swi_x", (B, T, 2 * F_SWI))
gate, up = x[..., :F_SWI], x[..., F_SWI:]
out = F.silu(gate) * up
out.backward(load("swi_dout", (B, T, F_SWI)))
save("swi_out", out), save("swi_dx", x.grad)


# RoPE: LlamaRotaryEmbedding (default rope_type) and apply_rotary_pos_emb / rotate_half
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def cos_sin(position_ids):  # (T,) -> cos, sin of shape (T, HS)
    inv_freq = 1.0 / (THETA ** (torch.arange(0, GQ_HS, 2, dtype=torch.int64).double() / GQ_HS))
    freqs = position_ids.double()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def split_heads(qkv):  # (B, T, C3) -> q (B, NH, T, HS), k, v (B, KV, T, HS)
    q, k, v = qkv.split([GQ_C, GQ_KV * GQ_HS, GQ_KV * GQ_HS], dim=2)
    q = q.view(B, T, GQ_NH, GQ_HS).transpose(1, 2)
    k = k.view(B, T, GQ_KV, GQ_HS).transpose(1, 2)
    v = v.view(B, T, GQ_KV, GQ_HS).transpose(1, 2)
    return q, k, v


def merge_heads(q, k, v):
    return torch.cat([t.transpose(1, 2).reshape(B, T, -1) for t in (q, k, v)], dim=2)


def apply_rope(qkv, pos0):
    cos, sin = cos_sin(torch.arange(pos0, pos0 + T))
    q, k, v = split_heads(qkv)
    q = q * cos + rotate_half(q) * sin  # apply_rotary_pos_emb (cos, sin broadcast over batch and heads)
    k = k * cos + rotate_half(k) * sin
    return merge_heads(q, k, v)


# The test's fp32 table must be HF's cos/sin (rows [cos(a_0..a_{HS/2-1}) | sin(...)]): the layout check.
tab = load("rope_table", (TMAX, GQ_HS))
cos_all, sin_all = cos_sin(torch.arange(TMAX))
tab_err = max((tab[:, : GQ_HS // 2] - cos_all[:, : GQ_HS // 2]).abs().max().item(),
              (tab[:, GQ_HS // 2:] - sin_all[:, : GQ_HS // 2]).abs().max().item())
assert tab_err < 1e-6, f"rope table differs from HF's cos/sin by {tab_err}"
save("rope_out", apply_rope(load("gq_qkv", (B, T, GQ_C3)), POS0))
qkv = leaf("gq_qkv", (B, T, GQ_C3))
apply_rope(qkv, 0).backward(load("rope_dout", (B, T, GQ_C3)))
save("rope_dx", qkv.grad)


# Grouped-query attention: repeat_kv, then causal softmax attention (torch 1.13 has no
# scaled_dot_product_attention; this is its math, as the GPT-2 attention reference above)
def repeat_kv(x, n_rep):  # modeling_llama.repeat_kv: (B, KV, T, HS) -> (B, KV * n_rep, T, HS)
    b, kvh, slen, hd = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, kvh, n_rep, slen, hd).reshape(b, kvh * n_rep, slen, hd)


qkv = leaf("gq_qkv", (B, T, GQ_C3))
q, k, v = split_heads(qkv)
k, v = repeat_kv(k, GQ_NH // GQ_KV), repeat_kv(v, GQ_NH // GQ_KV)
att = (q @ k.transpose(-2, -1)) * (1.0 / GQ_HS ** 0.5)
att = att.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf"))
lse = torch.logsumexp(att, dim=-1)
y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, GQ_C)
y.backward(load("gq_dout", (B, T, GQ_C)))
save("gq_out", y), save("gq_lse", lse), save("gq_dqkv", qkv.grad)


# ---- Packed examples: rows hold several examples, position_ids restart at 0 at each (the chat loader's
# packing); attention must not cross examples. The mask is written out as the block-diagonal causal mask
# (query t sees key j iff j <= t and j is in t's example, i.e. j >= t - position_ids[t]).
PK_NH, PK_KV, PK_HS = cfg["pk_nh"], cfg["pk_kv"], cfg["pk_hs"]
pk_pos = load("pk_pos", (B, T), np.int32)
steps = torch.arange(T)
example_start = steps[None, :] - pk_pos  # (B, T)
block_causal = (steps[None, None, :] <= steps[None, :, None]) & (steps[None, None, :] >= example_start[:, :, None])


def packed_attention(qkv, nh, kvh, hs):  # qkv (B, T, nh*hs + 2*kvh*hs) -> out (B, T, nh*hs), lse (B, nh, T)
    q, k, v = qkv.split([nh * hs, kvh * hs, kvh * hs], dim=2)
    q = q.view(B, T, nh, hs).transpose(1, 2)
    k = repeat_kv(k.view(B, T, kvh, hs).transpose(1, 2), nh // kvh)
    v = repeat_kv(v.view(B, T, kvh, hs).transpose(1, 2), nh // kvh)
    att = (q @ k.transpose(-2, -1)) * (1.0 / hs ** 0.5)
    att = att.masked_fill(~block_causal[:, None], float("-inf"))
    y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, nh * hs)
    return y, torch.logsumexp(att, dim=-1)


qkv = leaf("pk_qkv", (B, T, (PK_NH + 2 * PK_KV) * PK_HS))
y, lse = packed_attention(qkv, PK_NH, PK_KV, PK_HS)
y.backward(load("pk_dout", (B, T, PK_NH * PK_HS)))
save("pk_gq_out", y), save("pk_gq_lse", lse), save("pk_gq_dqkv", qkv.grad)
qkv = leaf("att_qkv", (B, T, 3 * C))  # multi-head: GPT-2's attention inputs above, packed
y, lse = packed_attention(qkv, NH, NH, C // NH)
y.backward(load("att_dout", (B, T, C)))
save("pk_att_out", y), save("pk_att_lse", lse), save("pk_att_dqkv", qkv.grad)


# RoPE at per-token position_ids (B, T): LlamaRotaryEmbedding's cos/sin of each row's positions, broadcast over
# the heads (apply_rotary_pos_emb's unsqueeze_dim = 1).
def apply_rope_at(qkv, position_ids):
    inv_freq = 1.0 / (THETA ** (torch.arange(0, GQ_HS, 2, dtype=torch.int64).double() / GQ_HS))
    freqs = position_ids.double()[..., None] * inv_freq  # (B, T, HS/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # (B, 1, T, HS)
    q, k, v = split_heads(qkv)
    return merge_heads(q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v)


save("pk_rope_out", apply_rope_at(load("gq_qkv", (B, T, GQ_C3)), pk_pos))
qkv = leaf("gq_qkv", (B, T, GQ_C3))
apply_rope_at(qkv, pk_pos).backward(load("rope_dout", (B, T, GQ_C3)))
save("pk_rope_dx", qkv.grad)
