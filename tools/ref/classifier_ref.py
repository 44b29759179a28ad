#!/usr/bin/python3
"""Reference for tests/models/classifier_test.cpp: the image classifier of models/classifier.h in PyTorch
(float64), on the weights and batch the test wrote to DIR.

DIR/manifest.json: {"conv": bool, "H", "W", "C", "classes", "mean", "std", "B",
                    "params": [[name, shape], ...]}  (our layouts, in table order)
DIR/params.f32: the parameters, concatenated; DIR/pixels.i32 (B, H*W*C); DIR/labels.i32 (B) (-1: unlabelled)
Writes DIR/loss.txt (mean cross-entropy over labelled rows) and DIR/grads.f64 (every parameter's gradient
in our layout, concatenated in table order).

Our conv weights are (OC, KH, KW, C) and activations NHWC: the weights are permuted to torch's (OC, C, KH, KW)
here, and the features reach the first linear layer flattened in (h, w, c) order as ours are.
"""
import json
import sys

import numpy as np
import torch
import torch.nn.functional as F


def main(d):
    m = json.load(open(f"{d}/manifest.json"))
    flat = np.fromfile(f"{d}/params.f32", dtype=np.float32).astype(np.float64)
    params, at = {}, 0
    for name, shape in m["params"]:
        n = int(np.prod(shape))
        t = torch.tensor(flat[at:at + n].reshape(shape), dtype=torch.float64)
        if name.startswith("conv") and name.endswith(".weight"):
            t = t.permute(0, 3, 1, 2).contiguous()  # (OC,KH,KW,C) -> (OC,C,KH,KW)
        params[name] = t.requires_grad_(True)
        at += n
    B, H, W, C = m["B"], m["H"], m["W"], m["C"]
    px = np.fromfile(f"{d}/pixels.i32", dtype=np.int32).reshape(B, H, W, C).astype(np.float64)
    labels = torch.tensor(np.fromfile(f"{d}/labels.i32", dtype=np.int32).astype(np.int64))
    x = torch.tensor((px / 255.0 - m["mean"]) / m["std"]).permute(0, 3, 1, 2)  # NCHW
    i = 0
    while f"conv{i}.weight" in params:
        x = F.max_pool2d(F.relu(F.conv2d(x, params[f"conv{i}.weight"], params[f"conv{i}.bias"], padding=1)), 2)
        i += 1
    x = x.permute(0, 2, 3, 1).reshape(B, -1)  # flattened (h, w, c), as our NHWC activations
    i = 0
    while f"fc{i}.weight" in params:
        x = F.relu(F.linear(x, params[f"fc{i}.weight"], params[f"fc{i}.bias"]))
        i += 1
    logits = F.linear(x, params["out.weight"], params["out.bias"])
    loss = F.cross_entropy(logits, labels, ignore_index=-1)
    loss.backward()
    open(f"{d}/loss.txt", "w").write(repr(loss.item()))
    grads = []
    for name, _ in m["params"]:
        g = params[name].grad
        if name.startswith("conv") and name.endswith(".weight"):
            g = g.permute(0, 2, 3, 1)  # back to (OC,KH,KW,C)
        grads.append(g.contiguous().numpy().reshape(-1))
    np.concatenate(grads).astype(np.float64).tofile(f"{d}/grads.f64")


if __name__ == "__main__":
    main(sys.argv[1])
