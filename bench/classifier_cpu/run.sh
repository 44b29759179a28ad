#!/usr/bin/env bash
# Image classification on CPU, ours vs PyTorch in one run (issue 21): the presets' CNN and MLP
# (configs/presets/fashion_mnist_{cnn,mlp}.yaml), batch 128, AdamW, fp32, the same threads.
#   ours:    `llmtrain train` for STEPS steps on Fashion-MNIST: training images/s = the median step's
#            (metrics.jsonl tokens_per_sec / 784 pixels), inference = the test set's evaluation
#            (summary.json test_images_per_sec, batch 128, 10,000 images)
#   PyTorch: bench/classifier_cpu/torch_classifier.py (Debian's python3-torch), the same shapes.
# Usage: bench/classifier_cpu/run.sh [BUILD_DIR] [STEPS] [THREADS]   target: ours >= 2x PyTorch
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/release}
STEPS=${2:-60}
THREADS=${3:-2}
BIN=$BUILD/llmtrain
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ours() {  # preset -> "train_ips infer_ips"
  "$BIN" train --config "configs/presets/fashion_mnist_$1.yaml" --set trainer.epochs=0 --set "trainer.max_steps=$STEPS" \
    --set trainer.warmup_steps=5 --set trainer.eval_every_steps=0 --set trainer.save_every_steps=0 \
    --set trainer.log_every_steps=1 --set run.device=cpu --set "run.threads=$THREADS" \
    --set "output.root_dir=$work/runs" --set "output.run_id=$1" >/dev/null 2>"$work/$1.log"
  /usr/bin/python3 - "$work/runs/$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"loss"' in l]
s = json.load(open(sys.argv[1] + "/summary.json"))
print(f"{statistics.median(r['tokens_per_sec'] for r in rows[2:]) / 784:.0f} {s['test_images_per_sec']:.0f}")
PY
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg); threads $THREADS"
printf "%-4s %14s %14s %7s %14s %14s %7s\n" model "ours train/s" "torch train/s" ratio "ours infer/s" "torch infer/s" ratio
for arch in cnn mlp; do
  read -r ot oi < <(ours $arch)
  if [ $arch = cnn ]; then targs=(--arch cnn --conv 32,64 --hidden 128 --dropout 0.25); else targs=(--arch mlp --conv "" --hidden 256,128 --dropout 0.1); fi
  tj=$(/usr/bin/python3 bench/classifier_cpu/torch_classifier.py "${targs[@]}" --batch 128 --threads "$THREADS" --steps "$STEPS")
  read -r tt ti < <(echo "$tj" | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.0f %.0f" % (j["train_images_per_sec"], j["infer_images_per_sec"]))')
  printf "%-4s %14s %14s %6.2fx %14s %14s %6.2fx\n" $arch "$ot" "$tt" "$(/usr/bin/python3 -c "print($ot/$tt)")" "$oi" "$ti" "$(/usr/bin/python3 -c "print($oi/$ti)")"
done
