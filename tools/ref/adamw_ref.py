#!/usr/bin/python3
"""Reference values for src/optim from PyTorch: torch.optim.AdamW steps with two parameter groups
(decay / no decay), LambdaLR schedules, and torch.nn.utils.clip_grad_norm_.

Usage: /usr/bin/python3 tools/ref/adamw_ref.py OUT.safetensors
Read by tests/reference/optim_reference_test.cpp. Hyper-parameters travel in the file's metadata so
the C++ test uses exactly the values this script used. Tensor names:
  p0.<param>, g<k>.<param>      initial params, grads of step k (k = 0..steps-1)
  p1.<param>, pN.<param>        params after 1 step and after `steps` steps
  m.<param>, v.<param>          exp_avg / exp_avg_sq after `steps` steps
  lr                            F64 [steps], the lr given to each step
  clip.in.<param>, clip.out.<param>, clip.norm   clip_grad_norm_ input, output and returned norm
  sched.<kind>.w<W>             F64 [max+1]: LambdaLR's lr for steps 0..max
"""
import math
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
BETAS = (0.9, 0.95)
EPS = 1e-8
WD = 0.1
STEPS = 6
SCHED = dict(lr=1e-2, min_lr=1e-3, warmup=2, max_steps=STEPS)
CLIP_MAX = 1.0


def lr_lambda(kind, lr, min_lr, warmup, max_steps):
    """The schedule as a LambdaLR multiplier (written from the formula, independently of the C++)."""
    def f(step):
        if step < warmup:
            return (step + 1) / warmup
        if kind == "constant":
            return 1.0
        r = 1.0 if max_steps <= warmup else min(max((step - warmup) / (max_steps - warmup), 0.0), 1.0)
        coeff = 0.5 * (1.0 + math.cos(math.pi * r)) if kind == "cosine" else 1.0 - r
        return (min_lr + coeff * (lr - min_lr)) / lr
    return f


def schedule_values(kind, lr, min_lr, warmup, max_steps):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(kind, lr, min_lr, warmup, max_steps))
    out = []
    for _ in range(max_steps + 1):
        out.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    return torch.tensor(out, dtype=torch.float64)


def main():
    torch.manual_seed(4)
    out = {}
    params = {n: torch.nn.Parameter(torch.randn(s)) for n, s, _ in PARAMS}
    for n, _, _ in PARAMS:
        out[f"p0.{n}"] = params[n].detach().clone()
    decay = [params[n] for n, _, d in PARAMS if d]
    no_decay = [params[n] for n, _, d in PARAMS if not d]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=SCHED["lr"], betas=BETAS, eps=EPS, foreach=False)
    lam = lr_lambda("cosine", **SCHED)
    lrs = []
    for k in range(STEPS):
        lr = SCHED["lr"] * lam(k)
        lrs.append(lr)
        for g in opt.param_groups:
            g["lr"] = lr
        for n, s, _ in PARAMS:
            # Grads of varying scale (some tiny) so eps and the bias corrections matter.
            grad = torch.randn(s) * (10.0 ** torch.randint(-4, 1, s).float())
            out[f"g{k}.{n}"] = grad.clone()
            params[n].grad = grad
        opt.step()
        if k == 0:
            for n, _, _ in PARAMS:
                out[f"p1.{n}"] = params[n].detach().clone()
    for n, _, _ in PARAMS:
        out[f"pN.{n}"] = params[n].detach().clone()
        st = opt.state[params[n]]
        out[f"m.{n}"] = st["exp_avg"].clone()
        out[f"v.{n}"] = st["exp_avg_sq"].clone()
    out["lr"] = torch.tensor(lrs, dtype=torch.float64)

    # clip_grad_norm_: grads whose norm (about 40) is well above CLIP_MAX.
    clip_params = []
    for n, s, _ in PARAMS:
        p = torch.nn.Parameter(torch.zeros(s))
        p.grad = torch.randn(s)
        out[f"clip.in.{n}"] = p.grad.clone()
        clip_params.append(p)
    norm = torch.nn.utils.clip_grad_norm_(clip_params, CLIP_MAX)
    for (n, _, _), p in zip(PARAMS, clip_params):
        out[f"clip.out.{n}"] = p.grad.clone()
    out["clip.norm"] = torch.tensor(float(norm), dtype=torch.float64)

    for kind in ("cosine", "linear", "constant"):
        for w in (0, 10, 100, 150):
            out[f"sched.{kind}.w{w}"] = schedule_values(kind, 6e-4, 6e-5, w, 100)

    meta = {"beta1": repr(BETAS[0]), "beta2": repr(BETAS[1]), "eps": repr(EPS), "weight_decay": repr(WD),
            "steps": str(STEPS), "clip_max": repr(CLIP_MAX), "torch": torch.__version__}
    save(sys.argv[1], out, meta)


if __name__ == "__main__":
    main()
