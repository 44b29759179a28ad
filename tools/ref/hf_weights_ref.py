#!/usr/bin/python3
"""Checks a Hugging Face weight directory written by llmtrain (tests/models/hf_weights_test.cpp) the way
transformers reads one, with PyTorch and the safetensors spec only (the `safetensors` package is not in
Debian): the index's weight_map names every tensor once, each shard exists and holds exactly its tensors,
metadata.total_size is the sum of the tensors' bytes, and every tensor equals the fp32 reference values
converted by PyTorch (`.to(torch.bfloat16)`, round to nearest even), bit for bit.

usage: hf_weights_ref.py DIR REFERENCE.json
REFERENCE.json: {"dtype": "BF16" | "F32", "tensors": {name: {"shape": [...], "f32_file": path}}}, the
f32 files holding the values we were asked to write (little-endian float32)."""
import json
import os
import struct
import sys

import torch

DTYPES = {"BF16": (torch.bfloat16, 2), "F32": (torch.float32, 4)}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n :]
    tensors = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        dtype, size = DTYPES[h["dtype"]]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype) if end > begin else torch.empty(0, dtype=dtype)
        tensors[name] = (h["dtype"], t.reshape(h["shape"]), end - begin)
    return meta, tensors


def main():
    out_dir, ref_path = sys.argv[1], sys.argv[2]
    with open(ref_path) as f:
        ref = json.load(f)
    index_path = os.path.join(out_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
        weight_map = index["weight_map"]
        shards = sorted(set(weight_map.values()))
        n = len(shards)
        expected_names = ["model-%05d-of-%05d.safetensors" % (k + 1, n) for k in range(n)]
        assert shards == expected_names, (shards, expected_names)
    else:
        index = None
        shards = ["model.safetensors"]
        weight_map = None
    seen = {}
    total = 0
    for shard in shards:
        meta, tensors = read_safetensors(os.path.join(out_dir, shard))
        assert meta.get("format") == "pt", (shard, meta)  # transformers refuses other formats
        for name, (dtype, t, nbytes) in tensors.items():
            assert name not in seen, "tensor %s in %s and %s" % (name, seen[name], shard)
            seen[name] = shard
            if weight_map is not None:
                assert weight_map[name] == shard, (name, weight_map[name], shard)
            total += nbytes
            assert dtype == ref["dtype"], (name, dtype)
    assert sorted(seen) == sorted(ref["tensors"]), (sorted(seen), sorted(ref["tensors"]))
    if weight_map is not None:
        assert sorted(weight_map) == sorted(seen)
        assert index["metadata"]["total_size"] == total, (index["metadata"], total)
    for name, r in ref["tensors"].items():
        with open(r["f32_file"], "rb") as f:
            want = torch.frombuffer(bytearray(f.read()), dtype=torch.float32).reshape(r["shape"])
        want = want.to(DTYPES[ref["dtype"]][0])
        meta, tensors = read_safetensors(os.path.join(out_dir, seen[name]))
        got = tensors[name][1]
        assert list(got.shape) == r["shape"], (name, list(got.shape), r["shape"])
        # Bit for bit: compare the raw 16/32-bit patterns, so -0.0 vs 0.0 and NaN payloads count too.
        as_int = torch.int16 if ref["dtype"] == "BF16" else torch.int32
        if not torch.equal(got.view(as_int), want.view(as_int)):
            diff = (got.view(as_int) != want.view(as_int)).nonzero()[0].tolist()
            raise AssertionError("%s differs from PyTorch at %s: %r vs %r"
                                 % (name, diff, got[tuple(diff)], want[tuple(diff)]))
    print("ok: %d shard(s), %d tensors, %d bytes" % (len(shards), len(seen), total))


if __name__ == "__main__":
    main()
