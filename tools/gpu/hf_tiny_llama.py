"""Usage on the GPU machine: python3 hf_tiny_llama.py OUTDIR. A tiny random LLaMA written by transformers (HF
directory) + an llm.c-format val shard + the float64 HF loss over the eval windows that bars use (batch b row r:
window w = b*B + r, inputs t[w*T:w*T+T], targets shifted by one)."""
import json, sys, os, numpy as np, torch
from transformers import LlamaConfig, LlamaForCausalLM
out = sys.argv[1]
def make(name, tie, scaling, seed):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5,
                      rope_theta=500000.0,
                      tie_word_embeddings=tie, bos_token_id=1, eos_token_id=2, attention_bias=False, mlp_bias=False,
                      rope_scaling=({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 16} if scaling else None))
    m = LlamaForCausalLM(cfg)
    with torch.no_grad():  # wider init than HF's 0.02 so that the loss depends on every weight
        for n, p in m.named_parameters():
            if "norm" in n: p.copy_(1 + 0.1 * torch.randn_like(p))
            else: p.copy_(0.15 * torch.randn_like(p))
    d = f"{out}/{name}"
    m.save_pretrained(d, safe_serialization=True)
    m = m.double().eval()
    B, T, S = 4, 64, 3
    rng = np.random.default_rng(seed)
    toks = rng.integers(0, 1000, size=B * T * S + 1 + 300)
    hdr = np.zeros(256, dtype=np.int32); hdr[0] = 20240520; hdr[1] = 1; hdr[2] = len(toks)
    with open(f"{d}/val_000000.bin", "wb") as f:
        f.write(hdr.tobytes()); f.write(np.asarray(toks, dtype=np.uint16).tobytes())
    t = torch.tensor(toks, dtype=torch.long)
    losses = []
    with torch.no_grad():
        for b in range(S):
            w = [(b * B + r) * T for r in range(B)]
            x = torch.stack([t[s:s + T] for s in w]); y = torch.stack([t[s + 1:s + T + 1] for s in w])
            logits = m(x).logits
            losses.append(torch.nn.functional.cross_entropy(logits.reshape(-1, 1000), y.reshape(-1)).item())
        greedy = m.generate(torch.tensor([[1, 17, 300, 42]]), max_new_tokens=24, do_sample=False).tolist()[0]
    ref = {"loss": float(np.mean(losses)), "B": B, "T": T, "steps": S, "greedy_prompt": [1, 17, 300, 42],
           "greedy": greedy}
    json.dump(ref, open(f"{d}/reference.json", "w"))
    print(name, ref["loss"], os.listdir(d))
make("llama_tied_scaled", True, True, 101)
make("llama_untied", False, False, 202)
