#!/usr/bin/python3
"""Tiny random Hugging Face models of the Qwen2, Qwen3 and Mistral families, written by transformers
itself, with float64 references (tests/reference/hf_families_reference_test.cpp reads what this writes;
needs `transformers` and `peft`, installed on the GPU machine, not in Debian).

usage: hf_families_ref.py OUT_DIR

For each case OUT_DIR/<case>/ gets:
  model/               save_pretrained of the model in float32 (config.json, model.safetensors,
                       generation_config.json) as transformers writes it;
  batch.safetensors    inputs and targets (I32, (B, T)); targets[0, :3] = -1 (ignored);
  loss.txt             mean cross-entropy over the targets >= 0, computed by the transformers model in
                       float64 from the float32 values of model/ (eager attention);
  grads.safetensors    d loss / d every parameter (named as in model.safetensors; tied: no lm_head);
  greedy.json          {"prompt": [...], "continuation": [...], "margins": [...]}: greedy decoding of
                       max_new_tokens ids in float64, and each step's gap between the best and second
                       logit (a near-tie would make fp32 disagree legitimately);
  peft/                a PEFT LoRA adapter (r 4, alpha 8, all seven linear modules, B random so that
                       it changes the model), save_pretrained;
  peft_loss.txt        the loss of base + adapter (unmerged) in float64 on the same batch;
  peft_grads.safetensors  its gradients w.r.t. the adapters, under the adapter file's names;
  peft_merged_loss.txt the loss after merge_and_unload in float64.
Weights are drawn here (std 0.1 matrices and biases, 1 + 0.1 N norms) rather than transformers' 0.02 so
that attention is far from uniform and every path carries gradient.
Cases: qwen2_tied (rope_theta 1e4), qwen2_untied (rope_theta 1e6, Qwen2.5's), qwen3 (head_dim 16 with
hidden 32 / 4 heads = 8), mistral_window (sliding_window 5 < T 16), mistral_nowindow (sliding_window
null, head_dim 12)."""
import json
import os
import sys

import torch
import transformers as T
from safetensors.torch import save_file

V, C, F, L, NH, KV, B, TT = 64, 32, 48, 2, 4, 2, 2, 16
PROMPT = [3, 17, 42, 5, 9, 30, 1]  # 7 ids: with 10 new ones the window of 5 is crossed in decoding
NEW = 10


def rope(theta):
    # transformers 5.x takes rope_parameters; 4.x rope_theta.
    if int(T.__version__.split(".")[0]) >= 5:
        return {"rope_parameters": {"rope_type": "default", "rope_theta": theta}}
    return {"rope_theta": theta}


def cases():
    common = dict(vocab_size=V, hidden_size=C, intermediate_size=F, num_hidden_layers=L, num_attention_heads=NH,
                  num_key_value_heads=KV, max_position_embeddings=64, rms_norm_eps=1e-6)
    return {
        "qwen2_tied": (T.Qwen2ForCausalLM, T.Qwen2Config(**common, tie_word_embeddings=True, **rope(10000.0))),
        "qwen2_untied": (T.Qwen2ForCausalLM, T.Qwen2Config(**common, tie_word_embeddings=False, **rope(1e6))),
        "qwen3": (T.Qwen3ForCausalLM, T.Qwen3Config(**common, head_dim=16, tie_word_embeddings=True, **rope(1e6))),
        "mistral_window": (T.MistralForCausalLM,
                           T.MistralConfig(**common, sliding_window=5, tie_word_embeddings=False, **rope(1e4))),
        "mistral_nowindow": (T.MistralForCausalLM,
                             T.MistralConfig(**common, sliding_window=None, head_dim=12, tie_word_embeddings=False,
                                             **rope(1e4))),
    }


def randomize(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))


def mean_loss(model, inputs, targets):
    logits = model(input_ids=inputs.long()).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1).long(),
                                             ignore_index=-1)


def write_text(path, x):
    with open(path, "w") as f:
        f.write(f"{x:.17g}\n")


def greedy(model):
    ids = torch.tensor([PROMPT])
    out, margins = [], []
    with torch.no_grad():
        for _ in range(NEW):  # the plain loop, no cache: each step is one full forward
            logits = model(input_ids=ids).logits[0, -1]
            top = torch.topk(logits, 2)
            out.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
            ids = torch.cat([ids, top.indices[:1].view(1, 1)], dim=1)
    # transformers' own generate (KV cache) must agree with the loop.
    gen = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW, do_sample=False, eos_token_id=None,
                         pad_token_id=0, min_new_tokens=NEW)
    assert gen[0, len(PROMPT):].tolist() == out, (gen, out)
    return {"prompt": PROMPT, "continuation": out, "margins": margins}


def peft_case(cls, model_dir, out, inputs, targets):
    import peft

    base = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    lc = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                         target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    pm = peft.get_peft_model(base, lc)
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_" in name:
                p.copy_(0.2 * torch.randn_like(p))
    pm.save_pretrained(os.path.join(out, "peft"))
    pm = pm.double()
    loss = mean_loss(pm, inputs, targets)
    loss.backward()
    grads = {n.replace(".default", ""): p.grad.float().contiguous() for n, p in pm.named_parameters()
             if "lora_" in n}
    save_file(grads, os.path.join(out, "peft_grads.safetensors"))
    write_text(os.path.join(out, "peft_loss.txt"), loss.item())
    merged = pm.merge_and_unload()
    with torch.no_grad():
        write_text(os.path.join(out, "peft_merged_loss.txt"), mean_loss(merged, inputs, targets).item())


def main():
    out_root = sys.argv[1]
    torch.manual_seed(0)
    inputs = torch.randint(0, V, (B, TT), dtype=torch.int32)
    targets = torch.randint(0, V, (B, TT), dtype=torch.int32)
    targets[0, :3] = -1
    summary = {"transformers": T.__version__, "torch": torch.__version__}
    for name, (cls, cfg) in cases().items():
        out = os.path.join(out_root, name)
        os.makedirs(out)
        cfg._attn_implementation = "eager"
        model = cls(cfg).float()
        randomize(model)
        model_dir = os.path.join(out, "model")
        model.save_pretrained(model_dir)
        # Reload what was written, so the reference is the file's model, then compute in float64.
        model = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").double()
        save_file({"inputs": inputs, "targets": targets}, os.path.join(out, "batch.safetensors"))
        loss = mean_loss(model, inputs, targets)
        loss.backward()
        write_text(os.path.join(out, "loss.txt"), loss.item())
        save_file({n: p.grad.float().contiguous() for n, p in model.named_parameters()},
                  os.path.join(out, "grads.safetensors"))
        model.zero_grad()
        g = greedy(model)
        with open(os.path.join(out, "greedy.json"), "w") as f:
            json.dump(g, f)
        peft_case(cls, model_dir, out, inputs, targets)
        summary[name] = {"loss": loss.item(), "greedy": g["continuation"], "min_margin": min(g["margins"])}
        print(name, summary[name])
    with open(os.path.join(out_root, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
