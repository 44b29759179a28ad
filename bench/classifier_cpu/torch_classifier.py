#!/usr/bin/python3
"""PyTorch's side of bench/classifier_cpu/run.sh: the preset's CNN or MLP (configs/presets/fashion_mnist_*.yaml),
AdamW, the same batch and threads, random images of Fashion-MNIST's shape (throughput does not depend on
the values). Prints one JSON line: training and inference images/s (medians over timed rounds).
--autocast: torch.autocast("cpu", dtype=torch.bfloat16) around the forward and the loss (training and
inference), fp32 master weights and AdamW: PyTorch's bf16 mode, the peer of our trainer.precision: bf16."""
import argparse
import contextlib
import json
import statistics
import time

import torch
import torch.nn as nn


def model(arch, conv, hidden, dropout):
    layers, ch, size = [], 1, 28
    if arch == "cnn":
        for oc in conv:
            layers += [nn.Conv2d(ch, oc, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
            ch, size = oc, size // 2
    layers.append(nn.Flatten())
    width = ch * size * size
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(dropout)]
        width = h
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="cnn")
    ap.add_argument("--conv", default="32,64")
    ap.add_argument("--hidden", default="128")
    ap.add_argument("--dropout", type=float, default=0.25)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--infer-images", type=int, default=10000)
    # Passes over the inference images; the median pass is reported. One pass on the GPU is ~5 ms, and a
    # single one swung 2x between runs of the same script (docs/benchmarks.md), so bench/classifier_gpu asks
    # for 20.
    ap.add_argument("--infer-rounds", type=int, default=1)
    # bench/classifier_gpu: --device cuda --compile (torch.compile default mode), the images already on the
    # GPU (a random tensor created there), timings synchronised.
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--autocast", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    ctx = (lambda: torch.autocast(dev.type, dtype=torch.bfloat16)) if a.autocast else contextlib.nullcontext
    m = model(a.arch, [int(x) for x in a.conv.split(",") if x], [int(x) for x in a.hidden.split(",") if x], a.dropout)
    m = m.to(dev)
    fwd = torch.compile(m) if a.compile else m
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    x = torch.randn(a.batch, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    m.train()
    times, cpu = [], 0.0
    warm = 10 if a.compile else 3
    for i in range(a.steps + warm):
        sync()
        t, c = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        with ctx():
            loss = nn.functional.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        sync()
        if i >= warm:
            times.append(time.perf_counter() - t)
            cpu += time.process_time() - c
    train_ips = a.batch / statistics.median(times)
    m.eval()
    xi = torch.randn(a.infer_images, 1, 28, 28, device=dev)
    with torch.no_grad(), ctx():
        for _ in range(3):
            fwd(xi[: a.batch])
        sync()
        n = a.infer_images // a.batch * a.batch
        walls, cpus = [], []
        for _ in range(a.infer_rounds):
            t, c = time.perf_counter(), time.process_time()
            for s in range(0, n, a.batch):
                fwd(xi[s : s + a.batch])
            sync()
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        infer_ips, infer_cpu = n / statistics.median(walls), n / statistics.median(cpus)
    # Per CPU-second (process CPU time, all threads): the steadier figure on a shared machine.
    print(json.dumps({"train_images_per_sec": train_ips, "infer_images_per_sec": infer_ips,
                      "train_images_per_cpu_sec": a.batch * a.steps / cpu, "infer_images_per_cpu_sec": infer_cpu,
                      "torch": torch.__version__,
                      "device": a.device, "compile": a.compile, "autocast": a.autocast}))


if __name__ == "__main__":
    main()
