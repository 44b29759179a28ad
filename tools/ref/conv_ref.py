#!/usr/bin/python3
"""PyTorch reference for the image ops of src/kernels (conv2d, max pooling, ReLU) and the classifier at an
image classifier's shapes (T = 1, V = Vp = 10).

Usage: /usr/bin/python3 tools/ref/conv_ref.py DIR
Read by tests/reference/conv_reference_test.cpp, which writes DIR/config.json (the cases) and the inputs as
raw little-endian fp32 (int32 for targets) DIR/<name>.bin in our layouts: activations NHWC, conv weights
(OC, KH, KW, C). This script permutes them to torch's NCHW and (OC, C, KH, KW), runs F.conv2d /
F.max_pool2d / F.relu / F.cross_entropy in float64 with autograd (the test's random output gradient), and
writes DIR/ref_<name>.bin (float64, permuted back to our layouts; max pooling's indices as int32).
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

D = sys.argv[1]
cfg = json.load(open(os.path.join(D, "config.json")))
torch.set_num_threads(1)


def load(name, shape, dtype=np.float32):
    a = np.fromfile(os.path.join(D, name + ".bin"), dtype=dtype)
    assert a.size == int(np.prod(shape)), (name, a.size, shape)
    t = torch.from_numpy(a.reshape(shape))
    return t.double() if dtype == np.float32 else t.long()


def save(name, t, dtype=np.float64):
    t.detach().contiguous().numpy().astype(dtype).tofile(os.path.join(D, "ref_" + name + ".bin"))


def nchw(t):  # NHWC -> NCHW (and (OC, KH, KW, C) -> (OC, C, KH, KW))
    return t.permute(0, 3, 1, 2)


def nhwc(t):
    return t.permute(0, 2, 3, 1)


for i, (B, H, W, C, OC, KH, KW, S, P) in enumerate(cfg["conv"]):
    x = nchw(load(f"conv{i}_x", (B, H, W, C))).requires_grad_(True)
    w = nchw(load(f"conv{i}_w", (OC, KH, KW, C))).requires_grad_(True)
    b = load(f"conv{i}_b", (OC,)).requires_grad_(True)
    out = F.conv2d(x, w, b, stride=S, padding=P)
    OH, OW = out.shape[2], out.shape[3]
    out.backward(nchw(load(f"conv{i}_dout", (B, OH, OW, OC))))
    save(f"conv{i}_out", nhwc(out)), save(f"conv{i}_dx", nhwc(x.grad))
    save(f"conv{i}_dw", nhwc(w.grad)), save(f"conv{i}_db", b.grad)

for i, (B, H, W, C, K, S) in enumerate(cfg["pool"]):
    x = nchw(load(f"pool{i}_x", (B, H, W, C))).requires_grad_(True)
    out, idx = F.max_pool2d(x, K, S, return_indices=True)
    OH, OW = out.shape[2], out.shape[3]
    out.backward(nchw(load(f"pool{i}_dout", (B, OH, OW, C))))
    save(f"pool{i}_out", nhwc(out)), save(f"pool{i}_dx", nhwc(x.grad)), save(f"pool{i}_idx", nhwc(idx), np.int32)

x = load("relu_x", (cfg["relu_n"],)).requires_grad_(True)
y = F.relu(x)
y.backward(load("relu_dout", (cfg["relu_n"],)))
save("relu_out", y), save("relu_dx", x.grad)

# the classifier of an image model: logits (B, 1, 10), mean cross-entropy over the batch
B, V = cfg["cls"]
logits = load("cls_logits", (B, V)).requires_grad_(True)
tgt = load("cls_targets", (B,), np.int32)
losses = F.cross_entropy(logits, tgt, reduction="none")
losses.mean().backward()
save("cls_losses", losses), save("cls_dlogits", logits.grad)
