#!/usr/bin/env bash
# On the GPU machine: where a classifier training step's time goes (issue 21), ours vs torch.compile.
# Ours: Nsight Compute's per-kernel durations over a window of launches in steady state (ncu, clocks left
# alone), beside the step's wall time from metrics.jsonl; PyTorch: torch.profiler's CUDA kernel time per
# step beside its wall time. Writes $OUT/classifier_profile/{ours_kernels.csv,torch_profile.txt,summary.txt}.
# Usage: [NO_TORCH=1] bash tools/gpu/classifier_profile.sh LLMTRAIN_BIN [ARCH=cnn] [BATCH=512]
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:?llmtrain binary}
ARCH=${2:-cnn}
BATCH=${3:-512}
out=${OUT:-/tmp/out}/classifier_profile
mkdir -p "$out"
w=$(mktemp -d)
python3 bench/classifier_gpu/random_idx.py "$w"
args=(train --config "configs/presets/fashion_mnist_$ARCH.yaml" --set trainer.epochs=0 --set trainer.max_steps=60
  --set "trainer.micro_batch_size=$BATCH" --set trainer.warmup_steps=5 --set trainer.eval_every_steps=0
  --set trainer.save_every_steps=0 --set trainer.log_every_steps=1 --set run.device=cuda
  --set "data.train_images=$w/train-images" --set "data.train_labels=$w/train-labels"
  --set "data.test_images=$w/test-images" --set "data.test_labels=$w/test-labels" --set "output.root_dir=$w/runs")
"$BIN" "${args[@]}" --set output.run_id=plain >"$out/plain.log" 2>&1
python3 - "$w/runs/plain" >"$out/summary.txt" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"loss"' in l]
s = json.load(open(sys.argv[1] + "/summary.json"))
print("ours median step ms", statistics.median(r["ms"] for r in rows[5:]),
      "img/s", statistics.median(r["tokens_per_sec"] for r in rows[5:]) / 784, "test img/s", s["test_images_per_sec"])
PY
ncu --clock-control none --launch-skip 1500 --launch-count 400 --metrics gpu__time_duration.sum --csv \
  "$BIN" "${args[@]}" --set output.run_id=ncu >"$out/ours_kernels.csv" 2>"$out/ncu.err"
[ -n "${NO_TORCH:-}" ] && { tail -3 "$out/ncu.err"; exit 0; }
python3 - "$ARCH" "$BATCH" >"$out/torch_profile.txt" 2>&1 <<'PY'
import sys, time, torch, torch.nn as nn
sys.argv = ["x", "--arch", sys.argv[1]]
src = open("bench/classifier_cpu/torch_classifier.py").read().split("def main")[0]
exec(src)
arch, B = sys.argv[2] if False else "cnn", 512
m = (model("cnn", [32, 64], [128], 0.25) if arch == "cnn" else model("mlp", [], [256, 128], 0.1)).cuda()
f = torch.compile(m)
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
x = torch.randn(B, 1, 28, 28, device="cuda"); y = torch.randint(0, 10, (B,), device="cuda")
def step():
    opt.zero_grad(set_to_none=True); nn.functional.cross_entropy(f(x), y).backward(); opt.step()
for _ in range(15): step()
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(50): step()
torch.cuda.synchronize()
print("torch step ms (wall, 50 steps)", (time.perf_counter() - t) / 50 * 1e3)
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    for _ in range(10): step()
    torch.cuda.synchronize()
print(p.key_averages().table(sort_by="cuda_time_total", row_limit=30))
m.eval()
xi = torch.randn(B, 1, 28, 28, device="cuda")
with torch.no_grad():
    for _ in range(5): f(xi)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p2:
        for _ in range(10): f(xi)
        torch.cuda.synchronize()
print(p2.key_averages().table(sort_by="cuda_time_total", row_limit=15))
PY
tail -3 "$out/ncu.err"
