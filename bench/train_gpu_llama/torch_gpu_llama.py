"""PyTorch peer for a Llama-3.2-1B-, Llama-3.1-8B-, Qwen2.5-1.5B- or Qwen3-1.7B-shaped model (--shape; random
weights): tokens/s and peak memory of a training step (the 8B shape: LoRA/PEFT modes; its full training's fp32 state
does not fit one GPU).
modes: full-mixed (fp32 params, bf16 autocast, fused AdamW), full-bf16 (bf16 params, fused AdamW), lora (frozen bf16
base, r=16 alpha=32 on q,k,v,o,gate,up,down; fp32 adapters, bf16 autocast). peft (transformers + peft 0.21, same
LoRA). Each with eager or compile. Usage:
python3 torch_gpu_llama.py --modes full-mixed:compile,full-bf16:compile,peft:compile --batch 4 --seq 2048
[--shape llama3.2-1b|llama3.1-8b|qwen2.5-1.5b|qwen3-1.7b] (the shapes of train_gpu_bench
--arch llama|llama3.1-8b|qwen2.5-1.5b|qwen3-1.7b)."""
import argparse, json, math, time, torch, torch.nn as nn
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config
ap = argparse.ArgumentParser()
ap.add_argument("--modes", default="full-mixed:eager")
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--seq", type=int, default=2048)
ap.add_argument("--steps", type=int, default=8)
ap.add_argument("--out", default="llama_anchor.jsonl")
ap.add_argument("--shape", default="llama3.2-1b", choices=["llama3.2-1b", "llama3.1-8b", "qwen2.5-1.5b", "qwen3-1.7b"])
a = ap.parse_args()
if a.shape == "llama3.2-1b":
    cfg = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                      num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-5,
                      rope_theta=500000.0, tie_word_embeddings=True,
                      rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
elif a.shape == "llama3.1-8b":  # Llama-3.1-8B's config.json: untied, llama3 scaling factor 8
    cfg = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072, rms_norm_eps=1e-5,
                      rope_theta=500000.0, tie_word_embeddings=False,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
elif a.shape == "qwen2.5-1.5b":  # Qwen2.5-1.5B's config.json: q/k/v biases, tied, theta 1e6
    cfg = Qwen2Config(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                      num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-6,
                      rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False)
else:  # Qwen3-1.7B's config.json: per-head q/k norms, head_dim 128, tied, theta 1e6
    cfg = Qwen3Config(vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                      num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                      rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, attention_bias=False,
                      use_sliding_window=False)
V, C, F, L = cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
HD = getattr(cfg, "head_dim", None) or C // cfg.num_attention_heads
Q, KV = cfg.num_attention_heads * HD, cfg.num_key_value_heads * HD
class LoRALinear(nn.Module):
    def __init__(self, base, r=16, alpha=32):
        super().__init__()
        self.base = base; self.base.weight.requires_grad_(False)
        self.A = nn.Parameter(torch.empty(r, base.in_features, device=base.weight.device, dtype=torch.float32))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.B = nn.Parameter(torch.zeros(base.out_features, r, device=base.weight.device, dtype=torch.float32))
        self.s = alpha / r
    def forward(self, x):
        return self.base(x) + (x @ self.A.t().to(x.dtype)) @ self.B.t().to(x.dtype) * self.s
dev = "cuda"
N = L * (C * (Q + 2 * KV) + Q * C + 3 * C * F) + V * C  # the matmuls' weights (the head once; the lookup is none)
T = a.seq
print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "shape": a.shape,
                  "matmul_params": N}))
for spec in a.modes.split(","):
    mode, comp = spec.split(":")
    torch.manual_seed(0)
    torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
    # The 8B shape is initialised on the GPU: on the host its random init alone takes minutes.
    with torch.device(dev if a.shape == "llama3.1-8b" else "cpu"):
        m = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    if mode == "full-mixed":
        m = m.to(dev)
        params = list(m.parameters())
    else:
        m = m.to(dev, dtype=torch.bfloat16)
        params = list(m.parameters())
    if mode == "peft":
        from peft import LoraConfig, get_peft_model
        m = get_peft_model(m, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=["q_proj", "k_proj",
                           "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], task_type="CAUSAL_LM"))
        for n, p in m.named_parameters():
            if "lora_" in n: p.data = p.data.float()
        params = [p for p in m.parameters() if p.requires_grad]
    if mode == "lora":
        for layer in m.model.layers:
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                setattr(layer.self_attn, name, LoRALinear(getattr(layer.self_attn, name)))
            for name in ("gate_proj", "up_proj", "down_proj"):
                setattr(layer.mlp, name, LoRALinear(getattr(layer.mlp, name)))
        for n, p in m.named_parameters():
            if not (n.endswith(".A") or n.endswith(".B")): p.requires_grad_(False)
        params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, fused=True)
    fwd = torch.compile(m) if comp == "compile" else m
    x = torch.randint(0, V, (a.batch, T), device=dev)
    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=(mode != "full-bf16")):
            loss = fwd(input_ids=x, labels=x).loss
        loss.backward()
        if mode not in ("lora", "peft"): torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step(); opt.zero_grad(set_to_none=True)
        return loss
    try:
        t0 = time.time()
        for _ in range(3): step()
        torch.cuda.synchronize(); warm = time.time() - t0
        ts = []
        for _ in range(a.steps):
            t = time.perf_counter(); step(); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
        ts.sort(); med = ts[len(ts) // 2]
        tok = a.batch * T / med
        flops = (6 * N + 12 * L * Q * T) if mode not in ("lora", "peft") else (4 * N + 12 * L * Q * T)
        r = {"shape": a.shape, "mode": mode, "compile": comp, "B": a.batch, "T": T, "step_ms": med * 1e3,
             "tokens_per_s": tok,
             "mfu_989": tok * flops / 989e12, "peak_gib": torch.cuda.max_memory_allocated() / 2**30, "warmup_s": warm,
             "trainable": sum(p.numel() for p in params)}
    except torch.cuda.OutOfMemoryError as e:
        r = {"mode": mode, "compile": comp, "B": a.batch, "T": T, "oom": True}
    print(json.dumps(r), flush=True)
    open(a.out, "a").write(json.dumps(r) + "\n")
    del m, opt, fwd, params
    torch._dynamo.reset()
