#!/usr/bin/env bash
# Image classification on one GPU, ours vs PyTorch torch.compile (default mode) in one run (issue 21): the
# preset's CNN (configs/presets/fashion_mnist_cnn.yaml) and MLP, batch 512, AdamW.
#   ours:    `llmtrain train --set run.device=cuda` for STEPS steps on IDX files of Fashion-MNIST's shape
#            (random pixels written here: throughput does not depend on the values, and the GPU host has
#            no dataset package); training images/s = the median step's; inference = the test split's eval.
#            Ours gathers each batch on the GPU from the image set uploaded once (reference rows).
#   PyTorch: bench/classifier_cpu/torch_classifier.py --device cuda --compile, images already on the GPU;
#            inference the median of 20 passes (single passes swung 2x between runs).
#   Both compute the convolutions in TF32 (trainer.conv_tf32's default; cuDNN's) and linear layers in fp32.
# Usage (GPU machine, binaries from tools/gpu/pack.sh): bench/classifier_gpu/run.sh LLMTRAIN_BIN [STEPS] [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:?llmtrain binary}
STEPS=${2:-200}
PY=${3:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" bench/classifier_gpu/random_idx.py "$work"
ours() {  # arch -> "train_ips infer_ips"
  "$BIN" train --config "configs/presets/fashion_mnist_$1.yaml" --set trainer.epochs=0 \
    --set "trainer.max_steps=$STEPS" \
    --set trainer.micro_batch_size=512 --set trainer.warmup_steps=5 --set trainer.eval_every_steps=0 \
    --set trainer.save_every_steps=0 --set trainer.log_every_steps=1 --set run.device=cuda \
    --set "data.train_images=$work/train-images" --set "data.train_labels=$work/train-labels" \
    --set "data.test_images=$work/test-images" --set "data.test_labels=$work/test-labels" \
    --set "output.root_dir=$work/runs" --set "output.run_id=$1" >"$work/$1.out" 2>"$work/$1.log" \
    || { cat "$work/$1.log" >&2; return 1; }
  "$PY" - "$work/runs/$1" <<'PYR'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"loss"' in l]
s = json.load(open(sys.argv[1] + "/summary.json"))
print(f"{statistics.median(r['tokens_per_sec'] for r in rows[5:]) / 784:.0f} {s['test_images_per_sec']:.0f}")
PYR
}
echo "machine: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); $(nproc) cores;" \
  "torch $("$PY" -c 'import torch; print(torch.__version__)')"
printf "%-4s %14s %14s %7s %14s %14s %7s\n" model "ours train/s" "torch train/s" ratio \
  "ours infer/s" "torch infer/s" ratio
for arch in cnn mlp; do
  read -r ot oi < <(ours $arch)
  if [ $arch = cnn ]; then
    targs=(--arch cnn --conv 32,64 --hidden 128 --dropout 0.25)
  else
    targs=(--arch mlp --conv "" --hidden 256,128 --dropout 0.1)
  fi
  tj=$("$PY" bench/classifier_cpu/torch_classifier.py "${targs[@]}" --batch 512 --steps "$STEPS" --device cuda \
    --compile --infer-rounds 20)
  read -r tt ti < <(echo "$tj" | "$PY" -c 'import json,sys; j=json.load(sys.stdin); print("%.0f %.0f" % (
    j["train_images_per_sec"], j["infer_images_per_sec"]))')
  printf "%-4s %14s %14s %6.2fx %14s %14s %6.2fx\n" $arch "$ot" "$tt" "$("$PY" -c "print($ot/$tt)")" \
    "$oi" "$ti" "$("$PY" -c "print($oi/$ti)")"
done
