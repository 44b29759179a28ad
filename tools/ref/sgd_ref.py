#!/usr/bin/python3
"""Reference values for optim::Sgd from PyTorch: torch.optim.SGD steps with two parameter groups
(decay / no decay, as the trainer splits them) for several settings of momentum, dampening and Nesterov.

Usage: /usr/bin/python3 tools/ref/sgd_ref.py OUT.safetensors
Read by tests/reference/sgd_reference_test.cpp. Each case's hyper-parameters travel in the metadata
("case.<c>" = "momentum,dampening,nesterov,weight_decay") so the C++ test uses exactly these values.
Tensor names:
  p0.<param>, g<k>.<param>       initial params, raw grads of step k (k = 0..steps-1)
  lr, scale                      F64 [steps]: the lr of each step; the factor the grads are multiplied by
                                 (in fp32, as clipping does) before torch sees them
  <c>.pN.<param>, <c>.buf.<param>  case c's params and momentum buffer after `steps` steps
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_ref import save  # noqa: E402

# (name, shape, decay): GPT-2-like names; 2-D weights decay, biases / norms / embeddings do not.
PARAMS = [
    ("transformer.wte.weight", (50, 16), False),
    ("transformer.h.0.ln_1.weight", (16,), False),
    ("transformer.h.0.ln_1.bias", (16,), False),
    ("transformer.h.0.attn.c_attn.weight", (16, 48), True),
    ("transformer.h.0.attn.c_attn.bias", (48,), False),
    ("transformer.h.0.mlp.c_fc.weight", (16, 64), True),
]
STEPS = 8
# name -> (momentum, dampening, nesterov, weight_decay)
CASES = {
    "momentum": (0.9, 0.0, False, 0.1),
    "nesterov": (0.9, 0.0, True, 0.1),
    "dampening": (0.8, 0.3, False, 0.05),
    "plain": (0.0, 0.0, False, 0.1),
    "nodecay": (0.95, 0.0, False, 0.0),
}


def main():
    torch.manual_seed(7)
    out = {}
    p0 = {n: torch.randn(s) for n, s, _ in PARAMS}
    grads = [{n: torch.randn(s) * (10.0 ** torch.randint(-2, 1, s).float()) for n, s, _ in PARAMS}
             for _ in range(STEPS)]
    lrs = [0.05 * (0.5 + 0.5 * (k + 1) / STEPS) for k in range(STEPS)]
    scales = [1.0 if k % 3 else 0.625 for k in range(STEPS)]  # some steps clipped
    for n, _, _ in PARAMS:
        out[f"p0.{n}"] = p0[n].clone()
        for k in range(STEPS):
            out[f"g{k}.{n}"] = grads[k][n].clone()
    out["lr"] = torch.tensor(lrs, dtype=torch.float64)
    out["scale"] = torch.tensor(scales, dtype=torch.float64)
    meta = {"steps": str(STEPS), "torch": torch.__version__}
    for c, (mom, damp, nest, wd) in CASES.items():
        params = {n: torch.nn.Parameter(p0[n].clone()) for n, _, _ in PARAMS}
        decay = [params[n] for n, _, d in PARAMS if d]
        no_decay = [params[n] for n, _, d in PARAMS if not d]
        opt = torch.optim.SGD([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                              lr=lrs[0], momentum=mom, dampening=damp, nesterov=nest, foreach=False)
        for k in range(STEPS):
            for g in opt.param_groups:
                g["lr"] = lrs[k]
            for n, _, _ in PARAMS:
                # The fp32 product grads * scale, as our kernel forms it from the clipping coefficient.
                params[n].grad = grads[k][n] * torch.tensor(scales[k], dtype=torch.float32)
            opt.step()
        for n, _, _ in PARAMS:
            out[f"{c}.pN.{n}"] = params[n].detach().clone()
            if mom != 0:
                out[f"{c}.buf.{n}"] = opt.state[params[n]]["momentum_buffer"].clone()
        meta[f"case.{c}"] = f"{mom!r},{damp!r},{int(nest)},{wd!r}"
    save(sys.argv[1], out, meta)


if __name__ == "__main__":
    main()
