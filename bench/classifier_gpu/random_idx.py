#!/usr/bin/python3
"""Writes IDX files of Fashion-MNIST's shape into DIR (train-images/-labels: 60,000; test-images/-labels:
10,000) with random pixels and labels cycling 0..9: throughput does not depend on the values, and the GPU
host has no dataset package. Used by bench/classifier_gpu/run.sh and tools/gpu/classifier_profile.sh.
Usage: random_idx.py DIR"""
import os
import struct
import sys


def idx(path, dims, n):
    with open(path, "wb") as f:
        f.write(struct.pack(">I", 0x800 | len(dims)) + b"".join(struct.pack(">I", d) for d in dims))
        f.write(os.urandom(n) if len(dims) > 1 else bytes(i % 10 for i in range(n)))


w = sys.argv[1]
idx(f"{w}/train-images", [60000, 28, 28], 60000 * 784)
idx(f"{w}/train-labels", [60000], 60000)
idx(f"{w}/test-images", [10000, 28, 28], 10000 * 784)
idx(f"{w}/test-labels", [10000], 10000)
