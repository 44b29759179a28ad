#!/usr/bin/env bash
# On the GPU machine: the image classifier on CUDA against the CPU on the same data (issue 21). Random
# IDX images of Fashion-MNIST's shape with labels that depend on the pixels (the class is the one of 10
# fixed stripes made brighter), so the loss must fall; 60 steps of the preset CNN on each device, fp32
# (trainer.precision fp32) and bf16 on CUDA; prints the losses side by side and the test accuracy of each.
# Usage: bash tools/gpu/classifier_check.sh LLMTRAIN_BIN   (logs under $OUT/classifier_check)
# PRESET=configs/presets/<other>.yaml and EXTRA="--set k=v ..." run another preset or settings (sgd_check.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:?llmtrain binary}
out=${OUT:-/tmp/out}/classifier_check
mkdir -p "$out"
w=$(mktemp -d)
python3 - "$w" <<'PY'
import os, struct, sys, random
w = sys.argv[1]
random.seed(0)
def write(name, n):
    imgs, labels = bytearray(), bytearray()
    for _ in range(n):
        c = random.randrange(10)
        img = bytearray(random.randrange(0, 200) for _ in range(784))
        for r in range(28):
            for x in range(c * 2 + 4, c * 2 + 6):
                img[r * 28 + x] = min(255, img[r * 28 + x] + 40)
        imgs += img
        labels.append(c)
    with open(f"{w}/{name}-images", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + imgs)
    with open(f"{w}/{name}-labels", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + labels)
write("train", 6000)
write("test", 1000)
PY
run() {  # name device precision
  "$BIN" train --config "${PRESET:-configs/presets/fashion_mnist_cnn.yaml}" ${EXTRA:-} --set trainer.epochs=0 \
    --set trainer.max_steps=60 \
    --set trainer.warmup_steps=5 --set trainer.eval_every_steps=0 --set trainer.save_every_steps=0 \
    --set trainer.log_every_steps=1 --set model.dropout=0 --set run.device=$2 --set trainer.precision=$3 \
    --set data.train_images=$w/train-images --set data.train_labels=$w/train-labels \
    --set data.test_images=$w/test-images --set data.test_labels=$w/test-labels \
    --set output.root_dir=$w/runs --set output.run_id=$1 >"$out/$1.log" 2>&1
  echo "$1 rc=$?"
}
run cpu cpu fp32
run cuda32 cuda fp32
run cuda16 cuda bf16
python3 - "$w/runs" <<'PY'
import json, sys
r = sys.argv[1]
def losses(n):
    try:
        return [json.loads(l)["loss"] for l in open(f"{r}/{n}/metrics.jsonl") if '"loss"' in l]
    except OSError:
        return []
a, b, c = losses("cpu"), losses("cuda32"), losses("cuda16")
for i in [*range(10), *range(14, max(len(a), len(b), len(c)), 10)]:
    g = lambda v: f"{v[i]:.5f}" if i < len(v) else "-"
    print(f"step {i + 1:3d}  cpu {g(a)}  cuda fp32 {g(b)}  cuda bf16 {g(c)}")
for n in ("cpu", "cuda32", "cuda16"):
    try:
        s = json.load(open(f"{r}/{n}/summary.json"))
        print(n, "test_accuracy", s.get("test_accuracy"), "images/s", s.get("tokens_per_sec", 0) / 784)
    except OSError as e:
        print(n, "no summary", e)
PY
rm -rf "$w"
