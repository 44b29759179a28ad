#!/usr/bin/env python3
"""Side-by-side table of one bench/train_gpu run (run.sh): our train_gpu_bench --json lines and
torch_gpu_gpt2.py's torch_summary.json, from the same device call. Prints tokens/s per system and batch,
our ratio to PyTorch's best, and MFU = (6N + 12*L*C*T) * tokens/s against 989 TFLOP/s and against the bf16
matmul rate measured in the same call (ours: cuBLASLt 8192^3; PyTorch's: torch.matmul 8192^3).
Usage: compare.py OURS_JSONL TORCH_SUMMARY_JSON"""
import json
import sys

ours = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
torch = json.load(open(sys.argv[2]))
our_peak = next((o["matmul_tflops"] for o in ours if "matmul_tflops" in o), float("nan"))
torch_peak = torch["matmul_peak_tflops"]
rows = [("llmtrain " + o["dtype"], o["B"], o["tok_s"], o["flops_per_token"]) for o in ours if "tok_s" in o]
rows += [("pytorch " + r["mode"], r["B"], r["tok_s"], r["flops_per_token"]) for r in torch["results"]]
best_torch = max((r for r in rows if r[0].startswith("pytorch")), key=lambda r: r[2], default=None)
best_ours = max((r for r in rows if r[0].startswith("llmtrain")), key=lambda r: r[2], default=None)
print(f"device: {torch['device']}; bf16 matmul 8192^3: ours {our_peak:.0f} TFLOP/s, torch {torch_peak:.0f} TFLOP/s")
print(f"{'system':18s} {'B':>3s} {'tokens/s':>10s} {'vs torch best':>13s} {'MFU/989':>8s} {'MFU/meas':>8s}")
for name, B, tok_s, fpt in rows:
    ratio = tok_s / best_torch[2] if best_torch else float("nan")
    tf = fpt * tok_s / 1e12
    print(f"{name:18s} {B:3d} {tok_s:10.0f} {ratio:12.3f}x {100 * tf / 989:7.1f}% "
          f"{100 * tf / max(our_peak, torch_peak):7.1f}%")
if best_torch and best_ours:
    print(f"best: llmtrain {best_ours[2]:.0f} tok/s (B={best_ours[1]}) vs pytorch {best_torch[0].split()[1]} "
          f"{best_torch[2]:.0f} tok/s (B={best_torch[1]}): ratio {best_ours[2] / best_torch[2]:.3f}x (target 1.1x)")
