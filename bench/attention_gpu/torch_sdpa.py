#!/usr/bin/env python3
"""PyTorch peer of attention_gpu_bench: F.scaled_dot_product_attention(is_causal=True) in bf16 on the GPU,
forward and backward timed separately with CUDA events (median), per backend (flash, cuDNN, default).
q, k, v are strided views of one (B, T, 3C) tensor, as in GPT-2 (with --KV < NH, grouped-query attention: one
(B, T, C + 2*KV*hs) tensor and enable_gqa=True, torch >= 2.5). With --ours FILE (the C++ bench's
--json output) it prints both side by side and our time over PyTorch's best (lower is better).
FLOPs: forward 4*B*NH*T^2*hs/2 (causal), backward 2.5x that (FlashAttention's convention)."""
import argparse
import contextlib
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_ms(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    ms = sorted(a.elapsed_time(b) for a, b in ev)
    return ms[len(ms) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--B", type=int, default=16)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--NH", type=int, default=12)
    ap.add_argument("--KV", type=int, default=0, help="key/value heads (default NH)")
    ap.add_argument("--hs", type=int, default=64)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--ours", nargs="*", default=[], help="attention_gpu_bench --json files (one per variant)")
    a = ap.parse_args()
    B, T, NH, hs = a.B, a.T, a.NH, a.hs
    KV = a.KV or NH
    C = NH * hs
    torch.manual_seed(0)
    qkv = torch.randn(B, T, C + 2 * KV * hs, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dout = torch.randn(B, NH, T, hs, device="cuda", dtype=torch.bfloat16)
    q, k, v = qkv.split([C, KV * hs, KV * hs], dim=2)  # (B, NH or KV, T, hs) views
    q = q.view(B, T, NH, hs).transpose(1, 2)
    k = k.view(B, T, KV, hs).transpose(1, 2)
    v = v.view(B, T, KV, hs).transpose(1, 2)
    gqa = {"enable_gqa": True} if KV != NH else {}
    fwd_flop = 4.0 * B * NH * T * T * hs / 2.0
    bwd_flop = 2.5 * fwd_flop
    rows = []
    for name, backend in (("torch-flash", SDPBackend.FLASH_ATTENTION), ("torch-cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("torch-default", None)):
        try:
            ctx = sdpa_kernel([backend]) if backend is not None else contextlib.nullcontext()
            with ctx:
                fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa), a.warmup,
                                a.iters)
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
                bwd = median_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), a.warmup,
                                a.iters)
            rows.append((name, fwd, bwd))
        except Exception as e:  # a backend this build or card lacks
            print(f"{name}: not available ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, B={B} T={T} NH={NH} KV={KV} hs={hs}, "
          f"median of {a.iters}")
    ours = []
    for path in a.ours:
        with open(path) as f:
            ours.append(json.load(f))
    rows[0:0] = [("ours-" + o.get("variant", ""), o["fwd_ms"], o["bwd_ms"]) for o in ours]
    print(f"{'impl':<15}{'fwd ms':>9}{'fwd TF/s':>10}{'bwd ms':>9}{'bwd TF/s':>10}")
    for name, fwd, bwd in rows:
        print(f"{name:<15}{fwd:9.3f}{fwd_flop / fwd / 1e9:10.1f}{bwd:9.3f}{bwd_flop / bwd / 1e9:10.1f}")
    torch_rows = [r for r in rows if not r[0].startswith("ours")]
    if ours and torch_rows:
        bf = min(r[1] for r in torch_rows)
        bb = min(r[2] for r in torch_rows)
        for o in ours:
            print(f"ours-{o.get('variant', '')} / best torch time: fwd {o['fwd_ms'] / bf:.2f}x  "
                  f"bwd {o['bwd_ms'] / bb:.2f}x  fwd+bwd {(o['fwd_ms'] + o['bwd_ms']) / (bf + bb):.2f}x  "
                  f"(target <= 1.5x)")


if __name__ == "__main__":
    main()
