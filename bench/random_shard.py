#!/usr/bin/python3
"""Writes a shard of 2,000,000 random token ids below VOCAB (default 50257, GPT-2's; seed 0) in llm.c's uint16
format (magic 20240520, version 1) for the training benchmarks: throughput does not depend on the ids' values.
Usage: /usr/bin/python3 bench/random_shard.py OUT.bin [VOCAB]"""
import sys

import numpy as np

n = 2_000_000
hdr = np.zeros(256, dtype=np.int32)
hdr[0], hdr[1], hdr[2] = 20240520, 1, n
rng = np.random.default_rng(0)
with open(sys.argv[1], "wb") as f:
    f.write(hdr.tobytes())
    f.write(rng.integers(0, int(sys.argv[2]) if len(sys.argv) > 2 else 50257, n, dtype=np.uint16).tobytes())
