#!/usr/bin/python3
"""Hugging Face directories against transformers itself (tests/models/hf_transformers_test.cpp; needs
`transformers`, installed on the GPU machine, not in Debian).

usage: hf_transformers_check.py OURS_DIR OUT_DIR

1. Every directory under OURS_DIR (written by llmtrain's hf_config_json + write_hf_weights) loads with
   LlamaForCausalLM.from_pretrained with no missing, unexpected or mismatched tensor; its config has the
   RoPE parameters, heads and eps of OURS_DIR/<name>.expect.json; every tensor equals the pattern the test
   wrote (value = ((k * 7) % 13 - 6) / 64 + t / 1024 for element k of the t-th tensor of the expect file,
   exact in bf16), bit for bit; generation_config.json gives the bos/eos ids.
2. OUT_DIR gets directories that transformers writes with save_pretrained (sharded, fp32 and bf16: a
   tied llama with llama3 RoPE, an untied GQA llama with another head_dim, a GPT-2), each tensor's values
   as fp32 in OUT_DIR/<dir>.f32/<name>, and OUT_DIR/manifest.json, for the test to read with our reader."""
import json
import os
import sys

import torch
import transformers as T


def check_ours(ours):
    for name in sorted(os.listdir(ours)):
        if not name.endswith(".expect.json"):
            continue
        d = os.path.join(ours, name[: -len(".expect.json")])
        with open(os.path.join(ours, name)) as f:
            expect = json.load(f)
        dtype = torch.bfloat16 if expect["dtype"] == "bfloat16" else torch.float32
        model, info = T.LlamaForCausalLM.from_pretrained(d, output_loading_info=True, dtype=dtype)
        problems = {k: v for k, v in info.items() if v}
        assert not problems, (d, problems)
        c = model.config
        for key, want in expect["config"].items():
            got = c.rope_parameters[key[len("rope.") :]] if key.startswith("rope.") else getattr(c, key)
            assert got == want, (d, key, got, want)
        sd = model.state_dict()
        for t, tensor in enumerate(expect["tensors"]):
            x = sd[tensor].reshape(-1).float()
            k = torch.arange(x.numel())
            want = ((k * 7) % 13 - 6).float() / 64 + t / 1024
            assert torch.equal(x, want), (d, tensor)
        assert sd.keys() == set(expect["tensors"]), (d, sorted(sd.keys()))
        g = T.GenerationConfig.from_pretrained(d)
        assert g.bos_token_id == expect["bos"] and g.eos_token_id == expect["eos"], (d, g.bos_token_id, g.eos_token_id)
        logits = model(torch.tensor([[1, 5, 9, 3]])).logits
        assert torch.isfinite(logits.float()).all(), d
        print("transformers %s loads %s: %d tensors, config and values as written" % (T.__version__, d, len(sd)))


def write_theirs(out):
    torch.manual_seed(0)
    base = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
    llama3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    cases = {
        "llama_tied": T.LlamaConfig(**base, num_key_value_heads=2, max_position_embeddings=256,
                                    tie_word_embeddings=True, rms_norm_eps=1e-5, rope_parameters=llama3),
        "llama_untied": T.LlamaConfig(**base, num_key_value_heads=1, head_dim=32, max_position_embeddings=128,
                                      tie_word_embeddings=False),
        "gpt2": T.GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4, n_positions=128),
    }
    manifest = {}
    for name, cfg in cases.items():
        model = (T.GPT2LMHeadModel if name == "gpt2" else T.LlamaForCausalLM)(cfg)
        for dtype, suffix in ((torch.float32, ""), (torch.bfloat16, "_bf16")):
            m = model.to(dtype)
            d = os.path.join(out, name + suffix)
            m.save_pretrained(d, max_shard_size="40KB")
            os.makedirs(d + ".f32")
            saved = {}
            with open(os.path.join(d, "model.safetensors.index.json")) as f:
                saved_names = json.load(f)["weight_map"].keys()
            for tensor, v in m.state_dict().items():
                if tensor not in saved_names:
                    continue  # tied lm_head, GPT-2's attention-mask buffers
                with open(os.path.join(d + ".f32", tensor), "wb") as f:
                    f.write(v.float().contiguous().numpy().tobytes())
                saved[tensor] = list(v.shape)
            manifest[name + suffix] = saved
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"transformers": T.__version__, "dirs": manifest}, f, indent=1)


if __name__ == "__main__":
    check_ours(sys.argv[1])
    write_theirs(sys.argv[2])
