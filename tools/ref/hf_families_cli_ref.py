#!/usr/bin/env python3
"""The numbers tests/reference/hf_families_cli_test.py checks `llmtrain eval` and `llmtrain merge` against: for each
family fixture under tests/reference/fixtures/hf_families/ (written by hf_families_ref.py), transformers' float64
mean cross-entropy of model/ on the one batch `llmtrain eval` reads from eval_tokens.bin (an llm.c shard of
B*T + 1 = 33 tokens: inputs tokens[0:32] as (2, 16), targets tokens[1:33]), and for the families with a PEFT
adapter the same loss after PEFT's merge_and_unload of peft/. Run where transformers 5.17 and peft 0.21 are
installed (a GPU host; CPU is enough):  python3 hf_families_cli_ref.py FIXTURES_DIR > eval_cli.json"""
import json
import os
import sys

import numpy as np
import peft
import torch
import transformers as T

B, TT = 2, 16


def shard_tokens(path):
    raw = open(path, "rb").read()
    header = np.frombuffer(raw[:1024], dtype=np.int32)
    assert header[0] == 20240520 and header[1] == 1, header[:3]
    return torch.from_numpy(np.frombuffer(raw[1024:], dtype=np.uint16)[: header[2]].astype(np.int64))


def mean_loss(model, tokens):
    inputs, targets = tokens[: B * TT].view(B, TT), tokens[1 : B * TT + 1].view(B, TT)
    with torch.no_grad():
        logits = model(input_ids=inputs).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()


def load(model_dir):
    m = T.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    return m.double().eval()


def main():
    root = sys.argv[1]
    tokens = shard_tokens(os.path.join(root, "eval_tokens.bin"))
    out = {}
    for name in sorted(os.listdir(root)):
        model_dir = os.path.join(root, name, "model")
        if not os.path.isdir(model_dir):
            continue
        row = {"eval_loss": mean_loss(load(model_dir), tokens)}
        if os.path.isdir(os.path.join(root, name, "peft")):
            adapter_dir = os.path.join(root, name, "peft")
            merged = peft.PeftModel.from_pretrained(load(model_dir), adapter_dir).merge_and_unload()
            row["peft_merged_eval_loss"] = mean_loss(merged.double(), tokens)
        out[name] = row
    json.dump({"transformers": T.__version__, "peft": peft.__version__, "torch": torch.__version__,
               "families": out}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
