#!/usr/bin/python3
"""Writes a safetensors file from PyTorch tensors by hand (struct + json), following the format spec
(https://github.com/huggingface/safetensors#format) the way the `safetensors` package lays it out:
u64 LE header size, compact JSON header padded with spaces to 8 bytes, "__metadata__" first, tensors
sorted by dtype alignment (largest first) then by name. Used by tests/core/safetensors_test.cpp to check
that our reader loads a file produced by another implementation.

Usage: /usr/bin/python3 tools/ref/safetensors_ref.py OUT.safetensors
For every reduced-precision tensor `x_<dt>` it also writes `x_<dt>_as_f32`, PyTorch's own conversion of
the same values to float32, so the C++ test can check our BF16/F16 -> F32 conversion bit for bit.
"""
import json
import struct
import sys

import torch

DTYPES = {
    torch.float64: ("F64", 8), torch.float32: ("F32", 4), torch.float16: ("F16", 2),
    torch.bfloat16: ("BF16", 2), torch.int64: ("I64", 8), torch.int32: ("I32", 4),
    torch.int16: ("I16", 2), torch.int8: ("I8", 1), torch.uint8: ("U8", 1), torch.bool: ("BOOL", 1),
}


def tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.contiguous()
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().tobytes()  # numpy has no bfloat16; the bits are what count
    return t.numpy().tobytes()


def save(path, tensors, metadata=None):
    items = sorted(tensors.items(), key=lambda kv: (-DTYPES[kv[1].dtype][1], kv[0]))
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs, off = [], 0
    for name, t in items:
        b = tensor_bytes(t)
        header[name] = {"dtype": DTYPES[t.dtype][0], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    torch.manual_seed(1234)
    special = torch.tensor([0.0, -0.0, 1.0, -2.5, 65504.0, 6.1e-5, 5.96e-8, 3e-6,  # f16 max, min normal, subnormals
                            float("inf"), float("-inf"), 1e-40, 3.0e38])
    x = torch.cat([torch.randn(500), special])
    tensors = {
        "transformer.wte.weight": torch.randn(17, 8),
        "transformer.h.0.attn.c_attn.bias": torch.randn(24),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 4),
        "x_bf16": x.to(torch.bfloat16),
        "x_bf16_as_f32": x.to(torch.bfloat16).float(),
        "x_f16": x.to(torch.float16),
        "x_f16_as_f32": x.to(torch.float16).float(),
        "x_f64": x.double(),
        "x_f64_as_f32": x.double().float(),
        "ids": torch.arange(-5, 6, dtype=torch.int64),
        "mask": torch.tensor([1, 0, 255], dtype=torch.uint8),
    }
    save(sys.argv[1], tensors, {"format": "pt", "note": "written by tools/ref/safetensors_ref.py"})


if __name__ == "__main__":
    main()
