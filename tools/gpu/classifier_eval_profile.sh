#!/usr/bin/env bash
# On the GPU machine: where the classifier's evaluation (inference) time goes (issue 21). Runs a short
# `llmtrain train` of the preset at batch BATCH under Nsight Compute (every launch, clocks left alone) and
# sums the kernels launched after the last optimizer step, i.e. the test set's evaluation at the end of the
# run (10,000 images = 20 batches of 512), per batch. Writes $OUT/eval_profile/{kernels.csv,per_batch.txt}.
# Usage: bash tools/gpu/classifier_eval_profile.sh LLMTRAIN_BIN [ARCH=cnn] [BATCH=512]  (env passes through)
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:?llmtrain binary}
ARCH=${2:-cnn}
BATCH=${3:-512}
out=${OUT:-/tmp/out}/eval_profile
mkdir -p "$out"
w=$(mktemp -d)
python3 bench/classifier_gpu/random_idx.py "$w"
ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  "$BIN" train --config "configs/presets/fashion_mnist_$ARCH.yaml" --set trainer.epochs=0 --set trainer.max_steps=3 \
  --set "trainer.micro_batch_size=$BATCH" --set trainer.warmup_steps=1 --set trainer.eval_every_steps=0 \
  --set trainer.save_every_steps=0 --set run.device=cuda \
  --set "data.train_images=$w/train-images" --set "data.train_labels=$w/train-labels" \
  --set "data.test_images=$w/test-images" --set "data.test_labels=$w/test-labels" \
  --set "output.root_dir=$w/runs" >"$out/kernels.csv" 2>"$out/ncu.err"
python3 - "$out/kernels.csv" "$BATCH" >"$out/per_batch.txt" <<'PY'
import collections, csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')))
last_opt = max(i for i, r in enumerate(rows) if "adamw" in r["Kernel Name"] or "sgd" in r["Kernel Name"])
ev = rows[last_opt + 1:]
batches = (10000 + int(sys.argv[2]) - 1) // int(sys.argv[2])
d = collections.defaultdict(float)
for r in ev:
    d[(r["Kernel Name"][:80], r["Grid Size"])] += float(r["Metric Value"].replace(",", "")) / 1e3
total = sum(d.values())
print(f"evaluation kernels: {len(ev)}; per batch of {sys.argv[2]} ({batches} batches): {total / batches:.1f} us")
for k, v in sorted(d.items(), key=lambda kv: -kv[1]):
    print(f"{v / batches:8.1f} us  {k[1]:>14}  {k[0]}")
PY
cat "$out/per_batch.txt"
