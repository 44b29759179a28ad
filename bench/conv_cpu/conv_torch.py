#!/usr/bin/python3
"""PyTorch's side of bench/conv_cpu: F.conv2d forward and backward at the shapes given, NCHW (torch's default,
as the issue's anchor CNN trains), fp32, on THREADS threads. Prints one JSON object per layer:
{"name", "fwd_ms", "bwd_ms"} (the fastest of REPS runs after a warm-up).
Usage: conv_torch.py THREADS REPS wall|cpu NAME:B:H:W:C:OC:K:S:P:DINP ...   (cpu: process CPU time)
"""
import json
import sys
import time

import torch
import torch.nn.functional as F

threads, reps = int(sys.argv[1]), int(sys.argv[2])
clock = time.process_time if sys.argv[3] == "cpu" else time.perf_counter
torch.set_num_threads(threads)


def min_ms(fn):  # the fastest of REPS after a warm-up, as conv_bench.cpp
    fn()
    ts = []
    for _ in range(reps):
        t0 = clock()
        fn()
        ts.append((clock() - t0) * 1e3)
    return min(ts)


for spec in sys.argv[4:]:
    name, *v = spec.split(":")
    B, H, W, C, OC, K, S, P, dinp = map(int, v)
    x = torch.randn(B, C, H, W, requires_grad=bool(dinp))
    w = torch.randn(OC, C, K, K, requires_grad=True)
    b = torch.randn(OC, requires_grad=True)
    with torch.no_grad():
        fwd = min_ms(lambda: F.conv2d(x, w, b, stride=S, padding=P))
    out = F.conv2d(x, w, b, stride=S, padding=P)
    g = torch.randn_like(out)

    def backward():
        w.grad = b.grad = x.grad = None
        out.backward(g, retain_graph=True)

    print(json.dumps({"name": name, "fwd_ms": fwd, "bwd_ms": min_ms(backward)}), flush=True)
