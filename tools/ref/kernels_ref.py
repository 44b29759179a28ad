#!/usr/bin/python3
"""PyTorch reference for the rows of the kernel case table (tests/kernels/case_table.h) marked kTorch.

Usage: /usr/bin/python3 tools/ref/kernels_ref.py DIR
Read by tests/reference/kernels_reference_test.cpp, which writes DIR/cases.json (one entry per row: its index, op,
shapes, parameters and tensors) and each input tensor as a raw little-endian array DIR/<row>_<name>.bin (float32,
or int32 for ids, targets and positions). For each row this script computes the op with torch in float64 from
those fp32 inputs (autograd for the backward, with the row's random output gradient; "+=" outputs added to their
start values) and writes DIR/<row>_<name>.ref.bin (float64) for every output the row compares. Attention is the
manual causal softmax attention (torch 1.13 has no SDPA), with the block-diagonal causal mask of packed examples
written out; the classifier is F.cross_entropy over the first V of Vp columns; AdamW is torch.optim.AdamW. The
LLaMA ops follow transformers' modeling_llama.py (LlamaRMSNorm, SiLU(gate) * up, rotate_half /
apply_rotary_pos_emb with LlamaRotaryEmbedding's cos/sin, repeat_kv before the attention).
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

D = sys.argv[1]
torch.set_num_threads(1)


class Row:
    def __init__(self, case):
        self.case = case
        self.d = case["dims"]
        self.p = case["params"]
        self.args = {a["name"]: a for a in case["args"]}

    def load(self, name):
        a = self.args[name]
        dtype = np.int32 if a["dtype"] == "i32" else np.float32
        v = np.fromfile(os.path.join(D, f"{self.case['row']}_{name}.bin"), dtype=dtype)
        assert v.size == int(np.prod(a["shape"])), (name, v.size, a["shape"])
        t = torch.from_numpy(v.reshape(a["shape"]))
        return t.double() if dtype == np.float32 else t.long()

    def leaf(self, name):
        return self.load(name).requires_grad_(True)

    def save(self, name, t):
        path = os.path.join(D, f"{self.case['row']}_{name}.ref.bin")
        t.detach().double().contiguous().numpy().tofile(path)

    def save_acc(self, name, grad):  # a "+=" output: its start value plus the gradient
        self.save(name, self.load(name) + grad)


def encoder(r):
    T = r.d["T"]
    ids, wte, wpe = r.load("inp"), r.leaf("wte"), r.leaf("wpe")
    out = wte[ids] + wpe[:T]
    out.backward(r.load("dout"))
    r.save("out", out), r.save_acc("dwte", wte.grad), r.save_acc("dwpe", wpe.grad)


def layernorm(r):
    C, eps = r.d["C"], r.p["eps"]
    x, w, b = r.leaf("inp"), r.leaf("weight"), r.leaf("bias")
    out = F.layer_norm(x, (C,), w, b, eps=eps)
    var, mean = torch.var_mean(x.detach(), dim=-1, unbiased=False)
    out.backward(r.load("dout"))
    r.save("out", out), r.save("mean", mean), r.save("rstd", 1.0 / torch.sqrt(var + eps))
    r.save_acc("dinp", x.grad), r.save_acc("dweight", w.grad), r.save_acc("dbias", b.grad)


def matmul(r):  # nn.Linear layout: weight (OC, C); reps calls accumulate dweight, dbias
    x, w = r.leaf("inp"), r.leaf("weight")
    b = r.leaf("bias") if r.d["bias"] else None
    out = F.linear(x, w, b)
    out.backward(r.load("dout"))
    reps = r.d["reps"]
    r.save("out", out), r.save("dinp", x.grad), r.save_acc("dweight", reps * w.grad)
    if b is not None:
        r.save_acc("dbias", reps * b.grad)


def repeat_kv(x, n_rep):  # modeling_llama.repeat_kv: (B, KV, T, HS) -> (B, KV * n_rep, T, HS)
    b, kvh, slen, hd = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, kvh, n_rep, slen, hd).reshape(b, kvh * n_rep, slen, hd)


def attention(r):
    B, T, C, NH, KV = (r.d[k] for k in ("B", "T", "C", "NH", "KV"))
    HS = C // NH
    steps = torch.arange(T)
    mask = steps[None, None, :] <= steps[None, :, None]  # causal: key j <= query t
    if "positions" in r.args:  # packed: key j also in t's example, j >= t - position_ids[t]
        start = steps[None, :] - r.load("positions")
        mask = mask & (steps[None, None, :] >= start[:, :, None])
    qkv = r.leaf("qkv")
    q, k, v = qkv.split([C, KV * HS, KV * HS], dim=2)
    q = q.view(B, T, NH, HS).transpose(1, 2)
    k = repeat_kv(k.view(B, T, KV, HS).transpose(1, 2), NH // KV)
    v = repeat_kv(v.view(B, T, KV, HS).transpose(1, 2), NH // KV)
    att = (q @ k.transpose(-2, -1)) * (1.0 / HS ** 0.5)
    att = att.masked_fill(~mask[:, None], float("-inf"))  # mask (1 or B, T, T) over the heads
    y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, C)
    y.backward(r.load("dout"))
    r.save("out", y), r.save("lse", torch.logsumexp(att, dim=-1)), r.save("dqkv", qkv.grad)
    if r.d["t0"] > 0:
        r.save("cached", y[:, r.d["t0"]:])


def gelu(r):  # the tanh approximation
    x = r.leaf("inp")
    y = F.gelu(x, approximate="tanh")
    y.backward(r.load("dout"))
    r.save("out", y), r.save("dinp", x.grad)


def classifier_losses(r, logits):
    V = r.d["V"]
    tgt = r.load("targets")
    return F.cross_entropy(logits[..., :V].reshape(-1, V), tgt.reshape(-1), ignore_index=-1,
                           reduction="none").view(tgt.shape)


def classifier(r):  # losses, and dlogits (in place over the logits) = d (dloss * sum(losses)) / d logits
    logits = r.leaf("logits")
    losses = classifier_losses(r, logits)
    (losses.sum() * r.p["dloss"]).backward()
    r.save("losses", losses), r.save("logits", logits.grad)


def classifier_forward(r):
    V, Vp = r.d["V"], r.d["Vp"]
    logits = r.load("logits")
    r.save("losses", classifier_losses(r, logits))
    r.save("probs", F.pad(F.softmax(logits[..., :V], dim=-1), (0, Vp - V)))


def adamw(r):  # reps steps of torch.optim.AdamW from the given state (step t-1, exp_avg, exp_avg_sq)
    p = r.load("params").clone().requires_grad_(True)
    opt = torch.optim.AdamW([p], lr=r.p["lr"], betas=(r.p["beta1"], r.p["beta2"]), eps=r.p["eps"],
                            weight_decay=r.p["weight_decay"], foreach=False)
    opt.state[p] = {"step": torch.tensor(float(r.p["step"] - 1)), "exp_avg": r.load("m").clone(),
                    "exp_avg_sq": r.load("v").clone()}
    for _ in range(r.d["reps"]):
        p.grad = r.load("grads") * r.p["grad_scale"]
        opt.step()
    r.save("params", p), r.save("m", opt.state[p]["exp_avg"]), r.save("v", opt.state[p]["exp_avg_sq"])


def sum_squares(r):  # the global grad norm's sum: torch.linalg.vector_norm squared
    r.save("sum", torch.stack([torch.linalg.vector_norm(r.load("x").flatten()) ** 2]))


def llama_rmsnorm(x, w, eps):  # LlamaRMSNorm.forward
    variance = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + eps))


def rmsnorm(r):
    eps = r.p["eps"]
    x, w = r.leaf("inp"), r.leaf("weight")
    out = llama_rmsnorm(x, w, eps)
    out.backward(r.load("dout"))
    r.save("out", out), r.save("rstd", torch.rsqrt(x.detach().pow(2).mean(-1) + eps))
    r.save_acc("dinp", x.grad), r.save_acc("dweight", w.grad)


def residual_rmsnorm(r):  # h = x1 + x2 (in fp32, as the kernel stores it), then RMSNorm of h
    eps = r.p["eps"]
    h = (r.load("inp1").float() + r.load("inp2").float()).double()
    r.save("residual", h), r.save("out", llama_rmsnorm(h, r.load("weight"), eps))
    r.save("rstd", torch.rsqrt(h.pow(2).mean(-1) + eps))


def swiglu(r):  # LlamaMLP's act_fn(gate) * up, act_fn = SiLU; gate and up the halves of one input
    Fw = r.d["F"]
    x = r.leaf("inp")
    out = F.silu(x[..., :Fw]) * x[..., Fw:]
    out.backward(r.load("dout"))
    r.save("out", out), r.save("dinp", x.grad)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope(r):  # LlamaRotaryEmbedding (default rope_type) and apply_rotary_pos_emb on the q and k heads
    B, T, C, NH, KV, theta = (r.d[k] for k in ("B", "T", "C", "NH", "KV", "theta"))
    HS = C // NH
    inv_freq = 1.0 / (theta ** (torch.arange(0, HS, 2, dtype=torch.int64).double() / HS))

    def cos_sin(position_ids):  # (..., T) -> cos, sin (..., T, HS)
        freqs = position_ids.double()[..., None] * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    # The row's fp32 table must be HF's cos/sin (rows [cos(a_0..a_{HS/2-1}) | sin(...)]): the layout check.
    tab = r.load("table")
    cos_all, sin_all = cos_sin(torch.arange(tab.shape[0]))
    err = max((tab[:, : HS // 2] - cos_all[:, : HS // 2]).abs().max().item(),
              (tab[:, HS // 2:] - sin_all[:, : HS // 2]).abs().max().item())
    assert err < 1e-6, f"row {r.case['row']}: rope table differs from HF's cos/sin by {err}"

    def apply(qkv, position_ids):  # position_ids (B, T): cos/sin broadcast over the heads (unsqueeze_dim 1)
        cos, sin = cos_sin(position_ids)
        cos, sin = cos[:, None], sin[:, None]
        q, k, v = qkv.split([NH * HS, KV * HS, KV * HS], dim=2)
        q = q.view(B, T, NH, HS).transpose(1, 2)
        k = k.view(B, T, KV, HS).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        return torch.cat([t.transpose(1, 2).reshape(B, T, -1) for t in (q, k)] + [v], dim=2)

    if "positions" in r.args:
        fwd_pos = bwd_pos = r.load("positions")
    else:
        fwd_pos = torch.arange(r.d["pos0"], r.d["pos0"] + T).expand(B, T)
        bwd_pos = torch.arange(T).expand(B, T)
    r.save("qkv", apply(r.load("qkv"), fwd_pos))
    g = r.leaf("dqkv")  # the backward is the transpose of the rotation, applied to the gradient in place
    x = torch.zeros_like(g, requires_grad=True)
    apply(x, bwd_pos).backward(g.detach())
    r.save("dqkv", x.grad)


OPS = {f.__name__: f for f in (encoder, layernorm, matmul, attention, gelu, classifier, classifier_forward, adamw,
                               sum_squares, rmsnorm, residual_rmsnorm, swiglu, rope)}

for case in json.load(open(os.path.join(D, "cases.json"))):
    if case["op"] not in OPS:
        sys.exit(f"kernels_ref.py: no PyTorch reference for op '{case['op']}' (row {case['row']})")
    OPS[case["op"]](Row(case))
